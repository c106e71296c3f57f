#pragma once
// quantized overloads: the int8 ops Inductor's quantization lowerings emit on
// uint8/int8 tensors that keep their input's scale and zero point.
#include "kiln/core/op_ref.hpp"

namespace kiln::quantized {

KILN_DECLARE_OP(max_pool2d, "quantized.max_pool2d.default");

}  // namespace kiln::quantized
