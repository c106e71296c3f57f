#pragma once
// _c10d_functional overloads: functional collectives (side-effecting: never removed as dead code).
#include "kiln/core/op_ref.hpp"

namespace kiln::c10d_functional {

KILN_DECLARE_OP(all_gather_into_tensor, "_c10d_functional.all_gather_into_tensor.default");
KILN_DECLARE_OP(all_gather_into_tensor_out, "_c10d_functional.all_gather_into_tensor_out.default");
KILN_DECLARE_OP(all_gather_into_tensor_coalesced, "_c10d_functional.all_gather_into_tensor_coalesced.default");
KILN_DECLARE_OP(reduce_scatter_tensor, "_c10d_functional.reduce_scatter_tensor.default");
KILN_DECLARE_OP(reduce_scatter_tensor_coalesced, "_c10d_functional.reduce_scatter_tensor_coalesced.default");
KILN_DECLARE_OP(all_reduce, "_c10d_functional.all_reduce.default");
KILN_DECLARE_OP(all_reduce_coalesced, "_c10d_functional.all_reduce_coalesced.default");
KILN_DECLARE_OP(wait_tensor, "_c10d_functional.wait_tensor.default");
KILN_DECLARE_OP(broadcast, "_c10d_functional.broadcast.default");
KILN_DECLARE_OP(all_to_all_single, "_c10d_functional.all_to_all_single.default");

}  // namespace kiln::c10d_functional
