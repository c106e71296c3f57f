#pragma once
// kiln's own ops: what kiln's passes create where Inductor calls a library
// kernel that kiln replaces with one of its own (`kiln::kops::grouped_mm` is
// "kiln.grouped_mm").
#include "kiln/core/op_ref.hpp"

namespace kiln::kops {

// grouped_mm(inputs, weights, biases or None) -> [inputs[i] @ weights[i] (+ biases[i])]:
// group_linear's fused op, in place of fbgemm's gmm.
KILN_DECLARE_OP(grouped_mm, "kiln.grouped_mm");

}  // namespace kiln::kops
