#pragma once
// The qlinear "lower" counters: Inductor 2.11 lowers each onednn.qlinear_pointwise
// left after the fusions through one-node lowering patterns (pass_number 2 of
// its post-grad lowering), counting qlinear_unary_lower_count/_nodes for
// .default/.tensor and qlinear_binary_lower_count/_nodes for .binary/.binary_tensor
// (each a pattern match, so pattern_matcher_count/_nodes too). kiln's executor
// lowers these nodes to its int8 kernels; this pass counts them the same way
// and changes nothing.
#include "kiln/core/graph.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/quantization/lower_counts.hpp"

namespace kiln {

using QLinearLowerCounts = LowerCounts;

inline LowerCounts count_qlinear_lowerings(const Graph& g, Counters* counters = nullptr) {
  return quantization_detail::count_lowerings(g, counters, {onednn::qlinear_pointwise, onednn::qlinear_pointwise_tensor},
                                              {onednn::qlinear_pointwise_binary, onednn::qlinear_pointwise_binary_tensor}, "qlinear_unary", "qlinear_binary");
}

}  // namespace kiln
