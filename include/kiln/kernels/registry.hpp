#pragma once
// Every kernel kiln ships, in compile-time kernel groups (kernels/kernel_group.hpp:
// Boost.Hana type lists of KernelEntry<"op key", Kernel>, one per group, each key
// written once beside its kernel), made once into the sorted dispatch table
// that lowering uses. A new kernel is one entry in its group's list.
//
// Compiling every kernel is the executor's biggest compile cost, so it is done
// in one translation unit of the program, as doctest's main is:
//
//   #define KILN_KERNELS_IMPLEMENTATION
//   #include <kiln/kernels/registry.hpp>
//
// That unit sees every group, and all_kernels there refuses a key given in two
// groups at compile time. Every other file includes kiln/executor/compiled_graph.hpp
// (or this header without the macro), which only declares default_kernels(). A
// program that wants the kernels in parallel, smaller translation units compiles
// the three parts in three files instead: KILN_KERNELS_PART_ONEDNN (convolution,
// matrix products, normalization, pooling), KILN_KERNELS_PART_POINTWISE, and
// KILN_KERNELS_PART_REST (reductions, distances, bilinear maps, shape ops, resizing, einsum, call_module kernels, Swin's,
// the collectives and default_kernels()); there a key in two groups is refused when the table is made.
// The collectives run on MPI where that part is compiled with KILN_HAVE_MPI
// (the kiln::mpi component), and are refused when lowered elsewhere.
#include "kiln/kernels/kernel_table.hpp"

namespace kiln::kernels {

// The table of every kernel below; defined where KILN_KERNELS_IMPLEMENTATION
// (or KILN_KERNELS_PART_REST) is.
const KernelTable& default_kernels();

// Each part's kernels, added to a table; defined where that part is compiled.
void add_onednn_kernels(KernelTable& table);
void add_pointwise_kernels(KernelTable& table);
void add_rest_kernels(KernelTable& table);

}  // namespace kiln::kernels

#if defined(KILN_KERNELS_IMPLEMENTATION) || defined(KILN_KERNELS_PART_ONEDNN)
#include "kiln/kernels/onednn.hpp"
namespace kiln::kernels {
void add_onednn_kernels(KernelTable& table) { add_kernels<onednn_kernels>(table); }
}  // namespace kiln::kernels
#endif

#if defined(KILN_KERNELS_IMPLEMENTATION) || defined(KILN_KERNELS_PART_POINTWISE)
#include "kiln/kernels/pointwise.hpp"
namespace kiln::kernels {
void add_pointwise_kernels(KernelTable& table) { add_kernels<pointwise_kernels>(table); }
}  // namespace kiln::kernels
#endif

#if defined(KILN_KERNELS_IMPLEMENTATION) || defined(KILN_KERNELS_PART_REST)
#include "kiln/kernels/bilinear.hpp"
#include "kiln/kernels/collectives.hpp"
#include "kiln/kernels/distances.hpp"
#include "kiln/kernels/einsum.hpp"
#include "kiln/kernels/modules.hpp"
#include "kiln/kernels/reductions.hpp"
#include "kiln/kernels/resize.hpp"
#include "kiln/kernels/shape_ops.hpp"
#include "kiln/kernels/swin.hpp"
namespace kiln::kernels {
using rest_kernels = concat_groups_t<reductions_kernels, distance_kernels, bilinear_kernels, shape_ops_kernels, resize_kernels, einsum_kernels, module_kernels,
                                    swin_kernels, collective_kernels>;
void add_rest_kernels(KernelTable& table) { add_kernels<rest_kernels>(table); }

const KernelTable& default_kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    add_pointwise_kernels(t);
    add_rest_kernels(t);
    add_onednn_kernels(t);
    return t;
  }();
  return table;
}
}  // namespace kiln::kernels
#endif

#if defined(KILN_KERNELS_IMPLEMENTATION)
namespace kiln::kernels {
// Every kernel in one group: instantiating it checks that no key is given twice across the groups.
using all_kernels = concat_groups_t<onednn_kernels, pointwise_kernels, rest_kernels>;
static_assert(all_kernels::size > 0);
}  // namespace kiln::kernels
#endif
