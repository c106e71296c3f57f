#pragma once
// prims overloads.
#include "kiln/core/op_ref.hpp"

namespace kiln::prims {

KILN_DECLARE_OP(convert_element_type, "prims.convert_element_type.default");
KILN_DECLARE_OP(iota, "prims.iota.default");
KILN_DECLARE_OP(var, "prims.var.default");

}  // namespace kiln::prims
