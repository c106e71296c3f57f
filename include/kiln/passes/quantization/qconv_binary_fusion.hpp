#pragma once
// qconv binary fusion, Inductor 2.11's _register_qconv_binary_fusion: a
// qconv_pointwise with no post-op yet adds a tensor into its output, either
// input order of the add, at three of Inductor's pass numbers:
//   3: int8 output: qconv + dequantize(accum) [-> relu] -> quantize_per_tensor,
//      the int8 accum itself (with its scale and zero point) going to the kernel;
//   4: float output: relu(qconv + accum);
//   5: float output: qconv + accum.
// The fused node is qconv2d_pointwise.binary(_tensor) with binary_attr "sum",
// alpha 1 and relu or none after the add. Inductor's checks: the qconv has one
// user; with a float output the accum comes from a dequantize_per_tensor; the
// two add inputs have one shape; the extra input (the int8 accum, or the float
// one) has at most one user besides the qconv's ancestors (oneDNN's sum writes
// into it) and is not the qconv's own input. And kiln's kernel's: a uint8/int8
// accum, or a float32 one, the output quantize over its dtype's whole range.
// Counters qconv2d_binary_matcher_count/_nodes (Inductor's nodes are kiln's).
// int8-mixed-bf16 (a qconv with a bfloat16 output, from weight prepack's bf16
// form): the forms above take it too (the add of its bf16 output and the
// float32 dequantized accum is float32, so a float output stays float32), and
// Inductor's in-place add form puts convert_element_type back to bfloat16
// after the add: quant([relu](to_bf16(qconv + dequant(accum)))) at pass 3,
// relu(to_bf16(qconv + accum)) at 3 too, to_bf16(qconv + accum) at 4, the
// float output bfloat16. Inductor takes any convert dtype there; kiln a
// bfloat16 one after a bf16 qconv (the kernel's output dtype).
#include <cstdint>
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
#include "kiln/passes/quantization/qconv_unary_fusion.hpp"

namespace kiln {

namespace quantization_detail {

// The add's input that is not the qconv.
inline Node* add_other(const Node* add, const Node* qc) {
  return add->arg(0).node() == qc ? add->arg(1).node() : add->arg(0).node();
}

// The accum dequantize of an int8-output match (in the match), or nullptr.
inline const Node* accum_dequantize(const std::vector<Node*>& nodes, const Node* add, const Node* qc) {
  const Node* other = add_other(add, qc);
  for (const Node* n : nodes)
    if (n == other && n->target() == quantized_decomposed::dequantize_per_tensor) return n;
  return nullptr;
}

// A float output's dtype: bfloat16 after the in-place add's convert, else the add's float32.
inline DType binary_float_output(const std::vector<Node*>& nodes) {
  return find_target(nodes, {prims::convert_element_type}) ? DType::bfloat16 : DType::float32;
}

inline bool valid_qconv_binary(const std::vector<Node*>& nodes, const Node* out) {
  const Node* qc = qconv_of(nodes);
  const Node* add = find_target(nodes, {aten::add_Tensor});
  if (!plain_qconv(qc, true) || !add || add->args().size() != 2 || add->kwargs().find("alpha")) return false;
  const Node* q = find_target(nodes, {quantized_decomposed::quantize_per_tensor});
  if (!full_range_quantize(q)) return false;
  // The in-place add's convert: back to bfloat16 after a bf16 qconv.
  const Node* to_bf16 = find_target(nodes, {prims::convert_element_type});
  if (to_bf16 && !(arg_is_dtype(to_bf16, 1, DType::bfloat16) && arg_is_dtype(qc, 13, DType::bfloat16))) return false;
  if (!q && meta_dtype(out).value_or(DType::float32) != binary_float_output(nodes)) return false;
  const Node* other = add_other(add, qc);
  const TensorMeta* om = other ? other->meta.val.tensor() : nullptr;
  const TensorMeta* qm = qc->meta.val.tensor();
  if (!om || !qm || !(om->shape == qm->shape)) return false;
  // The extra input: the int8 accum under the matched dequantize, or the float addend (a dequantize's output).
  const Node* extra = other;
  if (q) {
    const Node* dq = accum_dequantize(nodes, add, qc);
    extra = dq ? dq->arg(0).node() : nullptr;
    if (!extra || !(arg_is_dtype(dq, 5, DType::uint8) || arg_is_dtype(dq, 5, DType::int8))) return false;
    if (!number_arg(dq, 1) || !dq->arg(2).get_if<std::int64_t>()) return false;
    if (meta_dtype(extra).value_or(DType::float32) != (arg_is_dtype(dq, 5, DType::uint8) ? DType::uint8 : DType::int8)) return false;
  } else if (other->target() != quantized_decomposed::dequantize_per_tensor || om->dtype != DType::float32) {
    return false;
  }
  return remaining_users(extra, qc) <= 1 && extra != qc->arg(0).node();
}

inline Node* fuse_qconv_binary(Graph& g, const std::vector<Node*>& nodes, Node* out) {
  const Node* qc = qconv_of(nodes);
  const Node* add = find_target(nodes, {aten::add_Tensor});
  const Node* q = find_target(nodes, {quantized_decomposed::quantize_per_tensor});
  const Node* dq = q ? accum_dequantize(nodes, add, qc) : nullptr;
  const Arg accum = dq ? dq->arg(0) : Arg(add_other(add, qc));
  const Arg accum_scale = dq ? dq->arg(1) : Arg(1.0), accum_zp = dq ? dq->arg(2) : Arg(std::int64_t{0});
  const ArgList oq = q ? fused_output_quant(nodes) : ArgList{1.0, std::int64_t{0}, Arg(binary_float_output(nodes))};
  const std::string unary = find_target(nodes, {aten::relu}) ? "relu" : "none";
  ArgList args(qc->args().begin(), qc->args().begin() + 6);
  args.push_back(accum);
  for (std::size_t i = 6; i < 11; ++i) args.push_back(qc->arg(i));
  for (const Arg& a : {oq[0], oq[1], oq[2], accum_scale, accum_zp, Arg(std::string("sum")), Arg(1.0), Arg(unary), Arg(ArgList{}),
                       Arg(std::string())})
    args.push_back(a);
  const bool tensors = qc->target() == onednn::qconv_pointwise_tensor;
  Node* fused = g.call_function(tensors ? onednn::qconv2d_pointwise_binary_tensor : onednn::qconv2d_pointwise_binary, args);
  fused->meta = out->meta;
  out->replace_all_uses_with(fused);
  return fused;
}

}  // namespace quantization_detail

// Registers the binary fusions into `passes` (three: Inductor's pass numbers 3, 4 and 5 are 0, 1 and 2 here).
inline void register_qconv_binary_fusion_patterns(PatternMatcherPasses& passes, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = [counters](auto& m, Graph& g, Node* out) {
    const auto nodes = static_cast<std::int64_t>(m.nodes().size());
    qd::fuse_qconv_binary(g, m.nodes(), out);
    m.erase_nodes();
    qd::count_inductor_match(counters, "qconv2d_binary", nodes, nodes);
  };
  const auto check = [](const auto& m) { return qd::valid_qconv_binary(m.nodes(), m.output_node()); };
  const auto qc = qd::qconv_pattern();
  const auto dq_accum = CallFunction(quantized_decomposed::dequantize_per_tensor, kw<"accum">, kw<"accum_scale">, kw<"accum_zp">,
                                     Ignored(), Ignored(), kw<"accum_dq_dtype">);
  const auto add_q = CallFunction(aten::add_Tensor, qc, dq_accum);
  const auto add_q_swapped = CallFunction(aten::add_Tensor, dq_accum, qc);
  const auto add_f = CallFunction(aten::add_Tensor, qc, kw<"accum_after_dequant">);
  const auto add_f_swapped = CallFunction(aten::add_Tensor, kw<"accum_after_dequant">, qc);
  const auto relu = [](auto inner) { return CallFunction(aten::relu, inner); };
  const auto quant = [](auto inner) { return qd::quantize_o_pattern(inner); };
  const auto to_bf16 = [](auto inner) { return CallFunction(prims::convert_element_type, inner, kw<"convert_dtype_after_inplace_add">); };
  const auto opts = [](std::size_t pass, const char* name) { return PatternOptions{.name = name, .pass_number = pass}; };
  // Pass 3 (Inductor's): int8 output, the accum dequantized in the match.
  passes.register_pattern(quant(add_q), handler, check, opts(0, "qconv2d_binary: quant(qconv + dequant(accum))"));
  passes.register_pattern(quant(relu(add_q)), handler, check, opts(0, "qconv2d_binary: quant(relu(qconv + dequant(accum)))"));
  passes.register_pattern(quant(add_q_swapped), handler, check, opts(0, "qconv2d_binary: quant(dequant(accum) + qconv)"));
  passes.register_pattern(quant(relu(add_q_swapped)), handler, check, opts(0, "qconv2d_binary: quant(relu(dequant(accum) + qconv))"));
  // Pass 3 too, int8-mixed-bf16's in-place add (the sum converted back to bfloat16): int8 output, and relu with a bf16 one.
  passes.register_pattern(quant(to_bf16(add_q)), handler, check, opts(0, "qconv2d_binary (bf16): quant(to_bf16(qconv + dequant(accum)))"));
  passes.register_pattern(quant(relu(to_bf16(add_q))), handler, check,
                          opts(0, "qconv2d_binary (bf16): quant(relu(to_bf16(qconv + dequant(accum))))"));
  passes.register_pattern(quant(to_bf16(add_q_swapped)), handler, check,
                          opts(0, "qconv2d_binary (bf16): quant(to_bf16(dequant(accum) + qconv))"));
  passes.register_pattern(quant(relu(to_bf16(add_q_swapped))), handler, check,
                          opts(0, "qconv2d_binary (bf16): quant(relu(to_bf16(dequant(accum) + qconv)))"));
  passes.register_pattern(relu(to_bf16(add_f)), handler, check, opts(0, "qconv2d_binary (bf16): relu(to_bf16(qconv + accum))"));
  passes.register_pattern(relu(to_bf16(add_f_swapped)), handler, check, opts(0, "qconv2d_binary (bf16): relu(to_bf16(accum + qconv))"));
  // Pass 4: float output, sum then relu.
  passes.register_pattern(relu(add_f), handler, check, opts(1, "qconv2d_binary: relu(qconv + accum)"));
  passes.register_pattern(relu(add_f_swapped), handler, check, opts(1, "qconv2d_binary: relu(accum + qconv)"));
  // Pass 4 too, int8-mixed-bf16's in-place add: bf16 sum.
  passes.register_pattern(to_bf16(add_f), handler, check, opts(1, "qconv2d_binary (bf16): to_bf16(qconv + accum)"));
  passes.register_pattern(to_bf16(add_f_swapped), handler, check, opts(1, "qconv2d_binary (bf16): to_bf16(accum + qconv)"));
  // Pass 5: float output, sum.
  passes.register_pattern(add_f, handler, check, opts(2, "qconv2d_binary: qconv + accum"));
  passes.register_pattern(add_f_swapped, handler, check, opts(2, "qconv2d_binary: accum + qconv"));
}

}  // namespace kiln
