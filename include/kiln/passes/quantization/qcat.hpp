#pragma once
// qcat, Inductor 2.11's _register_quantization_cat: cat of per-tensor
// dequantizes -> quantize_per_tensor, every dequantize and the quantize with
// one scale and zero point (same_qparams.hpp), becomes aten.cat of the int8
// tensors themselves. Inductor's pattern is cat(ListOf(dequantize), dim), dim
// given. Counters qcat_matcher_count and qcat_matcher_nodes.
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/pass_through_lowering.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"
#include "kiln/passes/quantization/same_qparams.hpp"
#include "kiln/pattern/list_of.hpp"

namespace kiln {

namespace quantization_detail {

inline Node* lower_qcat(Graph& g, const std::vector<Node*>& nodes) {
  const Node* cat = find_target(nodes, {aten::cat});
  ArgList inputs;
  for (const Arg& a : *cat->arg(0).list()) inputs.push_back(a.node()->arg(0));
  return g.call_function(aten::cat, {Arg(std::move(inputs)), cat->arg(1)});
}

}  // namespace quantization_detail

inline void register_qcat_patterns(PatternMatcherPass& pass, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = qd::pass_through_handler(counters, "qcat", qd::lower_qcat);
  const auto dq = CallFunction(quantized_decomposed::dequantize_per_tensor, pattern::Arg(), pattern::Arg(), pattern::Arg(), pattern::Arg(), pattern::Arg(), pattern::Arg());
  const auto cat = CallFunction(aten::cat, ListOf(dq), kw<"dim">);
  pass.register_pattern(qd::quantize_o_pattern(cat), handler, qd::same_qparams_check,
                        PatternOptions{.name = "qcat: quant(cat(dequant...))"});
}

// Lowers each match over `g`; returns the number lowered.
inline std::size_t qcat(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPass pass("qcat");
  register_qcat_patterns(pass, counters);
  return pass.apply(g, counters);
}

}  // namespace kiln
