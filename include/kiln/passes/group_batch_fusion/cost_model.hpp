#pragma once
// kiln's cost model of a fused set (beyond Inductor, off by default): whether
// running one batched op instead of N small ones pays in kiln's executor.
//
// Both sides do the same arithmetic, so the model weighs only what differs:
// each executor step has a fixed cost (dispatch, the threads' fork and join),
// and the batched op needs its per-node inputs stacked into one tensor, a copy,
// except for constants (get_attr weights), which lowering stacks once at
// compile time, and inputs that every node shares. So, for a set of N nodes,
//   unfused = N * step
//   fused   = (1 + extra steps + stacked inputs) * step + stacked bytes / copy bandwidth
// and the set is fused when fused < unfused. `step_us` and `copy_gb_per_s` are
// calibrated per machine and thread count (bench/README.md says how).
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln::gbf {

// The defaults are calibrated on the device machine at 2 threads (figures: bench/README.md).
struct CostModel {
  double step_us = 2.2;         // fixed cost of one executor step
  double copy_gb_per_s = 10.0;  // bandwidth of a stacking copy
};

struct CostEstimate {
  double unfused_us = 0;
  double fused_us = 0;
  std::int64_t stacked_bytes = 0;  // bytes the batched op's inputs are copied through
  std::int64_t steps_fused = 0;
  bool pays() const { return fused_us < unfused_us; }
};

namespace detail {
inline std::int64_t bytes_of(const Node* n) {
  const TensorMeta* t = n ? n->meta.val.tensor() : nullptr;
  const std::optional<std::int64_t> count = t ? t->numel() : std::nullopt;
  return count ? *count * static_cast<std::int64_t>(dtype_itemsize(t->dtype)) : 0;
}
}  // namespace detail

// The estimate for fusing `subset`; `extra_steps` is what the fused form runs
// besides the batched op and its stacks (a batched layer-norm's weight mul and
// bias add, say), as the fusion knows it.
inline CostEstimate estimate_fusion(std::span<Node* const> subset, std::int64_t extra_steps, const CostModel& model) {
  CostEstimate e;
  const std::size_t n = subset.size();
  if (n == 0) return e;
  // Input positions: the i-th distinct input of each node (fusions group nodes
  // of one signature, so positions line up).
  std::vector<std::vector<Node*>> by_position;
  for (Node* node : subset) {
    const auto inputs = node->all_input_nodes();
    if (by_position.size() < inputs.size()) by_position.resize(inputs.size());
    std::size_t p = 0;
    for (Node* in : inputs) by_position[p++].push_back(in);
  }
  std::int64_t stacks = 0;
  for (const std::vector<Node*>& inputs : by_position) {
    bool shared = inputs.size() == n, constant = true;
    for (const Node* in : inputs) {
      shared &= in == inputs.front();
      constant &= in->op() == OpKind::get_attr;
    }
    if (shared || constant) continue;
    ++stacks;
    for (const Node* in : inputs) e.stacked_bytes += detail::bytes_of(in);
  }
  e.steps_fused = 1 + extra_steps + stacks;
  e.unfused_us = static_cast<double>(n) * model.step_us;
  e.fused_us = static_cast<double>(e.steps_fused) * model.step_us +
               static_cast<double>(e.stacked_bytes) / (model.copy_gb_per_s * 1e3);  // GB/s = 1e3 bytes/us
  return e;
}

}  // namespace kiln::gbf
