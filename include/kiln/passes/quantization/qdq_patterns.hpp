#pragma once
// The per-tensor dequantize and quantize the quantization patterns match around
// an int8 op, every argument captured (the names the handlers read them by).
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/pattern/call.hpp"
#include "kiln/pattern/leaf.hpp"

namespace kiln::quantization_detail {

// dequantize_per_tensor of a captured `x` with captured quantization arguments.
inline auto dequantize_x_pattern() {
  using namespace pattern;
  return CallFunction(quantized_decomposed::dequantize_per_tensor, kw<"x">, kw<"x_scale">, kw<"x_zp">, kw<"x_quant_min">,
                      kw<"x_quant_max">, kw<"x_dq_dtype">);
}

// quantize_per_tensor of `inner` with captured quantization arguments.
template <class Inner>
auto quantize_o_pattern(Inner inner) {
  using namespace pattern;
  return CallFunction(quantized_decomposed::quantize_per_tensor, inner, kw<"o_inv_scale">, kw<"o_zp">, kw<"o_qmin">, kw<"o_qmax">,
                      kw<"o_dtype">);
}

}  // namespace kiln::quantization_detail
