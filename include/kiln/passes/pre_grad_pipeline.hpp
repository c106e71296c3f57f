#pragma once
// The `pre_grad` pipeline: Inductor 2.11's pre_grad_passes on a torch-level
// graph, in its order, as a list of kiln's passes that a PassManager expands,
// so each step is linted, counted, numerically checked and switched off by its
// own name (PassManager::disable("fuse_conv_bn")):
//   1. fuse_fx: sink_cat_after_pointwise; the permute fusions when
//      "permute_fusion" is set (Inductor runs them off CPU only); remove_identity
//      and fuse_conv_bn when "freezing" is set (with the options object
//      "fuse_conv_bn" gives: {"threads": 2});
//   2. numpy_compat_normalization;
//   3. normalization_pass, if pre_grad_fusion_options names it;
//   4. the group/batch fusions pre_grad_fusion_options names, in its order;
//   5. its other passes in its order, each `counter` times (default 1);
//   6. efficient_conv_bn_eval_pass when "efficient_conv_bn_eval" is set (Inductor's
//      config.efficient_conv_bn_eval_fx_passes), then apply_gumbel_max_trick_pass;
//   7. stable_topological_sort.
// Inductor's defaults: pre_grad_fusion_options empty, freezing, permute_fusion
// and efficient_conv_bn_eval off. With "predispatch" set it is Inductor's
// _run_pre_dispatch_passes instead, for aten graphs of torch.export's
// pre-dispatch IR: its default list (normalization_aten_pass, remove_noop,
// relu_nan_to_num, the chunk/split/cat fusions, the batch fusions the options
// name, merge_concats, remove_reshape, fuse_parallel_linear, remove_split_ops,
// stack_to_unsqueeze) less "remove_passes", then the optional ones
// "add_passes" names (fuse_split_getitem_squeeze_cat), then remove_noop again
// (Inductor's normalize_node_kwargs_pass and its Triton passes have no
// counterpart). pre_grad_fusion_options is an object
// ({"split_cat_pass": {"counter": 2}}: its passes run in Inductor's documented
// order) or a list of one-key objects ([{"batch_linear": {}}, ...]: that order).
//   kiln-opt g.json --passes pre_grad --pass-options '{"pre_grad": {"freezing": true,
//       "pre_grad_fusion_options": {"normalization_pass": {}, "split_cat_pass": {}}}}'
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/error.hpp"
#include "kiln/passes/pass_registry.hpp"

namespace kiln {

namespace pre_grad_detail {

// Inductor's group/batch fusions on torch-level graphs (PRE_GRAD_FUSIONS).
inline const std::vector<std::string>& batch_fusions() {
  static const std::vector<std::string> names{"batch_linear",  "batch_linear_lhs", "batch_layernorm",
                                              "batch_tanh",    "batch_relu",       "batch_sigmoid",
                                              "batch_detach",  "batch_nan_to_num", "batch_clamp",
                                              "batch_dropout"};
  return names;
}
// The order an options object's passes run in: normalization, the fusions,
// then the split/cat passes as Inductor's split_cat.py registers them.
inline const std::vector<std::string>& documented_order() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"normalization_pass"};
    n.insert(n.end(), batch_fusions().begin(), batch_fusions().end());
    for (const char* p :
         {"remove_split_with_size_one_pass", "merge_getitem_cat_pass", "merge_stack_tahn_unbind_pass",
          "merge_splits_pass", "mutate_cat_pass", "split_cat_pass", "unbind_stack_pass", "split_cat_to_slices_pass",
          "unbind_cat_to_view_pass", "split_stack_to_cats_pass", "unbind_stack_to_slices_pass",
          "move_reshape_out_of_split_stack_pass", "einsum_to_pointwise_pass"})
      n.emplace_back(p);
    return n;
  }();
  return names;
}

// pre_grad_fusion_options as (name, options) in the order they run.
inline std::vector<std::pair<std::string, nlohmann::json>> fusion_options(const nlohmann::json& j) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  auto add = [&](const std::string& name, const nlohmann::json& value) {
    if (!value.is_object())
      throw Error("pre_grad: pre_grad_fusion_options['" + name + "'] must be a JSON object, not " + value.dump());
    for (const auto& [n, v] : out)
      if (n == name) throw Error("pre_grad: pre_grad_fusion_options names '" + name + "' twice");
    out.emplace_back(name, value);
  };
  if (j.is_null()) return out;
  if (j.is_array()) {
    for (const auto& item : j) {
      if (!item.is_object() || item.size() != 1)
        throw Error("pre_grad: each entry of a pre_grad_fusion_options list must be an object of one key, not " +
                    item.dump());
      add(item.begin().key(), item.begin().value());
    }
    return out;
  }
  if (!j.is_object()) throw Error("pre_grad: pre_grad_fusion_options must be an object or a list, not " + j.dump());
  for (const std::string& name : documented_order())
    if (j.contains(name)) add(name, j.at(name));
  for (const auto& [name, value] : j.items())  // names Inductor does not document, after
    if (std::find(documented_order().begin(), documented_order().end(), name) == documented_order().end())
      add(name, value);
  return out;
}

inline bool flag(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return false;
  if (!j.at(key).is_boolean()) throw Error(std::string("pre_grad: option '") + key + "' must be true or false");
  return j.at(key).get<bool>();
}

inline std::vector<std::string> names(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  const nlohmann::json& v = j.at(key);
  if (!v.is_array()) throw Error(std::string("pre_grad: option '") + key + "' must be a list of pass names");
  for (const auto& n : v) {
    if (!n.is_string()) throw Error(std::string("pre_grad: option '") + key + "' must be a list of pass names");
    out.push_back(n.get<std::string>());
  }
  return out;
}

// A fusion's options as its pass takes them: `counter` belongs to the pipeline.
inline nlohmann::json pass_options(nlohmann::json o) {
  o.erase("counter");
  return o;
}

// Inductor's _run_pre_dispatch_passes.
inline std::vector<PipelineStep> predispatch_steps(const nlohmann::json& options,
                                                   const std::vector<std::pair<std::string, nlohmann::json>>& fusions) {
  const std::vector<std::string> removed = names(options, "remove_passes");
  const std::vector<std::string> added = names(options, "add_passes");
  auto listed = [](const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  std::vector<PipelineStep> steps;
  auto step = [&](const std::string& pass) {
    if (!listed(removed, pass)) steps.push_back({pass, nlohmann::json::object()});
  };
  for (const char* p : {"normalization_aten_pass", "remove_noop", "relu_nan_to_num", "fuse_chunk_reshape_concat_pass"})
    step(p);
  for (const auto& [name, o] : fusions) {  // group_batch_fusion_passes: the fusions the options name
    if (!listed(removed, name)) steps.push_back({name, pass_options(o)});
  }
  for (const char* p : {"fuse_chunk_squeeze_cat_pass", "merge_concats_pass", "fuse_split_linear_add_pass",
                        "remove_reshape_pass", "fuse_parallel_linear_pass", "remove_split_ops_pass",
                        "stack_to_unsqueeze_pass", "fuse_chunk_reshape_unsqueeze_concat_pass"})
    step(p);
  for (const char* p : {"fuse_split_getitem_squeeze_cat"})
    if (listed(added, p)) steps.push_back({p, nlohmann::json::object()});
  if (!listed(removed, "remove_noop")) steps.push_back({"remove_noop", nlohmann::json::object()});
  return steps;
}

}  // namespace pre_grad_detail

// The steps of the pipeline for `options` (see the top of this file).
inline std::vector<PipelineStep> pre_grad_steps(const nlohmann::json& options) {
  namespace d = pre_grad_detail;
  if (!options.is_object()) throw Error("pre_grad: options must be a JSON object");
  if (d::flag(options, "predispatch")) {
    auto steps = d::predispatch_steps(options, d::fusion_options(options.contains("pre_grad_fusion_options")
                                                                     ? options.at("pre_grad_fusion_options")
                                                                     : nlohmann::json()));
    steps.push_back({"stable_topological_sort", nlohmann::json::object()});
    return steps;
  }
  std::vector<PipelineStep> steps;
  auto step = [&](std::string pass, nlohmann::json o = nlohmann::json::object()) {
    steps.push_back({std::move(pass), std::move(o)});
  };
  step("sink_cat_after_pointwise");
  if (d::flag(options, "permute_fusion"))
    for (const char* p : {"linear_permute_fusion", "permute_linear_fusion", "permute_matmul_fusion"}) step(p);
  if (d::flag(options, "freezing")) {
    step("remove_identity");
    nlohmann::json fold = options.contains("fuse_conv_bn") ? options.at("fuse_conv_bn") : nlohmann::json::object();
    if (!fold.is_object()) throw Error("pre_grad: option 'fuse_conv_bn' must be a JSON object, not " + fold.dump());
    step("fuse_conv_bn", std::move(fold));
  }
  step("numpy_compat_normalization");
  const auto fusions = d::fusion_options(options.contains("pre_grad_fusion_options")
                                             ? options.at("pre_grad_fusion_options")
                                             : nlohmann::json());
  auto is_batch_fusion = [&](const std::string& name) {
    return std::find(d::batch_fusions().begin(), d::batch_fusions().end(), name) != d::batch_fusions().end();
  };
  for (const auto& [name, o] : fusions)
    if (name == "normalization_pass") step(name, d::pass_options(o));
  for (const auto& [name, o] : fusions)
    if (is_batch_fusion(name)) step(name, d::pass_options(o));
  for (const auto& [name, o] : fusions) {
    if (name == "normalization_pass" || is_batch_fusion(name)) continue;
    std::int64_t counter = 1;
    if (o.contains("counter")) {
      if (!o.at("counter").is_number_integer() || o.at("counter").get<std::int64_t>() < 1)
        throw Error("pre_grad: '" + name + "': counter must be an integer of at least 1, not " + o.at("counter").dump());
      counter = o.at("counter").get<std::int64_t>();
    }
    for (std::int64_t i = 0; i < counter; ++i) step(name, d::pass_options(o));
  }
  if (d::flag(options, "efficient_conv_bn_eval")) step("efficient_conv_bn_eval_pass");
  step("apply_gumbel_max_trick_pass");
  step("stable_topological_sort");
  return steps;
}

inline void register_pre_grad_pipeline(PassRegistry& registry) {
  registry.add_pipeline({"pre_grad",
                         "Inductor's pre_grad_passes in its order (options: pre_grad_fusion_options, freezing, "
                         "permute_fusion, efficient_conv_bn_eval, fuse_conv_bn (its options); predispatch, add_passes, "
                         "remove_passes for Inductor's pre-dispatch list)",
                         pre_grad_steps,
                         {"pre_grad_fusion_options", "freezing", "permute_fusion", "efficient_conv_bn_eval", "fuse_conv_bn",
                          "predispatch", "add_passes", "remove_passes"}});
}

}  // namespace kiln
