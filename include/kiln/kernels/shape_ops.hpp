#pragma once
// Shape and view ops: zero-copy views where strides allow, copies where they do not, shape values (x.shape, size()) as static values.
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels {

inline constexpr auto shape_ops_kernels = boost::hana::tuple_t<>;

}  // namespace kiln::kernels
