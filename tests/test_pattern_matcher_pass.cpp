// PatternMatcherPass / PatternMatcherPasses / make_pattern_pass: Inductor's
// PatternMatcherPass.apply semantics (torch/_inductor/pattern_matcher.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/detail/graph_internals.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
using Internals = kiln::detail::GraphInternals;  // the storage hooks a pass driver uses
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

PatternMatcherPass addmm_pass(bool prevent_across_mutations = true) {
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

using kiln::testing::DebugCapture;

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

TEST_CASE("mutation regions: a match spanning an in-place op is dropped by default, kept only when the pass allows it") {
  // Inductor 2.11's PatternMatcherPass.apply always drops a match whose nodes
  // lie in more than one mutation region; kiln does by default.
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
      PatternMatcherPass by_default("addmm");
      by_default.register_pattern(addmm_pattern(), FuseAddmm{});
      CHECK(by_default.apply(g) == 0);
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

// ---------------------------------------------------------------- freeing what handlers erase

namespace {

std::unordered_set<const void*> addresses_of(const std::vector<Node*>& v) {
  return std::unordered_set<const void*>(v.begin(), v.end());
}

// x, then `blocks` times h = add(mm(h, w_i), b_i), then output(h); the
// placeholders w_i and b_i come first.
struct AddmmChain {
  Graph g;
  Node* x = nullptr;
  std::vector<Node*> w, b, mm, add;
  Node* out = nullptr;
  explicit AddmmChain(std::size_t blocks) {
    x = g.placeholder("x");
    for (std::size_t i = 0; i < blocks; ++i) w.push_back(g.placeholder("w" + std::to_string(i)));
    for (std::size_t i = 0; i < blocks; ++i) b.push_back(g.placeholder("b" + std::to_string(i)));
    Node* h = x;
    for (std::size_t i = 0; i < blocks; ++i) {
      mm.push_back(g.call_function(aten::mm, {h, w[i]}));
      add.push_back(h = g.call_function(aten::add_Tensor, {mm.back(), b[i]}));
    }
    out = g.output(ArgList{h});
  }
  std::unordered_set<const void*> original_ops() const {
    std::unordered_set<const void*> s(mm.begin(), mm.end());
    s.insert(add.begin(), add.end());
    return s;
  }
  // Every block became addmm(b_i, previous, w_i), in order, feeding the output.
  void check_fused() const {
    const std::vector<Node*> fused = g.find_nodes(OpKind::call_function, aten::addmm);
    REQUIRE(fused.size() == mm.size());
    Node* prev = x;
    for (std::size_t i = 0; i < fused.size(); ++i) {
      CAPTURE(i);
      REQUIRE(fused[i]->args().size() == 3);
      CHECK(fused[i]->args()[0].node() == b[i]);
      CHECK(fused[i]->args()[1].node() == prev);
      CHECK(fused[i]->args()[2].node() == w[i]);
      prev = fused[i];
    }
    CHECK(out->args()[0] == Arg(ArgList{prev}));
    CHECK(count_target(g, aten::mm) == 0);
    CHECK(count_target(g, aten::add_Tensor) == 0);
    lint(g);
  }
};

}  // namespace

TEST_CASE("apply: nodes a handler erased are freed when it returns and the next handler's nodes take their memory") {
  const std::size_t blocks = 12;
  AddmmChain t(blocks);
  const auto originals = t.original_ops();
  const std::uint64_t epoch = Internals::reorder_epoch(t.g);
  auto pass = addmm_pass();
  CHECK(pass.apply(t.g) == blocks);
  // One insert per gap between mm and add: nothing was renumbered or moved,
  // so the pass could tell the erased adds were visited already.
  REQUIRE(Internals::reorder_epoch(t.g) == epoch);
  t.check_fused();
  // The last block is fused first, into fresh memory; each block before it
  // is fused after the previous handler's add and mm were freed, into their memory.
  const std::vector<Node*> fused = t.g.find_nodes(OpKind::call_function, aten::addmm);
  std::size_t reused = 0;
  for (Node* n : fused) reused += originals.count(n);
  CHECK(reused >= 1);
  CHECK(reused == blocks - 1);
  CHECK(originals.count(fused.back()) == 0);
  // Every erased node was a visited add or an mm (no pattern's root): all freed.
  CHECK(Internals::erased_pending(t.g) == 0);
  kiln::testing::check_links(t.g);
}

TEST_CASE("apply: erased nodes the snapshot may still visit are kept, never handed to a handler, and never reused") {
  // x*x -> sigmoid -> *y, repeated: the sigmoid pattern erases its mul (a
  // pattern root too, still ahead in the snapshot); the mul pattern sees only
  // the muls by y.
  const std::size_t blocks = 10;
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  std::vector<Node*> squares, sigmoids, scales;
  Node* h = x;
  for (std::size_t i = 0; i < blocks; ++i) {
    const std::string k = std::to_string(i);
    squares.push_back(g.call_function(aten::mul_Tensor, {h, h}, {}, "sq" + k));
    sigmoids.push_back(g.call_function(aten::sigmoid, {squares.back()}, {}, "sig" + k));
    scales.push_back(h = g.call_function(aten::mul_Tensor, {sigmoids.back(), y}, {}, "scale" + k));
  }
  g.output(ArgList{h});
  std::unordered_set<std::string> original_names;
  for (Node* n : g.nodes()) original_names.insert(n->name());
  const std::unordered_set<const void*> square_addresses = addresses_of(squares);
  const std::unordered_set<const void*> sigmoid_addresses = addresses_of(sigmoids);

  std::vector<std::pair<const Node*, std::string>> created, seen;
  std::vector<std::string> sig_seen, mul_seen;
  std::size_t mul_calls = 0;
  PatternMatcherPass pass("pow");
  pass.register_pattern(p::CallFunction(aten::sigmoid, p::CallFunction(aten::mul_Tensor, p::kw<"x">, p::kw<"x">)),
                        [&](auto& m, Graph& gr, Node* root) {
                          seen.push_back({root, root->name()});
                          sig_seen.push_back(root->name());
                          Node* pw = gr.call_function(aten::pow_Tensor_Scalar, {m.template get<"x">(), Arg(2)});
                          Node* s = gr.call_function(aten::sigmoid, {pw});
                          created.push_back({pw, pw->name()});
                          created.push_back({s, s->name()});
                          root->replace_all_uses_with(s);
                          m.erase_nodes();
                        });
  pass.register_pattern(p::CallFunctionVarArgs(aten::mul_Tensor), [&](auto&, Graph&, Node* root) {
    ++mul_calls;
    REQUIRE_FALSE(root->erased());
    seen.push_back({root, root->name()});
    mul_seen.push_back(root->name());
  });
  const std::uint64_t epoch = Internals::reorder_epoch(g);
  CHECK(pass.apply(g) == 2 * blocks);
  REQUIRE(Internals::reorder_epoch(g) == epoch);

  std::vector<std::string> expected_sig, expected_mul;
  for (std::size_t i = blocks; i-- > 0;) {
    expected_sig.push_back("sig" + std::to_string(i));  // (the sigmoids themselves are freed)
    expected_mul.push_back("scale" + std::to_string(i));
  }
  CHECK(sig_seen == expected_sig);
  CHECK(mul_calls == blocks);
  CHECK(mul_seen == expected_mul);
  // Nothing a handler created was visited (by address and name: addresses are
  // reused, names never).
  std::unordered_set<std::string> created_names;
  for (const auto& [n, name] : created) created_names.insert(name);
  REQUIRE(created_names.size() == 2 * blocks);
  for (const auto& [n, name] : seen) {
    CHECK(created_names.count(name) == 0);
    CHECK(original_names.count(name) == 1);
  }
  // The squares were erased while still ahead in the snapshot: kept, readable, pending.
  CHECK(Internals::erased_pending(g) == blocks);
  for (Node* sq : squares) CHECK(sq->erased());
  // So no new node took their memory; the visited sigmoids' memory was reused
  // (by the first node of every handler but the first).
  std::size_t into_sigmoids = 0;
  for (const auto& [n, name] : created) {
    CHECK(square_addresses.count(n) == 0);
    into_sigmoids += sigmoid_addresses.count(n);
  }
  CHECK(into_sigmoids == blocks - 1);
  CHECK(count_target(g, aten::pow_Tensor_Scalar) == blocks);
  CHECK(count_target(g, aten::sigmoid) == blocks);
  CHECK(count_target(g, aten::mul_Tensor) == blocks);
  lint(g);
  g.purge_erased();
  CHECK(Internals::erased_pending(g) == 0);
  lint(g);
}

TEST_CASE("apply: a root node moved behind the candidate and erased there is kept, not freed") {
  // Once a handler moves a node, order keys no longer tell what the snapshot
  // has visited: every erased pattern root stays pending.
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> relus;
  for (int i = 0; i < 30; ++i) relus.push_back(g.call_function(aten::relu, {x}, {}, "r" + std::to_string(i)));
  g.output(ArgList{x});
  const std::unordered_set<const void*> relu_addresses = addresses_of(relus);
  std::unordered_map<const Node*, std::size_t> position;
  for (std::size_t i = 0; i < relus.size(); ++i) position[relus[i]] = i;
  std::vector<std::string> seen;
  std::vector<Node*> created;
  std::size_t erased = 0;
  PatternMatcherPass pass("move_then_erase");
  pass.register_pattern(p::CallFunctionVarArgs(aten::relu), [&](auto&, Graph& gr, Node* root) {
    seen.push_back(root->name());
    // A node of no pattern's root, created and erased: freed whatever moved.
    created.push_back(gr.call_function(aten::neg, {x}));
    Node* tmp = gr.call_function(aten::neg, {x});
    gr.erase_node(tmp);
    const std::size_t i = position.at(root);
    if (i == 0) return;
    // The relu before this one (not visited yet) goes after it, then away:
    // its new order key lies past the candidate.
    Node* victim = relus[i - 1];
    root->append(victim);
    REQUIRE(root->is_before(*victim));
    gr.erase_node(victim);
    ++erased;
  });
  std::vector<std::string> expected;
  for (std::size_t i = relus.size(); i-- > 0;) {
    expected.push_back(relus[i]->name());
    if (i > 0) --i;
  }
  CHECK(pass.apply(g) == expected.size());
  CHECK(seen == expected);
  CHECK(erased == relus.size() / 2);
  CHECK(Internals::erased_pending(g) == erased);
  for (Node* n : created) CHECK(relu_addresses.count(n) == 0);
  for (std::size_t i = 0; i < relus.size(); ++i)
    if (std::find(seen.begin(), seen.end(), relus[i]->name()) == seen.end()) CHECK(relus[i]->erased());
  lint(g);
}

TEST_CASE("apply: a handler that applies another pass to the same graph gives a correct, lint-clean result") {
  for (bool same_pass : {false, true}) {
    CAPTURE(same_pass);
    const std::size_t blocks = 8;
    AddmmChain t(blocks);
    const auto originals = t.original_ops();
    auto inner = addmm_pass();
    PatternMatcherPass outer("outer");
    std::size_t calls = 0, inner_count = 0;
    outer.register_pattern(addmm_pattern(), [&](auto& m, Graph& gr, Node* root) {
      FuseAddmm{}(m, gr, root);
      // The first call (at the last block) fuses every other block through a nested apply.
      if (++calls == 1) inner_count = same_pass ? outer.apply(gr) : inner.apply(gr);
    });
    CHECK(outer.apply(t.g) == 1);
    CHECK(inner_count == blocks - 1);
    CHECK(calls == (same_pass ? blocks : 1));
    t.check_fused();
    // The nested apply freed nothing (the outer snapshot still held its
    // adds): no addmm took an original node's memory.
    for (Node* n : t.g.find_nodes(OpKind::call_function, aten::addmm)) CHECK(originals.count(n) == 0);
    // After the handler, the outer apply freed the mm's and its own add; the
    // adds the nested apply erased lay ahead in its snapshot and are kept.
    CHECK(Internals::erased_pending(t.g) == blocks - 1);
    for (std::size_t i = 0; i + 1 < blocks; ++i) CHECK(t.add[i]->erased());
    t.g.purge_erased();
    lint(t.g);
    // The graph and both passes still work.
    CHECK(outer.apply(t.g) == 0);
    CHECK(inner.apply(t.g) == 0);
  }
}

TEST_CASE("apply: on a graph with a mutation op the pass frees nothing it erased") {
  const std::size_t blocks = 6;
  AddmmChain t(blocks);
  {
    // An in-place op before every block: one region for all matches, which stand.
    auto at = t.g.inserting_before(t.mm[0]);
    t.g.call_function(aten::relu_, {t.g.placeholder("scratch")});
  }
  const auto originals = t.original_ops();
  auto pass = addmm_pass(/*prevent_across_mutations=*/true);
  CHECK(pass.apply(t.g) == blocks);
  t.check_fused();
  // Its mutation regions are keyed by node address: every erased node stays.
  CHECK(Internals::erased_pending(t.g) == 2 * blocks);
  for (Node* n : t.mm) CHECK(n->erased());
  for (Node* n : t.add) CHECK(n->erased());
  for (Node* n : t.g.find_nodes(OpKind::call_function, aten::addmm)) CHECK(originals.count(n) == 0);
  t.g.purge_erased();
  CHECK(Internals::erased_pending(t.g) == 0);
  lint(t.g);
}

TEST_CASE("apply: on a graph without mutation ops the default pass keeps recycling erased nodes") {
  // The mutation-region rule is on by default, but with no mutation op there
  // is nothing per node to remember, so erased nodes are freed as usual.
  const std::size_t blocks = 6;
  AddmmChain t(blocks);
  PatternMatcherPass pass("addmm");
  pass.register_pattern(addmm_pattern(), FuseAddmm{});
  CHECK(pass.apply(t.g) == blocks);
  t.check_fused();
  CHECK(Internals::erased_pending(t.g) < 2 * blocks);
  lint(t.g);
}

TEST_CASE("is_mutation_op: Inductor's rule by schema, by name and by an `out` keyword argument") {
  CHECK(detail::mutation_op_name("relu_"));
  CHECK(detail::mutation_op_name("_set_grad_enabled"));
  CHECK(detail::mutation_op_name("manual_seed"));
  CHECK(detail::mutation_op_name("_enter_autocast"));
  CHECK(detail::mutation_op_name("_exit_autocast"));
  CHECK(detail::mutation_op_name("set_"));
  CHECK_FALSE(detail::mutation_op_name("__setitem__"));
  CHECK_FALSE(detail::mutation_op_name("__rshift__"));
  CHECK_FALSE(detail::mutation_op_name("offset"));
  CHECK_FALSE(detail::mutation_op_name("reset"));
  CHECK_FALSE(detail::mutation_op_name("relu"));
  CHECK_FALSE(detail::mutation_op_name("settings"));
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  CHECK(is_mutation_op(g.call_function(aten::relu_, {x})));
  CHECK(is_mutation_op(g.call_function(aten::copy_, {x, y})));
  CHECK_FALSE(is_mutation_op(g.call_function(aten::relu, {x})));
  CHECK(is_mutation_op(g.call_method("add_", {x, y})));
  CHECK_FALSE(is_mutation_op(g.call_method("add", {x, y})));
  CHECK(is_mutation_op(g.call_function(OpRef("torch._C._set_grad_enabled"), {false})));
  // A Python callable with a non-None out= mutates; an operator overload is
  // judged by its schema alone, as in Inductor.
  CHECK(is_mutation_op(g.call_function(OpRef("torch.add"), {x, y}, {{"out", y}})));
  CHECK_FALSE(is_mutation_op(g.call_function(OpRef("torch.add"), {x, y}, {{"out", Arg()}})));
  CHECK_FALSE(is_mutation_op(g.call_function(OpRef("torch.add"), {x, y})));
}

TEST_CASE("mutation regions: without compute(), the first same_region() computes them from the graph as it is") {
  // PatternMatcherPass::apply leaves them to the first match, so that a pass
  // that matches nothing does not look for mutation ops at all.
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* mm = g.call_function(aten::mm, {a, b});
  // A callable that mutates through `out=`, given its keywords after creation:
  // the graph's count of nodes with keywords must see it.
  Node* copy = g.call_function(OpRef("torch.add"), {a, b});
  copy->set_kwarg("out", Arg(b));
  Node* add = g.call_function(aten::add_Tensor, {mm, b});
  g.output(ArgList{add});
  MutationRegions regions;
  CHECK_FALSE(regions.computed());
  CHECK_FALSE(regions.active());
  std::vector<Node*> pair{mm, add};
  CHECK_FALSE(regions.same_region(pair, g));
  CHECK(regions.computed());
  CHECK(regions.active());
  // The same through a pass: the match across the out= call is dropped.
  CHECK(addmm_pass().apply(g) == 0);
  copy->set_kwargs({});  // no longer a mutation op
  MutationRegions fresh;
  CHECK(fresh.same_region(pair, g));
  CHECK_FALSE(fresh.active());
  CHECK(addmm_pass().apply(g) == 1);
}

TEST_CASE("mutation regions: nodes created after compute() are numbered from the nearest older node, as Inductor does") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* mm = g.call_function(aten::mm, {a, b});
  Node* add = g.call_function(aten::add_Tensor, {mm, b});
  g.output(ArgList{add});
  MutationRegions regions;
  regions.compute(g);
  CHECK_FALSE(regions.active());  // no mutation op: nothing kept per node
  std::vector<Node*> pair{mm, add};
  CHECK(regions.same_region(pair, g));
  // A handler adds the first mutation op (a new kind of node): the regions are
  // computed then, from the graph as it is.
  Node* late = nullptr;
  {
    auto at = g.inserting_before(add);
    g.call_function(aten::relu_, {a});
    late = g.call_function(aten::neg, {mm});
  }
  CHECK_FALSE(regions.same_region(pair, g));
  CHECK(regions.active());
  // Now regions are kept per node: another in-place op added between mm and
  // add leaves both (numbered already) where they were, while a node created
  // after it is numbered from its nearest numbered predecessor, one more.
  {
    auto at = g.inserting_before(add);
    g.call_function(aten::relu_, {b});
  }
  Node* newest = nullptr;
  {
    auto at = g.inserting_before(add);
    newest = g.call_function(aten::neg, {late});
  }
  std::vector<Node*> late_and_add{late, add};
  CHECK(regions.same_region(late_and_add, g));
  std::vector<Node*> newest_and_add{newest, add};
  CHECK_FALSE(regions.same_region(newest_and_add, g));
}

TEST_CASE("apply: a pattern whose first argument's kind or target cannot fit is skipped, yet KILN_PATTERN_DEBUG explains it") {
  // The pass asks a pattern's first child (a call pattern) about the node's first
  // argument before trying the pattern; the outcome must be the matcher's own.
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* r = g.call_function(aten::relu, {a}, {}, "relu_1");
  Node* on_relu = g.call_function(aten::add_Tensor, {r, b}, {}, "add_relu");
  Node* on_const = g.call_function(aten::add_Tensor, {2, b}, {}, "add_const");
  Node* mm = g.call_function(aten::mm, {a, b}, {}, "mm_1");
  Node* on_mm = g.call_function(aten::add_Tensor, {mm, b}, {}, "add_mm");
  g.output(ArgList{on_relu, on_const, on_mm});
  std::vector<std::string> matched;
  PatternMatcherPass pass;
  pass.register_pattern(addmm_pattern(), [&](auto& m) { matched.push_back(m.output_node()->name()); });
  std::string text;
  {
    DebugCapture capture("add_relu");
    CHECK(pass.apply(g) == 1);
    text = capture.text();
  }
  CHECK(matched == std::vector<std::string>{"add_mm"});
  INFO(text);
  CHECK(contains(text, "node relu_1: function_mismatch: it is call_function aten.relu.default"));
  // A node whose first argument is a constant is skipped the same way.
  std::string why;
  CHECK_FALSE(p::match(addmm_pattern(), on_const, &why).has_value());
  CHECK(contains(why, "expected a node"));
}

TEST_CASE("KILN_PATTERN_DEBUG shows the whole failing path, each step with its node, then the reason") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* sig = g.call_function(aten::sigmoid, {b}, {}, "sig_2");
  Node* mm = g.call_function(aten::mm, {a, sig}, {}, "mm_5");
  Node* add = g.call_function(aten::add_Tensor, {mm, c}, {{"alpha", 3}}, "add_9");
  g.output(ArgList{add});
  PatternMatcherPass pass;
  // The failure sits two calls down: mm's second argument is no relu.
  pass.register_pattern(p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"x">, p::CallFunction(aten::relu, p::kw<"w">)),
                                        p::kw<"y">, p::kwarg<"alpha">(p::kw<"alpha">)),
                        [](auto&) {}, PatternOptions{.name = "deep"});
  // A keyword child's failure names the keyword.
  pass.register_pattern(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(1)), [](auto&) {},
                        PatternOptions{.name = "alpha_one"});
  std::string text;
  {
    DebugCapture capture("add_9");
    CHECK(pass.apply(g) == 0);
    text = capture.text();
  }
  INFO(text);
  CHECK(contains(text, "deep: add_9 = CallFunction(aten.add.Tensor) args[0] -> mm_5 = CallFunction(aten.mm.default) args[1] -> "
                       "node sig_2: function_mismatch: it is call_function aten.sigmoid.default, the pattern wants "
                       "CallFunction aten.relu.default"));
  CHECK(contains(text, "alpha_one: add_9 = CallFunction(aten.add.Tensor) kwargs['alpha'] -> constant_args: constant 3 != 1"));
  // The same path comes back from a plain match() asked why.
  std::string why;
  CHECK_FALSE(p::match(p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"x">, p::CallFunction(aten::relu, p::kw<"w">)),
                                       p::kw<"y">, p::kwarg<"alpha">(p::kw<"alpha">)),
                       add, &why)
                   .has_value());
  CHECK(why.rfind("add_9 = CallFunction(aten.add.Tensor) args[0] -> mm_5 = CallFunction(aten.mm.default) args[1] -> node sig_2", 0) == 0);
}

TEST_CASE("extra_check may return kiln::CheckResult: a rejection's reason is what KILN_PATTERN_DEBUG prints") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* add = g.call_function(aten::add_Tensor, {a, b}, {{"alpha", 2}}, "add_1");
  g.output(ArgList{add});
  int handled = 0;
  PatternMatcherPass pass;
  auto pattern = p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(p::kw<"alpha">));
  pass.register_pattern(
      pattern, [&](auto&) { ++handled; },
      [](const auto& m) -> CheckResult {
        if (p::get<"alpha">(m) != Arg(1)) return reject("alpha is not 1");
        return true;
      },
      PatternOptions{.name = "literal_reason"});
  pass.register_pattern(
      pattern, [&](auto&) { ++handled; },
      [](const auto& m) -> CheckResult {
        return reject("alpha is " + format_arg(p::get<"alpha">(m)) + ", not 1");  // a reason built at run time
      },
      PatternOptions{.name = "built_reason"});
  pass.register_pattern(pattern, [&](auto&) { ++handled; }, [](const auto&) { return false; },
                        PatternOptions{.name = "plain_bool"});
  std::string text;
  {
    DebugCapture capture("add_1");
    CHECK(pass.apply(g) == 0);
    text = capture.text();
  }
  CHECK(handled == 0);
  INFO(text);
  CHECK(contains(text, "literal_reason: extra_check rejected the match: alpha is not 1"));
  CHECK(contains(text, "built_reason: extra_check rejected the match: alpha is 2, not 1"));
  CHECK(contains(text, "plain_bool: extra_check rejected the match\n"));
  // An accepting CheckResult lets the handler run.
  PatternMatcherPass accepting;
  accepting.register_pattern(pattern, [&](auto&) { ++handled; }, [](const auto&) -> CheckResult { return true; });
  CHECK(accepting.apply(g) == 1);
  CHECK(handled == 1);
  // The result itself.
  CHECK(CheckResult(true).accepted());
  CHECK(CheckResult(true).reason().empty());
  CHECK_FALSE(reject("no").accepted());
  CHECK(reject(std::string("built")).reason() == "built");
}
