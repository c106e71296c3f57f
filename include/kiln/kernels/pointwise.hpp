#pragma once
// Element-wise kernels on xtensor: unary math (one functor per op, one
// generic lower), torch.nn's other activations, binary arithmetic with broadcasting and scalars, where,
// comparisons and masked_fill, casts, dropout in inference and the quantize/dequantize ops, at the
// aten, torch-function, Tensor-method and operator levels.
#include "kiln/kernels/pointwise/activations.hpp"
#include "kiln/kernels/pointwise/binary.hpp"
#include "kiln/kernels/pointwise/compare.hpp"
#include "kiln/kernels/pointwise/quantize.hpp"
#include "kiln/kernels/pointwise/unary.hpp"

namespace kiln::kernels {

using pointwise_kernels = concat_groups_t<unary_kernels, activation_kernels, binary_kernels, compare_kernels, quantize_kernels>;

}  // namespace kiln::kernels
