#pragma once
// The quantization passes of Inductor 2.11's freezing (torch/_inductor/fx_passes/
// quantization.py) in its order, each a pass of kiln-opt's registry, and the
// `quantization` pipeline running them: remove_assert_ops (Inductor's post-grad
// step; torch.export's graphs carry these asserts, Dynamo's do not),
// pointless_view (Inductor's joint-graph pattern, which runs before them all),
// quant_lift_up, dequant_promotion (pass 0), qconv_weight_prepack and qlinear_weight_prepack (pass 1), qconv_post_op_fusion
// and qlinear_post_op_fusion (passes 3 to 5; conv and linear patterns never
// share a node, so running the conv ones first changes nothing), then the
// lowerings of Inductor's post-grad pass: qmaxpool2d, qcat, qreshape (int8
// tensors pass through), woq_int8 (weight-only int8 into _weight_int8pack_mm),
// qconv_lower and qlinear_lower, which count what Inductor's lowering counts.
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"
#include "kiln/passes/quantization/qcat.hpp"
#include "kiln/passes/quantization/qconv_lower.hpp"
#include "kiln/passes/quantization/qconv_post_op_fusion.hpp"
#include "kiln/passes/quantization/qconv_weight_prepack.hpp"
#include "kiln/passes/quantization/qlinear_lower.hpp"
#include "kiln/passes/quantization/qlinear_post_op_fusion.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"
#include "kiln/passes/quantization/qmaxpool2d.hpp"
#include "kiln/passes/quantization/qreshape.hpp"
#include "kiln/passes/quantization/quant_lift_up.hpp"
#include "kiln/passes/quantization/woq_int8.hpp"
#include "kiln/passes/pointless_view.hpp"
#include "kiln/passes/remove_assert_ops.hpp"

namespace kiln {

inline void register_quantization_pipeline(PassRegistry& registry) {
  register_remove_assert_ops_pass(registry);
  register_pointless_view_pass(registry);
  registry.add(Pass{"quant_lift_up", "move a per-tensor quantize above the view/reshape/permute/transpose chain feeding it",
                    [](Graph& g, PassContext& ctx) { return quant_lift_up(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qconv_weight_prepack",
                    "dequantize -> 2-d convolution with a per-channel int8 weight -> onednn.qconv_pointwise on qconv_prepack",
                    [](Graph& g, PassContext& ctx) { return qconv_weight_prepack(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qlinear_weight_prepack",
                    "dequantize -> linear with a per-channel int8 weight -> onednn.qlinear_pointwise on qlinear_prepack",
                    [](Graph& g, PassContext& ctx) { return qlinear_weight_prepack(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qconv_post_op_fusion",
                    "fold relu/hardtanh/hardswish/silu, a dequantized or float addend (then relu) and the output quantize into "
                    "qconv_pointwise and qconv2d_pointwise.binary (Inductor's passes 3-5)",
                    [](Graph& g, PassContext& ctx) { return qconv_post_op_fusion(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qlinear_post_op_fusion",
                    "fold relu/gelu, an add (then relu) and the output quantize into qlinear_pointwise (Inductor's passes 3-5)",
                    [](Graph& g, PassContext& ctx) { return qlinear_post_op_fusion(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qmaxpool2d", "dequantize -> max_pool2d_with_indices[0] -> quantize, one scale and zero point -> quantized.max_pool2d",
                    [](Graph& g, PassContext& ctx) { return qmaxpool2d(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qcat", "cat of dequantizes -> quantize, one scale and zero point -> cat of the int8 tensors",
                    [](Graph& g, PassContext& ctx) { return qcat(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qreshape", "dequantize -> reshape -> quantize, one scale and zero point -> reshape of the int8 tensor",
                    [](Graph& g, PassContext& ctx) { return qreshape(g, &ctx.counters) > 0; }});
  register_woq_int8_pass(registry);
  registry.add(Pass{"qconv_lower", "count the qconv nodes Inductor's lowering counts (changes nothing)",
                    [](Graph& g, PassContext& ctx) {
                      count_qconv_lowerings(g, &ctx.counters);
                      return false;
                    }});
  registry.add(Pass{"qlinear_lower", "count the qlinear_pointwise nodes Inductor's lowering counts (changes nothing)",
                    [](Graph& g, PassContext& ctx) {
                      count_qlinear_lowerings(g, &ctx.counters);
                      return false;
                    }});
  registry.add_pipeline({"quantization", "Inductor's quantization passes in its order",
                         [](const nlohmann::json&) {
                           return std::vector<PipelineStep>{{"remove_assert_ops"}, {"pointless_view"}, {"quant_lift_up"}, {"dequant_promotion"}, {"qconv_weight_prepack"},
                                                            {"qlinear_weight_prepack"}, {"qconv_post_op_fusion"},
                                                            {"qlinear_post_op_fusion"}, {"qmaxpool2d"}, {"qcat"}, {"qreshape"},
                                                            {"woq_int8"}, {"qconv_lower"}, {"qlinear_lower"}};
                         }});
}

}  // namespace kiln
