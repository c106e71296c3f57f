#pragma once
// flip(self, dims): the input reversed along each of `dims`, gathered through
// per-dim index tables as the padding modes are (pad_modes.hpp).
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/pad_modes.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels::shape_detail {

struct Flip {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const runtime::Layout& l = ctx.layout(in);
    const auto rank = static_cast<std::int64_t>(l.rank());
    std::vector<bool> flipped(l.rank(), false);
    for (std::int64_t d : sizes_arg(ctx, 1, "dims")) {
      const auto k = checked(ctx, [&] { return runtime::normalize_dim(d, rank); });
      if (flipped[k]) ctx.fail("flip: dim " + std::to_string(d) + " appears twice");
      flipped[k] = true;
    }
    if (rank == 0) return ctx.set_result(copy_into_new(ctx, in, runtime::Layout::contiguous(l.shape, l.dtype)));
    PadPlan p;
    p.in = in;
    p.itemsize = l.itemsize();
    p.out_shape = l.shape;
    p.source.resize(l.rank());
    for (std::size_t d = 0; d < l.rank(); ++d)
      for (std::int64_t o = 0; o < l.shape[d]; ++o) p.source[d].push_back((flipped[d] ? l.shape[d] - 1 - o : o) * l.strides[d]);
    p.out = ctx.buffer(runtime::Layout::contiguous(l.shape, l.dtype));
    ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_pad(fr, p); }), {in}, {p.out});
    ctx.set_result(p.out);
  }
};

}  // namespace kiln::kernels::shape_detail
