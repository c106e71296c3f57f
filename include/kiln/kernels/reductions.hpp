#pragma once
// Reductions on xtensor (mean, sum, amax, ...) at every level the exporter writes.
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels {

inline constexpr auto reductions_kernels = boost::hana::tuple_t<>;

}  // namespace kiln::kernels
