// lint(): a good graph passes; each broken invariant is reported naming the node.
#include <doctest/doctest.h>

#include <string>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"

using namespace kiln;

namespace {

// The LintError message of lint(g), or "" when it passes.
std::string lint_message(const Graph& g) {
  try {
    lint(g);
  } catch (const LintError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a well-formed graph passes lint") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* mm = g.call_function(aten::mm, {x, w});
  Node* r = g.call_function(aten::relu, {mm});
  Node* s = g.call_function(aten::sum_dim_IntList, {r, ArgList{1}}, {{"keepdim", Arg(true)}, {"w", Arg(w)}});
  Node* m = g.call_method("view", {s, Arg(-1)});
  Node* mod = g.call_module("fc", {m});
  g.output(ArgList{mod, ArgList{r, x}, ArgDict{{"k", Arg(mm)}}});
  CHECK(lint_message(g) == "");
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("lint passes after ordinary edits") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {a});
  Node* out = g.output(ArgList{b});
  Node* c = nullptr;
  {
    auto guard = g.inserting_before(out);
    c = g.call_function(aten::exp, {b});
  }
  b->replace_all_uses_with(c, [&](Node* u) { return u != c; });
  CHECK(lint_message(g) == "");
  g.erase_node(g.call_function(aten::abs, {x}));
  CHECK(lint_message(g) == "");
  CHECK(out->arg(0) == Arg(ArgList{c}));
}

TEST_CASE("lint reports a graph without an output node") {
  Graph g;
  Node* x = g.placeholder("x");
  g.call_function(aten::relu, {x});
  std::string msg = lint_message(g);
  CHECK(contains(msg, "output"));
  CHECK(contains(msg, "0"));
  CHECK_THROWS_AS(lint(g), LintError);
  CHECK_THROWS_AS(lint(g), GraphError);  // LintError is a GraphError
}

TEST_CASE("lint reports an empty graph") {
  Graph g;
  CHECK(contains(lint_message(g), "output"));
}

TEST_CASE("lint reports two output nodes, naming the second") {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(ArgList{x});
  Node* second = g.output(ArgList{x});
  CHECK(second->name() == "output_1");
  std::string msg = lint_message(g);
  CHECK(contains(msg, "output_1"));
  CHECK(contains(msg, "after the output"));
}

TEST_CASE("lint reports a node after the output node, naming it") {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(ArgList{x});
  g.call_function(aten::relu, {x});
  std::string msg = lint_message(g);
  CHECK(contains(msg, "relu"));
  CHECK(contains(msg, "after the output"));
}

TEST_CASE("lint reports an argument that refers to a later node") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {a});
  Node* out = g.output(ArgList{b});
  g.move_before(out, a);  // x, neg, relu, output: neg now uses a later node
  std::string msg = lint_message(g);
  CHECK(contains(msg, "node neg"));
  CHECK(contains(msg, "args[0]"));
  CHECK(contains(msg, "relu"));
}

TEST_CASE("lint reports a kwarg that refers to a later node") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::add_Tensor, {x}, {{"other", Arg(ArgList{a})}});
  g.output(ArgList{b});
  g.move_before(a, b);  // x, add, relu, output
  std::string msg = lint_message(g);
  CHECK(contains(msg, "node add"));
  CHECK(contains(msg, "kwargs[other]"));
  CHECK(contains(msg, "relu"));
}

TEST_CASE("lint reports a node that uses itself") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  g.output(ArgList{a});
  a->set_args({a});
  CHECK(contains(lint_message(g), "relu"));
}

TEST_CASE("lint reports a placeholder with arguments") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* p = g.create_node(OpKind::placeholder, OpRegistry::instance().intern("p"), {x}, {});
  g.output(ArgList{p});
  CHECK(p->name() == "p");
  std::string msg = lint_message(g);
  CHECK(contains(msg, "node p"));
  CHECK(contains(msg, "placeholder"));
}

TEST_CASE("lint reports a get_attr with keyword arguments") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.create_node(OpKind::get_attr, OpRegistry::instance().intern("w"), {}, {{"k", Arg(x)}});
  g.output(ArgList{w});
  std::string msg = lint_message(g);
  CHECK(contains(msg, "node w"));
  CHECK(contains(msg, "get_attr"));
}

TEST_CASE("lint reports an empty target") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* n = g.create_node(OpKind::call_function, OpRef(), {x}, {}, "blank");
  g.output(ArgList{n});
  std::string msg = lint_message(g);
  CHECK(contains(msg, "blank"));
  CHECK(contains(msg, "target"));
}

TEST_CASE("lint does not modify the graph") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  g.output(ArgList{a});
  std::string before = to_string(g);
  lint(g);
  CHECK(to_string(g) == before);
  CHECK(x->is_before(*a));
}
