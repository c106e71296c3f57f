#pragma once
// quantized_decomposed overloads: the quantize/dequantize nodes of PT2E-quantized graphs.
#include "kiln/core/op_ref.hpp"

namespace kiln::quantized_decomposed {

KILN_DECLARE_OP(quantize_per_tensor, "quantized_decomposed.quantize_per_tensor.default");
KILN_DECLARE_OP(quantize_per_tensor_tensor, "quantized_decomposed.quantize_per_tensor.tensor");
KILN_DECLARE_OP(dequantize_per_tensor, "quantized_decomposed.dequantize_per_tensor.default");
KILN_DECLARE_OP(dequantize_per_tensor_tensor, "quantized_decomposed.dequantize_per_tensor.tensor");
KILN_DECLARE_OP(quantize_per_channel, "quantized_decomposed.quantize_per_channel.default");
KILN_DECLARE_OP(dequantize_per_channel, "quantized_decomposed.dequantize_per_channel.default");
KILN_DECLARE_OP(choose_qparams_tensor, "quantized_decomposed.choose_qparams.tensor");

}  // namespace kiln::quantized_decomposed
