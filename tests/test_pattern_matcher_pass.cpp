// PatternMatcherPass / PatternMatcherPasses / make_pattern_pass: Inductor's
// PatternMatcherPass.apply semantics (torch/_inductor/pattern_matcher.py).
#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;
using kiln::testing::names;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

auto addmm_pattern() {
  return p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">), p::kw<"c">);
}

// add(mm(a, b), c) -> addmm(c, a, b), inserting before the root.
struct FuseAddmm {
  template <class M>
  void operator()(M& m, Graph& g, Node* root) const {
    Node* fused = g.call_function(aten::addmm, {m.template get<"c">(), m.template get<"a">(), m.template get<"b">()});
    root->replace_all_uses_with(fused);
    m.erase_nodes();
  }
};

PatternMatcherPass addmm_pass(bool prevent_across_mutations = false) {
  PatternMatcherPass pass("addmm", prevent_across_mutations);
  pass.register_pattern(addmm_pattern(), FuseAddmm{});
  return pass;
}

std::size_t count_target(const Graph& g, OpRef op) {
  std::size_t n = 0;
  for (Node* node : g.nodes()) n += node->is_call(op);
  return n;
}

// x -> mm(x, w1) + b1 -> relu -> mm(., w2) + b2 -> output.
struct Mlp {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w1 = g.placeholder("w1");
  Node* b1 = g.placeholder("b1");
  Node* w2 = g.placeholder("w2");
  Node* b2 = g.placeholder("b2");
  Node* mm1 = g.call_function(aten::mm, {x, w1});
  Node* add1 = g.call_function(aten::add_Tensor, {mm1, b1});
  Node* relu = g.call_function(aten::relu, {add1});
  Node* mm2 = g.call_function(aten::mm, {relu, w2});
  Node* add2 = g.call_function(aten::add_Tensor, {mm2, b2});
  Node* out = g.output(ArgList{add2});
};

// Restores an environment variable and std::cerr on scope exit.
class DebugCapture {
 public:
  explicit DebugCapture(const char* node_name) : old_(std::cerr.rdbuf(buf_.rdbuf())) {
    ::setenv("KILN_PATTERN_DEBUG", node_name, 1);
  }
  ~DebugCapture() {
    std::cerr.rdbuf(old_);
    ::unsetenv("KILN_PATTERN_DEBUG");
  }
  std::string text() const { return buf_.str(); }

 private:
  std::ostringstream buf_;
  std::streambuf* old_;
};

}  // namespace

TEST_CASE("apply: returns the number of matches applied and bumps pattern_matcher_count / _nodes") {
  Mlp t;
  auto pass = addmm_pass();
  Counters counters;
  CHECK(pass.apply(t.g, &counters) == 2);
  CHECK(counters.get("pattern_matcher_count") == 2);
  CHECK(counters.get("pattern_matcher_nodes") == 4);  // mm + add, twice
  CHECK(count_target(t.g, aten::addmm) == 2);
  CHECK(count_target(t.g, aten::mm) == 0);
  CHECK(count_target(t.g, aten::add_Tensor) == 0);
  // Nothing left to match: the counters stay.
  CHECK(pass.apply(t.g, &counters) == 0);
  CHECK(counters.get("pattern_matcher_count") == 2);
  // Without counters it still applies.
  Mlp t2;
  CHECK(pass.apply(t2.g) == 2);
}

TEST_CASE("apply: the P1 rewrite add(mm(a, b), c) -> addmm(c, a, b) leaves a lint-clean graph") {
  Mlp t;
  auto pass = addmm_pass();
  REQUIRE(pass.apply(t.g) == 2);
  lint(t.g);
  auto fused = t.g.find_nodes(OpKind::call_function, aten::addmm);
  REQUIRE(fused.size() == 2);
  // In graph order: the first layer's, then the second's.
  CHECK(fused[0]->args()[0].node() == t.b1);
  CHECK(fused[0]->args()[1].node() == t.x);
  CHECK(fused[0]->args()[2].node() == t.w1);
  CHECK(t.relu->args()[0].node() == fused[0]);
  CHECK(fused[1]->args()[0].node() == t.b2);
  CHECK(fused[1]->args()[1].node() == t.relu);
  CHECK(fused[1]->args()[2].node() == t.w2);
  CHECK(t.out->args()[0] == Arg(ArgList{fused[1]}));
  // The second layer is visited (and fused, so named) first.
  CHECK(names(t.g) == std::vector<std::string>{"x", "w1", "b1", "w2", "b2", "addmm_1", "relu", "addmm", "output"});
}

TEST_CASE("apply: candidates are visited in reverse topological order, not creation order") {
  for (int fillers : {0, 40}) {  // few candidates per node (sorted path) and many (backward walk)
    CAPTURE(fillers);
    Graph g;
    Node* x = g.placeholder("x");
    for (int i = 0; i < fillers; ++i) g.call_function(aten::neg, {x});
    Node* r1 = g.call_function(aten::relu, {x}, {}, "r1");
    Node* s1 = g.call_function(aten::sigmoid, {r1}, {}, "s1");
    Node* r2 = g.call_function(aten::relu, {s1}, {}, "r2");
    Node* s2 = nullptr;
    {
      // Created last, but placed first: graph order is r0, r1, s1, r2 ... s2 goes before r1.
      auto guard = g.inserting_before(r1);
      s2 = g.call_function(aten::sigmoid, {x}, {}, "s0");
      g.call_function(aten::relu, {s2}, {}, "r0");
    }
    g.output(ArgList{r2});
    std::vector<std::string> seen;
    PatternMatcherPass pass;
    auto record = [&](auto& m, Graph&, Node* root) {
      (void)m;
      seen.push_back(root->name());
    };
    pass.register_pattern(p::CallFunctionVarArgs(aten::relu), record);
    pass.register_pattern(p::CallFunctionVarArgs(aten::sigmoid), record);
    CHECK(pass.apply(g) == 5);
    CHECK(seen == std::vector<std::string>{"r2", "s1", "r1", "r0", "s0"});
  }
}

TEST_CASE("apply: nodes a handler creates are not visited in the same apply") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  g.output(ArgList{r});
  PatternMatcherPass pass;
  std::vector<std::string> seen;
  // Replaces each relu by a fresh relu of the same input.
  pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">), [&](auto& m, Graph& gr, Node* root) {
    seen.push_back(root->name());
    Node* fresh = gr.call_function(aten::relu, {m.template get<"x">()});
    root->replace_all_uses_with(fresh);
    m.erase_nodes();
  });
  CHECK(pass.apply(g) == 1);
  CHECK(seen == std::vector<std::string>{"relu"});
  // The next apply sees the node the handler made.
  CHECK(pass.apply(g) == 1);
  CHECK(seen == std::vector<std::string>{"relu", "relu_1"});
  lint(g);
}

TEST_CASE("apply: a candidate erased by an earlier handler is skipped") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* dead = g.call_function(aten::relu, {x}, {}, "dead");  // no users; visited after `live`
  Node* live = g.call_function(aten::relu, {x}, {}, "live");
  g.output(ArgList{live});
  PatternMatcherPass pass;
  std::vector<std::string> seen;
  // A VarArgs pattern would still match an erased node (its args are cleared).
  pass.register_pattern(p::CallFunctionVarArgs(aten::relu), [&](auto&, Graph& gr, Node* root) {
    seen.push_back(root->name());
    if (root == live) gr.erase_node(dead);
  });
  CHECK(pass.apply(g) == 1);
  CHECK(seen == std::vector<std::string>{"live"});
  CHECK(dead->erased());
}

TEST_CASE("apply: once an entry's handler erases the node, later entries for it are not tried") {
  for (bool erase : {true, false}) {
    CAPTURE(erase);
    Graph g;
    Node* x = g.placeholder("x");
    Node* r = g.call_function(aten::relu, {x});
    g.output(ArgList{r});
    PatternMatcherPass pass;
    std::vector<std::string> seen;
    pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">), [&](auto& m, Graph& gr, Node* root) {
      seen.push_back("first");
      if (!erase) return;
      Node* n = gr.call_function(aten::neg, {m.template get<"x">()});
      root->replace_all_uses_with(n);
      m.erase_nodes();
    });
    pass.register_pattern(p::CallFunctionVarArgs(aten::relu), [&](auto&, Graph&, Node*) { seen.push_back("second"); });
    CHECK(pass.apply(g) == (erase ? 1u : 2u));
    if (erase)
      CHECK(seen == std::vector<std::string>{"first"});
    else
      CHECK(seen == std::vector<std::string>{"first", "second"});
  }
}

TEST_CASE("apply: a node's entries are tried in registration order, prepend puts one first") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  g.output(ArgList{r});
  std::vector<std::string> seen;
  auto recorder = [&seen](std::string tag) { return [&seen, tag](auto&, Graph&, Node*) { seen.push_back(tag); }; };

  PatternMatcherPass plain;
  plain.register_pattern(p::CallFunction(aten::relu, p::Arg()), recorder("A"));
  plain.register_pattern(p::CallFunctionVarArgs(aten::relu), recorder("B"));
  plain.register_pattern(p::CallFunction(aten::relu, p::kw<"x">), recorder("C"));
  CHECK(plain.apply(g) == 3);
  CHECK(seen == std::vector<std::string>{"A", "B", "C"});

  seen.clear();
  PatternMatcherPass with_prepend;
  with_prepend.register_pattern(p::CallFunction(aten::relu, p::Arg()), recorder("A"));
  with_prepend.register_pattern(p::CallFunctionVarArgs(aten::relu), recorder("B"));
  with_prepend.register_pattern(p::CallFunction(aten::relu, p::kw<"x">), recorder("C"), PatternOptions{.prepend = true});
  CHECK(with_prepend.apply(g) == 3);
  CHECK(seen == std::vector<std::string>{"C", "A", "B"});
}

TEST_CASE("apply: extra_check can reject a structural match, rejected matches are not counted") {
  Graph g;
  Node* keep = g.placeholder("keep");
  Node* skip = g.placeholder("skip");
  Node* r1 = g.call_function(aten::relu, {keep});
  Node* r2 = g.call_function(aten::relu, {skip});
  g.output(ArgList{r1, r2});
  PatternMatcherPass pass;
  std::vector<std::string> handled, checked;
  pass.register_pattern(
      p::CallFunction(aten::relu, p::kw<"x">), [&](auto&, Graph&, Node* root) { handled.push_back(root->name()); },
      [&](const auto& m) {
        checked.push_back(m.template node<"x">()->name());
        return m.template node<"x">()->name() != "skip";
      });
  Counters counters;
  CHECK(pass.apply(g, &counters) == 1);
  CHECK(checked == std::vector<std::string>{"skip", "keep"});  // reverse order: relu_1 first
  CHECK(handled == std::vector<std::string>{r1->name()});
  CHECK(counters.get("pattern_matcher_count") == 1);
  CHECK(counters.get("pattern_matcher_nodes") == 1);
}

TEST_CASE("PatternMatcherPasses: patterns of pass 1 see the graph as pass 0 left it") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r1 = g.call_function(aten::relu, {x});
  Node* r2 = g.call_function(aten::relu, {r1});
  Node* s = g.call_function(aten::sigmoid, {r2});
  g.output(ArgList{s});

  PatternMatcherPasses passes(2, "post_grad");
  std::vector<std::string> order;
  // Registered first, but in pass 1: sigmoid(relu(placeholder)) only exists after pass 0.
  passes.register_pattern(
      p::CallFunction(aten::sigmoid, p::CallFunction(aten::relu, p::kw<"x">)),
      [&](auto& m, Graph& gr, Node* root) {
        order.push_back("pass1");
        Node* n = gr.call_function(aten::silu, {m.template get<"x">()});
        root->replace_all_uses_with(n);
        m.erase_nodes();
      },
      [](const auto& m) { return m.template node<"x">()->op() == OpKind::placeholder; }, PatternOptions{.pass_number = 1});
  // Pass 0: relu(relu(x)) -> relu(x).
  passes.register_pattern(
      p::CallFunction(aten::relu, p::CallFunction(aten::relu, p::kw<"x">)),
      [&](auto& m, Graph& gr, Node* root) {
        order.push_back("pass0");
        Node* n = gr.call_function(aten::relu, {m.template get<"x">()});
        root->replace_all_uses_with(n);
        m.erase_nodes();
      },
      PatternOptions{.pass_number = 0});
  CHECK(passes.size() == 2);
  CHECK(passes[0].name() == "post_grad_0");
  CHECK(passes[0].num_patterns() == 1);
  CHECK(passes[1].num_patterns() == 1);
  Counters counters;
  CHECK(passes.apply(g, &counters) == 2);
  CHECK(order == std::vector<std::string>{"pass0", "pass1"});
  CHECK(counters.get("pattern_matcher_count") == 2);
  CHECK(count_target(g, aten::silu) == 1);
  CHECK(count_target(g, aten::relu) == 0);
  lint(g);

  CHECK(contains(kiln::testing::message_of<Error>([&] {
                   passes.register_pattern(p::CallFunction(aten::relu, p::Arg()), [](auto&) {}, PatternOptions{.pass_number = 2});
                 }),
                 "pass_number 2"));
}

TEST_CASE("mutation regions: a match spanning an in-place op is dropped only when the pass asks for it") {
  // a, b, c | [mutation] | mm(a, b) | [mutation] | add(mm, c): with the mutation
  // between mm and add, the two matched nodes lie in different mutation regions.
  auto build = [](Graph& g, OpRef mutation, bool between) {
    Node* a = g.placeholder("a");
    Node* b = g.placeholder("b");
    Node* c = g.placeholder("c");
    const ArgList margs = mutation == aten::relu_ ? ArgList{c} : ArgList{c, a};
    if (!between) g.call_function(mutation, margs);
    Node* mm = g.call_function(aten::mm, {a, b});
    if (between) g.call_function(mutation, margs);
    g.output(ArgList{g.call_function(aten::add_Tensor, {mm, c})});
  };
  for (OpRef mutation : {aten::relu_, aten::copy_, aten::add__Tensor}) {
    CAPTURE(mutation.name);
    {
      Graph g;
      build(g, mutation, true);
      CHECK(addmm_pass(/*prevent_across_mutations=*/true).apply(g) == 0);
      CHECK(count_target(g, aten::mm) == 1);
    }
    {
      Graph g;
      build(g, mutation, true);
      CHECK(addmm_pass(/*prevent_across_mutations=*/false).apply(g) == 1);
    }
    {
      Graph g;  // the mutation before both: one region, the match stands
      build(g, mutation, false);
      CHECK(addmm_pass(/*prevent_across_mutations=*/true).apply(g) == 1);
    }
  }
}

TEST_CASE("make_pattern_pass: a Pass for PassRegistry / PassManager whose counters reach the manager") {
  PassRegistry registry;
  registry.add(make_pattern_pass("fuse_addmm_test", "add(mm(a, b), c) -> addmm(c, a, b)", [] { return addmm_pass(); }));
  const Pass& pass = registry.get("fuse_addmm_test");
  CHECK(pass.description == "add(mm(a, b), c) -> addmm(c, a, b)");
  PassManager pm(registry);
  Mlp t;
  auto records = pm.run(t.g, {"fuse_addmm_test"});
  REQUIRE(records.size() == 1);
  CHECK(records[0].changed);
  CHECK(pm.counters().get("pattern_matcher_count") == 2);
  CHECK(pm.counters().get("pattern_matcher_nodes") == 4);
  CHECK(count_target(t.g, aten::addmm) == 2);
  // The same pass object runs again on another graph (built once, applied per run).
  Mlp t2;
  records = pm.run(t2.g, {"fuse_addmm_test", "fuse_addmm_test"});
  CHECK(records[0].changed);
  CHECK_FALSE(records[1].changed);
  CHECK(pm.counters().get("pattern_matcher_count") == 4);
}

TEST_CASE("KILN_PATTERN_DEBUG=<node> prints each pattern tried at that node and why it failed") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* mm = g.call_function(aten::mm, {a, b}, {}, "mm_5");
  Node* add = g.call_function(aten::add_Tensor, {mm, c}, {}, "add_9");
  Node* other = g.call_function(aten::add_Tensor, {mm, c}, {}, "add_8");  // mm now has 2 users
  g.output(ArgList{add, other});
  PatternMatcherPass pass;
  pass.register_pattern(addmm_pattern(), FuseAddmm{});
  pass.register_pattern(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">), [](auto&) {},
                        PatternOptions{.name = "plain_add"});
  std::string text;
  {
    DebugCapture capture("add_9");
    CHECK(pass.apply(g) == 2);  // plain_add matches at add_9 and add_8
    text = capture.text();
  }
  CHECK(std::getenv("KILN_PATTERN_DEBUG") == nullptr);
  INFO(text);
  CHECK(contains(text, "node add_9"));
  CHECK(contains(text, "node mm_5: expected 1 user, has 2"));
  CHECK(contains(text, "CallFunction(aten.add.Tensor, CallFunction(aten.mm.default"));  // the pattern's text
  CHECK(contains(text, "plain_add: matched"));
  CHECK_FALSE(contains(text, "add_8"));  // only the named node is explained
  // Unset: silent.
  std::ostringstream silent;
  auto* old = std::cerr.rdbuf(silent.rdbuf());
  pass.apply(g);
  std::cerr.rdbuf(old);
  CHECK(silent.str().empty());
}

TEST_CASE("apply on the same pass again reuses its snapshot and a handler may re-enter it") {
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> relus;
  Node* h = x;
  for (int i = 0; i < 40; ++i) relus.push_back(h = g.call_function(aten::relu, {h}));
  g.output(h);

  PatternMatcherPass pass("relus");
  std::vector<Node*> outer, inner;
  int depth = 0;
  pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">, p::MULTIPLE), [&](auto&, Graph& graph, Node* root) {
    (depth == 0 ? outer : inner).push_back(root);
    if (depth == 0 && outer.size() == 1) {
      // The nested apply must take a snapshot of its own, not overwrite the
      // outer one that is still being walked.
      ++depth;
      CHECK(pass.apply(graph) == relus.size());
      --depth;
    }
  });
  const std::vector<Node*> reversed(relus.rbegin(), relus.rend());
  CHECK(pass.apply(g) == relus.size());  // the nested apply counted its own
  CHECK(outer == reversed);
  CHECK(inner == reversed);
  // A third apply on the same pass sees the same nodes in the same order.
  outer.clear();
  inner.clear();
  depth = 1;  // no nesting this time: everything lands in `inner`
  CHECK(pass.apply(g) == relus.size());
  CHECK(inner == reversed);
}

TEST_CASE("matches applied before a handler throws are still counted") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* h = x;
  for (int i = 0; i < 5; ++i) h = g.call_function(aten::relu, {h});
  g.output(h);
  PatternMatcherPass pass("throws");
  int calls = 0;
  pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">, p::MULTIPLE), [&](auto&) {
    if (++calls == 3) throw std::runtime_error("handler failed");
  });
  Counters counters;
  CHECK_THROWS_WITH_AS(pass.apply(g, &counters), "handler failed", std::runtime_error);
  CHECK(calls == 3);
  CHECK(counters.get("pattern_matcher_count") == 2);
  CHECK(counters.get("pattern_matcher_nodes") == 2);
}
