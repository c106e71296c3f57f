#pragma once
// The qconv "lower" counters: Inductor 2.11 lowers each onednn.qconv_pointwise
// left after the fusions through one-node lowering patterns (as it does
// qlinear's, see qlinear_lower.hpp), counting qconv_unary_lower_count/_nodes
// for qconv_pointwise (.default/.tensor) and qconv2d_binary_lower_count/_nodes
// for qconv2d_pointwise.binary(_tensor), each also a pattern match. kiln's
// executor lowers these nodes to its int8 kernels; this pass counts them the
// same way and changes nothing.
#include "kiln/core/graph.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/quantization/lower_counts.hpp"

namespace kiln {

using QConvLowerCounts = LowerCounts;

inline LowerCounts count_qconv_lowerings(const Graph& g, Counters* counters = nullptr) {
  return quantization_detail::count_lowerings(g, counters, {onednn::qconv_pointwise, onednn::qconv_pointwise_tensor},
                                              {onednn::qconv2d_pointwise_binary, onednn::qconv2d_pointwise_binary_tensor}, "qconv_unary", "qconv2d_binary");
}

}  // namespace kiln
