#pragma once
// Python `operator` module callables (`kiln::pyop::getitem` is "operator.getitem").
#include "kiln/core/op_ref.hpp"

namespace kiln::pyop {

KILN_DECLARE_OP(getitem, "operator.getitem");
KILN_DECLARE_OP(add, "operator.add");
KILN_DECLARE_OP(sub, "operator.sub");
KILN_DECLARE_OP(mul, "operator.mul");
KILN_DECLARE_OP(truediv, "operator.truediv");
KILN_DECLARE_OP(floordiv, "operator.floordiv");
KILN_DECLARE_OP(matmul, "operator.matmul");
KILN_DECLARE_OP(neg, "operator.neg");

}  // namespace kiln::pyop
