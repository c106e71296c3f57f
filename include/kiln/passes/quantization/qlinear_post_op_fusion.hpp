#pragma once
// qlinear post-op fusion, Inductor 2.11's _register_qlinear_unary_fusion and
// _register_qlinear_binary_fusion: a qlinear_pointwise with no post-op yet
// (weight prepack's) takes in the ops after it, in three passes (Inductor's
// pass numbers 3, 4 and 5):
//   3: int8 output, a quantize_per_tensor ends the chain: qlinear [-> relu |
//      gelu] -> quantize (unary), and qlinear + other [-> relu] -> quantize,
//      either input order of the add, other any float32 tensor ("add");
//   4: float output: qlinear -> relu | gelu (unary); relu(qlinear + accum) ("sum");
//   5: float output: qlinear + accum ("sum").
// The fused node is qlinear_pointwise(.tensor) with the post-op, or its
// .binary(.binary_tensor) form. Checks as Inductor's: a float-output unary
// match keeps the qlinear's own output dtype (kiln checks a binary one's is
// the dtype the unfused add gives, see below); for the binary forms the two add
// inputs have one shape and the extra input has no user but the add besides
// the qlinear's ancestors, and is not the qlinear's input. Counters
// qlinear_unary_matcher_count/_nodes and qlinear_binary_matcher_count/_nodes,
// nodes as Inductor counts them: its graph holds gelu decomposed (erf: 5
// nodes, tanh: 9), kiln's holds one aten.gelu.
// int8-mixed-bf16 (a qlinear with a bfloat16 output, from weight prepack's bf16
// form): the unary forms, with a float output (which stays bfloat16) and with
// the output quantize read through convert_element_type to float32 (one user),
// as in quant(to_fp32(relu(qlinear))); Inductor's bf16 gelu also converts to
// float32 before its decomposition and back after it, two more nodes it counts
// (one where kiln's graph holds the convert before the quantize). The binary
// forms in bf16 (Inductor's table, cases 1 to 6): a bfloat16 or float32
// addend, then the output quantize (read directly or through a convert to
// float32), or a float output of the add's promoted dtype (bf16 + bf16 stays
// bfloat16, "sum"; a float32 addend gives a float32 output, "sum", which the
// kernel computes from the unrounded product). Inductor's in-place add of a
// float32 addend puts convert_element_type back to bfloat16 right after the
// add: quant([to_fp32]([relu](to_bf16(qlinear + other)))) at pass 3, and a
// bfloat16 float output, post-op "add", as relu(to_bf16(qlinear + other)) at
// 4 and to_bf16(qlinear + other) at 5. Inductor takes any dtype in that
// convert; kiln a bfloat16 one after a bf16 qlinear. Counted as Inductor
// counts them: every node of the match (the to_bf16 one of them).
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/quantization/inductor_match_count.hpp"
#include "kiln/passes/quantization/qdq_patterns.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"

namespace kiln {

namespace quantization_detail {

inline Node* qlinear_of(const std::vector<Node*>& nodes) {
  return find_target(nodes, {onednn::qlinear_pointwise, onednn::qlinear_pointwise_tensor});
}

inline std::string string_arg(const Node* n, std::size_t i) {
  const auto* s = i < n->args().size() ? n->arg(i).get_if<std::string>() : nullptr;
  return s ? *s : std::string();
}

// gelu's approximate ("none" when not given).
inline std::string gelu_approximate(const Node* gelu) {
  if (const Arg* a = gelu->kwargs().find("approximate"))
    if (const auto* s = a->get_if<std::string>()) return *s;
  return gelu->args().size() > 1 ? string_arg(gelu, 1) : std::string("none");
}

// The post-ops of one match: the unary op (before the add, or after it in the binary forms) and the binary one.
struct PostOps {
  std::string binary = "none", unary = "none", algorithm;
};
inline PostOps post_ops_of(const std::vector<Node*>& nodes, bool binary, bool quantized, bool inplace) {
  PostOps p;
  // Inductor's post-op: "add" before an output quantize and after the in-place add's convert, else "sum".
  if (binary) p.binary = quantized || inplace ? "add" : "sum";
  if (find_target(nodes, {aten::relu})) p.unary = "relu";
  if (const Node* gelu = find_target(nodes, {aten::gelu})) {
    p.unary = "gelu";
    p.algorithm = gelu_approximate(gelu);
  }
  return p;
}

// The float dtype an int8 op computes its output in: float32, or bfloat16 in the int8-mixed-bf16 form.
inline DType float_output_dtype(const Node* op, std::size_t index) {
  const auto* d = op && index < op->args().size() ? op->arg(index).get_if<DType>() : nullptr;
  return d ? *d : DType::float32;
}

// The output node's dtype where its meta gives one.
inline std::optional<DType> meta_dtype(const Node* n) {
  const TensorMeta* m = n ? n->meta.val.tensor() : nullptr;
  return m ? std::optional<DType>(m->dtype) : std::nullopt;
}

// The int8-mixed-bf16 form's convert before the output quantize: to float32,
// after an op computing in bfloat16 (`op_dtype`); without a convert, nothing to check.
inline bool valid_convert_to_quantize(const std::vector<Node*>& nodes, DType op_dtype) {
  const Node* c = find_target(nodes, {prims::convert_element_type});
  return !c || (op_dtype == DType::bfloat16 && arg_is_dtype(c, 1, DType::float32));
}

// The binary forms' parts: the add, its input that is not the qlinear, and
// (in-place forms) the convert back to bfloat16 right after the add.
struct BinaryParts {
  const Node* add = nullptr;
  const Node* extra = nullptr;
  const Node* to_bf16 = nullptr;
};
inline BinaryParts binary_parts(const std::vector<Node*>& nodes, const Node* ql, bool inplace) {
  BinaryParts b;
  b.add = find_target(nodes, {aten::add_Tensor});
  if (!b.add || b.add->args().size() != 2) return b;
  b.extra = b.add->arg(0).node() == ql ? b.add->arg(1).node() : b.add->arg(0).node();
  if (inplace)
    for (const Node* n : nodes)
      if (n->target() == prims::convert_element_type && n->arg(0).node() == b.add) b.to_bf16 = n;
  return b;
}

// The float dtype a binary match's unfused graph ends in: bfloat16 after the
// in-place add's convert, else the add's promoted dtype (bf16 + bf16 is bf16,
// anything with a float32 operand is float32).
inline DType binary_float_dtype(const Node* ql, const BinaryParts& b) {
  if (b.to_bf16) return DType::bfloat16;
  const DType e = meta_dtype(b.extra).value_or(DType::float32);
  return float_output_dtype(ql, 9) == DType::bfloat16 && e == DType::bfloat16 ? DType::bfloat16 : DType::float32;
}

// The convert to float32 before the output quantize (int8-mixed-bf16), or
// nullptr; not the in-place add's convert when the quantize reads that one.
inline const Node* convert_before_quantize(const std::vector<Node*>& nodes, const Node* to_bf16) {
  const Node* q = find_target(nodes, {quantized_decomposed::quantize_per_tensor});
  const Node* c = q ? q->arg(0).node() : nullptr;
  return c && c != to_bf16 && c->target() == prims::convert_element_type ? c : nullptr;
}

// The output's dtype: the quantize's where one ends the match, else the float
// dtype the unfused graph gives (the qlinear's own for the unary forms).
inline DType fused_output_dtype(const std::vector<Node*>& nodes, bool binary, bool inplace) {
  const Node* q = find_target(nodes, {quantized_decomposed::quantize_per_tensor});
  const auto* d = q && q->args().size() > 5 ? q->arg(5).get_if<DType>() : nullptr;
  if (d) return *d;
  const Node* ql = qlinear_of(nodes);
  return binary ? binary_float_dtype(ql, binary_parts(nodes, ql, inplace)) : float_output_dtype(ql, 9);
}

// Inductor's _get_remaining_users: users of `extra` that are not ancestors of `compute`.
inline std::size_t remaining_users(const Node* extra, const Node* compute) {
  std::unordered_set<const Node*> ancestors;
  std::vector<const Node*> todo{compute};
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    for (const Node* in : n->all_input_nodes())
      if (ancestors.insert(in).second) todo.push_back(in);
  }
  std::size_t count = 0;
  for (const Node* u : extra->users()) count += ancestors.count(u) ? 0 : 1;
  return count;
}

// Inductor's checks (see the top), and the gelu forms and float32 extra input kiln's kernel takes.
inline bool valid_post_op_fusion(const std::vector<Node*>& nodes, const Node* out_node, bool binary, bool inplace = false) {
  const Node* ql = qlinear_of(nodes);
  if (!ql || string_arg(ql, 10) != "none") return false;
  const DType ql_dtype = float_output_dtype(ql, 9);
  if (ql_dtype != DType::float32 && ql_dtype != DType::bfloat16) return false;
  const bool quantized = find_target(nodes, {quantized_decomposed::quantize_per_tensor}) != nullptr;
  if (!binary) {
    // A float-output match keeps the qlinear's own output dtype (Inductor's check).
    if (!quantized && meta_dtype(out_node).value_or(DType::float32) != ql_dtype) return false;
    if (!valid_convert_to_quantize(nodes, ql_dtype)) return false;
    if (const Node* gelu = find_target(nodes, {aten::gelu})) {
      const std::string a = gelu_approximate(gelu);
      if (a != "none" && a != "tanh") return false;
    }
    return true;
  }
  const BinaryParts b = binary_parts(nodes, ql, inplace);
  if (!b.add || b.add->args().size() != 2 || b.add->kwargs().find("alpha")) return false;
  const TensorMeta* em = b.extra ? b.extra->meta.val.tensor() : nullptr;
  const TensorMeta* qm = ql->meta.val.tensor();
  if (!em || !qm || !(em->shape == qm->shape) || (em->dtype != DType::float32 && em->dtype != ql_dtype)) return false;
  // The in-place add's convert goes back to bfloat16 after a bf16 qlinear
  // (Inductor takes any dtype there; kiln the one its kernel writes).
  if (inplace && !(b.to_bf16 && arg_is_dtype(b.to_bf16, 1, DType::bfloat16) && ql_dtype == DType::bfloat16)) return false;
  // The convert before the quantize: to float32, in the int8-mixed-bf16 form.
  if (const Node* c = convert_before_quantize(nodes, b.to_bf16))
    if (!(ql_dtype == DType::bfloat16 && arg_is_dtype(c, 1, DType::float32))) return false;
  // A float output is what the unfused graph gives: the add's promoted dtype, or bfloat16 after the in-place convert.
  if (!quantized && meta_dtype(out_node).value_or(DType::float32) != binary_float_dtype(ql, b)) return false;
  return remaining_users(b.extra, ql) <= 1 && b.extra != ql->arg(0).node();
}

// The fused node's arguments: the qlinear's operands, the output's quantization, the post-ops.
inline Node* fuse_post_ops(Graph& g, const std::vector<Node*>& nodes, Node* out, bool binary, bool inplace = false) {
  const Node* ql = qlinear_of(nodes);
  const DType dtype = fused_output_dtype(nodes, binary, inplace);
  const Node* q = find_target(nodes, {quantized_decomposed::quantize_per_tensor});
  const Arg o_scale = q ? q->arg(1) : Arg(1.0), o_zp = q ? q->arg(2) : Arg(std::int64_t{0});
  const PostOps p = post_ops_of(nodes, binary, q != nullptr, inplace);
  const bool tensors = ql->target() == onednn::qlinear_pointwise_tensor;
  ArgList args{ql->arg(0), ql->arg(1), ql->arg(2), ql->arg(3), ql->arg(4), ql->arg(5)};
  if (!binary) {
    for (const Arg& a : {ql->arg(6), o_scale, o_zp, Arg(dtype), Arg(p.unary), Arg(ArgList{}), Arg(p.algorithm)}) args.push_back(a);
  } else {
    const Node* add = find_target(nodes, {aten::add_Tensor});
    const Arg other = add->arg(0).node() == ql ? add->arg(1) : add->arg(0);
    for (const Arg& a : {other, ql->arg(6), o_scale, o_zp, Arg(dtype), Arg(1.0), Arg(std::int64_t{0}), Arg(p.binary), Arg(1.0),
                         Arg(p.unary), Arg(ArgList{}), Arg(p.algorithm)})
      args.push_back(a);
  }
  const OpRef target = binary ? (tensors ? onednn::qlinear_pointwise_binary_tensor : onednn::qlinear_pointwise_binary)
                              : (tensors ? onednn::qlinear_pointwise_tensor : onednn::qlinear_pointwise);
  Node* fused = g.call_function(target, args);
  fused->meta = out->meta;
  out->replace_all_uses_with(fused);
  return fused;
}

// The matched nodes as Inductor counts them (its gelu is decomposed, in the
// bf16 form between a convert to float32 and one back).
inline std::int64_t inductor_fusion_nodes(const std::vector<Node*>& nodes) {
  std::int64_t n = static_cast<std::int64_t>(nodes.size());
  if (const Node* gelu = find_target(nodes, {aten::gelu})) {
    n += gelu_approximate(gelu) == "tanh" ? 8 : 4;
    if (float_output_dtype(qlinear_of(nodes), 9) == DType::bfloat16) n += find_target(nodes, {prims::convert_element_type}) ? 1 : 2;
  }
  return n;
}

}  // namespace quantization_detail

// Registers the fusions into `passes` (three: Inductor's pass numbers 3, 4, 5); counted into `counters` when given.
inline void register_qlinear_post_op_fusion_patterns(PatternMatcherPasses& passes, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = [counters](bool binary, bool inplace = false) {
    return [counters, binary, inplace](auto& m, Graph& g, Node* out) {
      const std::int64_t nodes = qd::inductor_fusion_nodes(m.nodes());
      const auto kiln_nodes = static_cast<std::int64_t>(m.nodes().size());
      qd::fuse_post_ops(g, m.nodes(), out, binary, inplace);
      m.erase_nodes();
      qd::count_inductor_match(counters, binary ? "qlinear_binary" : "qlinear_unary", nodes, kiln_nodes);
    };
  };
  const auto check = [](bool binary, bool inplace = false) {
    return [binary, inplace](const auto& m) { return qd::valid_post_op_fusion(m.nodes(), m.output_node(), binary, inplace); };
  };
  const auto ql = CallFunction({onednn::qlinear_pointwise, onednn::qlinear_pointwise_tensor}, kw<"x">, kw<"x_scale">, kw<"x_zp">,
                               kw<"packed_weight">, kw<"w_scale">, kw<"w_zp">, kw<"b">, kw<"output_scale">, kw<"output_zero_point">,
                               kw<"output_dtype">, kw<"postop_name">, kw<"postop_args">, kw<"postop_algorithm">);
  const auto quant = [](auto inner) { return qd::quantize_o_pattern(inner); };
  const auto quant_fp32 = [](auto inner) { return qd::quantize_o_pattern(CallFunction(prims::convert_element_type, inner, kw<"to_fp32">)); };
  const auto relu = [](auto inner) { return CallFunction(aten::relu, inner); };
  const auto gelu = CallFunction(aten::gelu, ql);
  const auto add = CallFunction(aten::add_Tensor, ql, kw<"other">);
  const auto add_swapped = CallFunction(aten::add_Tensor, kw<"other">, ql);
  // Inductor's in-place add of a float32 addend into a bf16 qlinear: the sum converted back to bfloat16.
  const auto to_bf16 = [](auto inner) { return CallFunction(prims::convert_element_type, inner, kw<"convert_dtype_after_inplace_add">); };
  const auto inplace_add = to_bf16(add);
  const auto inplace_add_swapped = to_bf16(add_swapped);
  const auto opts = [](std::size_t pass, const char* name) { return PatternOptions{.name = name, .pass_number = pass}; };
  // Pass 3 (Inductor's): int8 output.
  passes.register_pattern(quant(ql), handler(false), check(false), opts(0, "qlinear_unary: quant(qlinear)"));
  passes.register_pattern(quant(relu(ql)), handler(false), check(false), opts(0, "qlinear_unary: quant(relu(qlinear))"));
  passes.register_pattern(quant(gelu), handler(false), check(false), opts(0, "qlinear_unary: quant(gelu(qlinear))"));
  passes.register_pattern(quant_fp32(ql), handler(false), check(false), opts(0, "qlinear_unary (bf16): quant(to_fp32(qlinear))"));
  passes.register_pattern(quant_fp32(relu(ql)), handler(false), check(false), opts(0, "qlinear_unary (bf16): quant(to_fp32(relu(qlinear)))"));
  passes.register_pattern(quant_fp32(gelu), handler(false), check(false), opts(0, "qlinear_unary (bf16): quant(to_fp32(gelu(qlinear)))"));
  passes.register_pattern(quant(add), handler(true), check(true), opts(0, "qlinear_binary: quant(qlinear + other)"));
  passes.register_pattern(quant(add_swapped), handler(true), check(true), opts(0, "qlinear_binary: quant(other + qlinear)"));
  passes.register_pattern(quant(relu(add)), handler(true), check(true), opts(0, "qlinear_binary: quant(relu(qlinear + other))"));
  passes.register_pattern(quant(relu(add_swapped)), handler(true), check(true), opts(0, "qlinear_binary: quant(relu(other + qlinear))"));
  passes.register_pattern(quant_fp32(add), handler(true), check(true), opts(0, "qlinear_binary (bf16): quant(to_fp32(qlinear + other))"));
  passes.register_pattern(quant_fp32(add_swapped), handler(true), check(true),
                          opts(0, "qlinear_binary (bf16): quant(to_fp32(other + qlinear))"));
  passes.register_pattern(quant_fp32(relu(add)), handler(true), check(true),
                          opts(0, "qlinear_binary (bf16): quant(to_fp32(relu(qlinear + other)))"));
  passes.register_pattern(quant_fp32(relu(add_swapped)), handler(true), check(true),
                          opts(0, "qlinear_binary (bf16): quant(to_fp32(relu(other + qlinear)))"));
  // Pass 3 too, the in-place add: quant([to_fp32]([relu](to_bf16(qlinear + other)))).
  const auto inplace_q = [&](auto pattern, const char* name) { passes.register_pattern(pattern, handler(true, true), check(true, true), opts(0, name)); };
  inplace_q(quant(inplace_add), "qlinear_binary (bf16): quant(to_bf16(qlinear + other))");
  inplace_q(quant(inplace_add_swapped), "qlinear_binary (bf16): quant(to_bf16(other + qlinear))");
  inplace_q(quant(relu(inplace_add)), "qlinear_binary (bf16): quant(relu(to_bf16(qlinear + other)))");
  inplace_q(quant(relu(inplace_add_swapped)), "qlinear_binary (bf16): quant(relu(to_bf16(other + qlinear)))");
  inplace_q(quant_fp32(inplace_add), "qlinear_binary (bf16): quant(to_fp32(to_bf16(qlinear + other)))");
  inplace_q(quant_fp32(inplace_add_swapped), "qlinear_binary (bf16): quant(to_fp32(to_bf16(other + qlinear)))");
  inplace_q(quant_fp32(relu(inplace_add)), "qlinear_binary (bf16): quant(to_fp32(relu(to_bf16(qlinear + other))))");
  inplace_q(quant_fp32(relu(inplace_add_swapped)), "qlinear_binary (bf16): quant(to_fp32(relu(to_bf16(other + qlinear))))");
  // Pass 4: float output, unary, and sum then relu.
  passes.register_pattern(relu(ql), handler(false), check(false), opts(1, "qlinear_unary: relu(qlinear)"));
  passes.register_pattern(gelu, handler(false), check(false), opts(1, "qlinear_unary: gelu(qlinear)"));
  passes.register_pattern(relu(add), handler(true), check(true), opts(1, "qlinear_binary: relu(qlinear + accum)"));
  passes.register_pattern(relu(add_swapped), handler(true), check(true), opts(1, "qlinear_binary: relu(accum + qlinear)"));
  passes.register_pattern(relu(inplace_add), handler(true, true), check(true, true), opts(1, "qlinear_binary (bf16): relu(to_bf16(qlinear + other))"));
  passes.register_pattern(relu(inplace_add_swapped), handler(true, true), check(true, true),
                          opts(1, "qlinear_binary (bf16): relu(to_bf16(other + qlinear))"));
  // Pass 5: float output, sum.
  passes.register_pattern(add, handler(true), check(true), opts(2, "qlinear_binary: qlinear + accum"));
  passes.register_pattern(add_swapped, handler(true), check(true), opts(2, "qlinear_binary: accum + qlinear"));
  passes.register_pattern(inplace_add, handler(true, true), check(true, true), opts(2, "qlinear_binary (bf16): to_bf16(qlinear + other)"));
  passes.register_pattern(inplace_add_swapped, handler(true, true), check(true, true), opts(2, "qlinear_binary (bf16): to_bf16(other + qlinear)"));
}

// Applies the three fusion passes over `g`; returns the number of fusions.
inline std::size_t qlinear_post_op_fusion(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPasses passes(3, "qlinear_post_op_fusion");
  register_qlinear_post_op_fusion_patterns(passes, counters);
  return passes.apply(g, counters);
}

}  // namespace kiln
