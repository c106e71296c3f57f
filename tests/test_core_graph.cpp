// Graph and Node: creation, torch.fx naming, users and inputs bookkeeping, argument
// edits, replacing uses, erasing, insertion points, moving, order keys, lookups,
// clone and move.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core.hpp"
#include "test_support.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_functional.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/operator.hpp"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<Node*> users_of(const Node* n) { return n->user_list(); }

// is_before agrees with list order for every pair (quadratic: small graphs only),
// or for every adjacent pair plus a sample of far pairs (large graphs).
void check_order_consistent(const Graph& g) {
  std::vector<Node*> v = g.node_list();
  REQUIRE(v.size() == g.size());
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    REQUIRE(v[i]->next() == v[i + 1]);
    REQUIRE(v[i + 1]->prev() == v[i]);
    REQUIRE(v[i]->is_before(*v[i + 1]));
    REQUIRE_FALSE(v[i + 1]->is_before(*v[i]));
  }
  if (v.size() <= 200) {
    for (std::size_t i = 0; i < v.size(); ++i)
      for (std::size_t j = 0; j < v.size(); ++j) REQUIRE(v[i]->is_before(*v[j]) == (i < j));
  } else {
    std::mt19937 rng(123);
    std::uniform_int_distribution<std::size_t> pick(0, v.size() - 1);
    for (int k = 0; k < 20000; ++k) {
      std::size_t i = pick(rng), j = pick(rng);
      REQUIRE(v[i]->is_before(*v[j]) == (i < j));
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- creation

TEST_CASE("each node kind is created with its op, target and args") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* f = g.call_function(aten::mm, {x, w});
  Node* m = g.call_method("view", {f, Arg(-1)});
  Node* mod = g.call_module("fc", {m}, {{"scale", Arg(2.0)}});
  Node* out = g.output(ArgList{mod});

  CHECK(x->op() == OpKind::placeholder);
  CHECK(x->target_name() == "x");
  CHECK(x->args().empty());
  CHECK(w->op() == OpKind::get_attr);
  CHECK(w->target_name() == "w");
  CHECK(f->op() == OpKind::call_function);
  CHECK(f->target() == aten::mm);
  CHECK(f->args() == ArgList{Arg(x), Arg(w)});
  CHECK(m->op() == OpKind::call_method);
  CHECK(m->target_name() == "view");
  CHECK(m->arg(1) == Arg(-1));
  CHECK(mod->op() == OpKind::call_module);
  CHECK(mod->target_name() == "fc");
  CHECK(*mod->kwargs().find("scale") == Arg(2.0));
  CHECK(out->op() == OpKind::output);
  CHECK(out->target_name() == "output");
  CHECK(out->name() == "output");
  CHECK(out->args() == ArgList{Arg(ArgList{Arg(mod)})});
  for (Node* n : {x, w, f, m, mod, out}) CHECK(&n->graph() == &g);
  CHECK(g.size() == 6);
  CHECK_FALSE(g.empty());
  CHECK(g.front() == x);
  CHECK(g.back() == out);
  CHECK(names(g) == std::vector<std::string>{"x", "w", "mm", "view", "fc", "output"});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("placeholder and get_attr carry their meta value") {
  Graph g;
  TensorMeta tm{{std::int64_t{2}, std::int64_t{3}}, DType::float16, std::nullopt};
  Node* x = g.placeholder("x", MetaVal(tm));
  Node* w = g.get_attr("w", MetaVal(std::int64_t{4}));
  REQUIRE(x->meta.val.tensor() != nullptr);
  CHECK(*x->meta.val.tensor() == tm);
  CHECK(std::get<std::int64_t>(w->meta.val.value()) == 4);
}

TEST_CASE("Node::arg out of range throws naming the node") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  CHECK(r->arg(0) == Arg(x));
  std::string msg = message_of<GraphError>([&] { (void)r->arg(1); });
  CHECK(msg.find("relu") != std::string::npos);
  CHECK(msg.find("1") != std::string::npos);
}

// ---------------------------------------------------------------- names

TEST_CASE("default names follow torch.fx: short op name, then _1, _2") {
  Graph g;
  Node* x = g.placeholder("x");
  CHECK(g.call_function(aten::add_Tensor, {x, x})->name() == "add");
  CHECK(g.call_function(aten::add_Tensor, {x, x})->name() == "add_1");
  CHECK(g.call_function(aten::add_Scalar, {x, Arg(1)})->name() == "add_2");  // same short name, shared count
  CHECK(g.call_function(pyop::getitem, {x, Arg(0)})->name() == "getitem");
  CHECK(g.call_function(pyop::getitem, {x, Arg(1)})->name() == "getitem_1");
  CHECK(g.call_function(F::linear, {x, x})->name() == "linear");
  CHECK(g.call_function(aten::softmax, {x, Arg(-1), Arg(false)})->name() == "_softmax");
  CHECK(g.call_function(c10d_functional::all_reduce, {x, "sum", "0"})->name() == "all_reduce");
  CHECK(g.call_method("view", {x, Arg(-1)})->name() == "view");
  CHECK(g.call_method("view", {x, Arg(-1)})->name() == "view_1");
  CHECK(g.call_module("layer1.0.conv", {x})->name() == "layer1_0_conv");
}

TEST_CASE("default names snake_case CamelCase as torch.fx does") {
  // torch.fx._snake_case: an underscore only where a lower-case letter is followed
  // by an upper-case one, then lower-case everything ("mod.ALL_CAPS" -> "mod.all_caps").
  Graph g;
  Node* x = g.placeholder("x");
  CHECK(g.call_function(OpRef("mylib.MyOp"), {x})->name() == "my_op");
  CHECK(g.call_function(OpRef("mylib.myCamelOp"), {x})->name() == "my_camel_op");
  CHECK(g.call_function(OpRef("mylib.ALL_CAPS"), {x})->name() == "all_caps");
  CHECK(g.call_function(OpRef("mylib.ReLU"), {x})->name() == "re_lu");
  CHECK(g.call_function(OpRef("mylib.Conv2D"), {x})->name() == "conv2d");
  CHECK(g.call_function(OpRef("mylib.HTTPServer"), {x})->name() == "httpserver");
  CHECK(g.get_attr("blockA.Weight")->name() == "block_a_weight");
}

TEST_CASE("default names drop dunder marks and avoid Python builtins and keywords") {
  // torch.fx: _target_to_str strips "__x__" to "x"; create_name never shadows a
  // builtin or keyword ("abs" -> "abs_1", as the aten graphs Inductor prints show).
  Graph g;
  Node* x = g.placeholder("x");
  CHECK(g.call_function(aten::abs, {x})->name() == "abs_1");
  CHECK(g.call_function(aten::abs, {x})->name() == "abs_2");
  CHECK(g.call_function(OpRef("aten.sum.dim_IntList"), {x, ArgList{1}})->name() == "sum_1");
  CHECK(g.call_function(OpRef("aten.max.default"), {x})->name() == "max_1");
  CHECK(g.call_function(OpRef("aten.slice.Tensor"), {x})->name() == "slice_1");
  CHECK(g.call_function(OpRef("aten.pow.Tensor_Scalar"), {x, Arg(2)})->name() == "pow_1");
  CHECK(g.call_function(OpRef("aten.__and__.Tensor"), {x, x})->name() == "and_1");
  CHECK(g.call_method("__getitem__", {x, Arg(0)})->name() == "getitem");
  CHECK(g.call_function(aten::relu, {x})->name() == "relu");  // not a builtin
  // Explicit names are kept as given: a graph read from a file keeps its names.
  CHECK(g.call_function(aten::abs, {x}, {}, "abs")->name() == "abs");
  CHECK(g.placeholder("input")->name() == "input");
}

TEST_CASE("get_attr names replace illegal characters") {
  Graph g;
  CHECK(g.get_attr("conv.weight")->name() == "conv_weight");
  CHECK(g.get_attr("conv.weight")->name() == "conv_weight_1");
  CHECK(g.get_attr("layers.0.bias")->name() == "layers_0_bias");
  CHECK(g.get_attr("0.weight")->name() == "_0_weight");  // leading digit gets an underscore
  CHECK(g.get_attr("a..b")->name() == "a_b");            // a run of illegal characters is one '_'
  // The target itself is unchanged.
  CHECK(g.find_node("conv_weight")->target_name() == "conv.weight");
}

TEST_CASE("explicit names are kept verbatim when free and suffixed when taken") {
  Graph g;
  Node* x = g.placeholder("x");
  CHECK(g.call_function(aten::add_Tensor, {x, x}, {}, "add_01")->name() == "add_01");
  CHECK(g.call_function(aten::add_Tensor, {x, x}, {}, "my_sum")->name() == "my_sum");
  CHECK(g.call_function(aten::add_Tensor, {x, x}, {}, "my_sum")->name() == "my_sum_1");
  CHECK(g.call_function(aten::add_Tensor, {x, x}, {}, "my_sum")->name() == "my_sum_2");
  CHECK(g.placeholder("x")->name() == "x_1");
  CHECK(g.call_function(aten::relu, {x}, {}, "x_1")->name() == "x_2");
  CHECK(g.call_function(aten::relu, {x}, {}, "weird name!")->name() == "weird_name_");
}

TEST_CASE("suffix counting continues from the last suffix used, as torch.fx's namespace does") {
  Graph g;
  Node* x = g.placeholder("x");
  // A graph read from a file may already use add_5 (add_1..4 were erased before export).
  CHECK(g.call_function(aten::add_Tensor, {x, x}, {}, "add_5")->name() == "add_5");
  CHECK(g.call_function(aten::add_Tensor, {x, x})->name() == "add");
  CHECK(g.call_function(aten::add_Tensor, {x, x})->name() == "add_6");
  CHECK(g.call_function(aten::add_Tensor, {x, x})->name() == "add_7");
}

TEST_CASE("names of erased nodes are not reused") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  CHECK(r->name() == "relu");
  g.erase_node(r);
  CHECK(g.find_node("relu") == nullptr);
  CHECK(g.call_function(aten::relu, {x})->name() == "relu_1");
  CHECK(g.call_function(aten::relu, {x}, {}, "relu")->name() == "relu_2");
}

TEST_CASE("unique_name does not reserve the name it returns") {
  Graph g;
  g.placeholder("x");
  CHECK(g.unique_name("x") == "x_1");
  CHECK(g.unique_name("y") == "y");
  CHECK(g.unique_name("y") == "y");
  CHECK(g.unique_name("") == "_unnamed");
}

// ---------------------------------------------------------------- users and inputs

TEST_CASE("users are kept in insertion order") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  Node* u1 = g.call_function(aten::neg, {r});
  Node* u2 = g.call_function(aten::exp, {r});
  Node* u3 = g.call_function(aten::add_Tensor, {x, r});
  CHECK(users_of(r) == std::vector<Node*>{u1, u2, u3});
  CHECK(r->num_users() == 3);
  CHECK(users_of(x) == std::vector<Node*>{r, u3});
  std::vector<Node*> iterated;
  for (Node* u : r->users()) iterated.push_back(u);
  CHECK(iterated == users_of(r));
}

TEST_CASE("a node using an input twice is one user entry") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  Node* sq = g.call_function(aten::mul_Tensor, {r, r});
  Node* cat = g.call_function(aten::cat, {ArgList{r, sq, r}, Arg(0)}, {{"out_hint", Arg(r)}});
  CHECK(r->num_users() == 2);
  CHECK(users_of(r) == std::vector<Node*>{sq, cat});
  CHECK(sq->all_input_nodes() == std::vector<Node*>{r});
  CHECK(cat->all_input_nodes() == std::vector<Node*>{r, sq});
  CHECK_NOTHROW(g.output(ArgList{cat}));
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("all_input_nodes: args then kwargs, first use order, unique") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* d = g.placeholder("d");
  Node* n = g.call_function(OpRef("mylib.combine.default"),
                            {Arg(b), Arg(ArgList{Arg(a), Arg(b)}), Arg(Slice{{Arg(c), Arg(), Arg()}})},
                            {{"k1", Arg(a)}, {"k2", Arg(ArgDict{{"z", Arg(d)}})}});
  CHECK(n->all_input_nodes() == std::vector<Node*>{b, a, c, d});
  for (Node* in : {a, b, c, d}) CHECK(users_of(in) == std::vector<Node*>{n});
}

TEST_CASE("all_input_nodes stays unique for a large fan-in") {
  Graph g;
  std::vector<Node*> ph;
  for (int i = 0; i < 40; ++i) ph.push_back(g.placeholder("p" + std::to_string(i)));
  ArgList l;
  for (int rep = 0; rep < 3; ++rep)
    for (Node* p : ph) l.push_back(p);
  Node* cat = g.call_function(aten::cat, {Arg(l)});
  CHECK(cat->all_input_nodes() == ph);
  for (Node* p : ph) CHECK(p->num_users() == 1);
  g.output(ArgList{cat});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("set_args updates users both ways") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* u = g.call_function(aten::add_Tensor, {a, b});
  u->set_args({a, c});
  CHECK(u->args() == ArgList{Arg(a), Arg(c)});
  CHECK(users_of(a) == std::vector<Node*>{u});
  CHECK(users_of(b).empty());
  CHECK(b->num_users() == 0);
  CHECK(users_of(c) == std::vector<Node*>{u});
  CHECK(u->all_input_nodes() == std::vector<Node*>{a, c});
  u->set_args({Arg(1), Arg(2)});
  CHECK(u->all_input_nodes().empty());
  for (Node* n : {a, b, c}) CHECK(n->num_users() == 0);
  u->set_args({b});
  CHECK(users_of(b) == std::vector<Node*>{u});
  g.output(ArgList{u});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("set_kwargs, set_arg and set_kwarg update users both ways") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* d = g.placeholder("d");
  Node* u = g.call_function(aten::add_Tensor, {a, b}, {{"alpha", Arg(c)}});
  CHECK(u->all_input_nodes() == std::vector<Node*>{a, b, c});

  u->set_kwargs({{"alpha", Arg(d)}});
  CHECK(c->num_users() == 0);
  CHECK(users_of(d) == std::vector<Node*>{u});
  CHECK(u->args() == ArgList{Arg(a), Arg(b)});  // args untouched
  CHECK(u->all_input_nodes() == std::vector<Node*>{a, b, d});

  u->set_arg(0, c);
  CHECK(a->num_users() == 0);
  CHECK(users_of(c) == std::vector<Node*>{u});
  CHECK(u->args() == ArgList{Arg(c), Arg(b)});

  u->set_kwarg("alpha", Arg(2));
  CHECK(d->num_users() == 0);
  CHECK(*u->kwargs().find("alpha") == Arg(2));
  u->set_kwarg("beta", a);
  CHECK(users_of(a) == std::vector<Node*>{u});
  std::vector<std::string> keys;
  for (const auto& [k, v] : u->kwargs()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"alpha", "beta"});
  CHECK(u->all_input_nodes() == std::vector<Node*>{c, b, a});

  // Same input now in two places: still one user entry, and dropping one keeps it.
  u->set_arg(1, c);
  CHECK(b->num_users() == 0);
  CHECK(c->num_users() == 1);
  u->set_arg(0, Arg(0));
  CHECK(c->num_users() == 1);
  g.output(ArgList{u});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("set_arg out of range throws naming the node and leaves it unchanged") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* u = g.call_function(aten::relu, {a});
  std::string msg = message_of<GraphError>([&] { u->set_arg(3, a); });
  CHECK(msg.find("relu") != std::string::npos);
  CHECK(u->args() == ArgList{Arg(a)});
  CHECK(a->num_users() == 1);
}

// ---------------------------------------------------------------- replacing uses

TEST_CASE("replace_all_uses_with rewires every user and returns them") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {x});
  Node* u1 = g.call_function(aten::mul_Tensor, {a, a});
  Node* u2 = g.call_function(aten::add_Tensor, {u1}, {{"other", Arg(a)}});
  Node* u3 = g.call_function(aten::cat, {ArgList{a, u2}});
  Node* out = g.output(ArgList{u3, b});
  std::vector<Node*> changed = a->replace_all_uses_with(b);
  CHECK(changed == std::vector<Node*>{u1, u2, u3});
  CHECK(a->num_users() == 0);
  CHECK(users_of(b) == std::vector<Node*>{out, u1, u2, u3});
  CHECK(u1->args() == ArgList{Arg(b), Arg(b)});
  CHECK(*u2->kwargs().find("other") == Arg(b));
  CHECK(u3->args() == ArgList{Arg(ArgList{Arg(b), Arg(u2)})});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("replace_all_uses_with with a filter only rewires accepted users") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(aten::relu, {x});
  Node* u1 = g.call_function(aten::neg, {a});
  Node* u2 = g.call_function(aten::exp, {a});
  Node* u3 = g.call_function(aten::log, {a});
  g.output(ArgList{u1, u2, u3});
  std::vector<Node*> seen;
  auto changed = a->replace_all_uses_with(y, [&](Node* u) {
    seen.push_back(u);
    return u != u2;
  });
  CHECK(seen == std::vector<Node*>{u1, u2, u3});
  CHECK(changed == std::vector<Node*>{u1, u3});
  CHECK(users_of(a) == std::vector<Node*>{u2});
  CHECK(users_of(y) == std::vector<Node*>{u1, u3});
  CHECK(u2->arg(0) == Arg(a));
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("replace_all_uses_with itself is a no-op") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* u = g.call_function(aten::neg, {a});
  g.output(ArgList{u});
  CHECK(a->replace_all_uses_with(a).empty());
  CHECK(users_of(a) == std::vector<Node*>{u});
  CHECK(u->arg(0) == Arg(a));
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("replace_input_with changes one node only, everywhere in its args and kwargs") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* u = g.call_function(OpRef("mylib.f.default"), {x, ArgList{x, y}}, {{"k", Arg(x)}});
  Node* v = g.call_function(aten::neg, {x});
  u->replace_input_with(x, y);
  CHECK(u->args() == ArgList{Arg(y), Arg(ArgList{Arg(y), Arg(y)})});
  CHECK(*u->kwargs().find("k") == Arg(y));
  CHECK(u->all_input_nodes() == std::vector<Node*>{y});
  CHECK(users_of(x) == std::vector<Node*>{v});
  CHECK(users_of(y) == std::vector<Node*>{u});
  CHECK(v->arg(0) == Arg(x));
  // Replacing an input the node does not use changes nothing.
  u->replace_input_with(v, x);
  CHECK(u->all_input_nodes() == std::vector<Node*>{y});
}

// ---------------------------------------------------------------- erasing

TEST_CASE("erase_node refuses while the node has users, naming it and them") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* u1 = g.call_function(aten::neg, {a});
  Node* u2 = g.call_function(aten::exp, {a});
  std::string msg = message_of<GraphError>([&] { g.erase_node(a); });
  CHECK(msg.find("relu") != std::string::npos);
  CHECK(msg.find("neg") != std::string::npos);
  CHECK(msg.find("exp") != std::string::npos);
  CHECK(msg.find("2") != std::string::npos);
  CHECK_FALSE(a->erased());
  CHECK(g.size() == 4);
  CHECK(g.find_node("relu") == a);

  g.erase_node(u1);
  g.erase_node(u2);
  CHECK(a->num_users() == 0);
  g.erase_node(a);
  CHECK(a->erased());
  CHECK(u1->erased());
  CHECK(g.find_node("relu") == nullptr);
  CHECK(g.find_node("neg") == nullptr);
  CHECK(g.size() == 1);
  CHECK(names(g) == std::vector<std::string>{"x"});
  CHECK(x->num_users() == 0);  // erasing a node drops it from its inputs' users
  g.output(ArgList{x});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("an erased node cannot be erased again, moved, or used as an argument") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {x});
  g.erase_node(a);
  CHECK(message_of<GraphError>([&] { g.erase_node(a); }).find("relu") != std::string::npos);
  CHECK_THROWS_AS(g.move_before(b, a), GraphError);
  CHECK(message_of<GraphError>([&] { b->set_args({a}); }).find("relu") != std::string::npos);
  CHECK(b->args() == ArgList{Arg(x)});
  CHECK_THROWS_AS(g.call_function(aten::exp, {a}), GraphError);
  CHECK(g.size() == 2);
  CHECK_THROWS_AS((void)g.inserting_before(a), GraphError);
}

TEST_CASE("purge_erased frees erased nodes and keeps live ones") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  g.erase_node(a);
  g.purge_erased();
  g.output(ArgList{x});
  CHECK(g.size() == 2);
  CHECK_NOTHROW(lint(g));
}

// ---------------------------------------------------------------- insertion points

TEST_CASE("inserting_before puts new nodes before the anchor in creation order") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  Node* out = g.output(ArgList{r});
  {
    auto guard = g.inserting_before(r);
    g.call_function(aten::neg, {x});
    g.call_function(aten::exp, {x});
    g.call_function(aten::log, {x});
  }
  CHECK(names(g) == std::vector<std::string>{"x", "neg", "exp", "log", "relu", "output"});
  // Restored: new nodes go to the end again.
  g.call_function(aten::abs, {x}, {}, "last");
  CHECK(g.back()->name() == "last");
  CHECK(out->next() == g.back());
  check_order_consistent(g);
}

TEST_CASE("inserting_after puts each new node right after the anchor, as torch.fx does") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  g.output(ArgList{r});
  {
    auto guard = g.inserting_after(x);
    g.call_function(aten::neg, {x});
    g.call_function(aten::exp, {x});
  }
  // torch.fx's insert point is anchor.append: the later node lands first.
  CHECK(names(g) == std::vector<std::string>{"x", "exp", "neg", "relu", "output"});
  {
    auto guard = g.inserting_after(g.back());  // after the last node: appends
    g.call_function(aten::log, {x});
  }
  CHECK(g.back()->name() == "log");
  check_order_consistent(g);
}

TEST_CASE("insertion guards nest and restore the previous point") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x}, {}, "a");
  Node* b = g.call_function(aten::relu, {x}, {}, "b");
  {
    auto outer = g.inserting_before(a);
    g.call_function(aten::neg, {x}, {}, "o1");
    {
      auto inner = g.inserting_after(b);
      g.call_function(aten::neg, {x}, {}, "i1");
      g.call_function(aten::neg, {x}, {}, "i2");
    }
    g.call_function(aten::neg, {x}, {}, "o2");  // back before a
  }
  g.call_function(aten::neg, {x}, {}, "end");
  CHECK(names(g) == std::vector<std::string>{"x", "o1", "o2", "a", "b", "i2", "i1", "end"});
  check_order_consistent(g);
}

TEST_CASE("erasing the insertion anchor keeps inserting at the same place, and moving it moves the point") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x}, {}, "a");
  Node* b = g.call_function(aten::relu, {x}, {}, "b");
  Node* c = g.call_function(aten::relu, {x}, {}, "c");
  {
    auto guard = g.inserting_before(b);
    g.erase_node(b);
    g.call_function(aten::neg, {x}, {}, "n1");
  }
  CHECK(names(g) == std::vector<std::string>{"x", "a", "n1", "c"});
  {
    auto guard = g.inserting_before(c);
    g.move_before(a, c);  // the insertion point is "before c", wherever c goes
    g.call_function(aten::neg, {x}, {}, "n2");
  }
  CHECK(names(g) == std::vector<std::string>{"x", "n2", "c", "a", "n1"});
  {
    auto guard = g.inserting_after(a);
    g.erase_node(a);  // after-mode: keep inserting after a's predecessor
    g.call_function(aten::neg, {x}, {}, "n3");
    g.call_function(aten::neg, {x}, {}, "n4");
  }
  CHECK(names(g) == std::vector<std::string>{"x", "n2", "c", "n4", "n3", "n1"});
  check_order_consistent(g);
}

TEST_CASE("editing a node's arguments makes it the last user of its inputs, as in torch.fx") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(aten::neg, {x}, {}, "a");
  Node* b = g.call_function(aten::neg, {x}, {}, "b");
  Node* c = g.call_function(aten::add_Tensor, {x, y}, {}, "c");
  CHECK(users_of(x) == std::vector<Node*>{a, b, c});
  a->set_kwarg("alpha", 2);  // same inputs, still re-registered
  CHECK(users_of(x) == std::vector<Node*>{b, c, a});
  c->replace_input_with(y, x);  // c now uses x twice, y not at all
  CHECK(users_of(x) == std::vector<Node*>{b, a, c});
  CHECK(y->num_users() == 0);
  b->replace_all_uses_with(b);  // self-replacement changes nothing
  CHECK(users_of(x) == std::vector<Node*>{b, a, c});
}

// ---------------------------------------------------------------- moving

TEST_CASE("prepend, append and move_before move nodes") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x}, {}, "a");
  Node* b = g.call_function(aten::relu, {x}, {}, "b");
  Node* c = g.call_function(aten::relu, {x}, {}, "c");
  Node* d = g.call_function(aten::relu, {x}, {}, "d");

  a->prepend(d);  // d just before a
  CHECK(names(g) == std::vector<std::string>{"x", "d", "a", "b", "c"});
  check_order_consistent(g);
  c->append(a);  // a just after c
  CHECK(names(g) == std::vector<std::string>{"x", "d", "b", "c", "a"});
  check_order_consistent(g);
  g.move_before(nullptr, x);  // to the end
  CHECK(names(g) == std::vector<std::string>{"d", "b", "c", "a", "x"});
  CHECK(g.front() == d);
  CHECK(g.back() == x);
  CHECK(d->prev() == nullptr);
  CHECK(x->next() == nullptr);
  check_order_consistent(g);
  g.move_before(d, x);  // to the front
  CHECK(names(g) == std::vector<std::string>{"x", "d", "b", "c", "a"});
  check_order_consistent(g);

  // No-op moves.
  b->append(c);  // c already directly after b
  c->prepend(b);
  a->append(a);
  a->prepend(a);
  g.move_before(b, b);
  CHECK(names(g) == std::vector<std::string>{"x", "d", "b", "c", "a"});
  CHECK(g.size() == 5);
  check_order_consistent(g);
  g.output(ArgList{a, b, c, d});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("moving a node of another graph is rejected") {
  Graph g1, g2;
  Node* x1 = g1.placeholder("x");
  Node* x2 = g2.placeholder("y");
  std::string msg = message_of<GraphError>([&] { g1.move_before(x1, x2); });
  CHECK(msg.find("y") != std::string::npos);
  CHECK_THROWS_AS(x1->prepend(x2), GraphError);
  CHECK(g1.size() == 1);
  CHECK(g2.size() == 1);
}

TEST_CASE("order keys survive 10,000 insertions at one spot") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x}, {}, "a");
  Node* b = g.call_function(aten::relu, {x}, {}, "b");
  std::vector<Node*> created;
  {
    // Always directly after `a`: every key must fit between a and the previous new node.
    for (int i = 0; i < 10000; ++i) {
      auto guard = g.inserting_after(a);
      created.push_back(g.call_function(aten::neg, {x}));
    }
  }
  REQUIRE(g.size() == 10003);
  // Each new node went directly after a, so they appear newest first.
  std::vector<Node*> v = g.node_list();
  CHECK(v[0] == x);
  CHECK(v[1] == a);
  CHECK(v[2] == created.back());
  CHECK(v[10001] == created.front());
  CHECK(v[10002] == b);
  check_order_consistent(g);

  // And at the front, repeatedly.
  for (int i = 0; i < 5000; ++i) {
    auto guard = g.inserting_before(g.front());
    g.call_function(aten::exp, {Arg(i)});
  }
  check_order_consistent(g);
  // And moving one node back and forth between two neighbours.
  for (int i = 0; i < 3000; ++i) g.move_before(i % 2 ? b : a, created[i]);
  check_order_consistent(g);
}

// ---------------------------------------------------------------- lookups

TEST_CASE("find_nodes by op kind and target, sorted and unsorted") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r1 = g.call_function(aten::relu, {x});
  Node* n1 = g.call_function(aten::neg, {r1});
  Node* r2 = g.call_function(aten::relu, {n1});
  Node* r3 = g.call_function(aten::relu, {x});
  Node* m = g.call_method("relu", {x});
  Node* out = g.output(ArgList{r2, r3, m});

  CHECK(g.find_nodes(OpKind::call_function, aten::relu) == std::vector<Node*>{r1, r2, r3});
  CHECK(g.find_nodes(OpKind::call_function, aten::neg) == std::vector<Node*>{n1});
  CHECK(g.find_nodes(OpKind::call_function, aten::mm).empty());
  CHECK(g.find_nodes(OpKind::call_function) == std::vector<Node*>{r1, n1, r2, r3});
  CHECK(g.find_nodes(OpKind::call_method) == std::vector<Node*>{m});
  CHECK(g.find_nodes(OpKind::call_method, OpRef("relu")) == std::vector<Node*>{m});
  CHECK(g.find_nodes(OpKind::placeholder) == std::vector<Node*>{x});
  CHECK(g.find_nodes(OpKind::output) == std::vector<Node*>{out});
  CHECK(g.find_nodes(OpKind::get_attr).empty());

  // Move r3 to the front of the relus: sorted follows the graph, unsorted the creation.
  g.move_before(r1, r3);
  CHECK(g.find_nodes(OpKind::call_function, aten::relu) == std::vector<Node*>{r3, r1, r2});
  CHECK(g.find_nodes(OpKind::call_function, aten::relu, false) == std::vector<Node*>{r1, r2, r3});
  CHECK(g.find_nodes(OpKind::call_function) == std::vector<Node*>{r3, r1, n1, r2});

  // Erased nodes disappear from both.
  out->set_args(ArgList{Arg(ArgList{r3, m})});
  g.erase_node(r2);
  g.erase_node(n1);
  CHECK(g.find_nodes(OpKind::call_function, aten::relu) == std::vector<Node*>{r3, r1});
  CHECK(g.find_nodes(OpKind::call_function, aten::relu, false) == std::vector<Node*>{r1, r3});
  CHECK(g.find_nodes(OpKind::call_function, aten::neg).empty());
  CHECK(g.find_nodes(OpKind::call_function) == std::vector<Node*>{r3, r1});

  // New nodes of the kind are found too.
  Node* r4 = g.call_function(aten::relu, {x});
  CHECK(g.find_nodes(OpKind::call_function, aten::relu, false) == std::vector<Node*>{r1, r3, r4});
}

TEST_CASE("output_node and placeholders") {
  Graph g;
  CHECK(g.output_node() == nullptr);
  CHECK(g.placeholders().empty());
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* b = g.placeholder("b");  // placeholders need not be at the top
  Node* out = g.output(ArgList{r, b});
  CHECK(g.output_node() == out);
  CHECK(g.placeholders() == std::vector<Node*>{a, b});
  g.move_before(a, b);
  CHECK(g.placeholders() == std::vector<Node*>{b, a});
}

TEST_CASE("get_arg_value: positional, keyword, absent") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* s = g.call_function(aten::sum_dim_IntList, {x, ArgList{1}}, {{"keepdim", Arg(true)}});
  REQUIRE(get_arg_value(*s, 0, "self") != nullptr);
  CHECK(*get_arg_value(*s, 0, "self") == Arg(x));
  CHECK(*get_arg_value(*s, 1, "dim") == Arg(ArgList{1}));
  REQUIRE(get_arg_value(*s, 2, "keepdim") != nullptr);
  CHECK(*get_arg_value(*s, 2, "keepdim") == Arg(true));
  CHECK(get_arg_value(*s, 3, "dtype") == nullptr);
  CHECK(get_arg_value(*s, 2) == nullptr);  // no name: positional only
  // A positional argument wins over a keyword of the same name.
  Node* t = g.call_function(OpRef("mylib.f.default"), {Arg(1)}, {{"a", Arg(2)}});
  CHECK(*get_arg_value(*t, 0, "a") == Arg(1));
}

TEST_CASE("find_node by name") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  CHECK(g.find_node("x") == x);
  CHECK(g.find_node("relu") == r);
  CHECK(g.find_node("nope") == nullptr);
  CHECK(g.find_node("") == nullptr);
}

// ---------------------------------------------------------------- clone and move

TEST_CASE("clone copies names, order, args, kwargs and meta, and is independent") {
  Graph g("orig");
  Node* x = g.placeholder("x", MetaVal(TensorMeta{{std::int64_t{4}}, DType::float32, std::nullopt}));
  Node* w = g.get_attr("w");
  Node* mm = g.call_function(aten::mm, {x, w});
  Node* s = g.call_function(aten::sum_dim_IntList, {mm, ArgList{1}}, {{"keepdim", Arg(true)}, {"src", Arg(x)}});
  g.move_before(x, w);  // order differs from creation order: w, x, mm, sum_1
  g.output(ArgList{s});
  mm->meta.extra_json.emplace_back("stack_trace", "\"here\"");

  std::unordered_map<const Node*, Node*> map;
  Graph c = g.clone(&map);
  CHECK(c.name() == "orig");
  CHECK(to_string(c, {.show_meta = true}) == to_string(g, {.show_meta = true}));
  CHECK(c.size() == g.size());
  REQUIRE(map.size() == g.size());
  for (Node* n : g.nodes()) {
    Node* m = map.at(n);
    CHECK(m != n);
    CHECK(&m->graph() == &c);
    CHECK(m->name() == n->name());
    CHECK(m->meta == n->meta);
  }
  CHECK(map.at(s)->kwargs().find("src")->node() == map.at(x));
  CHECK(map.at(mm)->args() == ArgList{Arg(map.at(x)), Arg(map.at(w))});
  CHECK(c.find_node("mm") == map.at(mm));
  CHECK_NOTHROW(lint(c));

  // Editing the clone leaves the original alone, and vice versa.
  Node* cmm = map.at(mm);
  Node* cr = nullptr;
  {
    auto guard = c.inserting_before(c.output_node());
    cr = c.call_function(aten::relu, {cmm});
  }
  c.output_node()->set_args(ArgList{Arg(ArgList{cr})});
  c.erase_node(map.at(s));
  CHECK(x->num_users() == 2);
  CHECK(g.find_node("sum_1") == s);
  CHECK_FALSE(s->erased());
  CHECK(mm->num_users() == 1);
  CHECK(cmm->num_users() == 1);
  CHECK(g.find_node("relu") == nullptr);
  g.call_function(aten::neg, {x});
  CHECK(c.find_node("neg") == nullptr);
  CHECK_NOTHROW(lint(c));
}

TEST_CASE("clone without a mapping names new nodes as the original would") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  g.call_function(aten::relu, {a});
  Graph c = g.clone();
  CHECK(to_string(c) == to_string(g));
  CHECK(c.call_function(aten::relu, {c.front()})->name() == "relu_2");
  CHECK(g.call_function(aten::relu, {x})->name() == "relu_2");
}

TEST_CASE("a move-constructed graph owns the nodes") {
  auto make = [] {
    Graph g("moved");
    Node* x = g.placeholder("x");
    Node* r = g.call_function(aten::relu, {x});
    g.output(ArgList{r});
    return g;
  };
  Graph src = make();
  Node* x = src.front();
  Graph g(std::move(src));
  CHECK(g.name() == "moved");
  CHECK(g.size() == 3);
  CHECK(&x->graph() == &g);
  for (Node* n : g.nodes()) CHECK(&n->graph() == &g);
  CHECK(g.find_node("relu")->arg(0) == Arg(x));
  CHECK(g.find_nodes(OpKind::call_function, aten::relu).size() == 1);
  CHECK(g.find_nodes(OpKind::placeholder) == std::vector<Node*>{x});
  // Still editable.
  Node* n = g.call_function(aten::neg, {x});
  {
    auto guard = g.inserting_before(g.output_node());
    g.move_before(g.output_node(), n);
  }
  g.output_node()->set_args(ArgList{Arg(ArgList{n})});
  g.erase_node(g.find_node("relu"));
  CHECK(names(g) == std::vector<std::string>{"x", "neg", "output"});
  CHECK_NOTHROW(lint(g));
  // The moved-from graph is empty and usable on its own.
  CHECK(src.size() == 0);
  CHECK(src.front() == nullptr);
  CHECK(src.find_node("x") == nullptr);
  CHECK(src.find_nodes(OpKind::placeholder).empty());
  CHECK(src.find_nodes(OpKind::call_function).empty());
  Node* y = src.placeholder("y");
  src.output(ArgList{y});
  CHECK(src.find_nodes(OpKind::placeholder) == std::vector<Node*>{y});
  CHECK(src.find_nodes(OpKind::output).size() == 1);
  CHECK_NOTHROW(lint(src));
  CHECK(g.find_nodes(OpKind::placeholder) == std::vector<Node*>{x});
}

TEST_CASE("move-assigning a graph replaces the target's nodes") {
  Graph a;
  a.placeholder("old");
  Graph b;
  Node* y = b.placeholder("y");
  b.output(ArgList{y});
  a = std::move(b);
  CHECK(a.size() == 2);
  CHECK(&y->graph() == &a);
  CHECK(a.find_node("old") == nullptr);
  CHECK(a.find_nodes(OpKind::placeholder) == std::vector<Node*>{y});
  CHECK_NOTHROW(lint(a));
}

TEST_CASE("nodes of another graph are rejected as arguments, naming the node") {
  Graph g1, g2;
  Node* x1 = g1.placeholder("x1");
  Node* x2 = g2.placeholder("x2");
  std::string msg = message_of<GraphError>([&] { g1.call_function(aten::relu, {x2}); });
  CHECK(msg.find("x2") != std::string::npos);
  CHECK(g1.size() == 1);
  CHECK(x2->num_users() == 0);
  CHECK(g1.find_node("relu") == nullptr);

  Node* r = g1.call_function(aten::relu, {x1});
  CHECK(message_of<GraphError>([&] { r->set_args({x2}); }).find("x2") != std::string::npos);
  CHECK(message_of<GraphError>([&] { r->set_kwarg("k", ArgList{x2}); }).find("x2") != std::string::npos);
  CHECK(message_of<GraphError>([&] { x1->replace_all_uses_with(x2); }).find("x2") != std::string::npos);
  CHECK(r->args() == ArgList{Arg(x1)});
  CHECK(r->kwargs().empty());
  CHECK(x2->num_users() == 0);
  g1.output(ArgList{r});
  CHECK_NOTHROW(lint(g1));
}

TEST_CASE("a null node reference is rejected as an argument, naming the node") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* missing = g.find_node("no_such_node");  // nullptr
  REQUIRE(missing == nullptr);
  std::string msg = message_of<GraphError>([&] { g.call_function(aten::relu, {missing}); });
  CHECK(msg.find("relu") != std::string::npos);
  CHECK(msg.find("null") != std::string::npos);
  CHECK(g.size() == 1);
  Node* r = g.call_function(aten::relu, {x});
  CHECK_THROWS_AS(r->set_args({Arg(ArgList{Arg(x), Arg(missing)})}), GraphError);
  CHECK_THROWS_AS(r->set_kwarg("k", Arg(Slice{{Arg(missing), Arg(), Arg()}})), GraphError);
  CHECK(r->args() == ArgList{Arg(x)});
  CHECK(r->kwargs().empty());
  g.output(ArgList{r});
  CHECK_NOTHROW(lint(g));
}

// ---------------------------------------------------------------- scale

TEST_CASE("a weight with 40,000 users rewired away one by one stays consistent, fast") {
  constexpr int kUsers = 40000;
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.placeholder("w");
  Node* w2 = g.placeholder("w2");
  std::vector<Node*> mms;
  mms.reserve(kUsers);
  for (int i = 0; i < kUsers; ++i) mms.push_back(g.call_function(aten::mm, {x, w}));
  ArgList outs(mms.begin(), mms.end());
  g.output(Arg(std::move(outs)));
  REQUIRE(w->num_users() == kUsers);
  CHECK_NOTHROW(lint(g));

  // Rewire in a shuffled order, through both set_arg and replace_input_with.
  std::vector<int> order(kUsers);
  for (int i = 0; i < kUsers; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));

  auto start = std::chrono::steady_clock::now();
  std::vector<char> moved(kUsers, 0);
  for (int k = 0; k < kUsers; ++k) {
    Node* u = mms[order[k]];
    if (k % 2)
      u->set_arg(1, w2);
    else
      u->replace_input_with(w, w2);
    moved[order[k]] = 1;
    REQUIRE(w->num_users() == std::size_t(kUsers - k - 1));
    REQUIRE(w2->num_users() == std::size_t(k + 1));
    if (k == kUsers / 2 || k == kUsers - 100) {
      // Remaining users are exactly the unmoved ones, still in creation order.
      std::vector<Node*> expect;
      for (int i = 0; i < kUsers; ++i)
        if (!moved[i]) expect.push_back(mms[i]);
      REQUIRE(users_of(w) == expect);
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 1.0);
  MESSAGE("rewiring 40,000 users took " << seconds << " s");

  CHECK(w->num_users() == 0);
  CHECK(users_of(w).empty());
  // w2's users are in the order they were rewired.
  std::vector<Node*> expect;
  for (int i : order) expect.push_back(mms[i]);
  CHECK(users_of(w2) == expect);
  CHECK_NOTHROW(lint(g));
  g.erase_node(w);
  CHECK_NOTHROW(lint(g));

  // And all at once back again.
  auto changed = w2->replace_all_uses_with(x);
  CHECK(changed.size() == std::size_t(kUsers));
  CHECK(x->num_users() == std::size_t(kUsers));
  CHECK(w2->num_users() == 0);
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("users removed from the middle then re-added keep a consistent list") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  std::vector<Node*> u;
  for (int i = 0; i < 100; ++i) u.push_back(g.call_function(aten::neg, {x}));
  // Move 90 away (forces compaction of x's user list), then 10 of them back.
  for (int i = 0; i < 90; ++i) u[i]->set_args({y});
  for (int i = 0; i < 10; ++i) u[i]->set_args({x});
  std::vector<Node*> expect(u.begin() + 90, u.end());
  expect.insert(expect.end(), u.begin(), u.begin() + 10);
  CHECK(users_of(x) == expect);
  CHECK(x->num_users() == 20);
  CHECK(y->num_users() == 80);
  // Removing again after compaction still removes the right entries.
  for (int i = 95; i < 100; ++i) u[i]->set_args({y});
  expect.erase(expect.begin() + 5, expect.begin() + 10);
  CHECK(users_of(x) == expect);
  g.output(ArgList(u.begin(), u.end()));
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("Node::replace_all_uses_of leaves the graph and every user list as the calls one by one do") {
  // A random graph where replaced nodes share users (a cat of several, a node
  // using two of them, one used by several), replaced in a shuffled order.
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Graph g;
    std::vector<Node*> nodes{g.placeholder("x"), g.placeholder("y")};
    for (int i = 0; i < 30; ++i) {
      const std::size_t fan = 1 + rng() % 3;
      ArgList args;
      for (std::size_t k = 0; k < fan; ++k) args.push_back(Arg(nodes[rng() % nodes.size()]));
      if (rng() % 4 == 0) {
        ArgList list;
        for (int k = 0; k < 20; ++k) list.push_back(Arg(nodes[rng() % nodes.size()]));
        args.push_back(Arg(std::move(list)));
      }
      nodes.push_back(g.call_function(aten::add_Tensor, std::move(args)));
    }
    ArgList outs;
    for (Node* n : nodes) outs.push_back(Arg(n));
    g.output(Arg(outs));
    // Replace some nodes by fresh ones made at the end (before the output).
    auto pick = [&](Graph& graph) {
      std::mt19937 r2(seed * 7);
      std::vector<Node*> from, to;
      std::vector<Node*> all = graph.node_list();
      for (Node* n : all)
        if (n->op() == OpKind::call_function && r2() % 3 == 0) from.push_back(n);
      std::shuffle(from.begin(), from.end(), r2);
      auto guard = graph.inserting_before(graph.output_node());
      for (std::size_t i = 0; i < from.size(); ++i) to.push_back(graph.call_function(aten::neg, {Arg(graph.find_node("x"))}));
      return std::pair{from, to};
    };
    std::unordered_map<const Node*, Node*> map;
    Graph one_by_one = g.clone(&map);
    auto [from1, to1] = pick(one_by_one);
    for (std::size_t i = 0; i < from1.size(); ++i) from1[i]->replace_all_uses_with(to1[i]);
    auto [from2, to2] = pick(g);
    Node::replace_all_uses_of(from2, to2);
    INFO("seed " << seed);
    REQUIRE(g.size() == one_by_one.size());
    std::vector<Node*> a = g.node_list(), b = one_by_one.node_list();
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(format_node(*a[i]) == format_node(*b[i]));
      CHECK(testing::names(a[i]->user_list()) == testing::names(b[i]->user_list()));
      std::vector<std::string> ia, ib;
      for (Node* n : a[i]->all_input_nodes()) ia.push_back(n->name());
      for (Node* n : b[i]->all_input_nodes()) ib.push_back(n->name());
      CHECK(ia == ib);
    }
    stable_topological_sort(g);  // (the replacements were made after their users)
    lint(g);                     // users and inputs agree
  }
}

TEST_CASE("Node::replace_all_uses_of called again after other edits still matches the calls one by one") {
  // A user edited once is remembered as the last user of all its inputs; new
  // users joining after it in between must make the next call check again.
  // Half the rounds replace only inputs of the final cat (the one user edited,
  // where nothing else checks the user order again).
  for (unsigned seed = 1; seed <= 40; ++seed) {
    auto build = [&](Graph& g) {
      std::mt19937 rng(seed);
      std::vector<Node*> nodes{g.placeholder("x"), g.placeholder("y")};
      for (int i = 0; i < 30; ++i) {
        ArgList args;
        for (std::size_t k = 0, fan = 1 + rng() % 3; k < fan; ++k) args.push_back(Arg(nodes[rng() % nodes.size()]));
        if (rng() % 3 == 0) {
          ArgList list;
          for (int k = 0; k < 25; ++k) list.push_back(Arg(nodes[rng() % nodes.size()]));
          args.push_back(Arg(std::move(list)));
        }
        nodes.push_back(g.call_function(aten::add_Tensor, std::move(args)));
      }
      ArgList outs;
      for (Node* n : nodes) outs.push_back(Arg(n));
      g.output(Arg(g.call_function(aten::cat, {Arg(outs)})));
    };
    // One round: new users of random nodes (joining after the users there),
    // then a random set of nodes replaced by fresh ones.
    auto round = [&](Graph& g, unsigned r, bool batched) {
      std::mt19937 rng(seed * 131 + r);
      std::vector<Node*> all;
      for (Node* n : g.node_list())
        if (n->op() == OpKind::call_function || n->op() == OpKind::placeholder) all.push_back(n);
      auto guard = g.inserting_before(g.output_node());
      for (int k = 0, extra = static_cast<int>(rng() % 4); k < extra; ++k)
        g.call_function(aten::mul_Tensor, {Arg(all[rng() % all.size()]), Arg(all[rng() % all.size()])});
      std::vector<Node*> from, to;
      const Node* cat = g.output_node()->all_input_nodes()[0];
      for (Node* n : all) {
        const bool cat_only = n->num_users() == 1 && n->user_list()[0] == cat;
        if (n != cat && n->op() == OpKind::call_function && n->num_users() > 0 && (r % 2 == 0 || cat_only) && rng() % 4 == 0)
          from.push_back(n);
      }
      std::shuffle(from.begin(), from.end(), rng);
      for (std::size_t i = 0; i < from.size(); ++i) to.push_back(g.call_function(aten::neg, {Arg(g.find_node("x"))}));
      if (batched) {
        Node::replace_all_uses_of(from, to);
      } else {
        for (std::size_t i = 0; i < from.size(); ++i) from[i]->replace_all_uses_with(to[i]);
      }
    };
    Graph g, one_by_one;
    build(g);
    build(one_by_one);
    for (unsigned r = 0; r < 6; ++r) {
      round(g, r, true);
      round(one_by_one, r, false);
      INFO("seed " << seed << ", round " << r);
      REQUIRE(g.size() == one_by_one.size());
      std::vector<Node*> a = g.node_list(), b = one_by_one.node_list();
      for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(format_node(*a[i]) == format_node(*b[i]));
        CHECK(testing::names(a[i]->user_list()) == testing::names(b[i]->user_list()));
      }
    }
  }
}
