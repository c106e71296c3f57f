// ListOf(pattern, partial): a list argument matched element by element, with
// Inductor's semantics (torch/_inductor/pattern_matcher.py, ListOf._match):
// each element in a child context (fresh slots but the multi-user ones, fresh
// exclusive set, own captures merged afterwards), args bundled per element.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;
using kiln::testing::names;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// An op without a schema, so a pattern may give it any number of arguments.
constexpr OpRef kFrob{"test_list_of.frob.default"};

Arg list_of(std::initializer_list<Node*> nodes) {
  ArgList l;
  for (Node* n : nodes) l.emplace_back(n);
  return Arg(std::move(l));
}

// cat(list, 1)
Node* cat(Graph& g, std::initializer_list<Node*> items) {
  return g.call_function(aten::cat, ArgList{list_of(items), Arg(1)});
}

auto relu_list_pattern(bool partial = false) {
  return p::CallFunction(aten::cat, p::ListOf(p::CallFunction(aten::relu, p::Arg()), partial), p::Arg());
}

}  // namespace

// ---- matching and args ----

TEST_CASE("ListOf matches when every element matches and bundles each element's args into a list") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* r1 = g.call_function(aten::relu, {a});
  Node* r2 = g.call_function(aten::relu, {b});
  Node* c = cat(g, {r1, r2});
  g.output(ArgList{c});

  auto m = p::match(relu_list_pattern(), c);
  REQUIRE(m.has_value());
  // Inductor: each element's args become a tuple, and the ListOf's one arg is
  // the tuple of those: [((a,), (b,)), 1].
  const std::vector<Arg> expected{Arg(ArgList{Arg(ArgList{Arg(a)}), Arg(ArgList{Arg(b)})}), Arg(1)};
  CHECK(m->args() == expected);
  CHECK(m->nodes() == std::vector<Node*>{r1, r2, c});
  CHECK(m->output_nodes() == std::vector<Node*>{c});
}

TEST_CASE("ListOf whose elements capture no Arg() adds no argument at all") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r1 = g.call_function(aten::relu, {a});
  Node* r2 = g.call_function(aten::relu, {a});
  Node* c = cat(g, {r1, r2});
  g.output(ArgList{c});

  auto pat = p::CallFunction(aten::cat, p::ListOf(p::CallFunction(aten::relu, p::Ignored())), p::Arg());
  auto m = p::match(pat, c);
  REQUIRE(m.has_value());
  CHECK(m->args() == std::vector<Arg>{Arg(1)});
  CHECK(m->nodes() == std::vector<Node*>{r1, r2, c});
}

TEST_CASE("ListOf (full) fails when one element does not match, naming the element") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {b});
  Node* c = cat(g, {r, s});
  g.output(ArgList{c});

  std::string why;
  CHECK_FALSE(p::match(relu_list_pattern(), c, &why).has_value());
  CHECK(contains(why, "list[1]: "));
  CHECK(contains(why, "function_mismatch"));
}

TEST_CASE("ListOf(partial) skips the elements that do not match") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* d = g.placeholder("d");
  Node* r1 = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {b});
  Node* r2 = g.call_function(aten::relu, {d});
  Node* c = cat(g, {r1, s, r2});
  g.output(ArgList{c});

  auto m = p::match(relu_list_pattern(true), c);
  REQUIRE(m.has_value());
  CHECK(m->args() == std::vector<Arg>{Arg(ArgList{Arg(ArgList{Arg(a)}), Arg(ArgList{Arg(d)})}), Arg(1)});
  CHECK(m->nodes() == std::vector<Node*>{r1, r2, c});
  // The full form rejects the same list.
  CHECK_FALSE(p::match(relu_list_pattern(false), c).has_value());
  // A skipped element is not the reason for a later failure.
  std::string why;
  auto dim2 = p::CallFunction(aten::cat, p::ListOf(p::CallFunction(aten::relu, p::Arg()), true), 2);
  CHECK_FALSE(p::match(dim2, c, &why).has_value());
  CHECK(contains(why, "constant_args"));
  CHECK_FALSE(contains(why, "function_mismatch"));
}

TEST_CASE("ListOf(partial) fails when no element matches") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* s = g.call_function(aten::sigmoid, {a});
  Node* t = g.call_function(aten::tanh, {a});
  Node* c = cat(g, {s, t});
  g.output(ArgList{c});

  std::string why;
  CHECK_FALSE(p::match(relu_list_pattern(true), c, &why).has_value());
  // Inductor's reason, after the path that leads to it.
  CHECK(why == "cat = CallFunction(aten.cat.default) args[0] -> list: no_match");
}

TEST_CASE("ListOf rejects a non-list argument and an empty list") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* not_a_list = g.call_function(kFrob, {r, Arg(1)});
  Node* empty = g.call_function(aten::cat, ArgList{Arg(ArgList{}), Arg(1)});
  g.output(ArgList{not_a_list, empty});

  for (bool partial : {false, true}) {
    auto pat = p::CallFunction({kFrob, aten::cat}, p::ListOf(p::CallFunction(aten::relu, p::Arg()), partial), p::Arg());
    std::string why;
    CHECK_FALSE(p::match(pat, not_a_list, &why).has_value());
    CHECK(contains(why, "non_list"));
    CHECK_FALSE(p::match(pat, empty, &why).has_value());
    CHECK(contains(why, "non_list"));
  }
}

TEST_CASE("a skipped element leaves none of its captures, args or nodes behind") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c1 = g.placeholder("c1");
  Node* c2 = g.placeholder("c2");
  Node* ra = g.call_function(aten::relu, {a});
  Node* f1 = g.call_function(kFrob, {ra, c1, Arg(3)});  // fails on the constant, after the rest matched
  Node* rb = g.call_function(aten::relu, {b});
  Node* f2 = g.call_function(kFrob, {rb, c2, Arg(2)});
  Node* c = cat(g, {f1, f2});
  g.output(ArgList{c});

  auto pat = p::CallFunction(
      aten::cat, p::ListOf(p::CallFunction(kFrob, p::CallFunction(aten::relu, p::kw<"x">), p::Arg(), 2), true),
      p::Ignored());
  auto m = p::match(pat, c);
  REQUIRE(m.has_value());
  CHECK(m->node<"x">() == b);  // not a: the failed element's capture is gone
  CHECK(m->args() == std::vector<Arg>{Arg(ArgList{Arg(ArgList{Arg(c2)})})});
  CHECK(m->nodes() == std::vector<Node*>{rb, f2, c});
}

// ---- captures ----

TEST_CASE("a capture inside ListOf must bind the same value in every element") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* s1 = g.call_function(aten::add_Tensor, {a, y});
  Node* s2 = g.call_function(aten::add_Tensor, {b, y});
  Node* same = cat(g, {s1, s2});
  Node* t1 = g.call_function(aten::add_Tensor, {a, y});
  Node* t2 = g.call_function(aten::add_Tensor, {b, z});
  Node* differ = cat(g, {t1, t2});
  g.output(ArgList{same, differ});

  auto pat = [](bool partial) {
    return p::CallFunction(aten::cat, p::ListOf(p::CallFunction(aten::add_Tensor, p::Ignored(), p::kw<"y">), partial),
                           p::Ignored());
  };
  auto m = p::match(pat(false), same);
  REQUIRE(m.has_value());
  CHECK(m->node<"y">() == y);

  std::string why;
  CHECK_FALSE(p::match(pat(false), differ, &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'y'"));
  // Partial does not skip the disagreeing element: Inductor raises the
  // mismatch out of Match.extend, failing the whole match.
  CHECK_FALSE(p::match(pat(true), differ, &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'y'"));
}

TEST_CASE("a capture inside ListOf must agree with the same name bound outside it") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* s1 = g.call_function(aten::add_Tensor, {a, y});
  Node* agree = g.call_function(kFrob, {list_of({s1}), y});
  Node* s2 = g.call_function(aten::add_Tensor, {a, y});
  Node* disagree = g.call_function(kFrob, {list_of({s2}), z});
  Node* s3 = g.call_function(aten::add_Tensor, {a, y});
  Node* disagree_before = g.call_function(kFrob, {z, list_of({s3})});
  g.output(ArgList{agree, disagree, disagree_before});

  auto elem = p::ListOf(p::CallFunction(aten::add_Tensor, p::Ignored(), p::kw<"y">));
  auto after = p::CallFunction(kFrob, elem, p::kw<"y">);
  auto before = p::CallFunction(kFrob, p::kw<"y">, elem);
  auto m = p::match(after, agree);
  REQUIRE(m.has_value());
  CHECK(m->node<"y">() == y);
  CHECK_FALSE(p::match(after, disagree).has_value());
  std::string why;
  CHECK_FALSE(p::match(before, disagree_before, &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'y'"));
}

// ---- exclusive args ----

TEST_CASE("each ListOf element gets a fresh exclusive set, and the outer one is kept") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* ra1 = g.call_function(aten::relu, {a});
  Node* ra2 = g.call_function(aten::relu, {a});
  Node* twice = cat(g, {ra1, ra2});
  Node* ra3 = g.call_function(aten::relu, {a});
  Node* outer_then_inner = g.call_function(kFrob, {a, list_of({ra3}), b});
  Node* rb1 = g.call_function(aten::relu, {b});
  Node* outer_kept = g.call_function(kFrob, {a, list_of({rb1}), a});
  Node* rb2 = g.call_function(aten::relu, {b});
  Node* inner_dropped = g.call_function(kFrob, {c, list_of({rb2}), b});
  Node* aa = g.call_function(aten::add_Tensor, {a, a});
  Node* within = cat(g, {aa});
  g.output(ArgList{twice, outer_then_inner, outer_kept, inner_dropped, within});

  const p::ExclusiveKeywordArg<"e"> e{};
  // The same exclusive arg object binds `a` in two elements: fine, each
  // element has its own set (and the capture agrees).
  auto m = p::match(p::CallFunction(aten::cat, p::ListOf(p::CallFunction(aten::relu, e)), p::Ignored()), twice);
  REQUIRE(m.has_value());
  CHECK(m->node<"e">() == a);

  auto around = p::CallFunction(kFrob, p::ExclusiveKeywordArg<"g">{}, p::ListOf(p::CallFunction(aten::relu, e)),
                                p::ExclusiveKeywordArg<"h">{});
  CHECK(p::match(around, outer_then_inner).has_value());  // g's `a` is not in the element's set
  std::string why;
  CHECK_FALSE(p::match(around, outer_kept, &why).has_value());  // g's `a` is still there for h
  CHECK(contains(why, "exclusive arg appears twice"));
  CHECK(p::match(around, inner_dropped).has_value());  // e's `b` is gone by the time h binds

  // Within one element, exclusivity holds.
  auto pair = p::CallFunction(aten::cat,
                              p::ListOf(p::CallFunction(aten::add_Tensor, p::ExclusiveKeywordArg<"x">{},
                                                        p::ExclusiveKeywordArg<"y">{})),
                              p::Ignored());
  CHECK_FALSE(p::match(pair, within, &why).has_value());
  CHECK(contains(why, "exclusive arg appears twice"));
}

// ---- the users rule and multi-user patterns ----

TEST_CASE("the users rule applies inside ListOf elements") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* r1 = g.call_function(aten::relu, {a});
  Node* r2 = g.call_function(aten::relu, {b});
  Node* c = cat(g, {r1, r2});
  Node* extra = g.call_function(aten::sigmoid, {r2});  // r2 has two users
  g.output(ArgList{c, extra});

  std::string why;
  CHECK_FALSE(p::match(relu_list_pattern(false), c, &why).has_value());
  CHECK(contains(why, "list[1]: "));
  CHECK(contains(why, "expected 1 user, has 2"));
  auto m = p::match(relu_list_pattern(true), c);
  REQUIRE(m.has_value());
  CHECK(m->nodes() == std::vector<Node*>{r1, c});
}

TEST_CASE("a multi-user sub-pattern matched in one element is the same node in the next") {
  // Inductor carries the multi-user patterns from element to element
  // (filter_multi_user_patterns), so a shared producer is matched once.
  auto shared = p::CallFunction(aten::relu, p::Arg(), p::MULTIPLE);
  auto pat = p::CallFunction(aten::cat, p::ListOf(p::CallFunction(aten::mul_Tensor, shared, p::Arg())), p::Ignored());

  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* r = g.call_function(aten::relu, {a});
  Node* m1 = g.call_function(aten::mul_Tensor, {r, b});
  Node* m2 = g.call_function(aten::mul_Tensor, {r, c});
  Node* one_producer = cat(g, {m1, m2});
  Node* r1 = g.call_function(aten::relu, {a});
  Node* r2 = g.call_function(aten::relu, {a});
  Node* n1 = g.call_function(aten::mul_Tensor, {r1, b});
  Node* n2 = g.call_function(aten::mul_Tensor, {r2, c});
  Node* two_producers = cat(g, {n1, n2});
  g.output(ArgList{one_producer, two_producers});

  auto m = p::match(pat, one_producer);
  REQUIRE(m.has_value());
  // The second element finds relu already matched: no Arg() from it, no node.
  CHECK(m->args() == std::vector<Arg>{Arg(ArgList{Arg(ArgList{Arg(a), Arg(b)}), Arg(ArgList{Arg(c)})})});
  CHECK(m->nodes() == std::vector<Node*>{r, m1, m2, one_producer});

  std::string why;
  CHECK_FALSE(p::match(pat, two_producers, &why).has_value());
  CHECK(contains(why, "repeated pattern differs"));
}

TEST_CASE("multi-user matches flow into ListOf elements from outside, but not out of them") {
  auto shared = p::CallFunction(aten::relu, p::Ignored(), p::MULTIPLE);
  auto into = p::CallFunction(kFrob, shared, p::ListOf(p::CallFunction(aten::mul_Tensor, shared, p::Ignored())));
  auto out_of = p::CallFunction(kFrob, p::ListOf(p::CallFunction(aten::mul_Tensor, shared, p::Ignored())), shared);

  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* r1 = g.call_function(aten::relu, {a});
  Node* r2 = g.call_function(aten::relu, {a});
  Node* same_mul = g.call_function(aten::mul_Tensor, {r1, b});
  Node* same = g.call_function(kFrob, {r1, list_of({same_mul})});
  Node* other_mul = g.call_function(aten::mul_Tensor, {r2, b});
  Node* other = g.call_function(kFrob, {r1, list_of({other_mul})});
  Node* after_mul = g.call_function(aten::mul_Tensor, {r1, b});
  Node* after = g.call_function(kFrob, {list_of({after_mul}), r2});
  g.output(ArgList{same, other, after});

  CHECK(p::match(into, same).has_value());
  std::string why;
  CHECK_FALSE(p::match(into, other, &why).has_value());  // relu is r1 outside, so r1 inside
  CHECK(contains(why, "repeated pattern differs"));
  // What the elements matched is gone after the ListOf: relu may be r2 there.
  auto m = p::match(out_of, after);
  REQUIRE(m.has_value());
  CHECK(m->nodes() == std::vector<Node*>{r1, after_mul, r2, after});
}

TEST_CASE("one ListOf object used twice must see equal lists") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r1 = g.call_function(aten::relu, {a});
  Node* r2 = g.call_function(aten::relu, {a});
  Node* same = g.call_function(kFrob, {list_of({r1}), list_of({r1})});
  Node* differ = g.call_function(kFrob, {list_of({r1}), list_of({r2})});
  g.output(ArgList{same, differ});

  auto l = p::ListOf(p::CallFunction(aten::relu, p::Ignored(), p::MULTIPLE));
  auto pat = p::CallFunction(kFrob, l, l);
  CHECK(p::match(pat, same).has_value());
  std::string why;
  CHECK_FALSE(p::match(pat, differ, &why).has_value());
  CHECK(contains(why, "repeated pattern differs"));
}

TEST_CASE("ListOf describes itself in Inductor's style") {
  CHECK(p::describe(p::ListOf(p::CallFunction(aten::relu, p::Arg()))) == "ListOf(CallFunction(aten.relu.default, Arg()))");
  CHECK(p::describe(p::ListOf(p::CallFunction(aten::relu, p::Arg()), true)) ==
        "ListOf(CallFunction(aten.relu.default, Arg()), partial=True)");
}
