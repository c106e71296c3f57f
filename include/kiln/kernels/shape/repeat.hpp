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

// aten.repeat_interleave.Tensor(repeats, output_size=None): index k written
// repeats[k] times, [0]*r0 + [1]*r1 + ...; its shape follows the values, so
// repeats must be known when lowering (mvit_v1_b's folded counts), and the
// result is a constant.
struct RepeatInterleaveCounts {
  static void lower(runtime::LowerContext& ctx) {
    const auto reps = ctx.tensor(0, "repeats");
    const runtime::Layout l = ctx.layout(reps);
    if (l.rank() != 1 || (l.dtype != DType::int64 && l.dtype != DType::int32))
      ctx.fail("repeats must be a 1-d integer tensor, got " + std::string(dtype_name(l.dtype)) + " " + runtime::shape_str(l.shape));
    const auto c = ctx.constant(reps);
    if (!c) ctx.fail("repeats is known only when the graph runs, and the result's shape depends on its values");
    std::vector<std::int64_t> out;
    for (std::int64_t k = 0; k < l.shape[0]; ++k) {
      const auto* p = static_cast<const std::byte*>(c->raw()) + k * l.strides[0] * static_cast<std::int64_t>(l.itemsize());
      const std::int64_t r = l.dtype == DType::int64 ? *reinterpret_cast<const std::int64_t*>(p) : *reinterpret_cast<const std::int32_t*>(p);
      if (r < 0) ctx.fail("repeats holds a negative count " + std::to_string(r));
      out.insert(out.end(), static_cast<std::size_t>(r), k);
    }
    const Arg size = ctx.value(1, "output_size");
    if (const auto* n = size.get_if<std::int64_t>(); n && *n != static_cast<std::int64_t>(out.size()))
      ctx.fail("output_size " + std::to_string(*n) + " is not the repeats' sum " + std::to_string(out.size()));
    const auto n = static_cast<std::int64_t>(out.size());
    ctx.set_result(ctx.constant_value(runtime::Tensor::from_values<std::int64_t>({n}, out), ctx.node().name()));
  }
};

}  // namespace kiln::kernels::shape_detail
