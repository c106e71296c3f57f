#pragma once
// pixel_shuffle, pixel_unshuffle and channel_shuffle: each a permutation of
// the input's elements, read as a strided view of the (contiguous) input in the
// output's order and copied into a new contiguous buffer.
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels::shape_detail {

// `in` made contiguous; its leading dims before the last `tail` folded into one (B).
inline runtime::ValueId contiguous_input(runtime::LowerContext& ctx, runtime::ValueId in) {
  const runtime::Layout& l = ctx.layout(in);
  return l.is_contiguous() ? in : copy_into_new(ctx, in, runtime::Layout::contiguous(l.shape, l.dtype));
}

// The elements of contiguous `in` read through (shape, strides), copied, then viewed as `out_shape`.
inline void permuted_copy(runtime::LowerContext& ctx, runtime::ValueId in, runtime::Shape shape, runtime::Shape strides,
                          runtime::Shape out_shape) {
  const DType dt = ctx.layout(in).dtype;
  const auto copy = copy_into_new(ctx, ctx.view(in, runtime::Layout{dt, shape, std::move(strides)}), runtime::Layout::contiguous(shape, dt));
  ctx.set_result(ctx.view(copy, runtime::Layout::contiguous(std::move(out_shape), dt)));
}

// pixel_shuffle(self, upscale_factor): [*, C r^2, H, W] -> [*, C, H r, W r].
// pixel_unshuffle(self, downscale_factor): [*, C, H r, W r] -> [*, C r^2, H, W].
template <bool Unshuffle>
struct PixelShuffle {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = contiguous_input(ctx, ctx.tensor(0, "input"));
    const runtime::Layout l = ctx.layout(in);
    const char* name = Unshuffle ? "pixel_unshuffle" : "pixel_shuffle";
    const std::int64_t r = ctx.int_arg(1, Unshuffle ? "downscale_factor" : "upscale_factor");
    if (l.rank() < 3 || r < 1) ctx.fail(std::string(name) + " needs an input of rank >= 3 and a factor >= 1, got " + runtime::shape_str(l.shape));
    const std::size_t k = l.rank() - 3;
    std::int64_t B = 1;
    for (std::size_t d = 0; d < k; ++d) B *= l.shape[d];
    runtime::Shape out_shape(l.shape.begin(), l.shape.begin() + static_cast<std::ptrdiff_t>(k));
    if constexpr (!Unshuffle) {
      const std::int64_t C = l.shape[k] / (r * r), H = l.shape[k + 1], W = l.shape[k + 2];
      if (l.shape[k] % (r * r) != 0) ctx.fail("pixel_shuffle: " + std::to_string(l.shape[k]) + " channels do not divide by " + std::to_string(r * r));
      out_shape.insert(out_shape.end(), {C, H * r, W * r});
      // input [B, C, r1, r2, H, W] read as [B, C, H, r1, W, r2]
      permuted_copy(ctx, in, {B, C, H, r, W, r}, {C * r * r * H * W, r * r * H * W, W, r * H * W, 1, H * W}, out_shape);
    } else {
      const std::int64_t C = l.shape[k], H = l.shape[k + 1] / r, W = l.shape[k + 2] / r;
      if (l.shape[k + 1] % r != 0 || l.shape[k + 2] % r != 0)
        ctx.fail("pixel_unshuffle: " + runtime::shape_str(l.shape) + "'s height and width do not divide by " + std::to_string(r));
      out_shape.insert(out_shape.end(), {C * r * r, H, W});
      // input [B, C, H, r1, W, r2] read as [B, C, r1, r2, H, W]
      permuted_copy(ctx, in, {B, C, r, r, H, W}, {C * H * r * W * r, H * r * W * r, W * r, 1, r * W * r, r}, out_shape);
    }
  }
};

// channel_shuffle(self, groups): [N, C, *] with channels (g, C/g) reordered as (C/g, g).
struct ChannelShuffle {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = contiguous_input(ctx, ctx.tensor(0, "input"));
    const runtime::Layout l = ctx.layout(in);
    const std::int64_t g = ctx.int_arg(1, "groups");
    if (l.rank() < 2 || g < 1 || l.shape[1] % g != 0)
      ctx.fail("channel_shuffle: the channels of " + runtime::shape_str(l.shape) + " do not split into " + std::to_string(g) + " groups");
    const std::int64_t N = l.shape[0], C = l.shape[1], S = l.numel() / std::max<std::int64_t>(N * C, 1);
    permuted_copy(ctx, in, {N, C / g, g, S}, {C * S, S, (C / g) * S, 1}, l.shape);
  }
};

}  // namespace kiln::kernels::shape_detail
