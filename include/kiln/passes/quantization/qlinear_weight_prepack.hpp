#pragma once
// qlinear weight prepack, the second of Inductor 2.11's quantization passes
// (_register_qlinear_weight_prepack, pass_number 1, after dequant promotion):
// a per-tensor dequantized uint8/int8 activation, read only by a linear whose
// weight is an int8 [N, K] tensor dequantized per output channel (axis 0),
// becomes onednn.qlinear_pointwise (or .tensor, for the .tensor dequantize) on
// onednn.qlinear_prepack(weight, x_shape), with a float32 output and no post-op
// yet. Forms: kiln's aten.linear, with and without bias; Inductor's decomposed
// addmm(bias, x, permute(w)) and mm(x, permute(w)) (the transpose also as torch's
// trace spells it, aten.t), 2-D or between reshapes
// (an input of rank > 2); and the bmm form Inductor's decomposition gives a
// linear over a non-contiguous input of rank 3: bmm(expand(dequant),
// expand(permute(w))), then add(., b) with a bias (Inductor's pass 1, and
// pass 2 without, after the bias form had its chance: here the second of the
// pass's two rounds). Each form also in int8-mixed-bf16: the activation's
// dequantize and the weight's dequantize_per_channel each through
// prims.convert_element_type to bfloat16 (read only by the linear, or the
// permute), giving a bfloat16 output as Inductor's does. Counters:
// qlinear_weight_prepack_matcher_count, and _nodes as Inductor counts them on
// its decomposed graph, where a linear is a permute and an addmm (or mm), plus
// two reshapes over an input of rank > 2 (the bmm form, where its recorded
// strides are those of a permuted input no view flattens).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/quantization/inductor_match_count.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"

namespace kiln {

namespace quantization_detail {

inline Node* find_target(const std::vector<Node*>& nodes, std::initializer_list<OpRef> targets) {
  for (Node* n : nodes)
    for (const OpRef& t : targets)
      if (n->op() == OpKind::call_function && n->target() == t) return n;
  return nullptr;
}

inline bool arg_is_int(const Node* n, std::size_t i, std::int64_t v) {
  const auto* p = i < n->args().size() ? n->arg(i).get_if<std::int64_t>() : nullptr;
  return p && *p == v;
}
inline bool arg_is_dtype(const Node* n, std::size_t i, DType d) {
  const auto* p = i < n->args().size() ? n->arg(i).get_if<DType>() : nullptr;
  return p && *p == d;
}

// A static shape as integers; nullopt where a dim is symbolic or the value is no list of ints.
inline std::optional<std::vector<std::int64_t>> int_list(const Arg& a) {
  const auto* l = a.get_if<ArgList>();
  if (!l) return std::nullopt;
  std::vector<std::int64_t> v;
  for (const Arg& x : *l) {
    const auto* i = x.get_if<std::int64_t>();
    if (!i) return std::nullopt;
    v.push_back(*i);
  }
  return v;
}
inline std::optional<std::vector<std::int64_t>> static_dims(const Node* n) {
  const TensorMeta* t = n ? n->meta.val.tensor() : nullptr;
  if (!t) return std::nullopt;
  std::vector<std::int64_t> v;
  for (const Dim& d : t->shape) {
    if (!is_static(d)) return std::nullopt;
    v.push_back(std::get<std::int64_t>(d));
  }
  return v;
}

// Inductor's extra checks of the bmm form: the activation's expand keeps its
// size, the weight [N, K] is permuted [1, 0] and expanded to [B, K, N] for the
// activation's B; and kiln's: a bias of N values (the qlinear's bias; an add of
// anything else is no bias).
inline bool valid_dequant_bmm(const std::vector<Node*>& nodes) {
  const Node* bmm = find_target(nodes, {aten::bmm});
  if (!bmm) return true;
  const Node* dq = find_target(nodes, {quantized_decomposed::dequantize_per_tensor, quantized_decomposed::dequantize_per_tensor_tensor});
  const Node* dqc = find_target(nodes, {quantized_decomposed::dequantize_per_channel});
  const Node* act_expand = bmm->arg(0).node();
  const Node* wgt_expand = bmm->arg(1).node();
  const auto x = static_dims(dq->arg(0).node()), w = static_dims(dqc->arg(0).node());
  const auto act_size = int_list(act_expand->arg(1)), wgt_size = int_list(wgt_expand->arg(1));
  if (!x || !w || !act_size || !wgt_size || *x != *act_size || x->size() != 3 || w->size() != 2) return false;
  if (*wgt_size != std::vector<std::int64_t>{(*x)[0], (*w)[1], (*w)[0]}) return false;
  const Node* add = find_target(nodes, {aten::add_Tensor});
  if (!add) return true;
  const auto b = static_dims(add->arg(1).node());
  return add->args().size() == 2 && !add->kwargs().find("alpha") && b && *b == std::vector<std::int64_t>{(*w)[0]};
}

// The output dtype of the int8 op replacing a match: bfloat16 in the
// int8-mixed-bf16 form (its inputs converted to bfloat16), float32 otherwise.
inline DType prepack_output_dtype(const std::vector<Node*>& nodes) {
  return find_target(nodes, {prims::convert_element_type}) ? DType::bfloat16 : DType::float32;
}

// Every dtype convert of the match is to bfloat16: Inductor's patterns take any
// dtype there, but the op it writes computes in bfloat16, so kiln holds to that.
inline bool converts_to_bf16(const std::vector<Node*>& nodes) {
  for (const Node* n : nodes)
    if (n->op() == OpKind::call_function && n->target() == prims::convert_element_type && !arg_is_dtype(n, 1, DType::bfloat16))
      return false;
  return true;
}

// Inductor's _is_valid_dequant_linear_pattern (the dequantize has one user),
// and what kiln's int8 kernel needs: a uint8/int8 activation, an int8 2-d
// weight dequantized per output channel, a transpose [1, 0] where there is one.
inline bool valid_dequant_linear(const std::vector<Node*>& nodes) {
  const Node* dq = find_target(nodes, {quantized_decomposed::dequantize_per_tensor, quantized_decomposed::dequantize_per_tensor_tensor});
  const Node* dqc = find_target(nodes, {quantized_decomposed::dequantize_per_channel});
  if (!dq || !dqc || dq->num_users() != 1 || !converts_to_bf16(nodes) || !valid_dequant_bmm(nodes)) return false;
  if (!arg_is_dtype(dq, 5, DType::uint8) && !arg_is_dtype(dq, 5, DType::int8)) return false;
  if (!arg_is_int(dqc, 3, 0) || !arg_is_dtype(dqc, 6, DType::int8)) return false;
  const Node* w = dqc->arg(0).node();
  const TensorMeta* wm = w ? w->meta.val.tensor() : nullptr;
  if (!wm || wm->rank() != 2 || wm->dtype != DType::int8) return false;
  if (const Node* t = find_target(nodes, {aten::permute})) {
    const auto* axes = t->args().size() > 1 ? t->arg(1).get_if<ArgList>() : nullptr;
    if (!axes || axes->size() != 2 || !pattern::python_equal((*axes)[0], Arg(1)) || !pattern::python_equal((*axes)[1], Arg(0))) return false;
  }
  return true;
}

// The activation's shape for qlinear_prepack's x_shape; None where a dim is symbolic.
inline Arg static_shape(const Node* n) {
  const TensorMeta* t = n ? n->meta.val.tensor() : nullptr;
  if (!t) return Arg();
  ArgList dims;
  for (const Dim& d : t->shape) {
    if (!is_static(d)) return Arg();
    dims.push_back(std::get<std::int64_t>(d));
  }
  return dims;
}

// Replaces the matched linear (ending at `out`) by qlinear_pointwise on the packed weight.
inline void prepack_qlinear(Graph& g, const std::vector<Node*>& nodes, Node* out, const Arg& bias) {
  const Node* dq = find_target(nodes, {quantized_decomposed::dequantize_per_tensor, quantized_decomposed::dequantize_per_tensor_tensor});
  const Node* dqc = find_target(nodes, {quantized_decomposed::dequantize_per_channel});
  Node* qx = dq->arg(0).node();
  Node* packed = g.call_function(onednn::qlinear_prepack, {dqc->arg(0), static_shape(qx)});
  packed->meta = dqc->arg(0).node()->meta;
  const bool tensors = dq->target() == quantized_decomposed::dequantize_per_tensor_tensor;
  Node* q = g.call_function(tensors ? onednn::qlinear_pointwise_tensor : onednn::qlinear_pointwise,
                            {dq->arg(0), dq->arg(1), dq->arg(2), packed, dqc->arg(1), dqc->arg(2), bias, 1.0, std::int64_t{0},
                             Arg(prepack_output_dtype(nodes)), std::string("none"), ArgList{}, std::string("")});
  q->meta = out->meta;
  out->replace_all_uses_with(q);
}

// Whether the match binds `name` (patterns with and without a bias share one handler).
template <class M>
constexpr bool binds(std::string_view name) {
  for (std::string_view n : std::remove_cvref_t<M>::capture_names())
    if (n == name) return true;
  return false;
}

}  // namespace quantization_detail

// Registers the prepack patterns into `passes` (two rounds: the bmm form
// without a bias goes in the second); matches are counted into `counters` when given.
inline void register_qlinear_weight_prepack_patterns(PatternMatcherPasses& passes, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = [counters](auto& m, Graph& g, Node* out) {
    kiln::Arg bias;
    if constexpr (qd::binds<decltype(m)>("b")) bias = get<"b">(m);
    std::int64_t nodes = static_cast<std::int64_t>(m.nodes().size());
    if (out->target() == aten::linear) {
      const Node* x = out->arg(0).node();
      const TensorMeta* xm = x ? x->meta.val.tensor() : nullptr;
      // Inductor's linear: a permute and addmm/mm, between reshapes over rank > 2; or, over an
      // input no view flattens, two expands into bmm and the bias added after.
      if (!qd::inductor_folds_linear_input(xm)) nodes += 3 + (qd::binds<decltype(m)>("b") ? 1 : 0);
      else nodes += 1 + (xm && xm->rank() > 2 ? 2 : 0);
    }
    const auto kiln_nodes = static_cast<std::int64_t>(m.nodes().size());
    qd::prepack_qlinear(g, m.nodes(), out, bias);
    m.erase_nodes();
    qd::count_inductor_match(counters, "qlinear_weight_prepack", nodes, kiln_nodes);
  };
  const auto check = [](const auto& m) { return qd::valid_dequant_linear(m.nodes()); };
  const auto dqc = CallFunction(quantized_decomposed::dequantize_per_channel, kw<"q_weight">, kw<"w_scale">, kw<"w_zp">,
                                kw<"w_axis">, kw<"w_quant_min">, kw<"w_quant_max">, kw<"w_dtype">);
  // One set of forms per dtype and transpose: `dq` and `w` are the activation and
  // the weight as the linear reads them, `transpose` spells w's transpose.
  const auto forms = [&](auto dq, auto w, auto transpose, const std::string& tag) {
    const auto t = transpose(w);
    const auto act2d = CallFunction(aten::reshape, dq, kw<"act_reshape_size">);
    const auto out_nd = [](auto inner) { return CallFunction(aten::reshape, inner, kw<"output_reshape_size">); };
    const auto opts = [&tag](const char* form, std::size_t round = 0) {
      return PatternOptions{.name = "qlinear_weight_prepack" + tag + ": " + form, .pass_number = round};
    };
    auto& pass = passes;
    pass.register_pattern(CallFunction(aten::linear, dq, w, kw<"b">), handler, check, opts("linear(dequant, dequant_per_channel, b)"));
    pass.register_pattern(CallFunction(aten::linear, dq, w), handler, check, opts("linear(dequant, dequant_per_channel)"));
    pass.register_pattern(out_nd(CallFunction(aten::addmm, kw<"b">, act2d, t)), handler, check,
                          opts("reshape(addmm(b, reshape(dequant), t))"));
    pass.register_pattern(out_nd(CallFunction(aten::mm, act2d, t)), handler, check, opts("reshape(mm(reshape(dequant), t))"));
    pass.register_pattern(CallFunction(aten::addmm, kw<"b">, dq, t), handler, check, opts("addmm(b, dequant, t)"));
    pass.register_pattern(CallFunction(aten::mm, dq, t), handler, check, opts("mm(dequant, t)"));
    const auto bmm = CallFunction(aten::bmm, CallFunction(aten::expand, dq, kw<"act_expand_size">),
                                  CallFunction(aten::expand, t, kw<"wgt_expand_size">));
    pass.register_pattern(CallFunction(aten::add_Tensor, bmm, kw<"b">), handler, check, opts("add(bmm(expand(dequant), expand(t)), b)"));
    pass.register_pattern(bmm, handler, check, opts("bmm(expand(dequant), expand(t))", 1));
  };
  // The transpose as Inductor's decomposition writes it, and as torch's own
  // trace does (an autocast re-trace of a linear: t(to_bf16(dequant_per_channel(w)))).
  const auto permuted = [](auto w) { return CallFunction(aten::permute, w, kw<"permute_axes">); };
  const auto t = [](auto w) { return CallFunction(aten::t, w); };
  forms(qd::dequantize_per_tensor_activation(), dqc, permuted, "");
  forms(qd::dequantize_per_tensor_activation(), dqc, t, " (t)");
  // int8-mixed-bf16: each input through convert_element_type (Inductor's autocast_act_dtype / autocast_wgt_dtype).
  const auto dq_bf16 = CallFunction(prims::convert_element_type, qd::dequantize_per_tensor_activation(), kw<"autocast_act_dtype">);
  const auto dqc_bf16 = CallFunction(prims::convert_element_type, dqc, kw<"autocast_wgt_dtype">);
  forms(dq_bf16, dqc_bf16, permuted, " (bf16)");
  forms(dq_bf16, dqc_bf16, t, " (bf16, t)");
}

// Applies the weight prepack once over `g`; returns the number of linears replaced.
inline std::size_t qlinear_weight_prepack(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPasses passes(2, "qlinear_weight_prepack");
  register_qlinear_weight_prepack_patterns(passes, counters);
  return passes.apply(g, counters);
}

}  // namespace kiln
