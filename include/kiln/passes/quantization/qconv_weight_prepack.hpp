#pragma once
// qconv weight prepack, Inductor 2.11's _register_qconv_weight_prepack (pass_number
// 1, with the qlinear one): a per-tensor dequantized uint8/int8 activation, read
// only by a 2-d aten.convolution (not transposed) whose weight is an int8
// [OC, IC/groups, KH, KW] tensor dequantized per output channel (axis 0),
// becomes onednn.qconv_pointwise (or .tensor, for the .tensor dequantize) on
// onednn.qconv_prepack, with a float32 output and no post-op yet; the bias,
// present or None, carries over. Also the int8-mixed-bf16 form: the activation's
// dequantize and the weight's dequantize_per_channel each through
// prims.convert_element_type to bfloat16 (read only by the convolution), giving
// a bfloat16 output as Inductor's does. Counters: qconv_weight_prepack_matcher_count,
// and _nodes: the dequantize, the weight's dequantize, their converts in the
// bf16 form, and the convolution.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"

namespace kiln {

namespace quantization_detail {

inline std::size_t rank_of(const Node* n) {
  const TensorMeta* m = n ? n->meta.val.tensor() : nullptr;
  return m ? m->rank() : 0;
}

// Inductor's _is_valid_dequant_conv_pattern (a 3-d or 4-d activation and weight,
// that is a 1-d or 2-d convolution, the dequantize read only by the conv) and what
// kiln's int8 kernel needs: a uint8/int8 activation, an int8 weight dequantized per
// output channel, no transpose.
inline bool valid_dequant_conv(const std::vector<Node*>& nodes) {
  const Node* dq = find_target(nodes, {quantized_decomposed::dequantize_per_tensor, quantized_decomposed::dequantize_per_tensor_tensor});
  const Node* dqc = find_target(nodes, {quantized_decomposed::dequantize_per_channel});
  const Node* conv = find_target(nodes, {aten::convolution});
  if (!dq || !dqc || !conv || dq->num_users() != 1 || !converts_to_bf16(nodes)) return false;
  if (!arg_is_dtype(dq, 5, DType::uint8) && !arg_is_dtype(dq, 5, DType::int8)) return false;
  if (!arg_is_int(dqc, 3, 0) || !arg_is_dtype(dqc, 6, DType::int8)) return false;
  const auto* transposed = conv->args().size() > 6 ? conv->arg(6).get_if<bool>() : nullptr;
  if (!transposed || *transposed) return false;
  const Node* w = dqc->arg(0).node();
  const TensorMeta* wm = w ? w->meta.val.tensor() : nullptr;
  const auto conv1d_or_2d = [](std::size_t rank) { return rank == 3 || rank == 4; };
  return wm && wm->dtype == DType::int8 && conv1d_or_2d(wm->rank()) && conv1d_or_2d(rank_of(dq->arg(0).node()));
}

// Replaces the matched convolution by qconv_pointwise on the packed weight.
inline void prepack_qconv(Graph& g, const std::vector<Node*>& nodes, Node* conv) {
  const Node* dq = find_target(nodes, {quantized_decomposed::dequantize_per_tensor, quantized_decomposed::dequantize_per_tensor_tensor});
  const Node* dqc = find_target(nodes, {quantized_decomposed::dequantize_per_channel});
  Node* qx = dq->arg(0).node();
  Node* packed = g.call_function(onednn::qconv_prepack, {dqc->arg(0), dqc->arg(1), dq->arg(1), dq->arg(2), conv->arg(3), conv->arg(4),
                                                         conv->arg(5), conv->arg(8), static_shape(qx)});
  packed->meta = dqc->arg(0).node()->meta;
  const bool tensors = dq->target() == quantized_decomposed::dequantize_per_tensor_tensor;
  Node* q = g.call_function(tensors ? onednn::qconv_pointwise_tensor : onednn::qconv_pointwise,
                            {dq->arg(0), dq->arg(1), dq->arg(2), packed, dqc->arg(1), dqc->arg(2), conv->arg(2), conv->arg(3), conv->arg(4),
                             conv->arg(5), conv->arg(8), 1.0, std::int64_t{0}, Arg(prepack_output_dtype(nodes)), std::string("none"), ArgList{},
                             std::string("")});
  q->meta = conv->meta;
  conv->replace_all_uses_with(q);
}

}  // namespace quantization_detail

// Registers the prepack pattern into `pass`; matches are counted into `counters` when given.
inline void register_qconv_weight_prepack_patterns(PatternMatcherPass& pass, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = [counters](auto& m, Graph& g, Node* out) {
    const auto nodes = static_cast<std::int64_t>(m.nodes().size());
    qd::prepack_qconv(g, m.nodes(), out);
    m.erase_nodes();
    if (counters) {
      counters->increment("qconv_weight_prepack_matcher_count", 1);
      counters->increment("qconv_weight_prepack_matcher_nodes", nodes);
    }
  };
  const auto check = [](const auto& m) { return qd::valid_dequant_conv(m.nodes()); };
  const auto dqc = CallFunction(quantized_decomposed::dequantize_per_channel, kw<"q_weight">, kw<"w_scale">, kw<"w_zp">, kw<"w_axis">,
                                kw<"w_quant_min">, kw<"w_quant_max">, kw<"w_dtype">);
  const auto forms = [&](auto dq, auto w, const std::string& tag) {
    pass.register_pattern(CallFunction(aten::convolution, dq, w, kw<"b">, kw<"stride">, kw<"padding">, kw<"dilation">, kw<"is_transposed">,
                                       kw<"out_padding">, kw<"groups">),
                          handler, check, PatternOptions{.name = "qconv_weight_prepack" + tag + ": convolution(dequant, dequant_per_channel, b)"});
  };
  forms(qd::dequantize_per_tensor_activation(), dqc, "");
  // int8-mixed-bf16: each input through convert_element_type (Inductor's autocast_act_dtype / autocast_wgt_dtype).
  forms(CallFunction(prims::convert_element_type, qd::dequantize_per_tensor_activation(), kw<"autocast_act_dtype">),
        CallFunction(prims::convert_element_type, dqc, kw<"autocast_wgt_dtype">), " (bf16)");
}

// Applies the weight prepack once over `g`; returns the number of convolutions replaced.
inline std::size_t qconv_weight_prepack(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPass pass("qconv_weight_prepack");
  register_qconv_weight_prepack_patterns(pass, counters);
  return pass.apply(g, counters);
}

}  // namespace kiln
