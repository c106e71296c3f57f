// eliminate_dead_code(): torch.fx's Graph.eliminate_dead_code (reverse walk, erase
// unused nodes that are not impure), with kiln's impurity rules.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "test_support.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_functional.hpp"
#include "kiln/ops/operator.hpp"

using namespace kiln;
using namespace kiln::testing;


TEST_CASE("a chain of unused pure nodes goes in one call") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {a});
  Node* c = g.call_function(aten::exp, {b});
  Node* d = g.call_function(aten::mul_Tensor, {c, a});  // dead too; a has two dead users
  Node* live = g.call_function(aten::sigmoid, {x});
  g.output(ArgList{live});
  CHECK(eliminate_dead_code(g) == 4);
  CHECK(names(g) == std::vector<std::string>{"x", "sigmoid", "output"});
  for (Node* n : {a, b, c, d}) CHECK(n->erased());
  CHECK_FALSE(live->erased());
  CHECK(x->num_users() == 1);
  CHECK_NOTHROW(lint(g));
  // Nothing left to remove.
  CHECK(eliminate_dead_code(g) == 0);
}

TEST_CASE("used nodes are kept, including ones used only by the output") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {a});
  g.output(ArgList{ArgList{b}, ArgDict{{"k", Arg(a)}}});
  CHECK(eliminate_dead_code(g) == 0);
  CHECK(g.size() == 4);
}

TEST_CASE("placeholders and the output are kept even when unused") {
  Graph g;
  g.placeholder("x");
  g.placeholder("unused");
  g.output(ArgList{});
  CHECK(eliminate_dead_code(g) == 0);
  CHECK(names(g) == std::vector<std::string>{"x", "unused", "output"});
}

TEST_CASE("mutating ops are kept, and so are their inputs") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* buf = g.call_function(aten::clone, {x});
  Node* r = g.call_function(aten::relu_, {buf});
  Node* y = g.placeholder("y");
  Node* cp = g.call_function(aten::copy_, {x, y});
  Node* add = g.call_function(aten::add__Tensor, {x, y});
  Node* outv = g.call_function(OpRef("aten.add.out"), {x, y}, {{"out", Arg(buf)}});
  g.output(ArgList{});
  CHECK(eliminate_dead_code(g) == 0);
  for (Node* n : {buf, r, cp, add, outv}) CHECK_FALSE(n->erased());
}

TEST_CASE("collectives are kept even when unused") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* ar = g.call_function(c10d_functional::all_reduce, {x, "sum", "0"});
  Node* wt = g.call_function(c10d_functional::wait_tensor, {ar});
  Node* dead = g.call_function(aten::relu, {x});
  g.output(ArgList{});
  CHECK(eliminate_dead_code(g) == 1);
  CHECK(dead->erased());
  CHECK_FALSE(ar->erased());
  CHECK_FALSE(wt->erased());
}

TEST_CASE("side-effectful functions of torch.fx are kept") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* set = g.call_function(OpRef("operator.setitem"), {x, Arg(0), Arg(1.0)});
  Node* as = g.call_function(OpRef("torch._assert"), {Arg(true), "msg"});
  Node* meta = g.call_function(OpRef("aten._assert_tensor_metadata.default"), {x});
  Node* scal = g.call_function(OpRef("aten._assert_scalar.default"), {Arg(true), "msg"});
  g.output(ArgList{x});
  CHECK(eliminate_dead_code(g) == 0);
  for (Node* n : {set, as, meta, scal}) CHECK_FALSE(n->erased());
}

TEST_CASE("call_module is kept, call_method only when it ends in '_'") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* mod = g.call_module("layer", {x});
  Node* inplace = g.call_method("add_", {x, Arg(1)});
  Node* view = g.call_method("view", {x, Arg(-1)});
  Node* size = g.call_method("size", {x});
  g.output(ArgList{x});
  CHECK(eliminate_dead_code(g) == 2);
  CHECK_FALSE(mod->erased());
  CHECK_FALSE(inplace->erased());
  CHECK(view->erased());
  CHECK(size->erased());
}

TEST_CASE("unused get_attr nodes are removed, used ones kept") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("fc.weight");
  Node* unused = g.get_attr("fc.bias");
  Node* mm = g.call_function(aten::mm, {x, w});
  g.output(ArgList{mm});
  CHECK(eliminate_dead_code(g) == 1);
  CHECK(unused->erased());
  CHECK_FALSE(w->erased());
  CHECK(g.find_node("fc_bias") == nullptr);
}

TEST_CASE("a dead pure node feeding only an erased chain goes, one feeding a mutation stays") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {a});  // dead
  Node* c = g.call_function(aten::exp, {x});
  Node* m = g.call_function(aten::relu_, {c});  // keeps c alive
  g.output(ArgList{x});
  CHECK(eliminate_dead_code(g) == 2);
  CHECK(a->erased());
  CHECK(b->erased());
  CHECK_FALSE(c->erased());
  CHECK_FALSE(m->erased());
  CHECK_NOTHROW(lint(g));
}
