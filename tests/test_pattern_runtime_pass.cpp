// Runtime patterns in PatternMatcherPass: indexed, tried and applied exactly as
// compiled ones (Inductor's PatternMatcherPass.apply: reverse topological
// snapshot, patterns of the node's (op, target) in registration order,
// extra_check, handler inserting before the node, pattern_matcher_count and
// pattern_matcher_nodes). The compiled and runtime forms of the same patterns
// must agree on every graph: the same matches, the same counters, the same result.
#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern/runtime_matcher.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;
using p::RuntimePattern;

namespace {

// The matcher benchmark's chain: mm, add, relu, mul(relu, relu), sigmoid, add.
// Every third block's relu gets an extra neg user (so P5-like users rules differ),
// and every fourth block a tanh beside the sigmoid.
Graph chain(int blocks) {
  Graph g("chain");
  Node* h = g.placeholder("x");
  Node* w = g.placeholder("w");
  Node* b = g.placeholder("b");
  ArgList outs;
  for (int i = 0; i < blocks; ++i) {
    Node* mm = g.call_function(aten::mm, {h, w});
    Node* add = g.call_function(aten::add_Tensor, {mm, b});
    Node* relu = g.call_function(aten::relu, {add});
    Node* mul = g.call_function(aten::mul_Tensor, {relu, relu});
    Node* sig = g.call_function(aten::sigmoid, {mul});
    if (i % 3 == 0) outs.push_back(g.call_function(aten::neg, {relu}));
    Node* other = relu;
    if (i % 4 == 0) other = g.call_function(aten::tanh, {relu});
    h = g.call_function(aten::add_Tensor, {sig, other});
  }
  outs.push_back(h);
  g.output(outs);
  return g;
}

struct Hits {
  int p[5] = {0, 0, 0, 0, 0};
};

// The five patterns of bench/bench_matcher.cpp; one generic handler serves the
// compiled and the runtime form (get<"x">(m) works on both).
// rewrite = false: count only, so that every node stays for the other patterns.
auto p1_handler(Hits& h, bool rewrite = true) {
  return [&h, rewrite](auto& m, Graph& g, Node* root) {
    ++h.p[0];
    if (!rewrite) return;
    Node* fused = g.call_function(aten::addmm, {p::get<"c">(m), p::get<"a">(m), p::get<"b">(m)});
    root->replace_all_uses_with(fused);
    m.erase_nodes();
  };
}
auto p2_handler(Hits& h, bool rewrite = true) {
  return [&h, rewrite](auto& m, Graph& g, Node* root) {
    ++h.p[1];
    if (!rewrite) return;
    Node* sq = g.call_function(aten::pow_Tensor_Scalar, {p::get<"x">(m), 2});
    Node* s = g.call_function(aten::sigmoid, {sq});
    root->replace_all_uses_with(s);
    m.erase_nodes();
  };
}
auto counting(Hits& h, int i) {
  return [&h, i](auto&) { ++h.p[i]; };
}

PatternMatcherPass compiled_pass(Hits& h, bool rewrite = true) {
  using namespace kiln::pattern;
  PatternMatcherPass pass("compiled");
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::mm, kw<"a">, kw<"b">), kw<"c">), p1_handler(h, rewrite));
  pass.register_pattern(CallFunction(aten::sigmoid, CallFunction(aten::mul_Tensor, kw<"x">, kw<"x">)), p2_handler(h, rewrite));
  pass.register_pattern(CallFunction(aten::relu, CallFunction(aten::tanh, kw<"x">)), counting(h, 2));
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::sigmoid, Ignored()), CallFunction(aten::tanh, Ignored())),
                        counting(h, 3));
  pass.register_pattern(CallFunction(aten::mul_Tensor, CallFunction(aten::relu, kw<"x">), kw<"y">), counting(h, 4));
  return pass;
}

RuntimePattern rt_p1() {
  RuntimePattern r;
  auto mm = r.call_function(aten::mm, {r.keyword_arg("a"), r.keyword_arg("b")});
  r.set_output(r.call_function(aten::add_Tensor, {mm, r.keyword_arg("c")}));
  return r;
}
RuntimePattern rt_p2() {
  RuntimePattern r;
  auto mul = r.call_function(aten::mul_Tensor, {r.keyword_arg("x"), r.keyword_arg("x")});
  r.set_output(r.call_function(aten::sigmoid, {mul}));
  return r;
}
RuntimePattern rt_p3() {
  RuntimePattern r;
  r.set_output(r.call_function(aten::relu, {r.call_function(aten::tanh, {r.keyword_arg("x")})}));
  return r;
}
RuntimePattern rt_p4() {
  RuntimePattern r;
  auto s = r.call_function(aten::sigmoid, {r.ignored()});
  auto t = r.call_function(aten::tanh, {r.ignored()});
  r.set_output(r.call_function(aten::add_Tensor, {s, t}));
  return r;
}
RuntimePattern rt_p5() {
  RuntimePattern r;
  r.set_output(r.call_function(aten::mul_Tensor, {r.call_function(aten::relu, {r.keyword_arg("x")}), r.keyword_arg("y")}));
  return r;
}

PatternMatcherPass runtime_pass(Hits& h, bool rewrite = true) {
  PatternMatcherPass pass("runtime");
  pass.register_runtime_pattern(rt_p1(), p1_handler(h, rewrite));
  pass.register_runtime_pattern(rt_p2(), p2_handler(h, rewrite));
  pass.register_runtime_pattern(rt_p3(), counting(h, 2));
  pass.register_runtime_pattern(rt_p4(), counting(h, 3));
  pass.register_runtime_pattern(rt_p5(), counting(h, 4));
  return pass;
}

}  // namespace

// Applies the compiled and the runtime pass to two copies of chain(blocks) and
// checks that they agree; returns the runtime pass's hits.
Hits apply_both(int blocks, bool rewrite, Graph& a, Graph& b) {
  a = chain(blocks);
  b = chain(blocks);
  Hits ha, hb;
  Counters ca, cb;
  PatternMatcherPass pa = compiled_pass(ha, rewrite);
  PatternMatcherPass pb = runtime_pass(hb, rewrite);
  const std::size_t na = pa.apply(a, &ca);
  const std::size_t nb = pb.apply(b, &cb);
  CHECK(na == nb);
  for (int i = 0; i < 5; ++i) CHECK(ha.p[i] == hb.p[i]);
  CHECK(ca.to_json() == cb.to_json());
  CHECK(cb.get("pattern_matcher_count") == static_cast<std::int64_t>(nb));
  CHECK(to_string(a) == to_string(b));
  return hb;
}

TEST_CASE("compiled and runtime forms of the same patterns agree: hits, counters, resulting graph") {
  for (int blocks : {1, 5, 12}) {
    Graph a, b;
    const Hits h = apply_both(blocks, true, a, b);
    CHECK(h.p[0] == blocks);
    lint(b);
    // Applied again: the rewritten graph has nothing left for P1 and P2.
    Hits ha2, hb2;
    PatternMatcherPass pa2 = compiled_pass(ha2);
    PatternMatcherPass pb2 = runtime_pass(hb2);
    CHECK(pa2.apply(a) == pb2.apply(b));
    CHECK(hb2.p[0] == 0);
    CHECK(hb2.p[1] == 0);
  }
}

TEST_CASE("compiled and runtime agree on every pattern when no handler rewrites (each node is tried)") {
  // Without rewriting, P5 (mul(relu(x), y)) is tried at every mul and fails the
  // users rule (relu has 2 or 3 users), P4 matches where a tanh sits beside the sigmoid.
  for (int blocks : {1, 4, 9}) {
    Graph a, b;
    const Hits h = apply_both(blocks, false, a, b);
    CHECK(h.p[0] == blocks);
    CHECK(h.p[3] == (blocks + 3) / 4);
    CHECK(h.p[4] == 0);
  }
}

TEST_CASE("runtime pattern entries: counters count matched nodes, extra_check can reject") {
  // Inductor: pattern_matcher_count += 1 and pattern_matcher_nodes += len(m.nodes)
  // per applied match; a match extra_check rejects is not applied nor counted.
  Graph g = chain(4);
  Hits h;
  PatternMatcherPass pass("rt");
  int checked = 0;
  pass.register_runtime_pattern(rt_p1(), p1_handler(h), [&](const p::RuntimeMatch& m) {
    ++checked;
    return m.output_node()->name() != "add";  // reject the first block's
  });
  Counters c;
  CHECK(pass.apply(g, &c) == 3);
  CHECK(checked == 4);
  CHECK(c.get("pattern_matcher_count") == 3);
  CHECK(c.get("pattern_matcher_nodes") == 6);
  CHECK(g.find_nodes(OpKind::call_function, aten::addmm).size() == 3);
}

TEST_CASE("runtime and compiled patterns share one root index and registration order, prepend included") {
  // Inductor keeps one list per (op, target) and tries its entries in order.
  Graph g = chain(1);
  std::vector<std::string> order;
  PatternMatcherPass pass("mixed");
  pass.register_pattern(p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">), p::kw<"c">),
                        [&](auto&) { order.push_back("compiled"); });
  pass.register_runtime_pattern(rt_p1(), [&](p::RuntimeMatch&) { order.push_back("runtime"); });
  pass.register_runtime_pattern(rt_p1(), [&](p::RuntimeMatch&) { order.push_back("runtime-first"); },
                                PatternOptions{.prepend = true, .name = "first"});
  CHECK(pass.apply(g) == 3);  // no handler erases the root, so every entry is tried
  CHECK(order == std::vector<std::string>{"runtime-first", "compiled", "runtime"});
  CHECK(pass.num_patterns() == 3);
  CHECK(pass.describe().find("first\n") != std::string::npos);
  CHECK(pass.describe().find("CallFunction(aten.add.Tensor, CallFunction(aten.mm.default, KeywordArg('a')") !=
        std::string::npos);
}

TEST_CASE("a runtime match that crosses a mutation is dropped unless the pass allows it") {
  // Inductor 2.11 always requires every matched node to lie in one mutation
  // region (compute_mutation_region_ids); kiln does by default.
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.placeholder("w");
  Node* mm = g.call_function(aten::mm, {x, w});
  g.call_function(aten::relu_, {x});  // mutates x between mm and add
  Node* add = g.call_function(aten::add_Tensor, {mm, x});
  g.output(ArgList{add});
  int hits = 0;
  PatternMatcherPass guarded("guarded");
  guarded.register_runtime_pattern(rt_p1(), [&](p::RuntimeMatch&) { ++hits; });
  CHECK(guarded.apply(g) == 0);
  PatternMatcherPass open("open", /*prevent_match_across_mutations=*/false);
  open.register_runtime_pattern(rt_p1(), [&](p::RuntimeMatch&) { ++hits; });
  CHECK(open.apply(g) == 1);
  CHECK(hits == 1);
}

TEST_CASE("the handler inserts before the root and gets the match's nodes and captures") {
  Graph g = chain(1);
  PatternMatcherPass pass("rt");
  std::vector<std::string> seen;
  pass.register_runtime_pattern(rt_p1(), [&](p::RuntimeMatch& m, Graph& graph, Node* root) {
    seen = testing::names(m.nodes());
    Node* n = graph.call_function(aten::neg, {m.get("c")});
    CHECK(n->next() == root);  // inserted right before the root
  });
  CHECK(pass.apply(g) == 1);
  CHECK(seen == std::vector<std::string>{"mm", "add"});
}

TEST_CASE("KILN_PATTERN_DEBUG reports why a runtime pattern failed at the named node") {
  // Inductor's TORCHINDUCTOR_PATTERN_MATCH_DEBUG logs each failed pattern at that node.
  Graph g = chain(1);
  g.call_function(aten::neg, {g.find_node("mm")});  // mm gets a second user: P1 fails at `add`
  PatternMatcherPass pass("rt");
  pass.register_runtime_pattern(rt_p1(), [](p::RuntimeMatch&) {}, PatternOptions{.name = "P1"});
  std::size_t n = 0;
  const std::string text = kiln::testing::pattern_debug_output("add", [&] { n = pass.apply(g); });
  CHECK(n == 0);
  // The path from the root to the failing position, then the reason.
  CHECK(text.find("KILN_PATTERN_DEBUG: node add: P1: add = CallFunction(aten.add.Tensor) args[0] -> node mm: "
                            "expected 1 user, has 2") != std::string::npos);
}

TEST_CASE("PatternMatcherPasses take runtime patterns by pass_number") {
  // Inductor's post_grad pass_patterns: a list of PatternMatcherPasses applied in order.
  Graph g = chain(2);
  Hits h;
  PatternMatcherPasses passes(2, "rt");
  passes.register_pattern(rt_p1(), p1_handler(h), PatternOptions{.pass_number = 1});
  CHECK(passes[0].num_patterns() == 0);
  CHECK(passes[1].num_patterns() == 1);
  CHECK(passes.apply(g) == 2);
  CHECK(h.p[0] == 2);
}

TEST_CASE("A runtime pattern's extra_check may give a reason, which KILN_PATTERN_DEBUG prints") {
  Graph g = chain(1);
  PatternMatcherPass pass("rt");
  int handled = 0;
  pass.register_runtime_pattern(
      rt_p1(), [&](p::RuntimeMatch&) { ++handled; },
      [](const p::RuntimeMatch& m) -> CheckResult { return reject("rejected at " + m.output_node()->name()); },
      PatternOptions{.name = "P1"});
  std::size_t n = 0;
  const std::string text = kiln::testing::pattern_debug_output("add", [&] { n = pass.apply(g); });
  CHECK(n == 0);
  CHECK(handled == 0);
  CHECK(text.find("KILN_PATTERN_DEBUG: node add: P1: extra_check rejected the match: rejected at add") !=
        std::string::npos);
}
