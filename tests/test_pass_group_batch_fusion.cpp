// Group and batch fusion (kiln/passes/group_batch_fusion.hpp) against
// Inductor 2.11's results on the fixtures, and each fusion's matching rules.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/kiln_ops.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/group_batch_fusion.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "test_support.hpp"
#include "towers_graph.hpp"

#include <nlohmann/json.hpp>

using namespace kiln;
using kiln::testing::f32;
using kiln::testing::towers_graph;

namespace {

const std::string kInductor = std::string(KILN_FIXTURES_DIR) + "/inductor/";

std::map<std::string, int> target_counts(const Graph& g) {
  std::map<std::string, int> m;
  for (const Node* n : g.nodes()) ++m[std::string(n->target_name())];
  return m;
}

nlohmann::json expected(const std::string& file) {
  std::ifstream in(kInductor + file);
  return nlohmann::json::parse(in);
}

// Runs the named fusions in order, as Inductor runs its *_fusion_options.
Counters run_fusions(Graph& g, const std::vector<std::string>& names, const nlohmann::json& options = {}) {
  Counters c;
  for (const auto& name : names) {
    auto f = make_group_batch_fusion(name);
    REQUIRE(f != nullptr);
    f->options = gbf::SearchOptions::from_json(options, name);
    gbf::apply_group_batch_fusion(g, *f, &c);
    lint(g);
  }
  return c;
}

std::int64_t fusion_counters(const Counters& c) {
  std::int64_t total = 0;
  for (const auto& [k, v] : c.values()) total += v;
  return total;
}

}  // namespace

TEST_CASE("towers_n8: the five pre-grad fusions give Inductor's counters and its nodes, target for target") {
  Graph g = io::read_fx_json(kInductor + "towers_n8_pregrad.json.gz").graph;
  const auto want = expected("towers_n8.expected.json");
  REQUIRE(g.size() == want["nodes_before"].get<std::size_t>());
  const Counters c = run_fusions(g, {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"});
  for (const auto& [name, value] : want["counters"].items()) {
    INFO(name);
    CHECK(c.get(name) == value.get<std::int64_t>());
  }
  CHECK(g.size() == want["nodes_after"].get<std::size_t>());
  const Graph after = io::read_fx_json(kInductor + "towers_n8_after_gbf.json.gz").graph;
  CHECK(target_counts(g) == target_counts(after));
}

TEST_CASE("postgrad_net: the post-grad fusions give Inductor's counters (batch_linear_post_grad finds no set)") {
  Graph g = io::read_fx_json(kInductor + "postgrad_net_pre.json.gz").graph;
  const auto want = expected("postgrad_net.expected.json");
  const Counters c = run_fusions(g, {"batch_linear_post_grad", "batch_aten_add", "batch_aten_mul", "batch_aten_sub",
                                     "batch_aten_div", "batch_aten_tanh", "batch_aten_sigmoid", "batch_aten_relu"});
  for (const auto& [name, value] : want["counters"].items()) {
    INFO(name);
    CHECK(c.get(name) == value.get<std::int64_t>());
  }
  CHECK(c.get("batch_linear_post_grad") == 0);
  CHECK(fusion_counters(c) == 7);
}

TEST_CASE("a generated towers graph matches the fixture's shape and fuses as it does") {
  Graph g = towers_graph(8);
  const Graph fixture = io::read_fx_json(kInductor + "towers_n8_pregrad.json.gz").graph;
  CHECK(g.size() == fixture.size());
  auto ops = [](const Graph& graph) {
    std::map<std::string, int> m;
    for (const Node* n : graph.nodes())
      if (n->op() != OpKind::placeholder) ++m[std::string(n->target_name())];
    return m;
  };
  CHECK(ops(g) == ops(fixture));
  const Counters c = run_fusions(g, {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"});
  for (const char* name : {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"}) CHECK(c.get(name) == 1);
  CHECK(g.size() == 107);
}

TEST_CASE("max_fuse_set_size splits a large group into sets of at most that size, in order") {
  // 700 towers: the 700 linears are one group; sets of 300, 300 and 100.
  Graph g = towers_graph(700);
  Counters c = run_fusions(g, {"batch_linear"});
  CHECK(c.get("batch_linear") == 3);
  std::vector<std::size_t> sizes;
  for (const Node* n : g.find_nodes(OpKind::call_function, torch::stack)) {
    // The inputs' stack of each set: its list holds one getitem of the split per linear.
    const ArgList& items = *n->args()[0].list();
    if (items[0].node()->is_call(pyop::getitem)) sizes.push_back(items.size());
  }
  std::sort(sizes.begin(), sizes.end());
  CHECK(sizes == std::vector<std::size_t>{100, 300, 300});
  // A smaller maximum makes more sets; a remainder under the minimum is left alone.
  Graph h = towers_graph(23);
  c = run_fusions(h, {"batch_linear"}, {{"max_fuse_set_size", 10}});
  CHECK(c.get("batch_linear") == 2);  // 10 + 10, and 3 < 5 stay linears
  CHECK(h.count_nodes(OpKind::call_function, F::linear) == 3);
}

TEST_CASE("fewer nodes than min_fuse_set_size are not fused, and the option lowers it") {
  Graph g = towers_graph(4);
  CHECK(fusion_counters(run_fusions(g, {"batch_linear", "batch_tanh"})) == 0);
  CHECK(g.count_nodes(OpKind::call_function, F::linear) == 4);
  Graph h = towers_graph(4);
  Counters c = run_fusions(h, {"batch_linear", "batch_tanh"}, {{"min_fuse_set_size", 2}});
  CHECK(c.get("batch_linear") == 1);
  CHECK(c.get("batch_tanh") == 1);
}

TEST_CASE("nodes of different shapes, and nodes that depend on each other, are not fused together") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 8}));
  Node* w = g.placeholder("w", f32({8, 8}));
  Node* w2 = g.placeholder("w2", f32({16, 8}));
  ArgList outs;
  // Five independent linears of one shape, three of another: one set.
  for (int i = 0; i < 5; ++i) {
    Node* l = g.call_function(F::linear, {Arg(x), Arg(w)});
    l->meta.val = f32({4, 8});
    outs.push_back(Arg(l));
  }
  for (int i = 0; i < 3; ++i) {
    Node* l = g.call_function(F::linear, {Arg(x), Arg(w2)});
    l->meta.val = f32({4, 16});
    outs.push_back(Arg(l));
  }
  // A chain of five linears: each depends on the one before.
  Node* h = x;
  for (int i = 0; i < 5; ++i) {
    h = g.call_function(F::linear, {Arg(h), Arg(w)});
    h->meta.val = f32({4, 8});
  }
  outs.push_back(Arg(h));
  g.output(Arg(outs));
  Counters c = run_fusions(g, {"batch_linear"});
  CHECK(c.get("batch_linear") == 1);
  // The chain's first linear reads x as the five do, and joins their set
  // (six of them); the rest of the chain and the [16, 8] ones stay.
  CHECK(g.count_nodes(OpKind::call_function, F::linear) == 4 + 3);
}

TEST_CASE("a linear whose result a user mutates is not fused (Inductor's guard)") {
  Graph g = towers_graph(5);
  // tower 0's linear gets an in-place user: four linears are left, under the minimum.
  Node* first = g.find_nodes(OpKind::call_function, F::linear)[0];
  {
    auto guard = g.inserting_after(first);
    Node* m = g.call_function(OpRef("torch.Tensor.mul_"), {Arg(first), Arg(2.0)});
    m->meta.val = first->meta.val;
  }
  CHECK(run_fusions(g, {"batch_linear"}).get("batch_linear") == 0);
}

TEST_CASE("an in-place relu whose input is read elsewhere is not fused, where Inductor's rewrite would lose the write") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 8}));
  ArgList outs;
  for (int i = 0; i < 5; ++i) {
    Node* t = g.call_function(torch::tanh, {Arg(x)});
    t->meta.val = f32({4, 8});
    Node* r = g.call_function(F::relu, {Arg(t)}, ArgDict{{"inplace", Arg(true)}});
    r->meta.val = f32({4, 8});
    outs.push_back(Arg(r));
    if (i < 3) outs.push_back(Arg(t));  // three of them read the relu'd input afterwards
  }
  g.output(Arg(outs));
  CHECK(run_fusions(g, {"batch_relu"}).get("batch_relu") == 0);  // 2 < 5 qualify
  // Without the other readers, in-place relus fuse, keeping inplace in the batched op.
  Graph h;
  Node* y = h.placeholder("y", f32({4, 8}));
  ArgList outs2;
  for (int i = 0; i < 5; ++i) {
    Node* t = h.call_function(torch::tanh, {Arg(y)});
    t->meta.val = f32({4, 8});
    Node* r = h.call_function(F::relu, {Arg(t)}, ArgDict{{"inplace", Arg(true)}});
    r->meta.val = f32({4, 8});
    outs2.push_back(Arg(r));
  }
  h.output(Arg(outs2));
  CHECK(run_fusions(h, {"batch_relu"}).get("batch_relu") == 1);
  Node* batched = h.find_nodes(OpKind::call_function, F::relu).at(0);
  CHECK(batched->kwargs().find("inplace")->get_if<bool>() != nullptr);
  CHECK(*batched->kwargs().find("inplace")->get_if<bool>());
}

TEST_CASE("batch_clamp keeps positional bounds in its key and its rewrite (Inductor drops them)") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 8}));
  ArgList outs;
  for (int i = 0; i < 6; ++i) {
    Node* t = g.call_function(torch::tanh, {Arg(x)});
    t->meta.val = f32({4, 8});
    // Two kinds of bounds: 0..1 for five, -1..1 for one.
    Node* c = g.call_function(torch::clamp, {Arg(t), Arg(i < 5 ? 0.0 : -1.0), Arg(1.0)});
    c->meta.val = f32({4, 8});
    Node* u = g.call_function(torch::neg, {Arg(c)});
    u->meta.val = f32({4, 8});
    outs.push_back(Arg(u));
  }
  g.output(Arg(outs));
  CHECK(run_fusions(g, {"batch_clamp"}).get("batch_clamp") == 1);
  const auto clamps = g.find_nodes(OpKind::call_function, torch::clamp);
  REQUIRE(clamps.size() == 2);  // the batched one and the odd one out
  int batched = 0;
  for (Node* c : clamps) {
    if (!c->args()[0].node()->is_call(torch::stack)) continue;
    ++batched;
    REQUIRE(c->args().size() == 3);
    CHECK(*c->args()[1].get_if<double>() == 0.0);
    CHECK(*c->args()[2].get_if<double>() == 1.0);
  }
  CHECK(batched == 1);
}

TEST_CASE("the rewritten graph of each pre-grad fusion has the shapes of the original in its metas") {
  Graph g = towers_graph(6);
  run_fusions(g, {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"});
  for (const Node* n : g.nodes()) {
    if (n->is_call(torch::stack)) {
      // One more dimension than what it stacks.
      const TensorMeta* t = n->meta.val.tensor();
      REQUIRE(t);
      CHECK(t->rank() == n->args()[0].list()->front().node()->meta.val.tensor()->rank() + 1);
    }
    if (n->is_call(torch::baddbmm)) {
      const TensorMeta* t = n->meta.val.tensor();
      REQUIRE(t);
      CHECK(t->shape == std::vector<Dim>{std::int64_t{6}, std::int64_t{16}, std::int64_t{64}});
    }
    if (n->is_call(torch::unbind)) {
      REQUIRE(n->meta.val.list());
      CHECK(n->meta.val.list()->size() == 6);
    }
  }
  // The output still takes a cat of [16, 64] values.
  const Node* cat = g.find_nodes(OpKind::call_function, torch::cat).at(0);
  for (const Arg& a : *cat->args()[0].list()) CHECK(a.node()->meta.val.tensor()->shape == std::vector<Dim>{std::int64_t{16}, std::int64_t{64}});
}

TEST_CASE("batch_linear_lhs fuses linears of one input into one mm and a split") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 8}));
  ArgList outs;
  for (int i = 0; i < 5; ++i) {
    Node* w = g.placeholder("w" + std::to_string(i), f32({3 + i, 8}));
    Node* l = g.call_function(F::linear, {Arg(x), Arg(w)});
    l->meta.val = f32({4, 3 + i});
    outs.push_back(Arg(l));
  }
  g.output(Arg(outs));
  CHECK(run_fusions(g, {"batch_linear_lhs"}).get("batch_linear_lhs") == 1);
  const Node* split = g.find_nodes(OpKind::call_function, torch::split).at(0);
  CHECK(format_arg(split->args()[1]) == "[3, 4, 5, 6, 7]");
  CHECK(split->args()[0].node()->is_call(torch::mm));
  CHECK(g.count_nodes(OpKind::call_function, F::linear) == 0);
}

TEST_CASE("post-grad batch_linear fuses mm's of one shape into bmm + select, with bias adds") {
  Graph g;
  ArgList outs;
  for (int i = 0; i < 5; ++i) {
    Node* a = g.placeholder("a" + std::to_string(i), f32({4, 8}));
    Node* b = g.placeholder("b" + std::to_string(i), f32({8, 6}));
    Node* c = g.placeholder("c" + std::to_string(i), f32({6}));
    Node* mm = g.call_function(aten::addmm, {Arg(c), Arg(a), Arg(b)});
    mm->meta.val = f32({4, 6});
    outs.push_back(Arg(mm));
  }
  g.output(Arg(outs));
  CHECK(run_fusions(g, {"batch_linear_post_grad"}).get("batch_linear_post_grad") == 1);
  CHECK(g.count_nodes(OpKind::call_function, aten::packets::bmm) == 1);
  CHECK(g.count_nodes(OpKind::call_function, aten::packets::select) == 5);
  CHECK(g.count_nodes(OpKind::call_function, aten::packets::add) == 5);
  // With shape_broadcast_batch_linear, the bias is broadcast first.
  Graph h;
  ArgList outs2;
  for (int i = 0; i < 5; ++i) {
    Node* a = h.placeholder("a" + std::to_string(i), f32({4, 8}));
    Node* b = h.placeholder("b" + std::to_string(i), f32({8, 6}));
    Node* c = h.placeholder("c" + std::to_string(i), f32({6}));
    Node* mm = h.call_function(aten::addmm, {Arg(c), Arg(a), Arg(b)});
    mm->meta.val = f32({4, 6});
    outs2.push_back(Arg(mm));
  }
  h.output(Arg(outs2));
  run_fusions(h, {"batch_linear_post_grad"}, {{"shape_broadcast_batch_linear", true}});
  CHECK(h.count_nodes(OpKind::call_function, aten::broadcast_to) == 5);
}

TEST_CASE("batch_aten_sub keeps alpha (Inductor drops it), and a div with a rounding mode (another overload) is not batched") {
  Graph g;
  ArgList outs;
  for (int i = 0; i < 5; ++i) {
    Node* a = g.placeholder("a" + std::to_string(i), f32({4, 8}));
    Node* b = g.placeholder("b" + std::to_string(i), f32({4, 8}));
    Node* n = g.call_function(aten::sub_Tensor, {Arg(a), Arg(b)}, ArgDict{{"alpha", Arg(2)}});
    n->meta.val = f32({4, 8});
    outs.push_back(Arg(n));
    Node* d = g.call_function(OpRef("aten.div.Tensor_mode"), {Arg(a), Arg(b)}, ArgDict{{"rounding_mode", Arg("floor")}});
    d->meta.val = f32({4, 8});
    outs.push_back(Arg(d));
  }
  g.output(Arg(outs));
  const Counters c = run_fusions(g, {"batch_aten_sub", "batch_aten_div"});
  CHECK(c.get("batch_aten_sub") == 1);
  CHECK(c.get("batch_aten_div") == 0);
  const Node* batched = g.find_nodes(OpKind::call_function, aten::sub_Tensor).at(0);
  REQUIRE(batched->kwargs().find("alpha") != nullptr);
  CHECK(*batched->kwargs().find("alpha")->get_if<std::int64_t>() == 2);
}

TEST_CASE("group/batch fusions are passes of kiln-opt's registry, with their options checked") {
  PassRegistry r = default_pass_registry();
  for (const char* name : {"batch_linear", "batch_linear_lhs", "batch_layernorm", "batch_tanh", "batch_sigmoid", "batch_relu",
                           "batch_detach", "batch_nan_to_num", "batch_clamp", "batch_dropout", "batch_linear_post_grad", "group_linear",
                           "batch_aten_add", "batch_aten_sub", "batch_aten_mul", "batch_aten_div", "batch_aten_tanh",
                           "batch_aten_sigmoid", "batch_aten_relu"})
    CHECK_MESSAGE(r.find(name) != nullptr, name);
  PassManager pm(r);
  Graph g = towers_graph(8);
  pm.set_options(nlohmann::json{{"batch_linear", {{"min_fuse_set_size", 9}}}});
  pm.run(g, {"batch_linear", "batch_tanh"});
  CHECK(pm.counters().get("batch_linear") == 0);  // 8 < 9
  CHECK(pm.counters().get("batch_tanh") == 1);
  CHECK(kiln::testing::message_of<Error>([] { gbf::SearchOptions::from_json({{"max_fuse_set_size", 0}}, "batch_linear"); })
            .find("'max_fuse_set_size' must be an integer of at least 1") != std::string::npos);
  CHECK(kiln::testing::message_of<Error>([] { gbf::SearchOptions::from_json({{"min_size", 2}}, "batch_linear"); })
            .find("unknown option 'min_size'") != std::string::npos);
}

TEST_CASE("towers of every size give Inductor 2.11's counters and nodes, target for target (sets capped at 300, batched ops batched again)") {
  // tests/data/inductor_towers_gbf.json: Inductor's own results on Dynamo
  // graphs of the towers model (bench/inductor/towers_gbf.py on PyTorch 2.11).
  std::ifstream in(std::string(KILN_TEST_DATA_DIR) + "/inductor_towers_gbf.json");
  const auto data = nlohmann::json::parse(in);
  REQUIRE(data["sizes"].size() >= 5);
  for (const auto& [size, want] : data["sizes"].items()) {
    INFO("towers: " << size);
    Graph g = towers_graph(std::stoll(size));
    CHECK(g.size() == want["nodes_before"].get<std::size_t>());
    const Counters c = run_fusions(g, {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"});
    for (const auto& [name, value] : want["counters"].items()) {
      INFO(name);
      CHECK(c.get(name) == value.get<std::int64_t>());
    }
    CHECK(g.size() == want["nodes_after"].get<std::size_t>());
    std::map<std::string, int> targets;
    for (const Node* n : g.nodes())
      if (n->op() != OpKind::placeholder) ++targets[std::string(n->target_name())];
    CHECK(targets == want["targets"].get<std::map<std::string, int>>());
  }
}

TEST_CASE("group_linear groups mm's of any even shapes into one kiln.grouped_mm, addmm's apart, odd or large sizes left") {
  struct Builder {
    Graph g;
    ArgList outs;
    void mm(std::int64_t m, std::int64_t k, std::int64_t n, bool bias) {
      const std::string i = std::to_string(outs.size());
      Node* a = g.placeholder("a" + i, f32({m, k}));
      Node* b = g.placeholder("b" + i, f32({k, n}));
      Node* out = bias ? g.call_function(aten::addmm, {Arg(g.placeholder("c" + i, f32({n}))), Arg(a), Arg(b)})
                       : g.call_function(aten::mm, {Arg(a), Arg(b)});
      out->meta.val = f32({m, n});
      outs.push_back(Arg(out));
    }
  };
  Builder t;
  for (std::int64_t s : {2, 4, 6, 8, 10}) t.mm(s, 2 * s, 4, false);  // five shapes, one set
  t.mm(3, 4, 4, false);                                                 // odd: not grouped
  t.mm(4096 + 2, 4, 4, false);                                          // over the maximum
  for (int i = 0; i < 5; ++i) t.mm(4, 4, 8, true);                      // five addmm's: a set of their own
  t.g.output(Arg(t.outs));
  CHECK(run_fusions(t.g, {"group_linear"}).get("group_linear") == 2);
  const auto fused = t.g.find_nodes(OpKind::call_function, kops::grouped_mm);
  REQUIRE(fused.size() == 2);
  int without_biases = 0;
  for (const Node* f : fused) {
    CHECK(f->args()[0].list()->size() == 5);
    CHECK(f->meta.val.list()->size() == 5);
    without_biases += f->args()[2].is_none();
  }
  CHECK(without_biases == 1);
  CHECK(t.g.count_nodes(OpKind::call_function, aten::mm) == 2);  // the odd one and the large one
  // A lower maximum leaves the larger shapes out: fewer than five fit under 8.
  Builder u;
  for (std::int64_t s : {2, 4, 6, 8, 10}) u.mm(s, 2 * s, 4, false);
  u.g.output(Arg(u.outs));
  CHECK(run_fusions(u.g, {"group_linear"}, {{"max_fuse_tensor_size_group_linear", 8}}).get("group_linear") == 0);
}

TEST_CASE("cost model: the estimate counts one step per node against the batched op, its stacks and their bytes") {
  // 8 towers of [16, 64] float32 whose parameters are placeholders: batch_linear
  // stacks inputs, weights and biases (three copies), batch_tanh its inputs only.
  Graph g = towers_graph(8);
  std::vector<Node*> linears = g.find_nodes(OpKind::call_function, F::linear);
  REQUIRE(linears.size() == 8);
  const gbf::CostModel model{2.0, 10.0};
  const gbf::CostEstimate lin = gbf::estimate_fusion(linears, 0, model);
  CHECK(lin.steps_fused == 4);  // stack x3 + baddbmm
  CHECK(lin.stacked_bytes == 8 * (16 * 64 + 64 * 64 + 64) * 4);
  CHECK(lin.unfused_us == doctest::Approx(16.0));
  CHECK(lin.fused_us == doctest::Approx(4 * 2.0 + lin.stacked_bytes / 1e4));
  CHECK_FALSE(lin.pays());  // 8 steps saved do not pay for 170 KB copied at 10 GB/s
  std::vector<Node*> tanhs = g.find_nodes(OpKind::call_function, torch::tanh);
  const gbf::CostEstimate t = gbf::estimate_fusion(tanhs, 0, model);
  CHECK(t.steps_fused == 2);
  CHECK(t.stacked_bytes == 8 * 16 * 64 * 4);
  CHECK(t.pays());  // 16 us against 4 us + 3.3 us
  // Inputs every node shares are not stacked, and get_attr constants are
  // stacked once at compile time, not per run.
  Graph h;
  Node* x = h.placeholder("x", f32({4, 8}));
  std::vector<Node*> shared;
  for (int i = 0; i < 6; ++i) {
    Node* w = h.get_attr("w" + std::to_string(i), f32({8, 8}));
    shared.push_back(h.call_function(F::linear, {Arg(x), Arg(w)}));
  }
  h.output(ArgList(shared.begin(), shared.end()));
  const gbf::CostEstimate s = gbf::estimate_fusion(shared, 0, model);
  CHECK(s.stacked_bytes == 0);
  CHECK(s.steps_fused == 1);
}

TEST_CASE("cost model option: off, Inductor's sets, and on, sets that do not pay are skipped and counted, the rest fused") {
  const std::vector<std::string> order{"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"};
  Graph plain = towers_graph(8);
  const Counters inductor = run_fusions(plain, order);
  CHECK(inductor.get("batch_tanh") == 1);
  CHECK(inductor.get("batch_linear_skipped_by_cost_model") == 0);
  // A step that costs more than any copy: the model fuses every set Inductor does.
  Graph cheap_copies = towers_graph(8);
  const Counters all = run_fusions(cheap_copies, order, {{"cost_model", true}, {"cost_model_step_us", 1000.0}});
  for (const auto& name : order) CHECK(all.get(name) == inductor.get(name));
  CHECK(cheap_copies.size() == plain.size());
  // Slow copies: the linears (three stacks) are skipped, the pointwise ops still pay.
  Graph g = towers_graph(8);
  const std::size_t before = g.size();
  const Counters some = run_fusions(g, order, {{"cost_model", true}, {"cost_model_step_us", 2.0}, {"cost_model_copy_gb_per_s", 10.0}});
  CHECK(some.get("batch_linear") == 0);
  CHECK(some.get("batch_linear_skipped_by_cost_model") == 1);
  CHECK(g.find_nodes(OpKind::call_function, F::linear).size() == 8);
  CHECK(some.get("batch_tanh") == 1);
  CHECK(some.get("batch_tanh_skipped_by_cost_model") == 0);
  CHECK(g.size() != before);
  // Everything too slow to copy: nothing changes.
  Graph none = towers_graph(8);
  const Counters skipped = run_fusions(none, order, {{"cost_model", true}, {"cost_model_step_us", 0.01}});
  std::int64_t fused = 0;
  for (const auto& name : order) {
    fused += skipped.get(name);
    CHECK(skipped.get(name + "_skipped_by_cost_model") == 1);
  }
  CHECK(fused == 0);
  CHECK(none.size() == before);
}

TEST_CASE("cost model options are checked") {
  CHECK(kiln::testing::message_of<Error>([] { gbf::SearchOptions::from_json({{"cost_model_step_us", 0}}, "batch_tanh"); })
            .find("'cost_model_step_us' must be a positive number") != std::string::npos);
  CHECK(kiln::testing::message_of<Error>([] { gbf::SearchOptions::from_json({{"cost_model", 1}}, "batch_tanh"); })
            .find("'cost_model' must be true or false") != std::string::npos);
  const gbf::SearchOptions o = gbf::SearchOptions::from_json({{"cost_model", true}, {"cost_model_copy_gb_per_s", 7.5}}, "x");
  CHECK(o.cost_model);
  CHECK(o.costs.copy_gb_per_s == 7.5);
  CHECK(o.costs.step_us == gbf::CostModel{}.step_us);
}
