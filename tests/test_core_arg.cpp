// Arg: the value of one node argument (every ARG form of fx-graph-json), ArgDict,
// and the node traversals for_each_node / map_nodes (torch.fx's map_arg).
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"

using namespace kiln;

namespace {

// Every node reference inside `a`, in visiting order, duplicates included.
std::vector<Node*> nodes_in(const Arg& a) {
  std::vector<Node*> out;
  for_each_node(a, [&](Node* n) { out.push_back(n); });
  return out;
}

struct ThreeNodes {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
};

}  // namespace

TEST_CASE("Arg() and Arg(None{}) and Arg(nullptr) are None") {
  CHECK(Arg().is_none());
  CHECK(Arg(None{}).is_none());
  CHECK(Arg(nullptr).is_none());
  CHECK(Arg() == Arg(None{}));
  CHECK_FALSE(Arg().is_node());
  CHECK_FALSE(Arg().is_list());
  CHECK(Arg().node() == nullptr);
  CHECK(Arg().list() == nullptr);
}

TEST_CASE("integer literals are int64, true/false are bool, 1.0 is double") {
  Arg i(1);
  CHECK(i.is<std::int64_t>());
  CHECK_FALSE(i.is<bool>());
  CHECK_FALSE(i.is<double>());
  CHECK(*i.get_if<std::int64_t>() == 1);

  Arg b(true);
  CHECK(b.is<bool>());
  CHECK_FALSE(b.is<std::int64_t>());
  CHECK(*b.get_if<bool>() == true);
  CHECK(Arg(false).is<bool>());

  Arg d(1.0);
  CHECK(d.is<double>());
  CHECK_FALSE(d.is<std::int64_t>());
  CHECK(*d.get_if<double>() == 1.0);

  // Other integral types widen to int64; float widens to double.
  CHECK(Arg(std::int8_t{-3}).is<std::int64_t>());
  CHECK(*Arg(std::int8_t{-3}).get_if<std::int64_t>() == -3);
  CHECK(Arg(std::uint32_t{7}).is<std::int64_t>());
  CHECK(Arg(short{2}).is<std::int64_t>());
  CHECK(Arg(std::numeric_limits<std::int64_t>::min()).is<std::int64_t>());
  CHECK(*Arg(std::numeric_limits<std::int64_t>::min()).get_if<std::int64_t>() ==
        std::numeric_limits<std::int64_t>::min());
  CHECK(Arg(0.5f).is<double>());
  CHECK(*Arg(0.5f).get_if<double>() == 0.5);
}

TEST_CASE("int, bool and double of the same value are different Args") {
  // Structural equality compares alternatives first: Arg(1) is an int, not True or 1.0.
  CHECK(Arg(1) != Arg(true));
  CHECK(Arg(1) != Arg(1.0));
  CHECK(Arg(0) != Arg(false));
  CHECK(Arg(1) == Arg(1));
  CHECK(Arg(1) != Arg(2));
  CHECK(Arg(1.0) == Arg(1.0));
  CHECK(Arg(1.0) != Arg(1.5));
  CHECK(Arg(true) != Arg(false));
}

TEST_CASE("string constructors all give the same str Arg") {
  std::string s = "hello";
  std::string_view sv = s;
  CHECK(Arg("hello").is<std::string>());
  CHECK(Arg(s) == Arg("hello"));
  CHECK(Arg(sv) == Arg("hello"));
  CHECK(*Arg(sv).get_if<std::string>() == "hello");
  CHECK(Arg("hello") != Arg("world"));
  // A string is not a bool even though const char* converts to bool.
  CHECK_FALSE(Arg("x").is<bool>());
  CHECK(Arg("") == Arg(std::string()));
}

TEST_CASE("every other alternative constructs, is recognised and compares by value") {
  ThreeNodes t;

  SUBCASE("list") {
    Arg l(ArgList{Arg(1), Arg("x")});
    CHECK(l.is_list());
    REQUIRE(l.list() != nullptr);
    CHECK(l.list()->size() == 2);
    CHECK(l == Arg(ArgList{Arg(1), Arg("x")}));
    CHECK(l != Arg(ArgList{Arg("x"), Arg(1)}));
    CHECK(l != Arg(ArgList{Arg(1)}));
    // Braced init-list is a list too.
    Arg braced{Arg(1), Arg("x")};
    CHECK(braced == l);
    CHECK(Arg(ArgList{}).is_list());
    CHECK(Arg(ArgList{}) != Arg());
  }
  SUBCASE("node") {
    Arg n(t.a);
    CHECK(n.is_node());
    CHECK(n.node() == t.a);
    CHECK(n == Arg(t.a));
    CHECK(n != Arg(t.b));
    CHECK(n != Arg("a"));  // a node is not its name
  }
  SUBCASE("dtype") {
    Arg d(DType::bfloat16);
    CHECK(d.is<DType>());
    CHECK(*d.get_if<DType>() == DType::bfloat16);
    CHECK(d == Arg(DType::bfloat16));
    CHECK(d != Arg(DType::float16));
  }
  SUBCASE("device") {
    Arg d(Device{"cuda:0"});
    CHECK(d.is<Device>());
    CHECK(d.get_if<Device>()->name == "cuda:0");
    CHECK(d == Arg(Device{"cuda:0"}));
    CHECK(d != Arg(Device{"cpu"}));
    CHECK(d != Arg("cuda:0"));
  }
  SUBCASE("enum constant") {
    Arg e(EnumConst{"torch.contiguous_format"});
    CHECK(e.is<EnumConst>());
    CHECK(e == Arg(EnumConst{"torch.contiguous_format"}));
    CHECK(e != Arg(EnumConst{"torch.channels_last"}));
    CHECK(e != Arg(Repr{"torch.contiguous_format"}));
  }
  SUBCASE("slice") {
    Arg s(Slice{{Arg(), Arg(4), Arg(2)}});
    CHECK(s.is<Slice>());
    CHECK(s.get_if<Slice>()->parts.size() == 3);
    CHECK(s == Arg(Slice{{Arg(), Arg(4), Arg(2)}}));
    CHECK(s != Arg(Slice{{Arg(0), Arg(4), Arg(2)}}));
  }
  SUBCASE("symbolic int") {
    Arg s(SymInt{"s0"});
    CHECK(s.is<SymInt>());
    CHECK(s == Arg(SymInt{"s0"}));
    CHECK(s != Arg(SymInt{"s1"}));
    CHECK(s != Arg("s0"));
  }
  SUBCASE("dict") {
    Arg d(ArgDict{{"dim", Arg(1)}});
    CHECK(d.is<ArgDict>());
    CHECK(d == Arg(ArgDict{{"dim", Arg(1)}}));
    CHECK(d != Arg(ArgDict{{"dim", Arg(2)}}));
    CHECK(d != Arg(ArgDict{{"axis", Arg(1)}}));
  }
  SUBCASE("repr") {
    Arg r(Repr{"<object at 0x1>"});
    CHECK(r.is<Repr>());
    CHECK(r == Arg(Repr{"<object at 0x1>"}));
    CHECK(r != Arg(Repr{"<other>"}));
    CHECK(r != Arg("<object at 0x1>"));
  }
}

TEST_CASE("get_if returns nullptr for another alternative and allows editing") {
  Arg a(5);
  CHECK(a.get_if<double>() == nullptr);
  CHECK(a.get_if<std::string>() == nullptr);
  *a.get_if<std::int64_t>() = 6;
  CHECK(a == Arg(6));
  Arg l(ArgList{Arg(1)});
  l.get_if<ArgList>()->push_back(Arg(2));
  CHECK(l == Arg(ArgList{Arg(1), Arg(2)}));
}

TEST_CASE("ArgDict keeps insertion order") {
  ArgDict d{{"b", Arg(1)}, {"a", Arg(2)}};
  d.set("c", Arg(3));
  std::vector<std::string> keys;
  for (const auto& [k, v] : d) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"b", "a", "c"});
  CHECK(d.size() == 3);
  CHECK_FALSE(d.empty());
  CHECK(ArgDict().empty());
}

TEST_CASE("ArgDict::set on an existing key replaces the value in place") {
  ArgDict d{{"x", Arg(1)}, {"y", Arg(2)}, {"z", Arg(3)}};
  d.set("x", Arg("new"));
  REQUIRE(d.size() == 3);
  auto it = d.begin();
  CHECK(it->first == "x");
  CHECK(it->second == Arg("new"));
  ++it;
  CHECK(it->first == "y");
  ++it;
  CHECK(it->first == "z");
  // Setting the middle key keeps it in the middle.
  d.set("y", Arg(20));
  std::vector<std::string> keys;
  for (const auto& [k, v] : d) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"x", "y", "z"});
  CHECK(*d.find("y") == Arg(20));
}

TEST_CASE("ArgDict::erase removes only the named key and reports whether it existed") {
  ArgDict d{{"x", Arg(1)}, {"y", Arg(2)}, {"z", Arg(3)}};
  CHECK(d.erase("y"));
  CHECK_FALSE(d.erase("y"));
  CHECK_FALSE(d.erase("nope"));
  CHECK(d.size() == 2);
  CHECK_FALSE(d.contains("y"));
  std::vector<std::string> keys;
  for (const auto& [k, v] : d) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"x", "z"});
  // Re-adding an erased key appends it at the end.
  d.set("y", Arg(9));
  keys.clear();
  for (const auto& [k, v] : d) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"x", "z", "y"});
}

TEST_CASE("ArgDict::find and contains") {
  ArgDict d{{"dim", Arg(1)}, {"keepdim", Arg(true)}};
  REQUIRE(d.find("dim") != nullptr);
  CHECK(*d.find("dim") == Arg(1));
  CHECK(*d.find("keepdim") == Arg(true));
  CHECK(d.find("dtype") == nullptr);
  CHECK(d.find("") == nullptr);
  CHECK(d.find("di") == nullptr);  // no prefix matching
  CHECK(d.contains("dim"));
  CHECK_FALSE(d.contains("Dim"));
  // The non-const find edits in place.
  *d.find("dim") = Arg(-1);
  CHECK(*d.find("dim") == Arg(-1));
  const ArgDict& cd = d;
  CHECK(cd.find("keepdim") != nullptr);
}

TEST_CASE("ArgDict equality compares keys and values") {
  CHECK(ArgDict{{"a", Arg(1)}} == ArgDict{{"a", Arg(1)}});
  CHECK(ArgDict{{"a", Arg(1)}} != ArgDict{{"a", Arg(1.0)}});
  CHECK(ArgDict{{"a", Arg(1)}} != ArgDict{{"a", Arg(1)}, {"b", Arg(2)}});
  CHECK(ArgDict() == ArgDict());
}

TEST_CASE("for_each_node visits nested lists, dicts and slices in order with duplicates") {
  ThreeNodes t;
  Node *a = t.a, *b = t.b, *c = t.c;
  Arg nested(ArgList{
      Arg(b),
      Arg(ArgList{Arg(a), Arg(1), Arg(ArgList{Arg(c), Arg(a)})}),
      Arg(ArgDict{{"k1", Arg(c)}, {"k2", Arg(ArgList{Arg(b), Arg("s")})}}),
      Arg(Slice{{Arg(a), Arg(), Arg(b)}}),
      Arg(2.0),
      Arg(b),
  });
  CHECK(nodes_in(nested) == std::vector<Node*>{b, a, c, a, c, b, a, b, b});
}

TEST_CASE("for_each_node on non-node values visits nothing") {
  CHECK(nodes_in(Arg()).empty());
  CHECK(nodes_in(Arg(3)).empty());
  CHECK(nodes_in(Arg("x")).empty());
  CHECK(nodes_in(Arg(ArgList{Arg(1), Arg(ArgList{})})).empty());
  CHECK(nodes_in(Arg(DType::int8)).empty());
  CHECK(nodes_in(Arg(Repr{"%x"})).empty());
}

TEST_CASE("for_each_node on a single node visits it once") {
  ThreeNodes t;
  CHECK(nodes_in(Arg(t.a)) == std::vector<Node*>{t.a});
}

TEST_CASE("map_nodes replaces every reference and keeps structure and other values") {
  ThreeNodes t;
  Node *a = t.a, *b = t.b, *c = t.c;
  Arg in(ArgList{
      Arg(a),
      Arg(ArgDict{{"x", Arg(a)}, {"y", Arg(7)}, {"z", Arg(b)}}),
      Arg(Slice{{Arg(a), Arg(1), Arg()}}),
      Arg("a"),
      Arg(ArgList{Arg(b), Arg(a)}),
  });
  int calls = 0;
  Arg out = map_nodes(in, [&](Node* n) {
    ++calls;
    return n == a ? c : n;
  });
  CHECK(calls == 6);
  Arg expected(ArgList{
      Arg(c),
      Arg(ArgDict{{"x", Arg(c)}, {"y", Arg(7)}, {"z", Arg(b)}}),
      Arg(Slice{{Arg(c), Arg(1), Arg()}}),
      Arg("a"),
      Arg(ArgList{Arg(b), Arg(c)}),
  });
  CHECK(out == expected);
  // Input untouched.
  CHECK(nodes_in(in) == std::vector<Node*>{a, a, b, a, b, a});
  // The dict keeps its key order.
  std::vector<std::string> keys;
  for (const auto& [k, v] : *out.list()->at(1).get_if<ArgDict>()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"x", "y", "z"});
}

TEST_CASE("map_nodes on a value without nodes returns an equal value") {
  Arg v(ArgList{Arg(1), Arg(DType::float32), Arg(Device{"cpu"}), Arg(SymInt{"s0"})});
  int calls = 0;
  Arg out = map_nodes(v, [&](Node* n) {
    ++calls;
    return n;
  });
  CHECK(calls == 0);
  CHECK(out == v);
}

TEST_CASE("map_nodes on a bare node calls fn once") {
  ThreeNodes t;
  Arg out = map_nodes(Arg(t.a), [&](Node*) { return t.b; });
  CHECK(out.node() == t.b);
}

TEST_CASE("a node reference carries the node's kind and target") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  Node* v = g.call_method("view", {r, -1});
  const Arg ar(r), av(v), ax(x);
  REQUIRE(ar.node_ref() != nullptr);
  CHECK(ar.node_ref()->node == r);
  CHECK(ar.node_ref()->target_hash == aten::relu.hash);
  CHECK(ar.node_ref()->op == static_cast<std::uint8_t>(OpKind::call_function));
  CHECK(av.node_ref()->op == static_cast<std::uint8_t>(OpKind::call_method));
  CHECK(av.node_ref()->target_hash == v->target().hash);
  CHECK(ax.node_ref()->op == static_cast<std::uint8_t>(OpKind::placeholder));
  // Equality is the node's identity only.
  CHECK(Arg(r) == ar);
  CHECK_FALSE(Arg(r) == ax);
  // A null reference is still a node reference (an error for graph edits), with no kind.
  const Arg null_ref(static_cast<Node*>(nullptr));
  CHECK(null_ref.is_node());
  CHECK(null_ref.node() == nullptr);
  CHECK(null_ref.node_ref()->op == 0xff);
  CHECK(Arg(1).node_ref() == nullptr);
  // Arguments rewritten by an edit carry the new node's kind and target.
  Node* t = g.call_function(aten::tanh, {x});
  v->replace_input_with(r, t);
  CHECK(v->args()[0].node_ref()->target_hash == aten::tanh.hash);
}

TEST_CASE("copying a node reference keeps its node, kind and target, and copies between forms replace the form") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  const Arg ar(r);
  const Arg copy(ar);
  CHECK(copy.node() == r);
  CHECK(copy.node_ref()->target_hash == aten::relu.hash);
  CHECK(copy.node_ref()->op == static_cast<std::uint8_t>(OpKind::call_function));
  Arg a(x);
  a = ar;  // node over node
  CHECK(a.node() == r);
  CHECK(a.node_ref()->target_hash == aten::relu.hash);
  const Arg ax(x);
  a = ax;
  CHECK(a.node_ref()->op == static_cast<std::uint8_t>(OpKind::placeholder));
  Arg s(std::string("text"));
  s = ar;  // node over a boxed string
  CHECK(s.node() == r);
  const Arg list(ArgList{Arg(r), Arg(2), Arg(std::string("t"))});
  a = list;  // a list over a node
  CHECK(a == list);
  CHECK(a.list()->at(0).node() == r);
  Arg b = a;  // a list copied deeply
  CHECK(b == list);
  b.get_if<ArgList>()->at(1) = Arg(3);
  CHECK(a == list);
  const Arg null_ref(static_cast<Node*>(nullptr));
  Arg n(null_ref);
  CHECK(n.is_node());
  CHECK(n.node_ref()->op == 0xff);
  n = Arg(1.5);
  const Arg scalar = n;
  CHECK(scalar == Arg(1.5));
  a = a;  // self-assignment of a list
  CHECK(a == list);
}

TEST_CASE("is_scalar and owns_nothing sort every form") {
  Graph g;
  Node* x = g.placeholder("x");
  const std::vector<Arg> scalars = {Arg(), Arg(true), Arg(3), Arg(2.5), Arg(DType::float32)};
  for (const Arg& a : scalars) {
    CHECK(a.is_scalar());
    CHECK(a.owns_nothing());
  }
  CHECK_FALSE(Arg(x).is_scalar());
  CHECK(Arg(x).owns_nothing());
  const std::vector<Arg> owning = {Arg("s"), Arg(ArgList{}), Arg(ArgList{Arg(x)}), Arg(Device{"cpu"}),
                                   Arg(EnumConst{"torch.contiguous_format"}), Arg(Slice{}), Arg(SymInt{"s0"}),
                                   Arg(ArgDict{{"k", 1}}), Arg(Repr{"object()"})};
  for (const Arg& a : owning) {
    CHECK_FALSE(a.is_scalar());
    CHECK_FALSE(a.owns_nothing());
  }
}

TEST_CASE("Arg is 32 bytes: the big forms are boxed") {
  CHECK(sizeof(Arg) == 32);
  CHECK(sizeof(Box<ArgDict>) == sizeof(void*));
}

TEST_CASE("Box copies deeply, moves by stealing and compares by value") {
  Box<std::string> a(std::string("abc"));
  CHECK(*a == "abc");
  CHECK(a->size() == 3);
  CHECK(Box<std::string>().get() != nullptr);  // default-constructs a T
  CHECK(*Box<std::string>() == "");

  SUBCASE("copy construct") {
    Box<std::string> b(a);
    CHECK(b == a);
    CHECK(b.get() != a.get());
    *b += "d";
    CHECK(*a == "abc");
    CHECK(*b == "abcd");
    CHECK(b != a);
  }
  SUBCASE("copy assign") {
    Box<std::string> b(std::string("x"));
    b = a;
    CHECK(b == a);
    b->push_back('!');
    CHECK(*a == "abc");
    CHECK(*b == "abc!");
  }
  SUBCASE("move steals the T and leaves an empty Box that can be reused") {
    const std::string* held = a.get();
    Box<std::string> b(std::move(a));
    CHECK(b.get() == held);
    CHECK(*b == "abc");
    CHECK(a.get() == nullptr);
    Box<std::string> empty_copy(a);  // an empty Box copies to an empty Box and equals only an empty one
    CHECK(empty_copy.get() == nullptr);
    CHECK(empty_copy == a);
    CHECK(a != b);
    CHECK(b != a);
    a = b;  // an empty Box may be assigned to
    CHECK(*a == "abc");
    Box<std::string> c;
    c = std::move(b);
    CHECK(*c == "abc");
    CHECK(b.get() == nullptr);
  }
  SUBCASE("self-assignment keeps the value") {
    Box<std::string>& same = a;
    a = same;
    CHECK(*a == "abc");
    a = std::move(same);
    CHECK(*a == "abc");
  }
  SUBCASE("equality is by value, never by identity") {
    CHECK(Box<std::string>(std::string("abc")) == a);
    CHECK(Box<std::string>(std::string("abd")) != a);
    Box<ArgDict> nan_dict(ArgDict{{"x", Arg(std::numeric_limits<double>::quiet_NaN())}});
    CHECK_FALSE(nan_dict == nan_dict);
  }
  SUBCASE("a Box may be assigned a Box that lives inside its own value") {
    // Both assignments reach Box's assignment with the source inside the target's dict.
    Arg outer(ArgDict{{"inner", Arg(ArgDict{{"k", Arg(2)}})}});
    outer = *outer.get_if<ArgDict>()->find("inner");
    CHECK(outer == Arg(ArgDict{{"k", Arg(2)}}));
    Arg moved(ArgDict{{"inner", Arg(ArgDict{{"k", Arg(3)}})}});
    moved = std::move(*moved.get_if<ArgDict>()->find("inner"));
    CHECK(moved == Arg(ArgDict{{"k", Arg(3)}}));
  }
}

namespace {

// Each boxed form: two different values of it, and one way to change a value in place.
template <class T, class Edit>
void check_boxed_form(const T& value, const T& other, Edit edit) {
  CAPTURE(format_arg(Arg(value)));
  const Arg a(value);
  CHECK(a.is<T>());
  REQUIRE(a.get_if<T>() != nullptr);
  CHECK(*a.get_if<T>() == value);
  CHECK_FALSE(a.is<None>());
  CHECK(a.get_if<std::int64_t>() == nullptr);
  CHECK(Arg(1).get_if<T>() == nullptr);
  CHECK_FALSE(Arg(1).is<T>());

  // A copy owns its own value: editing it leaves the original alone.
  Arg copy = a;
  CHECK(copy == a);
  REQUIRE(copy.get_if<T>() != nullptr);
  CHECK(copy.get_if<T>() != a.get_if<T>());
  edit(*copy.get_if<T>());
  CHECK(copy != a);
  CHECK(*a.get_if<T>() == value);
  Arg assigned(7);
  assigned = a;
  edit(*assigned.get_if<T>());
  CHECK(*a.get_if<T>() == value);
  CHECK(assigned == copy);

  // A move keeps the boxed value where it is.
  const T* held = copy.get_if<T>();
  Arg moved = std::move(copy);
  CHECK(moved.get_if<T>() == held);

  CHECK(Arg(value) == a);
  CHECK(Arg(other) != a);
  CHECK(a != Arg());
  CHECK(a != Arg(1));
  CHECK(a != Arg(ArgList{a}));

  // Lists of boxed forms compare element by element, by value.
  const Arg list(ArgList{Arg(1), a, Arg(ArgList{a, Arg(other)})});
  CHECK(list == Arg(ArgList{Arg(1), Arg(value), Arg(ArgList{Arg(value), Arg(other)})}));
  CHECK(list != Arg(ArgList{Arg(1), Arg(value), Arg(ArgList{Arg(other), Arg(other)})}));
  CHECK(list != Arg(ArgList{Arg(1), Arg(other), Arg(ArgList{Arg(value), Arg(other)})}));
  Arg list_copy = list;
  edit(*list_copy.get_if<ArgList>()->at(2).get_if<ArgList>()->at(0).get_if<T>());
  CHECK(list_copy != list);
  CHECK(*list.list()->at(2).list()->at(0).get_if<T>() == value);
}

}  // namespace

TEST_CASE("every boxed form constructs, reads, copies deeply and compares by value") {
  SUBCASE("str") {
    check_boxed_form<std::string>("hello", "world", [](std::string& s) { s += "!"; });
  }
  SUBCASE("device") {
    check_boxed_form(Device{"cuda:0"}, Device{"cpu"}, [](Device& d) { d.name = "cuda:1"; });
  }
  SUBCASE("enum constant") {
    check_boxed_form(EnumConst{"torch.contiguous_format"}, EnumConst{"torch.channels_last"},
                     [](EnumConst& e) { e.name = "torch.preserve_format"; });
  }
  SUBCASE("symbolic int") {
    check_boxed_form(SymInt{"s0"}, SymInt{"s1"}, [](SymInt& s) { s.name = "s2"; });
  }
  SUBCASE("dict") {
    check_boxed_form(ArgDict{{"dim", Arg(1)}, {"name", Arg("x")}}, ArgDict{{"dim", Arg(2)}},
                     [](ArgDict& d) { d.find("name")->get_if<std::string>()->push_back('y'); });
  }
  SUBCASE("repr") {
    check_boxed_form(Repr{"<object at 0x1>"}, Repr{"<other>"}, [](Repr& r) { r.text.clear(); });
  }
}

TEST_CASE("boxed forms of the same text are different Args") {
  const std::vector<Arg> forms{Arg("t"), Arg(Device{"t"}), Arg(EnumConst{"t"}), Arg(SymInt{"t"}), Arg(Repr{"t"}),
                               Arg(ArgDict{{"t", Arg("t")}})};
  for (std::size_t i = 0; i < forms.size(); ++i)
    for (std::size_t j = 0; j < forms.size(); ++j) {
      CAPTURE(i);
      CAPTURE(j);
      CHECK((forms[i] == forms[j]) == (i == j));
    }
}

namespace {

// Names the form visit hands it; a Box would fall to the last overload.
struct Kind {
  std::string operator()(const std::string& s) const { return "str " + s; }
  std::string operator()(const Device& d) const { return "device " + d.name; }
  std::string operator()(const EnumConst& e) const { return "enum " + e.name; }
  std::string operator()(const SymInt& s) const { return "sym " + s.name; }
  std::string operator()(const ArgDict& d) const { return "dict " + std::to_string(d.size()); }
  std::string operator()(const Repr& r) const { return "repr " + r.text; }
  std::string operator()(std::int64_t i) const { return "int " + std::to_string(i); }
  std::string operator()(const ArgList& l) const { return "list " + std::to_string(l.size()); }
  std::string operator()(const auto&) const { return "other"; }
};

}  // namespace

TEST_CASE("Arg::visit calls f with the unboxed form") {
  CHECK(Arg("text").visit(Kind{}) == "str text");
  CHECK(Arg(Device{"cpu"}).visit(Kind{}) == "device cpu");
  CHECK(Arg(EnumConst{"Ellipsis"}).visit(Kind{}) == "enum Ellipsis");
  CHECK(Arg(SymInt{"s0"}).visit(Kind{}) == "sym s0");
  CHECK(Arg(ArgDict{{"a", Arg(1)}, {"b", Arg(2)}}).visit(Kind{}) == "dict 2");
  CHECK(Arg(Repr{"?"}).visit(Kind{}) == "repr ?");
  CHECK(Arg(4).visit(Kind{}) == "int 4");
  CHECK(Arg(ArgList{Arg(1)}).visit(Kind{}) == "list 1");
  CHECK(Arg(DType::int8).visit(Kind{}) == "other");
  CHECK(Arg().visit(Kind{}) == "other");

  // The non-const visit edits the held value in place.
  Arg s("abc");
  s.visit([](auto& v) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(v)>, std::string>) v += "d";
  });
  CHECK(s == Arg("abcd"));
  // A visitor may return void.
  int calls = 0;
  Arg(SymInt{"s0"}).visit([&](const auto&) { ++calls; });
  CHECK(calls == 1);
}
