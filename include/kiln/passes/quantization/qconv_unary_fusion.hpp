#pragma once
// qconv unary fusion, Inductor 2.11's _register_qconv_unary_fusion: a
// qconv_pointwise with no post-op yet (weight prepack's, float32 output) takes
// in the op after it, at two of Inductor's pass numbers:
//   3: int8 output: qconv [-> relu | hardtanh | hardswish | silu] -> quantize_per_tensor,
//      the fused node taking the quantize's scale, zero point and dtype;
//   4: float output: qconv -> relu | hardtanh | hardswish | silu.
// The fused node is qconv_pointwise(.tensor) with attr relu, hardtanh (its
// min and max as scalars), hardswish or swish. Checks as Inductor's (a float
// output keeps the qconv's own dtype; the pattern's interior nodes have one
// user each), and what kiln's kernel computes exactly as the unfused graph: a
// quantize over its dtype's whole range (the primitive saturates there, so a
// narrower quant_min/quant_max would give other values), numeric hardtanh
// bounds. Counters qconv_unary_matcher_count/_nodes with Inductor's nodes:
// its graph holds hardtanh as clamp_min + clamp_max, hardswish as five nodes
// and silu as two, kiln's one node each.
// int8-mixed-bf16 (a qconv with a bfloat16 output, from weight prepack's bf16
// form): a float output stays bfloat16, and the output quantize may read the
// chain through convert_element_type to float32 (one user), as in
// quant(to_fp32(relu(qconv))); Inductor's bf16 hardtanh, hardswish and silu
// convert to float32 before their decomposition and back after it, two more
// nodes it counts (one where kiln's graph holds the convert before the quantize).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/inductor_match_count.hpp"
#include "kiln/passes/quantization/qdq_patterns.hpp"
#include "kiln/passes/quantization/qlinear_post_op_fusion.hpp"

namespace kiln {

namespace quantization_detail {

inline Node* qconv_of(const std::vector<Node*>& nodes) {
  return find_target(nodes, {onednn::qconv_pointwise, onednn::qconv_pointwise_tensor});
}

// A qconv as weight prepack writes it: float32 output (or bfloat16, where
// `bf16_too`: the int8-mixed-bf16 form), no post-op yet.
inline bool plain_qconv(const Node* qc, bool bf16_too = false) {
  return qc && qc->args().size() >= 17 && (arg_is_dtype(qc, 13, DType::float32) || (bf16_too && arg_is_dtype(qc, 13, DType::bfloat16))) &&
         string_arg(qc, 14) == "none";
}

inline std::optional<double> number_arg(const Node* n, std::size_t i) {
  if (i >= n->args().size()) return std::nullopt;
  if (const auto* d = n->arg(i).get_if<double>()) return *d;
  if (const auto* v = n->arg(i).get_if<std::int64_t>()) return static_cast<double>(*v);
  return std::nullopt;
}

// The output quantize the fused kernel can take: a scalar scale and zero point,
// uint8 or int8 over the dtype's whole range (where the primitive saturates).
inline bool full_range_quantize(const Node* q) {
  if (!q) return true;
  if (q->args().size() != 6 || !number_arg(q, 1) || !q->arg(2).get_if<std::int64_t>()) return false;
  if (arg_is_dtype(q, 5, DType::uint8)) return arg_is_int(q, 3, 0) && arg_is_int(q, 4, 255);
  if (arg_is_dtype(q, 5, DType::int8)) return arg_is_int(q, 3, -128) && arg_is_int(q, 4, 127);
  return false;
}

// The unary op of a match as the qconv kernel names it, with its scalars.
struct ConvUnary {
  std::string name = "none";
  ArgList scalars;
  std::int64_t inductor_extra_nodes = 0;  // Inductor's decomposition holds this many more nodes
};
inline ConvUnary conv_unary_of(const std::vector<Node*>& nodes) {
  if (find_target(nodes, {aten::relu})) return {"relu", {}, 0};
  if (find_target(nodes, {aten::hardswish})) return {"hardswish", {}, 4};
  if (find_target(nodes, {aten::silu})) return {"swish", {}, 1};
  if (const Node* h = find_target(nodes, {aten::hardtanh})) {
    const auto lo = number_arg(h, 1), hi = number_arg(h, 2);
    return {"hardtanh", lo && hi ? ArgList{*lo, *hi} : ArgList{}, 1};
  }
  return {};
}

inline bool valid_qconv_unary(const std::vector<Node*>& nodes, const Node* out) {
  const Node* qc = qconv_of(nodes);
  if (!plain_qconv(qc, true)) return false;
  const DType qc_dtype = float_output_dtype(qc, 13);
  const Node* q = find_target(nodes, {quantized_decomposed::quantize_per_tensor});
  if (!full_range_quantize(q) || !valid_convert_to_quantize(nodes, qc_dtype)) return false;
  // A float-output match keeps the qconv's own output dtype (Inductor's check).
  if (!q && meta_dtype(out).value_or(DType::float32) != qc_dtype) return false;
  const Node* h = find_target(nodes, {aten::hardtanh});
  if (!h) return true;
  const auto lo = number_arg(h, 1), hi = number_arg(h, 2);
  return h->args().size() == 3 && lo && hi && *lo <= *hi;
}

// The fused qconv's output quantization: the quantize's, or the qconv's own float dtype with scale 1 and zero point 0.
inline ArgList fused_output_quant(const std::vector<Node*>& nodes) {
  const Node* q = find_target(nodes, {quantized_decomposed::quantize_per_tensor});
  if (!q) return {1.0, std::int64_t{0}, Arg(float_output_dtype(qconv_of(nodes), 13))};
  return {q->arg(1), q->arg(2), q->arg(5)};
}

inline Node* fuse_qconv_unary(Graph& g, const std::vector<Node*>& nodes, Node* out) {
  const Node* qc = qconv_of(nodes);
  const ConvUnary u = conv_unary_of(nodes);
  ArgList args(qc->args().begin(), qc->args().begin() + 11);
  for (const Arg& a : fused_output_quant(nodes)) args.push_back(a);
  for (const Arg& a : {Arg(u.name), Arg(u.scalars), Arg(std::string())}) args.push_back(a);
  Node* fused = g.call_function(qc->target(), args);
  fused->meta = out->meta;
  out->replace_all_uses_with(fused);
  return fused;
}

// qconv_pointwise(.tensor) with every argument captured, as Inductor's get_qconv_pt2e_pattern.
inline auto qconv_pattern() {
  using namespace pattern;
  return CallFunction({onednn::qconv_pointwise, onednn::qconv_pointwise_tensor}, kw<"x">, kw<"x_scale">, kw<"x_zp">, kw<"packed_weight">,
                      kw<"w_scale">, kw<"w_zp">, kw<"b">, kw<"stride">, kw<"padding">, kw<"dilation">, kw<"groups">, kw<"output_scale">,
                      kw<"output_zero_point">, kw<"output_dtype">, kw<"postop_name">, kw<"postop_args">, kw<"postop_algorithm">);
}

}  // namespace quantization_detail

// Registers the unary fusions into `passes` (at least two: Inductor's pass numbers 3 and 4 are 0 and 1 here).
inline void register_qconv_unary_fusion_patterns(PatternMatcherPasses& passes, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = [counters](auto& m, Graph& g, Node* out) {
    const auto kiln_nodes = static_cast<std::int64_t>(m.nodes().size());
    std::int64_t nodes = kiln_nodes + qd::conv_unary_of(m.nodes()).inductor_extra_nodes;
    const bool decomposed = qd::find_target(m.nodes(), {aten::hardtanh, aten::hardswish, aten::silu}) != nullptr;
    if (decomposed && qd::float_output_dtype(qd::qconv_of(m.nodes()), 13) == DType::bfloat16)
      nodes += qd::find_target(m.nodes(), {prims::convert_element_type}) ? 1 : 2;
    qd::fuse_qconv_unary(g, m.nodes(), out);
    m.erase_nodes();
    qd::count_inductor_match(counters, "qconv_unary", nodes, kiln_nodes);
  };
  const auto check = [](const auto& m) { return qd::valid_qconv_unary(m.nodes(), m.output_node()); };
  const auto qc = qd::qconv_pattern();
  const auto relu = CallFunction(aten::relu, qc);
  const auto hardtanh = CallFunction(aten::hardtanh, qc, kw<"min_value">, kw<"max_value">);
  const auto hardswish = CallFunction(aten::hardswish, qc);
  const auto silu = CallFunction(aten::silu, qc);
  const auto opts = [](std::size_t pass, const char* name) { return PatternOptions{.name = name, .pass_number = pass}; };
  // Pass 3 (Inductor's): int8 output.
  passes.register_pattern(qd::quantize_o_pattern(qc), handler, check, opts(0, "qconv_unary: quant(qconv)"));
  passes.register_pattern(qd::quantize_o_pattern(relu), handler, check, opts(0, "qconv_unary: quant(relu(qconv))"));
  passes.register_pattern(qd::quantize_o_pattern(hardtanh), handler, check, opts(0, "qconv_unary: quant(hardtanh(qconv))"));
  passes.register_pattern(qd::quantize_o_pattern(hardswish), handler, check, opts(0, "qconv_unary: quant(hardswish(qconv))"));
  passes.register_pattern(qd::quantize_o_pattern(silu), handler, check, opts(0, "qconv_unary: quant(silu(qconv))"));
  const auto to_fp32 = [](auto inner) { return CallFunction(prims::convert_element_type, inner, kw<"to_fp32">); };
  passes.register_pattern(qd::quantize_o_pattern(to_fp32(qc)), handler, check, opts(0, "qconv_unary (bf16): quant(to_fp32(qconv))"));
  passes.register_pattern(qd::quantize_o_pattern(to_fp32(relu)), handler, check, opts(0, "qconv_unary (bf16): quant(to_fp32(relu(qconv)))"));
  passes.register_pattern(qd::quantize_o_pattern(to_fp32(hardtanh)), handler, check,
                          opts(0, "qconv_unary (bf16): quant(to_fp32(hardtanh(qconv)))"));
  passes.register_pattern(qd::quantize_o_pattern(to_fp32(hardswish)), handler, check,
                          opts(0, "qconv_unary (bf16): quant(to_fp32(hardswish(qconv)))"));
  passes.register_pattern(qd::quantize_o_pattern(to_fp32(silu)), handler, check, opts(0, "qconv_unary (bf16): quant(to_fp32(silu(qconv)))"));
  // Pass 4: float output.
  passes.register_pattern(relu, handler, check, opts(1, "qconv_unary: relu(qconv)"));
  passes.register_pattern(hardtanh, handler, check, opts(1, "qconv_unary: hardtanh(qconv)"));
  passes.register_pattern(hardswish, handler, check, opts(1, "qconv_unary: hardswish(qconv)"));
  passes.register_pattern(silu, handler, check, opts(1, "qconv_unary: silu(qconv)"));
}

}  // namespace kiln
