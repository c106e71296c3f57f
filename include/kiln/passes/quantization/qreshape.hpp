#pragma once
// qreshape, Inductor 2.11's _register_quantization_reshape:
// dequantize_per_tensor -> reshape -> quantize_per_tensor with one scale and
// zero point on both sides (same_qparams.hpp) becomes aten.reshape of the int8
// tensor itself. Counters qreshape_matcher_count and qreshape_matcher_nodes.
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/pass_through_lowering.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"
#include "kiln/passes/quantization/same_qparams.hpp"

namespace kiln {

namespace quantization_detail {

inline Node* lower_qreshape(Graph& g, const std::vector<Node*>& nodes) {
  const Node* dq = find_target(nodes, {quantized_decomposed::dequantize_per_tensor});
  const Node* reshape = find_target(nodes, {aten::reshape});
  return g.call_function(aten::reshape, {dq->arg(0), reshape->arg(1)});
}

}  // namespace quantization_detail

inline void register_qreshape_patterns(PatternMatcherPass& pass, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = qd::pass_through_handler(counters, "qreshape", qd::lower_qreshape);
  const auto reshape = CallFunction(aten::reshape, qd::dequantize_x_pattern(), kw<"shape">);
  pass.register_pattern(qd::quantize_o_pattern(reshape), handler, qd::same_qparams_check,
                        PatternOptions{.name = "qreshape: quant(reshape(dequant))"});
}

// Lowers each match over `g`; returns the number lowered.
inline std::size_t qreshape(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPass pass("qreshape");
  register_qreshape_patterns(pass, counters);
  return pass.apply(g, counters);
}

}  // namespace kiln
