#pragma once
// The quantization passes of Inductor 2.11's freezing (torch/_inductor/fx_passes/
// quantization.py) in its order, each a pass of kiln-opt's registry, and the
// `quantization` pipeline running them: dequant_promotion (pass 0),
// qconv_weight_prepack and qlinear_weight_prepack (pass 1), qlinear_post_op_fusion (passes 3 to 5), and
// qlinear_lower, which counts what Inductor's lowering counts.
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"
#include "kiln/passes/quantization/qconv_weight_prepack.hpp"
#include "kiln/passes/quantization/qlinear_lower.hpp"
#include "kiln/passes/quantization/qlinear_post_op_fusion.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"

namespace kiln {

inline void register_quantization_pipeline(PassRegistry& registry) {
  registry.add(Pass{"qconv_weight_prepack",
                    "dequantize -> 2-d convolution with a per-channel int8 weight -> onednn.qconv_pointwise on qconv_prepack",
                    [](Graph& g, PassContext& ctx) { return qconv_weight_prepack(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qlinear_weight_prepack",
                    "dequantize -> linear with a per-channel int8 weight -> onednn.qlinear_pointwise on qlinear_prepack",
                    [](Graph& g, PassContext& ctx) { return qlinear_weight_prepack(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qlinear_post_op_fusion",
                    "fold relu/gelu, an add (then relu) and the output quantize into qlinear_pointwise (Inductor's passes 3-5)",
                    [](Graph& g, PassContext& ctx) { return qlinear_post_op_fusion(g, &ctx.counters) > 0; }});
  registry.add(Pass{"qlinear_lower", "count the qlinear_pointwise nodes Inductor's lowering counts (changes nothing)",
                    [](Graph& g, PassContext& ctx) {
                      count_qlinear_lowerings(g, &ctx.counters);
                      return false;
                    }});
  registry.add_pipeline({"quantization", "Inductor's quantization passes in its order",
                         [](const nlohmann::json&) {
                           return std::vector<PipelineStep>{{"dequant_promotion"}, {"qconv_weight_prepack"}, {"qlinear_weight_prepack"},
                                                            {"qlinear_post_op_fusion"}, {"qlinear_lower"}};
                         }});
}

}  // namespace kiln
