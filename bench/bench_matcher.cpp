// kiln-bench-matcher GRAPH.json[.gz] [--reps N] [--handlers rewrite|count] [--repeat-second K] [--first-only]
//                    [--runtime]
//
// Applies the five patterns of the matcher benchmark in one PatternMatcherPass
// and prints one JSON object:
//   {"nodes":..., "hits":{"P1":...,...}, "apply_ns_per_node":..., "second_apply_ns_per_node":...}
//   P1 add.Tensor(mm(a, b), c)        -> addmm(c, a, b)
//   P2 sigmoid(mul.Tensor(x, x))      -> sigmoid(pow.Tensor_Scalar(x, 2))
//   P3 relu(convolution(9 args))      (never present in the chain graph)
//   P4 add.Tensor(sigmoid(_), tanh(_)) (fails at tanh)
//   P5 mul.Tensor(relu(x), y)         (fails the users rule: relu has 2 users)
// The first apply runs on the graph as read (matching and rewriting); the second
// applies the same pass to the rewritten graph, where nothing matches any more
// (matching only). Times are per node of the graph being matched; best and
// median of --reps fresh reads. With --handlers count, P1 and P2 only count
// their matches: the first apply is then matching alone on the graph as read,
// and the second apply matches the same graph again. --first-only skips the
// second apply, for counting the first one's instructions under callgrind
// (--toggle-collect='kiln::PatternMatcherPass::apply*', see bench/README.md).
// --runtime registers the same five patterns built at run time (RuntimePattern)
// instead of compiled, with the same handlers, to compare the two matchers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern/runtime_matcher.hpp"

using namespace kiln;
using namespace kiln::pattern;

namespace {

struct Hits {
  std::int64_t p[5] = {0, 0, 0, 0, 0};
};

// The five patterns built at run time, as fx_to_pattern would build them from
// example graphs (users counts aside): the same elements the compiled ones hold.
RuntimePattern runtime_p1() {
  RuntimePattern r;
  r.set_output(r.call_function(aten::add_Tensor, {r.call_function(aten::mm, {r.keyword_arg("a"), r.keyword_arg("b")}),
                                                  r.keyword_arg("c")}));
  return r;
}
RuntimePattern runtime_p2() {
  RuntimePattern r;
  r.set_output(r.call_function(aten::sigmoid, {r.call_function(aten::mul_Tensor, {r.keyword_arg("x"), r.keyword_arg("x")})}));
  return r;
}
RuntimePattern runtime_p3() {
  RuntimePattern r;
  std::vector<RuntimePattern::Ref> nine;
  for (int i = 0; i < 9; ++i) nine.push_back(r.arg());
  r.set_output(r.call_function(aten::relu, {r.call_function(aten::convolution, nine)}));
  return r;
}
RuntimePattern runtime_p4() {
  RuntimePattern r;
  r.set_output(r.call_function(aten::add_Tensor, {r.call_function(aten::sigmoid, {r.ignored()}),
                                                  r.call_function(aten::tanh, {r.ignored()})}));
  return r;
}
RuntimePattern runtime_p5() {
  RuntimePattern r;
  r.set_output(r.call_function(aten::mul_Tensor, {r.call_function(aten::relu, {r.keyword_arg("x")}), r.keyword_arg("y")}));
  return r;
}

// rewrite = false (--handlers count): P1 and P2's handlers only count their
// matches, so the first apply times matching alone on the graph as read.
// runtime: the patterns are RuntimePatterns; the handlers are the same
// (get<"c">(m) reads a compiled or a runtime match).
PatternMatcherPass build_pass(Hits& hits, bool rewrite, bool runtime) {
  PatternMatcherPass pass("matcher_bench");
  auto p1 = [&hits, rewrite](auto& m, Graph& g, Node* root) {
    ++hits.p[0];
    if (!rewrite) return;
    Node* fused = g.call_function(aten::addmm, {get<"c">(m), get<"a">(m), get<"b">(m)});
    fused->meta = root->meta;
    root->replace_all_uses_with(fused);
    m.erase_nodes();
  };
  auto p2 = [&hits, rewrite](auto& m, Graph& g, Node* root) {
    ++hits.p[1];
    if (!rewrite) return;
    Node* sq = g.call_function(aten::pow_Tensor_Scalar, {get<"x">(m), 2});
    Node* s = g.call_function(aten::sigmoid, {sq});
    s->meta = root->meta;
    root->replace_all_uses_with(s);
    m.erase_nodes();
  };
  auto p3 = [&hits](auto&) { ++hits.p[2]; };
  auto p4 = [&hits](auto&) { ++hits.p[3]; };
  auto p5 = [&hits](auto&) { ++hits.p[4]; };
  if (runtime) {
    pass.register_runtime_pattern(runtime_p1(), p1);
    pass.register_runtime_pattern(runtime_p2(), p2);
    pass.register_runtime_pattern(runtime_p3(), p3);
    pass.register_runtime_pattern(runtime_p4(), p4);
    pass.register_runtime_pattern(runtime_p5(), p5);
    return pass;
  }
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::mm, kw<"a">, kw<"b">), kw<"c">), p1);
  pass.register_pattern(CallFunction(aten::sigmoid, CallFunction(aten::mul_Tensor, kw<"x">, kw<"x">)), p2);
  pass.register_pattern(CallFunction(aten::relu, CallFunction(aten::convolution, pattern::Arg(), pattern::Arg(), pattern::Arg(), pattern::Arg(), pattern::Arg(),
                                                              pattern::Arg(), pattern::Arg(), pattern::Arg(), pattern::Arg())),
                        p3);
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::sigmoid, Ignored()),
                                     CallFunction(aten::tanh, Ignored())),
                        p4);
  pass.register_pattern(CallFunction(aten::mul_Tensor, CallFunction(aten::relu, kw<"x">), kw<"y">), p5);
  return pass;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kiln-bench-matcher GRAPH.json[.gz] [--reps N] [--handlers rewrite|count] [--repeat-second K] "
                 "[--first-only] [--runtime]\n";
    return 2;
  }
  int reps = 3;
  int repeat_second = 1;  // > 1: rerun the matching-only apply, for profilers
  bool rewrite = true;    // --handlers count: P1 and P2 match but do not rewrite
  bool second = true;     // --first-only: no second apply
  bool runtime = false;   // --runtime: RuntimePatterns instead of compiled ones
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--first-only") second = false;
    if (std::string(argv[i]) == "--runtime") runtime = true;
  }
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::string(argv[i]) == "--repeat-second") repeat_second = std::max(1, std::atoi(argv[i + 1]));
    if (std::string(argv[i]) == "--handlers") {
      const std::string h = argv[i + 1];
      if (h != "rewrite" && h != "count") {
        std::cerr << "kiln-bench-matcher: --handlers takes rewrite (the default) or count, not '" << h << "'\n";
        return 2;
      }
      rewrite = h == "rewrite";
    }
  }
  try {
    std::vector<double> first_ns, second_ns;
    Hits hits;
    std::size_t nodes = 0, nodes_after = 0;
    Counters counters;
    for (int r = 0; r < reps; ++r) {
      auto file = io::read_fx_json(argv[1]);
      Graph& g = file.graph;
      nodes = g.size();
      Hits h;
      Counters c;
      PatternMatcherPass pass = build_pass(h, rewrite, runtime);
      auto t0 = std::chrono::steady_clock::now();
      pass.apply(g, &c);
      first_ns.push_back(seconds_since(t0) * 1e9 / static_cast<double>(nodes));
      g.purge_erased();
      nodes_after = g.size();
      const Hits first_hits = h;
      // The same pass applied again, as a fixpoint loop or Inductor's repeated
      // pass application does: nothing matches any more, so this is matching only.
      t0 = std::chrono::steady_clock::now();
      std::size_t second_hits = 0;
      for (int k = 0; second && k < repeat_second; ++k) second_hits += pass.apply(g);
      if (second) second_ns.push_back(seconds_since(t0) * 1e9 / static_cast<double>(nodes_after) / repeat_second);
      if (rewrite && second_hits != 0) std::cerr << "warning: the second apply matched " << second_hits << " times\n";
      lint(g);
      hits = first_hits;
      counters = c;
    }
    nlohmann::json out;
    out["handlers"] = rewrite ? "rewrite" : "count";
    out["patterns"] = runtime ? "runtime" : "compiled";
    out["nodes"] = nodes;
    out["nodes_after_rewrite"] = nodes_after;
    out["hits"] = {{"P1", hits.p[0]}, {"P2", hits.p[1]}, {"P3", hits.p[2]}, {"P4", hits.p[3]}, {"P5", hits.p[4]}};
    out["apply_ns_per_node"] = *std::min_element(first_ns.begin(), first_ns.end());
    out["apply_ns_per_node_median"] = median(first_ns);
    if (second) {
      out["second_apply_ns_per_node"] = *std::min_element(second_ns.begin(), second_ns.end());
      out["second_apply_ns_per_node_median"] = median(second_ns);
    }
    out["counters"] = counters.to_json();
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kiln-bench-matcher: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
