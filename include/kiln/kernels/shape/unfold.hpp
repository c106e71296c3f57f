#pragma once
// Unfold (im2col) and Fold (col2im) on float32: F.unfold / F.fold,
// aten.im2col / aten.col2im and, through modules.hpp, the Unfold / Fold
// modules. Unfold turns [N, C, H, W] into [N, C*kh*kw, L], one column per
// sliding-window position (L of them, row-major), zeros where the window
// reaches into the padding; Fold sums such columns back into [N, C, oh, ow],
// overlapping windows adding up. The unbatched forms ([C, H, W] for Unfold,
// [C*kh*kw, L] for Fold) run as N = 1. The input is read through its strides;
// the loops run one (n, c) plane at a time, planes spread over OpenMP threads.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels::shape_detail {

inline constexpr std::int64_t kUnfoldParallelElements = 32768;

// The window of one im2col / col2im: sizes per spatial dim (h, w).
struct Window {
  std::array<std::int64_t, 2> kernel{}, dilation{}, padding{}, stride{};
  std::array<std::int64_t, 2> image{}, blocks{};  // the (padded-free) image size and the windows along each dim
};

// An int or a list of one or two ints as an (h, w) pair; `what` names it in errors.
inline std::array<std::int64_t, 2> pair_arg(const runtime::LowerContext& ctx, const std::vector<std::int64_t>& v,
                                            const std::string& what, std::int64_t least) {
  if (v.size() != 1 && v.size() != 2) ctx.fail(what + " " + runtime::shape_str(v) + " must be an int or 2 ints");
  const std::array<std::int64_t, 2> p{v[0], v.back()};
  if (p[0] < least || p[1] < least)
    ctx.fail(what + " " + runtime::shape_str(v) + (least > 0 ? " must be positive" : " must not be negative"));
  return p;
}

// Reads kernel_size, dilation, padding and stride from positions k, k+1, k+2, k+3 (F.unfold's and
// im2col's order), and sets the window counts for an image of `image` size.
inline Window plan_window(const runtime::LowerContext& ctx, std::size_t k, std::array<std::int64_t, 2> image) {
  Window w;
  w.kernel = pair_arg(ctx, ctx.ints_arg(k, "kernel_size"), "kernel_size", 1);
  w.dilation = pair_arg(ctx, ctx.ints_arg(k + 1, "dilation", std::vector<std::int64_t>{1}), "dilation", 1);
  w.padding = pair_arg(ctx, ctx.ints_arg(k + 2, "padding", std::vector<std::int64_t>{0}), "padding", 0);
  w.stride = pair_arg(ctx, ctx.ints_arg(k + 3, "stride", std::vector<std::int64_t>{1}), "stride", 1);
  w.image = image;
  for (std::size_t d = 0; d < 2; ++d) {
    const std::int64_t span = w.image[d] + 2 * w.padding[d] - w.dilation[d] * (w.kernel[d] - 1) - 1;
    w.blocks[d] = span < 0 ? 0 : span / w.stride[d] + 1;
    if (w.blocks[d] < 1)
      ctx.fail("the window (kernel_size " + runtime::shape_str(std::vector<std::int64_t>(w.kernel.begin(), w.kernel.end())) +
               ", dilation " + runtime::shape_str(std::vector<std::int64_t>(w.dilation.begin(), w.dilation.end())) +
               ") does not fit the padded image " +
               runtime::shape_str(std::vector<std::int64_t>{w.image[0] + 2 * w.padding[0], w.image[1] + 2 * w.padding[1]}));
  }
  return w;
}

// Image ([N, C, H, W] strides) and columns ([N, C*kh*kw, L] strides) of one im2col / col2im.
struct FoldPlan {
  runtime::ValueId in = 0, out = 0;
  Window w;
  std::int64_t batch = 1, channels = 1;
  std::array<std::int64_t, 4> image_strides{};
  std::array<std::int64_t, 3> col_strides{};
};

// Calls f(image offset, column offset) for every in-image element of plane (n, c)'s windows.
template <class F>
void for_window_elements(const FoldPlan& p, std::int64_t n, std::int64_t c, const F& f) {
  const Window& w = p.w;
  for (std::int64_t ki = 0; ki < w.kernel[0]; ++ki)
    for (std::int64_t kj = 0; kj < w.kernel[1]; ++kj) {
      const std::int64_t row = (c * w.kernel[0] + ki) * w.kernel[1] + kj;
      for (std::int64_t by = 0; by < w.blocks[0]; ++by) {
        const std::int64_t y = by * w.stride[0] - w.padding[0] + ki * w.dilation[0];
        if (y < 0 || y >= w.image[0]) continue;
        for (std::int64_t bx = 0; bx < w.blocks[1]; ++bx) {
          const std::int64_t x = bx * w.stride[1] - w.padding[1] + kj * w.dilation[1];
          if (x < 0 || x >= w.image[1]) continue;
          f(n * p.image_strides[0] + c * p.image_strides[1] + y * p.image_strides[2] + x * p.image_strides[3],
            n * p.col_strides[0] + row * p.col_strides[1] + (by * w.blocks[1] + bx) * p.col_strides[2]);
        }
      }
    }
}

// Runs plane(n, c) for every plane, over threads when the work is large.
template <class Plane>
void for_planes(const runtime::Frame& fr, const FoldPlan& p, std::int64_t work, const Plane& plane) {
  const std::int64_t planes = p.batch * p.channels;
  if (fr.threads() > 1 && planes > 1 && work >= kUnfoldParallelElements) {
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t i = 0; i < planes; ++i) plane(i / p.channels, i % p.channels);
  } else {
    for (std::int64_t i = 0; i < planes; ++i) plane(i / p.channels, i % p.channels);
  }
}

inline void check_float(const runtime::LowerContext& ctx, const runtime::Layout& l) {
  if (l.dtype != DType::float32) ctx.fail("takes a float32 input, got " + std::string(dtype_name(l.dtype)));
}

// unfold(input, kernel_size, dilation=1, padding=0, stride=1) / im2col(self, kernel_size, dilation, padding, stride).
struct Unfold {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::ValueId in = ctx.tensor(0, "input");
    const runtime::Layout l = ctx.layout(in);  // a copy: ctx.buffer() below may move the value table
    check_float(ctx, l);
    if (l.rank() != 3 && l.rank() != 4) ctx.fail("takes a 3-d or 4-d input, got " + runtime::shape_str(l.shape));
    const std::size_t lead = l.rank() - 3;  // 1 where batched
    FoldPlan p;
    p.in = in;
    p.batch = lead ? l.shape[0] : 1;
    p.channels = l.shape[lead];
    p.w = plan_window(ctx, 1, {l.shape[lead + 1], l.shape[lead + 2]});
    p.image_strides = {lead ? l.strides[0] : 0, l.strides[lead], l.strides[lead + 1], l.strides[lead + 2]};
    const std::int64_t rows = p.channels * p.w.kernel[0] * p.w.kernel[1], cols = p.w.blocks[0] * p.w.blocks[1];
    p.col_strides = {rows * cols, cols, 1};
    runtime::Shape out_shape{rows, cols};
    if (lead) out_shape.insert(out_shape.begin(), p.batch);
    p.out = ctx.buffer(out_shape, DType::float32);
    ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run(fr, p); }), {p.in}, {p.out});
    ctx.set_result(p.out);
  }
  static void run(const runtime::Frame& fr, const FoldPlan& p) {
    const float* x = fr.data_as<float>(p.in);
    float* y = fr.data_as<float>(p.out);
    const std::int64_t numel = p.batch * p.col_strides[0];
    std::fill(y, y + numel, 0.0f);  // the padding's zeros; in-image elements are written below
    for_planes(fr, p, numel, [&](std::int64_t n, std::int64_t c) {
      for_window_elements(p, n, c, [&](std::int64_t xi, std::int64_t yi) { y[yi] = x[xi]; });
    });
  }
};

// fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) / col2im(self, output_size, ...).
struct Fold {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::ValueId in = ctx.tensor(0, "input");
    const runtime::Layout l = ctx.layout(in);
    check_float(ctx, l);
    if (l.rank() != 2 && l.rank() != 3) ctx.fail("takes a 2-d or 3-d input, got " + runtime::shape_str(l.shape));
    const std::size_t lead = l.rank() - 2;
    const auto size = pair_arg(ctx, ctx.ints_arg(1, "output_size"), "output_size", 1);
    FoldPlan p;
    p.in = in;
    p.batch = lead ? l.shape[0] : 1;
    p.w = plan_window(ctx, 2, size);
    const std::int64_t per_channel = p.w.kernel[0] * p.w.kernel[1], rows = l.shape[lead], cols = l.shape[lead + 1];
    if (rows % per_channel != 0)
      ctx.fail("input dim " + std::to_string(lead) + " of " + runtime::shape_str(l.shape) +
               " is not a multiple of the kernel's " + std::to_string(per_channel) + " elements");
    if (cols != p.w.blocks[0] * p.w.blocks[1])
      ctx.fail("input " + runtime::shape_str(l.shape) + " has " + std::to_string(cols) + " columns; output_size " +
               runtime::shape_str(std::vector<std::int64_t>{size[0], size[1]}) + " with this window makes " +
               std::to_string(p.w.blocks[0] * p.w.blocks[1]));
    p.channels = rows / per_channel;
    p.col_strides = {lead ? l.strides[0] : 0, l.strides[lead], l.strides[lead + 1]};
    p.image_strides = {p.channels * size[0] * size[1], size[0] * size[1], size[1], 1};
    runtime::Shape out_shape{p.channels, size[0], size[1]};
    if (lead) out_shape.insert(out_shape.begin(), p.batch);
    p.out = ctx.buffer(out_shape, DType::float32);
    ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run(fr, p); }), {p.in}, {p.out});
    ctx.set_result(p.out);
  }
  static void run(const runtime::Frame& fr, const FoldPlan& p) {
    const float* x = fr.data_as<float>(p.in);
    float* y = fr.data_as<float>(p.out);
    const std::int64_t numel = p.batch * p.image_strides[0];
    std::fill(y, y + numel, 0.0f);
    // Each plane owns its output elements, so the threads never add into the same one.
    for_planes(fr, p, numel, [&](std::int64_t n, std::int64_t c) {
      for_window_elements(p, n, c, [&](std::int64_t yi, std::int64_t xi) { y[yi] += x[xi]; });
    });
  }
};

}  // namespace kiln::kernels::shape_detail
