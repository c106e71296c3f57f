#pragma once
// 1-, 2- and 3-d pooling as a plain loop over explicit windows, for what
// oneDNN's pooling does not give: adaptive windows of differing sizes
// (PyTorch's start = floor(i * I / O), end = ceil((i + 1) * I / O)), max
// pooling's argmax indices (int64, flat into each channel's L, H*W or D*H*W
// volume, as PyTorch gives them) and average pooling with a divisor_override.
// Fewer than three spatial dims run as three with leading dims of size 1. It
// reads any strides and writes the result dense in the input's dim order; no
// threads (small ops).
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels::detail {

// The windows along one spatial dim: output i reads the input at start[i],
// start[i] + step, ... below end[i]; an average divides by count[i] (times the
// other dim's) unless a divisor is given.
struct WindowAxis {
  std::vector<std::int64_t> start, end, count;
  std::int64_t step = 1;
  std::int64_t size() const { return static_cast<std::int64_t>(start.size()); }
};

// Adaptive windows from `in` to `out` elements.
inline WindowAxis adaptive_axis(std::int64_t in, std::int64_t out) {
  WindowAxis a;
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t s = i * in / out, e = ((i + 1) * in + out - 1) / out;
    a.start.push_back(s);
    a.end.push_back(e);
    a.count.push_back(e - s);
  }
  return a;
}

// Max pooling's windows (PyTorch's CPU kernel): the first tap moved inside the
// input by whole dilations, the window cut at the input's end.
inline WindowAxis max_pool_axis(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                                std::int64_t pad, std::int64_t dilation) {
  WindowAxis a;
  a.step = dilation;
  for (std::int64_t i = 0; i < out; ++i) {
    std::int64_t s = i * stride - pad;
    const std::int64_t e = std::min(s + dilation * (kernel - 1) + 1, in);
    while (s < 0) s += dilation;
    a.start.push_back(s);
    a.end.push_back(e);
    a.count.push_back(0);
  }
  return a;
}

// Average pooling's windows: the count includes padding up to `pad` past the
// input's end when `count_include_pad`, else only the input's elements.
inline WindowAxis avg_pool_axis(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                                std::int64_t pad, bool count_include_pad) {
  WindowAxis a;
  for (std::int64_t i = 0; i < out; ++i) {
    std::int64_t s = i * stride - pad, e = std::min(s + kernel, in + pad);
    const std::int64_t padded = e - s;
    s = std::max<std::int64_t>(s, 0);
    e = std::min(e, in);
    a.start.push_back(s);
    a.end.push_back(e);
    a.count.push_back(count_include_pad ? padded : e - s);
  }
  return a;
}

enum class WindowReduce : std::uint8_t { max, mean };

// Along a spatial dim the input does not have: one window of one element.
inline WindowAxis unit_axis() { return WindowAxis{{0}, {1}, {1}, 1}; }

struct WindowPoolPlan {
  WindowReduce reduce = WindowReduce::max;
  runtime::ValueId in = 0, out = 0;
  std::optional<runtime::ValueId> indices;
  std::int64_t N = 0, C = 0, H = 0, W = 0;  // H, W: the input's last two spatial sizes, for flat indices
  std::array<std::int64_t, 5> in_strides{}, out_strides{};  // [N, C, D, H, W]; indices share out's strides
  WindowAxis d, h, w;
  std::optional<double> divisor;  // divisor_override
};

inline void run_window_pool(const runtime::Frame& f, const WindowPoolPlan& p) {
  const float* x = f.data_as<const float>(p.in);
  float* y = f.data_as<float>(p.out);
  std::int64_t* ix = p.indices ? f.data_as<std::int64_t>(*p.indices) : nullptr;
  const auto& is = p.in_strides;
  const auto& os = p.out_strides;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t c = 0; c < p.C; ++c) {
      const float* vol = x + n * is[0] + c * is[1];
      const std::int64_t obase = n * os[0] + c * os[1];
      for (std::int64_t i = 0; i < p.d.size(); ++i)
        for (std::int64_t j = 0; j < p.h.size(); ++j)
          for (std::int64_t k = 0; k < p.w.size(); ++k) {
            const std::int64_t o = obase + i * os[2] + j * os[3] + k * os[4];
            if (p.reduce == WindowReduce::max) {
              // PyTorch: the first largest wins, a NaN wins over everything.
              float best = -std::numeric_limits<float>::infinity();
              std::int64_t at = (p.d.start[i] * p.H + p.h.start[j]) * p.W + p.w.start[k];
              for (std::int64_t a = p.d.start[i]; a < p.d.end[i]; a += p.d.step)
                for (std::int64_t b = p.h.start[j]; b < p.h.end[j]; b += p.h.step)
                  for (std::int64_t e = p.w.start[k]; e < p.w.end[k]; e += p.w.step) {
                    const float v = vol[a * is[2] + b * is[3] + e * is[4]];
                    if (v > best || std::isnan(v)) {
                      best = v;
                      at = (a * p.H + b) * p.W + e;
                    }
                  }
              y[o] = best;
              if (ix) ix[o] = at;
            } else {
              float sum = 0;
              for (std::int64_t a = p.d.start[i]; a < p.d.end[i]; ++a)
                for (std::int64_t b = p.h.start[j]; b < p.h.end[j]; ++b)
                  for (std::int64_t e = p.w.start[k]; e < p.w.end[k]; ++e) sum += vol[a * is[2] + b * is[3] + e * is[4]];
              const double dv =
                  p.divisor ? *p.divisor : static_cast<double>(p.d.count[i] * p.h.count[j] * p.w.count[k]);
              y[o] = static_cast<float>(sum / dv);
            }
          }
    }
}

// Adds the step pooling the float32 `in` ([N, C] and one window axis per
// spatial dim, 1 to 3 of them) over `axes`; returns the result and, when
// asked, its int64 indices.
inline std::pair<runtime::ValueId, std::optional<runtime::ValueId>> lower_window_pool(
    runtime::LowerContext& ctx, runtime::ValueId in, std::vector<WindowAxis> axes, WindowReduce reduce, bool with_indices,
    std::optional<double> divisor = std::nullopt) {
  const runtime::Layout l = ctx.layout(in);
  const std::size_t nd = axes.size();
  if (nd < 1 || nd > 3 || l.rank() != nd + 2 || l.dtype != DType::float32)
    ctx.fail(std::to_string(nd) + "-d pooling takes a " + std::to_string(nd + 2) + "-d float32 input, got " +
             runtime::shape_str(l.shape));
  WindowPoolPlan p;
  p.reduce = reduce;
  p.in = in;
  p.N = l.shape[0];
  p.C = l.shape[1];
  runtime::Shape out_shape{l.shape[0], l.shape[1]};
  for (const WindowAxis& a : axes) out_shape.push_back(a.size());
  const runtime::Layout out_layout = runtime::dense_in_order_of(l, out_shape, DType::float32);
  p.out = ctx.buffer(out_layout);
  std::vector<runtime::ValueId> writes{p.out};
  if (with_indices) {
    p.indices = ctx.buffer(runtime::dense_in_order_of(l, out_shape, DType::int64));
    writes.push_back(*p.indices);
  }
  // The missing leading spatial dims have size 1 (stride 0: never stepped).
  const std::size_t lead = 3 - nd;
  for (int k = 0; k < 2; ++k) {
    p.in_strides[k] = l.strides[k];
    p.out_strides[k] = out_layout.strides[k];
  }
  std::int64_t sizes[3] = {1, 1, 1};
  for (std::size_t k = 0; k < nd; ++k) {
    p.in_strides[2 + lead + k] = l.strides[2 + k];
    p.out_strides[2 + lead + k] = out_layout.strides[2 + k];
    sizes[lead + k] = l.shape[2 + k];
  }
  p.H = sizes[1];
  p.W = sizes[2];
  while (axes.size() < 3) axes.insert(axes.begin(), unit_axis());
  p.d = std::move(axes[0]);
  p.h = std::move(axes[1]);
  p.w = std::move(axes[2]);
  p.divisor = divisor;
  const auto out = p.out;
  const auto indices = p.indices;
  ctx.add_step(runtime::make_step([p = std::move(p)](runtime::Frame& f) { run_window_pool(f, p); }), {in}, std::move(writes));
  return {out, indices};
}

}  // namespace kiln::kernels::detail
