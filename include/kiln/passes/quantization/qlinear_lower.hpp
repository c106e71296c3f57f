#pragma once
// The qlinear "lower" counters: Inductor 2.11 lowers each onednn.qlinear_pointwise
// left after the fusions through one-node lowering patterns (pass_number 2 of
// its post-grad lowering), counting qlinear_unary_lower_count/_nodes for
// .default/.tensor and qlinear_binary_lower_count/_nodes for .binary/.binary_tensor
// (each a pattern match, so pattern_matcher_count/_nodes too). kiln's executor
// lowers these nodes to its int8 kernels; this pass counts them the same way
// and changes nothing.
#include <cstdint>

#include "kiln/core/graph.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/passes/counters.hpp"

namespace kiln {

struct QLinearLowerCounts {
  std::int64_t unary = 0, binary = 0;
};

inline QLinearLowerCounts count_qlinear_lowerings(const Graph& g, Counters* counters = nullptr) {
  QLinearLowerCounts c;
  for (const Node* n : g.nodes()) {
    if (n->op() != OpKind::call_function) continue;
    if (n->target() == onednn::qlinear_pointwise || n->target() == onednn::qlinear_pointwise_tensor) ++c.unary;
    if (n->target() == onednn::qlinear_pointwise_binary || n->target() == onednn::qlinear_pointwise_binary_tensor) ++c.binary;
  }
  if (!counters) return c;
  const auto add = [counters](const char* key, std::int64_t v) {
    if (v) counters->increment(key, v);
  };
  add("qlinear_unary_lower_count", c.unary);
  add("qlinear_unary_lower_nodes", c.unary);
  add("qlinear_binary_lower_count", c.binary);
  add("qlinear_binary_lower_nodes", c.binary);
  add("pattern_matcher_count", c.unary + c.binary);
  add("pattern_matcher_nodes", c.unary + c.binary);
  return c;
}

}  // namespace kiln
