#pragma once
// Schemas of the ops whose patterns use keyword children, so the matcher can
// normalize positional arguments and defaults (see kiln/core/op_schema.hpp).
// Signatures follow PyTorch's (native_functions.yaml and torch.nn.functional).
#include "kiln/core/op_schema.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/ops/quantized.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/ops/torch.hpp"

namespace kiln::ops_schemas {

KILN_DECLARE_OP_SCHEMA(aten::add_Tensor, "self, other, *, alpha=1");
KILN_DECLARE_OP_SCHEMA(aten::sub_Tensor, "self, other, *, alpha=1");
KILN_DECLARE_OP_SCHEMA(aten::mul_Tensor, "self, other");
KILN_DECLARE_OP_SCHEMA(aten::div_Tensor, "self, other");
KILN_DECLARE_OP_SCHEMA(aten::mm, "self, mat2");
KILN_DECLARE_OP_SCHEMA(aten::weight_int8pack_mm, "self, mat2, scales");
KILN_DECLARE_OP_SCHEMA(aten::bmm, "self, mat2");
KILN_DECLARE_OP_SCHEMA(aten::addmm, "self, mat1, mat2, *, beta=1, alpha=1");
KILN_DECLARE_OP_SCHEMA(aten::baddbmm, "self, batch1, batch2, *, beta=1, alpha=1");
KILN_DECLARE_OP_SCHEMA(aten::pow_Tensor_Scalar, "self, exponent");
KILN_DECLARE_OP_SCHEMA(aten::gelu, "self, *, approximate='none'");
KILN_DECLARE_OP_SCHEMA(aten::leaky_relu, "self, negative_slope=0.01");
KILN_DECLARE_OP_SCHEMA(aten::hardtanh, "self, min_val=-1, max_val=1");
KILN_DECLARE_OP_SCHEMA(aten::clamp, "self, min=None, max=None");
KILN_DECLARE_OP_SCHEMA(aten::convolution,
                       "input, weight, bias, stride, padding, dilation, transposed, output_padding, groups");
KILN_DECLARE_OP_SCHEMA(aten::split_Tensor, "self, split_size, dim=0");
KILN_DECLARE_OP_SCHEMA(aten::split_with_sizes, "self, split_sizes, dim=0");
KILN_DECLARE_OP_SCHEMA(aten::cat, "tensors, dim=0");
KILN_DECLARE_OP_SCHEMA(aten::stack, "tensors, dim=0");
KILN_DECLARE_OP_SCHEMA(aten::unbind_int, "self, dim=0");
KILN_DECLARE_OP_SCHEMA(aten::sum_dim_IntList, "self, dim, keepdim=False, *, dtype=None");
KILN_DECLARE_OP_SCHEMA(aten::mean_dim, "self, dim, keepdim=False, *, dtype=None");
KILN_DECLARE_OP_SCHEMA(aten::permute, "self, dims");
KILN_DECLARE_OP_SCHEMA(aten::view, "self, size");
KILN_DECLARE_OP_SCHEMA(aten::reshape, "self, shape");
KILN_DECLARE_OP_SCHEMA(aten::transpose_int, "self, dim0, dim1");
KILN_DECLARE_OP_SCHEMA(aten::unsqueeze, "self, dim");
KILN_DECLARE_OP_SCHEMA(aten::native_layer_norm, "input, normalized_shape, weight, bias, eps");
KILN_DECLARE_OP_SCHEMA(aten::linear, "input, weight, bias=None");

KILN_DECLARE_OP_SCHEMA(F::linear, "input, weight, bias=None");
KILN_DECLARE_OP_SCHEMA(F::layer_norm, "input, normalized_shape, weight=None, bias=None, eps=1e-05");
KILN_DECLARE_OP_SCHEMA(F::batch_norm,
                       "input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05");
KILN_DECLARE_OP_SCHEMA(F::relu, "input, inplace=False");
KILN_DECLARE_OP_SCHEMA(F::gelu, "input, approximate='none'");
KILN_DECLARE_OP_SCHEMA(F::tanh, "input");
KILN_DECLARE_OP_SCHEMA(F::sigmoid, "input");
KILN_DECLARE_OP_SCHEMA(F::softmax, "input, dim=None, _stacklevel=3, dtype=None");
KILN_DECLARE_OP_SCHEMA(F::dropout, "input, p=0.5, training=True, inplace=False");

KILN_DECLARE_OP_SCHEMA(torch::split, "tensor, split_size_or_sections, dim=0");
KILN_DECLARE_OP_SCHEMA(torch::cat, "tensors, dim=0");
KILN_DECLARE_OP_SCHEMA(torch::stack, "tensors, dim=0");
KILN_DECLARE_OP_SCHEMA(torch::unbind, "input, dim=0");
KILN_DECLARE_OP_SCHEMA(torch::tanh, "input");
KILN_DECLARE_OP_SCHEMA(torch::sigmoid, "input");
KILN_DECLARE_OP_SCHEMA(torch::relu, "input");
KILN_DECLARE_OP_SCHEMA(torch::transpose, "input, dim0, dim1");
KILN_DECLARE_OP_SCHEMA(torch::unsqueeze, "input, dim");
KILN_DECLARE_OP_SCHEMA(torch::bmm, "input, mat2");
KILN_DECLARE_OP_SCHEMA(torch::baddbmm, "input, batch1, batch2, *, beta=1, alpha=1");
KILN_DECLARE_OP_SCHEMA(torch::mm, "input, mat2");
KILN_DECLARE_OP_SCHEMA(torch::addmm, "input, mat1, mat2, *, beta=1, alpha=1");
KILN_DECLARE_OP_SCHEMA(torch::conv2d, "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1");
KILN_DECLARE_OP_SCHEMA(torch::flatten, "input, start_dim=0, end_dim=-1");
KILN_DECLARE_OP_SCHEMA(torch::mean, "input, dim=None, keepdim=False, *, dtype=None");
KILN_DECLARE_OP_SCHEMA(torch::sum, "input, dim=None, keepdim=False, *, dtype=None");

KILN_DECLARE_OP_SCHEMA(quantized_decomposed::quantize_per_tensor, "input, scale, zero_point, quant_min, quant_max, dtype");
KILN_DECLARE_OP_SCHEMA(quantized_decomposed::quantize_per_tensor_tensor,
                       "input, scale, zero_point, quant_min, quant_max, dtype");
KILN_DECLARE_OP_SCHEMA(quantized_decomposed::dequantize_per_tensor,
                       "input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None");
KILN_DECLARE_OP_SCHEMA(quantized_decomposed::dequantize_per_tensor_tensor,
                       "input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None");
KILN_DECLARE_OP_SCHEMA(quantized_decomposed::quantize_per_channel,
                       "input, scales, zero_points, axis, quant_min, quant_max, dtype");
KILN_DECLARE_OP_SCHEMA(quantized_decomposed::dequantize_per_channel,
                       "input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None");
KILN_DECLARE_OP_SCHEMA(prims::convert_element_type, "a, dtype");
// Max pooling of a uint8/int8 tensor, whose result keeps its scale and zero point.
KILN_DECLARE_OP_SCHEMA(quantized::max_pool2d, "qx, kernel_size, stride, padding, dilation, ceil_mode=False");

// The fused int8 linear (PyTorch's onednn library); kiln's qlinear_prepack keeps the [N, K] weight.
KILN_DECLARE_OP_SCHEMA(onednn::qlinear_prepack, "weight, x_shape");
KILN_DECLARE_OP_SCHEMA(onednn::qlinear_pointwise,
                       "qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, bias, output_scale, output_zero_point, "
                       "output_dtype, post_op_name, post_op_args, post_op_algorithm");
KILN_DECLARE_OP_SCHEMA(onednn::qlinear_pointwise_tensor,
                       "qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, bias, output_scale, output_zero_point, "
                       "output_dtype, post_op_name, post_op_args, post_op_algorithm");
KILN_DECLARE_OP_SCHEMA(onednn::qlinear_pointwise_binary,
                       "qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, other, bias, output_scale, output_zero_point, "
                       "output_dtype, other_scale, other_zp, binary_post_op, binary_alpha, unary_post_op, unary_post_op_args, "
                       "unary_post_op_algorithm");
KILN_DECLARE_OP_SCHEMA(onednn::qlinear_pointwise_binary_tensor,
                       "qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, other, bias, output_scale, output_zero_point, "
                       "output_dtype, other_scale, other_zp, binary_post_op, binary_alpha, unary_post_op, unary_post_op_args, "
                       "unary_post_op_algorithm");

// The fused int8 convolution; kiln's qconv_prepack keeps the logical [OC, IC/groups, k...] weight.
KILN_DECLARE_OP_SCHEMA(onednn::qconv_prepack,
                       "weight, w_scales, x_scale, x_zp, stride, padding, dilation, groups, x_shape=None");
#define KILN_QCONV_UNARY_SCHEMA                                                                                    \
  "qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, bias, stride, padding, dilation, groups, output_scale, " \
  "output_zero_point, output_dtype, attr, scalars, algorithm"
KILN_DECLARE_OP_SCHEMA(onednn::qconv_pointwise, KILN_QCONV_UNARY_SCHEMA);
KILN_DECLARE_OP_SCHEMA(onednn::qconv_pointwise_tensor, KILN_QCONV_UNARY_SCHEMA);
KILN_DECLARE_OP_SCHEMA(onednn::qconv2d_pointwise, KILN_QCONV_UNARY_SCHEMA);
#undef KILN_QCONV_UNARY_SCHEMA
#define KILN_QCONV_BINARY_SCHEMA                                                                                           \
  "qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, qaccum, bias, stride, padding, dilation, groups, output_scale, " \
  "output_zero_point, output_dtype, accum_scale, accum_zero_point, binary_attr, alpha, unary_attr, unary_scalars, "      \
  "unary_algorithm"
KILN_DECLARE_OP_SCHEMA(onednn::qconv2d_pointwise_binary, KILN_QCONV_BINARY_SCHEMA);
KILN_DECLARE_OP_SCHEMA(onednn::qconv2d_pointwise_binary_tensor, KILN_QCONV_BINARY_SCHEMA);
#undef KILN_QCONV_BINARY_SCHEMA

}  // namespace kiln::ops_schemas
