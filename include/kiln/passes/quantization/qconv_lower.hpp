#pragma once
// The qconv "lower" counters: Inductor 2.11 lowers each onednn.qconv_pointwise
// left after the fusions through one-node lowering patterns (as it does
// qlinear's, see qlinear_lower.hpp), counting qconv_unary_lower_count/_nodes
// for qconv_pointwise (.default/.tensor) and qconv2d_binary_lower_count/_nodes
// for qconv2d_pointwise.binary(_tensor), each also a pattern match. kiln's
// executor lowers these nodes to its int8 kernels; this pass counts them the
// same way and changes nothing.
#include <cstdint>

#include "kiln/core/graph.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/passes/counters.hpp"

namespace kiln {

struct QConvLowerCounts {
  std::int64_t unary = 0, binary = 0;
};

inline QConvLowerCounts count_qconv_lowerings(const Graph& g, Counters* counters = nullptr) {
  QConvLowerCounts c;
  for (const Node* n : g.nodes()) {
    if (n->op() != OpKind::call_function) continue;
    if (n->target() == onednn::qconv_pointwise || n->target() == onednn::qconv_pointwise_tensor) ++c.unary;
    if (n->target() == onednn::qconv2d_pointwise_binary || n->target() == onednn::qconv2d_pointwise_binary_tensor) ++c.binary;
  }
  if (!counters) return c;
  const auto add = [counters](const char* key, std::int64_t v) {
    if (v) counters->increment(key, v);
  };
  add("qconv_unary_lower_count", c.unary);
  add("qconv_unary_lower_nodes", c.unary);
  add("qconv2d_binary_lower_count", c.binary);
  add("qconv2d_binary_lower_nodes", c.binary);
  add("pattern_matcher_count", c.unary + c.binary);
  add("pattern_matcher_nodes", c.unary + c.binary);
  return c;
}

}  // namespace kiln
