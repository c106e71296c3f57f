#pragma once
// Every kernel kiln ships, in one compile-time table (Boost.Hana), folded
// once into the dispatch table that lowering uses. A new kernel is one
// Kernel<"target"> specialization in its group's header and one entry in that
// group's tuple.
#include <boost/hana/concat.hpp>

#include "kiln/kernels/kernel_table.hpp"
#include "kiln/kernels/onednn.hpp"
#include "kiln/kernels/pointwise.hpp"
#include "kiln/kernels/reductions.hpp"
#include "kiln/kernels/shape_ops.hpp"

namespace kiln::kernels {

inline constexpr auto all_kernels =
    boost::hana::concat(boost::hana::concat(pointwise_kernels, reductions_kernels),
                        boost::hana::concat(shape_ops_kernels, onednn_kernels));

inline const KernelTable& default_kernels() {
  static const KernelTable table = make_kernel_table(all_kernels);
  return table;
}

}  // namespace kiln::kernels
