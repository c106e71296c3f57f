#pragma once
// Every kernel kiln ships, in one compile-time table (Boost.Hana), folded
// once into the dispatch table that lowering uses. A new kernel is one
// Kernel<"target"> specialization in its group's header and one entry in that
// group's tuple.
//
// Compiling every kernel is the executor's biggest compile cost, so it is done
// in one translation unit of the program, as doctest's main is:
//
//   #define KILN_KERNELS_IMPLEMENTATION
//   #include <kiln/kernels/registry.hpp>
//
// Every other file includes kiln/runtime/compiled_graph.hpp (or this header
// without the macro), which only declares default_kernels().
#include "kiln/kernels/kernel_table.hpp"

namespace kiln::kernels {

// The table of every kernel below; defined where KILN_KERNELS_IMPLEMENTATION is.
const KernelTable& default_kernels();

}  // namespace kiln::kernels

#ifdef KILN_KERNELS_IMPLEMENTATION
#include <boost/hana/concat.hpp>

#include "kiln/kernels/einsum.hpp"
#include "kiln/kernels/onednn.hpp"
#include "kiln/kernels/pointwise.hpp"
#include "kiln/kernels/reductions.hpp"
#include "kiln/kernels/shape_ops.hpp"

namespace kiln::kernels {

inline constexpr auto all_kernels =
    boost::hana::concat(boost::hana::concat(boost::hana::concat(pointwise_kernels, reductions_kernels),
                                            boost::hana::concat(shape_ops_kernels, onednn_kernels)),
                        einsum_kernels);

const KernelTable& default_kernels() {
  static const KernelTable table = make_kernel_table(all_kernels);
  return table;
}

}  // namespace kiln::kernels
#endif
