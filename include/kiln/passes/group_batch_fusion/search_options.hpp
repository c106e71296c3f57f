#pragma once
// The search options of group and batch fusion, with Inductor's defaults
// (group_batch_fusion.py's graph_search_options), settable per fusion through
// its pass options: {"min_fuse_set_size": 3, ...}.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/error.hpp"
#include "kiln/passes/group_batch_fusion/cost_model.hpp"

namespace kiln::gbf {

struct SearchOptions {
  std::int64_t min_fuse_set_size = 5;    // smaller sets are not fused
  std::int64_t max_fuse_set_size = 300;  // larger ones are fused in several sets
  std::int64_t max_fuse_search_depth = 5;  // how far up from each node candidates are looked for
  std::int64_t max_fuse_tensor_size_group_linear = 4096;  // group_linear: the largest dimension
  bool fuse_nodes_with_same_parent = false;  // pointwise: the input's target joins the key
  bool shape_broadcast_batch_linear = false;  // batch_linear_post_grad: broadcast the bias first
  bool fuse_nodes_with_same_users = false;    // linears: the users' targets join the key
  // kiln's own (not Inductor's): fuse a set only where cost_model.hpp says it
  // pays; the sets it skips count under "<fusion>_skipped_by_cost_model".
  bool cost_model = false;
  CostModel costs;  // options cost_model_step_us, cost_model_copy_gb_per_s

  static const std::vector<std::string>& keys() {
    static const std::vector<std::string> k{"min_fuse_set_size",          "max_fuse_set_size",
                                            "max_fuse_search_depth",      "max_fuse_tensor_size_group_linear",
                                            "fuse_nodes_with_same_parent", "shape_broadcast_batch_linear",
                                            "fuse_nodes_with_same_users",
                                            "cost_model",
                                            "cost_model_step_us",
                                            "cost_model_copy_gb_per_s"};
    return k;
  }

  // The defaults with what `j` sets; `who` names the pass in errors.
  static SearchOptions from_json(const nlohmann::json& j, const std::string& who) {
    SearchOptions o;
    if (j.is_null()) return o;
    if (!j.is_object()) throw Error(who + ": options must be a JSON object");
    auto integer = [&](const char* key, std::int64_t& out, std::int64_t least) {
      if (!j.contains(key)) return;
      const auto& v = j.at(key);
      if (!v.is_number_integer() || v.get<std::int64_t>() < least)
        throw Error(who + ": option '" + key + "' must be an integer of at least " + std::to_string(least) +
                    ", not " + v.dump());
      out = v.get<std::int64_t>();
    };
    auto boolean = [&](const char* key, bool& out) {
      if (!j.contains(key)) return;
      const auto& v = j.at(key);
      if (!v.is_boolean()) throw Error(who + ": option '" + std::string(key) + "' must be true or false, not " + v.dump());
      out = v.get<bool>();
    };
    auto positive = [&](const char* key, double& out) {
      if (!j.contains(key)) return;
      const auto& v = j.at(key);
      if (!v.is_number() || !(v.get<double>() > 0))
        throw Error(who + ": option '" + std::string(key) + "' must be a positive number, not " + v.dump());
      out = v.get<double>();
    };
    integer("min_fuse_set_size", o.min_fuse_set_size, 1);
    integer("max_fuse_set_size", o.max_fuse_set_size, 1);
    integer("max_fuse_search_depth", o.max_fuse_search_depth, 1);
    integer("max_fuse_tensor_size_group_linear", o.max_fuse_tensor_size_group_linear, 1);
    boolean("fuse_nodes_with_same_parent", o.fuse_nodes_with_same_parent);
    boolean("shape_broadcast_batch_linear", o.shape_broadcast_batch_linear);
    boolean("fuse_nodes_with_same_users", o.fuse_nodes_with_same_users);
    boolean("cost_model", o.cost_model);
    positive("cost_model_step_us", o.costs.step_us);
    positive("cost_model_copy_gb_per_s", o.costs.copy_gb_per_s);
    for (const auto& [k, v] : j.items()) {
      bool known = false;
      for (const auto& name : keys()) known |= name == k;
      if (!known) throw Error(who + ": unknown option '" + k + "'");
    }
    return o;
  }
};

}  // namespace kiln::gbf
