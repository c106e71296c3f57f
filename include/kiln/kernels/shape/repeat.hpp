#pragma once
// repeat(self, repeats): the input tiled repeats[d] times along each dim (the
// input's shape padded with leading 1s to the repeats' length). Read as a
// view of shape [r0, s0, r1, s1, ...] with stride 0 on each r, copied into a
// contiguous buffer, which is then [r0 * s0, r1 * s1, ...].
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/copies.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels::shape_detail {

struct Repeat {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const runtime::Layout l = ctx.layout(in);
    const auto reps = sizes_arg(ctx, 1, "repeats");
    if (reps.size() < l.rank())
      ctx.fail("repeat gives " + std::to_string(reps.size()) + " repeats for an input of rank " + std::to_string(l.rank()) +
               "; it needs at least one per dim");
    runtime::Layout tiled{l.dtype, {}, {}};
    runtime::Shape out_shape;
    const std::size_t lead = reps.size() - l.rank();
    for (std::size_t d = 0; d < reps.size(); ++d) {
      if (reps[d] < 0) ctx.fail("repeat: repeats " + runtime::shape_str(reps) + " holds a negative count");
      const std::int64_t s = d < lead ? 1 : l.shape[d - lead], st = d < lead ? 0 : l.strides[d - lead];
      tiled.shape.insert(tiled.shape.end(), {reps[d], s});
      tiled.strides.insert(tiled.strides.end(), {0, st});
      out_shape.push_back(reps[d] * s);
    }
    const auto copy = copy_into_new(ctx, ctx.view(in, tiled), runtime::Layout::contiguous(tiled.shape, l.dtype));
    ctx.set_result(ctx.view(copy, runtime::Layout::contiguous(out_shape, l.dtype)));
  }
};

}  // namespace kiln::kernels::shape_detail
