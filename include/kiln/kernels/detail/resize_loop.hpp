#pragma once
// Resizing 1 to 3 spatial dims as a separable loop: each output index of an
// axis reads 1 (nearest), 2 (linear) or 4 (cubic) input indices with weights,
// worked out once with PyTorch's source-index formulas (ATen's UpSample.h, in
// the float arithmetic its CPU kernels use), so results match PyTorch's to
// float rounding. Reads any strides and writes the result dense in the input's
// dim order (channels-last stays so), threads over output rows.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels::detail {

enum class ResizeMode : std::uint8_t { nearest, nearest_exact, linear, cubic };

// One output axis: output index o reads the input at offset[o * taps + t]
// (elements, stride applied) with weight[o * taps + t]; nearest has no weights.
template <class T>
struct ResizeAxis {
  int taps = 1;
  std::vector<std::int64_t> offset;
  std::vector<T> weight;
  std::int64_t size() const { return static_cast<std::int64_t>(offset.size()) / taps; }
};

// ATen's compute_scales_value: the inverse of a positive scale factor given, else in / out.
template <class T>
T inverse_scale(std::optional<double> scale, std::int64_t in, std::int64_t out) {
  return scale && *scale > 0 ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out);
}
// ATen's area_pixel_compute_scale: corners aligned map first to first and last to last.
template <class T>
T linear_scale(std::int64_t in, std::int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  return inverse_scale<T>(scale, in, out);
}
// ATen's area_pixel_compute_source_index: pixel centres unless the corners are
// aligned; clamped at 0 except for cubic, whose weights need the sign.
template <class T>
T source_index(T scale, std::int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return scale * static_cast<T>(o);
  const T s = static_cast<T>(static_cast<double>(scale) * (static_cast<double>(o) + 0.5) - 0.5);
  return !cubic && s < 0 ? T(0) : s;
}

// Nearest ('nearest': floor(o * scale), PyTorch's legacy choice; 'nearest-exact':
// floor((o + 0.5) * scale)), both in float whatever the dtype, as ATen does.
inline std::int64_t nearest_source(ResizeMode mode, std::int64_t o, std::int64_t in, std::int64_t out,
                                   std::optional<double> scale) {
  if (mode == ResizeMode::nearest) {
    if (out == in) return o;  // ATen's exact shortcuts
    if (out == 2 * in) return o >> 1;
  }
  const float s = inverse_scale<float>(scale, in, out);
  const float f = mode == ResizeMode::nearest ? static_cast<float>(o) * s
                                              : static_cast<float>((static_cast<double>(o) + 0.5) * static_cast<double>(s));
  return std::min(static_cast<std::int64_t>(std::floor(f)), in - 1);
}

// Keys' cubic convolution weights (A = -0.75, as PyTorch) of the 4 taps around a point t in [0, 1].
template <class T>
std::array<T, 4> cubic_weights(T t) {
  constexpr T A = T(-0.75);
  auto near = [](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };          // |x| <= 1
  auto far = [](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };      // 1 < |x| < 2
  const T u = static_cast<T>(1.0 - static_cast<double>(t));
  return {far(static_cast<T>(static_cast<double>(t) + 1.0)), near(t), near(u), far(static_cast<T>(static_cast<double>(u) + 1.0))};
}

// Linear (2 taps) and cubic (4 taps) weights of one axis, in T's arithmetic.
template <class T>
void add_weighted_taps(ResizeAxis<T>& a, ResizeMode mode, std::int64_t in, std::int64_t out, std::int64_t stride,
                       bool align_corners, std::optional<double> scale) {
  const T ratio = linear_scale<T>(in, out, align_corners, scale);
  for (std::int64_t o = 0; o < out; ++o) {
    if (mode == ResizeMode::linear) {
      std::int64_t i0 = o;
      T l1 = 0;
      if (out != in) {  // same size: ATen copies
        const T real = source_index<T>(ratio, o, align_corners, false);
        i0 = static_cast<std::int64_t>(real);
        l1 = std::min(std::max(real - static_cast<T>(i0), T(0)), T(1));
      }
      const std::int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      a.offset.insert(a.offset.end(), {i0 * stride, i1 * stride});
      a.weight.insert(a.weight.end(), {T(1) - l1, l1});
    } else {
      const T real = source_index<T>(ratio, o, align_corners, true);
      const std::int64_t i = std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(real))), in - 1);
      const T t = std::min(std::max(real - static_cast<T>(i), T(0)), T(1));
      const std::array<T, 4> w = cubic_weights<T>(t);
      for (std::int64_t k = 0; k < 4; ++k) {
        a.offset.push_back(std::clamp<std::int64_t>(i - 1 + k, 0, in - 1) * stride);
        a.weight.push_back(w[static_cast<std::size_t>(k)]);
      }
    }
  }
}

// The taps of one axis from `in` to `out` elements, input stride `stride`.
template <class T>
ResizeAxis<T> resize_axis(ResizeMode mode, std::int64_t in, std::int64_t out, std::int64_t stride, bool align_corners,
                          std::optional<double> scale) {
  ResizeAxis<T> a;
  a.taps = mode == ResizeMode::linear ? 2 : mode == ResizeMode::cubic ? 4 : 1;
  a.offset.reserve(static_cast<std::size_t>(out * a.taps));
  if (a.taps == 1) {
    for (std::int64_t o = 0; o < out; ++o) a.offset.push_back(nearest_source(mode, o, in, out, scale) * stride);
  } else if constexpr (std::is_floating_point_v<T>) {
    add_weighted_taps(a, mode, in, out, stride, align_corners, scale);
  }
  return a;
}

// Along a spatial dim the input does not have: one tap of weight 1.
template <class T>
ResizeAxis<T> unit_resize_axis(bool weighted) {
  ResizeAxis<T> a;
  a.offset = {0};
  if (weighted) a.weight = {T(1)};
  return a;
}

// What the step runs: [N, C, D, H, W] (missing leading spatial dims of size 1).
template <class T>
struct ResizePlan {
  runtime::ValueId in = 0, out = 0;
  std::int64_t N = 0, C = 0;
  std::array<std::int64_t, 5> out_strides{};
  std::int64_t in_n = 0, in_c = 0;
  std::array<ResizeAxis<T>, 3> axes;  // D, H, W
  bool weighted = false;              // false: every axis has one tap of weight 1 (nearest)
  bool channels_inner = false;        // the output's C is its innermost dim: loop C inside W
};

// The weighted sum of one output element of a linear or cubic plan, innermost
// axis first as ATen's separable kernel sums: sum_d wd * (sum_h wh * (sum_w ww * x)).
template <class T>
T weighted_value(const ResizePlan<T>& p, const T* plane, std::int64_t d, std::int64_t h, std::int64_t w) {
  const auto& [D, H, W] = p.axes;
  T acc_d = 0;
  for (int a = 0; a < D.taps; ++a) {
    const std::size_t ia = static_cast<std::size_t>(d * D.taps + a);
    T acc_h = 0;
    for (int b = 0; b < H.taps; ++b) {
      const std::size_t ib = static_cast<std::size_t>(h * H.taps + b);
      const T* row = plane + D.offset[ia] + H.offset[ib];
      T acc_w = 0;
      for (int e = 0; e < W.taps; ++e) {
        const std::size_t ie = static_cast<std::size_t>(w * W.taps + e);
        acc_w += row[W.offset[ie]] * W.weight[ie];
      }
      acc_h += acc_w * H.weight[ib];
    }
    acc_d += acc_h * D.weight[ia];
  }
  return acc_d;
}

// One output element at input `plane` (the (n, c) plane) and output indices (d, h, w).
template <class T>
T resize_value(const ResizePlan<T>& p, const T* plane, std::int64_t d, std::int64_t h, std::int64_t w) {
  if constexpr (std::is_floating_point_v<T>)
    if (p.weighted) return weighted_value(p, plane, d, h, w);
  const auto& [D, H, W] = p.axes;
  return plane[D.offset[static_cast<std::size_t>(d)] + H.offset[static_cast<std::size_t>(h)] + W.offset[static_cast<std::size_t>(w)]];
}

template <class T>
void run_resize(const runtime::Frame& f, const ResizePlan<T>& p) {
  const T* x = f.data_as<const T>(p.in);
  T* y = f.data_as<T>(p.out);
  const std::int64_t OD = p.axes[0].size(), OH = p.axes[1].size(), OW = p.axes[2].size();
  const std::int64_t rows = p.N * OD * OH;
  const auto& os = p.out_strides;
  auto row = [&](std::int64_t r) {
    const std::int64_t h = r % OH, d = (r / OH) % OD, n = r / (OH * OD);
    const T* xn = x + n * p.in_n;
    T* yr = y + n * os[0] + d * os[2] + h * os[3];
    if (p.channels_inner) {
      for (std::int64_t w = 0; w < OW; ++w)
        for (std::int64_t c = 0; c < p.C; ++c) yr[w * os[4] + c * os[1]] = resize_value(p, xn + c * p.in_c, d, h, w);
    } else {
      for (std::int64_t c = 0; c < p.C; ++c)
        for (std::int64_t w = 0; w < OW; ++w) yr[w * os[4] + c * os[1]] = resize_value(p, xn + c * p.in_c, d, h, w);
    }
  };
  const bool parallel = f.threads() > 1 && rows > 1 && rows * p.C * OW >= 16384;
  if (parallel) {
#pragma omp parallel for num_threads(f.threads()) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) row(r);
  } else {
    for (std::int64_t r = 0; r < rows; ++r) row(r);
  }
}

// Adds the step resizing `in` ([N, C] and `out_size.size()` spatial dims, 1 to
// 3) to `out_size`; `scales` are the scale factors given per spatial dim (the
// source index uses their inverse), `align_corners` applies to linear and cubic.
// T is the element type for weighted modes, or any type of the element's size for nearest.
template <class T>
runtime::ValueId lower_resize_as(runtime::LowerContext& ctx, runtime::ValueId in, ResizeMode mode,
                                 const std::vector<std::int64_t>& out_size, const std::vector<std::optional<double>>& scales,
                                 bool align_corners) {
  const runtime::Layout l = ctx.layout(in);
  const std::size_t nd = out_size.size();
  ResizePlan<T> p;
  p.in = in;
  p.N = l.shape[0];
  p.C = l.shape[1];
  p.in_n = l.strides[0];
  p.in_c = l.strides[1];
  p.weighted = mode == ResizeMode::linear || mode == ResizeMode::cubic;
  runtime::Shape out_shape{l.shape[0], l.shape[1]};
  out_shape.insert(out_shape.end(), out_size.begin(), out_size.end());
  const runtime::Layout ol = runtime::dense_in_order_of(l, out_shape, l.dtype);
  p.out = ctx.buffer(ol);
  const std::size_t lead = 3 - nd;  // missing leading spatial dims: size 1, never stepped
  p.out_strides[0] = ol.strides[0];
  p.out_strides[1] = ol.strides[1];
  for (std::size_t k = 0; k < lead; ++k) p.axes[k] = unit_resize_axis<T>(p.weighted);
  for (std::size_t k = 0; k < nd; ++k) {
    p.out_strides[2 + lead + k] = ol.strides[2 + k];
    p.axes[lead + k] = resize_axis<T>(mode, l.shape[2 + k], out_size[k], l.strides[2 + k], align_corners, scales[k]);
  }
  p.channels_inner = ol.strides[1] == 1 && p.C > 1;
  const runtime::ValueId out = p.out;
  ctx.add_step(runtime::make_step([p = std::move(p)](runtime::Frame& f) { run_resize(f, p); }), {in}, {out});
  return out;
}

}  // namespace kiln::kernels::detail
