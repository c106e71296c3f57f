// The pre_grad pipeline (kiln/passes/pre_grad_pipeline.hpp): Inductor 2.11's
// pre_grad_passes order, its options, and PassManager's pipelines.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/pre_grad_pipeline.hpp"
#include "kiln/executor/numeric_check.hpp"
#include "test_support.hpp"

using namespace kiln;

namespace {
std::vector<std::string> names(const std::vector<PipelineStep>& steps) {
  std::vector<std::string> n;
  for (const auto& s : steps) n.push_back(s.pass);
  return n;
}
using Names = std::vector<std::string>;
const std::string kInductor = std::string(KILN_FIXTURES_DIR) + "/inductor/";
}  // namespace

TEST_CASE("pre_grad with Inductor's defaults runs fuse_fx's sink, the numpy normalization, the gumbel trick and the sort") {
  CHECK(names(pre_grad_steps(nlohmann::json::object())) ==
        Names{"sink_cat_after_pointwise", "numpy_compat_normalization", "apply_gumbel_max_trick_pass",
              "stable_topological_sort"});
}

TEST_CASE("pre_grad: freezing, permute fusion and efficient_conv_bn_eval add their passes where Inductor runs them") {
  const auto steps = pre_grad_steps({{"freezing", true}, {"permute_fusion", true}, {"efficient_conv_bn_eval", true}});
  CHECK(names(steps) == Names{"sink_cat_after_pointwise", "linear_permute_fusion", "permute_linear_fusion",
                              "permute_matmul_fusion", "remove_identity", "fuse_conv_bn",
                              "numpy_compat_normalization", "efficient_conv_bn_eval_pass", "apply_gumbel_max_trick_pass",
                              "stable_topological_sort"});
}

TEST_CASE("pre_grad: an options object runs normalization first, the batch fusions next, then the split/cat passes in Inductor's order") {
  const nlohmann::json fusion_options = {{"split_cat_pass", {{"counter", 2}}},
                                         {"merge_splits_pass", nlohmann::json::object()},
                                         {"batch_tanh", {{"min_fuse_set_size", 3}}},
                                         {"batch_linear", nlohmann::json::object()},
                                         {"normalization_pass", nlohmann::json::object()}};
  const auto steps = pre_grad_steps({{"pre_grad_fusion_options", fusion_options}});
  CHECK(names(steps) == Names{"sink_cat_after_pointwise", "numpy_compat_normalization", "normalization_pass",
                              "batch_linear", "batch_tanh", "merge_splits_pass", "split_cat_pass", "split_cat_pass",
                              "apply_gumbel_max_trick_pass", "stable_topological_sort"});
  // The pass gets its options; `counter` is the pipeline's.
  CHECK(steps[4].options == nlohmann::json{{"min_fuse_set_size", 3}});
  CHECK(steps[6].options == nlohmann::json::object());
}

TEST_CASE("pre_grad: a list of one-key objects keeps its own order") {
  const nlohmann::json list = nlohmann::json::array(
      {{{"split_cat_pass", nlohmann::json::object()}}, {{"merge_splits_pass", {{"counter", 3}}}}});
  CHECK(names(pre_grad_steps({{"pre_grad_fusion_options", list}})) ==
        Names{"sink_cat_after_pointwise", "numpy_compat_normalization", "split_cat_pass", "merge_splits_pass",
              "merge_splits_pass", "merge_splits_pass", "apply_gumbel_max_trick_pass", "stable_topological_sort"});
}

TEST_CASE("pre_grad: bad options are refused naming the option") {
  using kiln::testing::message_of;
  CHECK(message_of<Error>([] { pre_grad_steps({{"freezing", 1}}); }).find("'freezing' must be true or false") !=
        std::string::npos);
  CHECK(message_of<Error>([] {
          pre_grad_steps({{"pre_grad_fusion_options", {{"split_cat_pass", {{"counter", 0}}}}}});
        }).find("'split_cat_pass': counter must be an integer of at least 1") != std::string::npos);
  CHECK(message_of<Error>([] {
          pre_grad_steps({{"pre_grad_fusion_options", nlohmann::json::array({1})}});
        }).find("must be an object of one key") != std::string::npos);
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  CHECK(message_of<Error>([&] { pm.set_options({{"pre_grad", {{"freezin", true}}}}); })
            .find("pass options for 'pre_grad': unknown key 'freezin'") != std::string::npos);
  // A pass the options name that kiln does not have: refused before anything runs.
  pm.set_options({{"pre_grad", {{"pre_grad_fusion_options", {{"no_such_pass", nlohmann::json::object()}}}}}});
  Graph g;
  Node* x = g.placeholder("x");
  g.output(ArgList{Arg(x)});
  CHECK(message_of<Error>([&] { pm.run(g, {"pre_grad"}); }).find("unknown pass 'no_such_pass'") != std::string::npos);
  // A step's options are checked against its pass's keys.
  pm.set_options({{"pre_grad", {{"pre_grad_fusion_options", {{"batch_tanh", {{"min_size", 2}}}}}}}});
  CHECK(message_of<Error>([&] { pm.run(g, {"pre_grad"}); }).find("'pre_grad/batch_tanh': unknown key 'min_size'") !=
        std::string::npos);
}

TEST_CASE("pre_grad on splitcat_b with the fixture's pipeline gives Inductor's counters and node count, and each step is a pass of its own") {
  std::ifstream in(kInductor + "splitcat_b.expected.json");
  const nlohmann::json want = nlohmann::json::parse(in);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& name : want["passes"]) list.push_back({{name.get<std::string>(), nlohmann::json::object()}});
  Graph g = io::read_fx_json(kInductor + "splitcat_b_pregrad.json.gz").graph;
  REQUIRE(g.size() == want["nodes_before"].get<std::size_t>());
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.set_options({{"pre_grad", {{"pre_grad_fusion_options", list}}}});
  // Every step is numerically checked against the graph as read (its inputs only: no weights).
  const runtime::NumericCheck check(g, {});
  std::vector<std::string> ran;
  pm.set_after_each_pass([&](const Graph& now, const std::string& pass) {
    ran.push_back(pass);
    const runtime::NumericReport r = check.compare(now);
    INFO(pass, ": ", r.summary());
    CHECK(r.ok);
  });
  pm.run(g, {"pre_grad"});
  for (const auto& [name, value] : want["counters"].items()) {
    INFO(name);
    CHECK(pm.counters().get(name) == value.get<std::int64_t>());
  }
  CHECK(g.size() == want["nodes_after"].get<std::size_t>());
  lint(g);
  CHECK(ran.size() == want["passes"].size() + 4);
  CHECK(ran.front() == "sink_cat_after_pointwise");
  CHECK(ran.back() == "stable_topological_sort");
  // Switched off by name, a step does not run.
  Graph h = io::read_fx_json(kInductor + "splitcat_b_pregrad.json.gz").graph;
  PassManager off(registry);
  off.set_options({{"pre_grad", {{"pre_grad_fusion_options", list}}}});
  off.disable("split_cat_pass");
  std::vector<std::string> ran_off;
  off.set_after_each_pass([&](const Graph&, const std::string& pass) { ran_off.push_back(pass); });
  off.run(h, {"pre_grad"});
  CHECK(std::find(ran_off.begin(), ran_off.end(), "split_cat_pass") == ran_off.end());
  CHECK(ran_off.size() + 1 == ran.size());
  lint(h);
}

TEST_CASE("pre_grad with predispatch is Inductor's pre-dispatch list, less remove_passes, plus add_passes") {
  const auto steps = pre_grad_steps({{"predispatch", true},
                                     {"pre_grad_fusion_options", {{"batch_aten_add", {{"counter", 2}}}}},
                                     {"remove_passes", {"relu_nan_to_num"}},
                                     {"add_passes", {"fuse_split_getitem_squeeze_cat"}}});
  CHECK(names(steps) == Names{"normalization_aten_pass", "remove_noop", "fuse_chunk_reshape_concat_pass",
                              "batch_aten_add", "fuse_chunk_squeeze_cat_pass", "merge_concats_pass",
                              "fuse_split_linear_add_pass", "remove_reshape_pass", "fuse_parallel_linear_pass",
                              "remove_split_ops_pass", "stack_to_unsqueeze_pass",
                              "fuse_chunk_reshape_unsqueeze_concat_pass", "fuse_split_getitem_squeeze_cat",
                              "remove_noop", "stable_topological_sort"});
  CHECK(steps[3].options == nlohmann::json::object());
  CHECK(kiln::testing::message_of<Error>([] { pre_grad_steps({{"predispatch", true}, {"remove_passes", "x"}}); })
            .find("'remove_passes' must be a list of pass names") != std::string::npos);
}

TEST_CASE("pre_grad: every pass either list names is registered, and the whole list runs on a graph") {
  const PassRegistry registry = default_pass_registry();
  nlohmann::json all = nlohmann::json::object();
  for (const auto& name : pre_grad_detail::documented_order()) all[name] = nlohmann::json::object();
  for (const nlohmann::json& options :
       {nlohmann::json{{"freezing", true}, {"permute_fusion", true}, {"efficient_conv_bn_eval", true},
                       {"pre_grad_fusion_options", all}},
        nlohmann::json{{"predispatch", true}, {"add_passes", {"fuse_split_getitem_squeeze_cat"}}}}) {
    for (const auto& s : pre_grad_steps(options)) {
      INFO(s.pass);
      CHECK(registry.find(s.pass) != nullptr);
    }
    Graph g = io::read_fx_json(kInductor + "splitcat_b_pregrad.json.gz").graph;
    PassManager pm(registry);
    pm.set_options({{"pre_grad", options}});
    pm.run(g, {"pre_grad"});
    lint(g);
  }
}
