#pragma once
// onednn overloads: the fused int8 ops Inductor's quantization passes produce.
#include "kiln/core/op_ref.hpp"

namespace kiln::onednn {

KILN_DECLARE_OP(qconv_pointwise, "onednn.qconv_pointwise.default");
KILN_DECLARE_OP(qconv_pointwise_tensor, "onednn.qconv_pointwise.tensor");
KILN_DECLARE_OP(qconv2d_pointwise, "onednn.qconv2d_pointwise.default");
KILN_DECLARE_OP(qconv2d_pointwise_binary, "onednn.qconv2d_pointwise.binary");
KILN_DECLARE_OP(qconv2d_pointwise_binary_tensor, "onednn.qconv2d_pointwise.binary_tensor");
KILN_DECLARE_OP(qlinear_pointwise, "onednn.qlinear_pointwise.default");
KILN_DECLARE_OP(qlinear_pointwise_tensor, "onednn.qlinear_pointwise.tensor");
KILN_DECLARE_OP(qlinear_pointwise_binary, "onednn.qlinear_pointwise.binary");
KILN_DECLARE_OP(qlinear_pointwise_binary_tensor, "onednn.qlinear_pointwise.binary_tensor");
KILN_DECLARE_OP(qconv_prepack, "onednn.qconv_prepack.default");
KILN_DECLARE_OP(qlinear_prepack, "onednn.qlinear_prepack.default");

}  // namespace kiln::onednn
