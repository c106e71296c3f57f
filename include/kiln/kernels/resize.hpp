#pragma once
// Resizing: F.interpolate (and the deprecated F.upsample, upsample_nearest,
// upsample_bilinear, which it stands for) and ATen's upsample ops, .vec and
// .default: nearest, nearest-exact, linear, bilinear, trilinear and bicubic on
// 1 to 3 spatial dims (detail/resize_loop.hpp), 'area' as adaptive average
// pooling, as PyTorch's interpolate does. The output size and the scales the
// source index uses follow PyTorch 1.13: a scale factor gives floor(in * s)
// elements and, unless recompute_scale_factor, its inverse as the scale.
// nn.Upsample and its subclasses lower as F.interpolate (kernels/modules.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/detail/resize_loop.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"

namespace kiln::kernels {

namespace resize_detail {

using detail::ResizeMode;

// Adds the resize of `in` ([N, C, spatial...]) to `out_size`, checking what the loop takes.
inline runtime::ValueId lower_resize(runtime::LowerContext& ctx, runtime::ValueId in, ResizeMode mode,
                                     const std::vector<std::int64_t>& out_size, const std::vector<std::optional<double>>& scales,
                                     bool align_corners) {
  const runtime::Layout& l = ctx.layout(in);
  if (l.rank() != out_size.size() + 2 || out_size.empty() || out_size.size() > 3)
    ctx.fail("resizing to " + runtime::shape_str(out_size) + " takes a " + std::to_string(out_size.size() + 2) + "-d input, got " +
             runtime::shape_str(l.shape));
  for (std::size_t k = 0; k < out_size.size(); ++k)
    if (l.shape[2 + k] <= 0 || out_size[k] <= 0)
      ctx.fail("input and output sizes must be greater than 0, got input " + runtime::shape_str(l.shape) + " and output size " +
               runtime::shape_str(out_size));
  const bool weighted = mode == ResizeMode::linear || mode == ResizeMode::cubic;
  if (weighted) {
    if (l.dtype == DType::float32) return detail::lower_resize_as<float>(ctx, in, mode, out_size, scales, align_corners);
    if (l.dtype == DType::float64) return detail::lower_resize_as<double>(ctx, in, mode, out_size, scales, align_corners);
    ctx.fail("linear and cubic resizing take float32 or float64, got " + std::string(dtype_name(l.dtype)));
  }
  // Nearest moves elements: any dtype, by its size.
  switch (l.itemsize()) {
    case 1: return detail::lower_resize_as<std::uint8_t>(ctx, in, mode, out_size, scales, false);
    case 2: return detail::lower_resize_as<std::uint16_t>(ctx, in, mode, out_size, scales, false);
    case 4: return detail::lower_resize_as<std::uint32_t>(ctx, in, mode, out_size, scales, false);
    case 8: return detail::lower_resize_as<std::uint64_t>(ctx, in, mode, out_size, scales, false);
    default: ctx.fail("nearest resizing has no kernel for " + std::string(dtype_name(l.dtype)));
  }
}

// A float or a list of floats (ints taken as floats), one per spatial dim.
inline std::vector<double> per_dim_floats(const runtime::LowerContext& ctx, const Arg& a, std::size_t nd, const char* what) {
  auto number = [&](const Arg& x) {
    if (const auto* d = x.get_if<double>()) return *d;
    if (const auto* i = x.get_if<std::int64_t>()) return static_cast<double>(*i);
    ctx.fail(std::string(what) + " holds something that is not a number");
  };
  const ArgList* list = a.list();
  if (!list) return std::vector<double>(nd, number(a));
  if (list->size() != nd)
    ctx.fail(std::string(what) + " has " + std::to_string(list->size()) + " values for " + std::to_string(nd) + " spatial dims");
  std::vector<double> out;
  for (const Arg& x : *list) out.push_back(number(x));
  return out;
}
// An int or a list of ints, one per spatial dim.
inline std::vector<std::int64_t> per_dim_ints(const runtime::LowerContext& ctx, const Arg& a, std::size_t nd, const char* what) {
  if (const auto* i = a.get_if<std::int64_t>()) return std::vector<std::int64_t>(nd, *i);
  const ArgList* list = a.list();
  if (!list) ctx.fail(std::string(what) + " is not an int or a list of ints");
  if (list->size() != nd)
    ctx.fail(std::string(what) + " has " + std::to_string(list->size()) + " values for " + std::to_string(nd) + " spatial dims");
  std::vector<std::int64_t> out;
  for (const Arg& x : *list) {
    const auto* i = x.get_if<std::int64_t>();
    if (!i) ctx.fail(std::string(what) + " holds something that is not an int");
    out.push_back(*i);
  }
  return out;
}

// floor(in * s) per spatial dim: the output size a scale factor gives (ATen's compute_output_size).
inline std::vector<std::int64_t> scaled_size(const runtime::Layout& l, const std::vector<double>& factors) {
  std::vector<std::int64_t> out;
  for (std::size_t k = 0; k < factors.size(); ++k)
    out.push_back(static_cast<std::int64_t>(static_cast<double>(l.shape[2 + k]) * factors[k]));
  return out;
}

// F.interpolate's modes: the loop's mode, the spatial dims it takes (0: 1 to 3), whether align_corners applies.
struct InterpolateMode {
  const char* name;
  ResizeMode mode;
  std::size_t nd;
  bool interpolating;
};
inline constexpr InterpolateMode kInterpolateModes[] = {
    {"nearest", ResizeMode::nearest, 0, false},   {"nearest-exact", ResizeMode::nearest_exact, 0, false},
    {"area", ResizeMode::nearest, 0, false},      {"linear", ResizeMode::linear, 1, true},
    {"bilinear", ResizeMode::linear, 2, true},    {"bicubic", ResizeMode::cubic, 2, true},
    {"trilinear", ResizeMode::linear, 3, true}};

// F.interpolate's arguments, read by each form that stands for it.
struct InterpolateArgs {
  runtime::ValueId input = 0;
  Arg size, scale_factor;
  std::string mode = "nearest";
  std::optional<bool> align_corners, recompute_scale_factor;
  bool antialias = false;
};

inline std::optional<bool> optional_bool(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw) {
  if (!ctx.has(pos, kw)) return std::nullopt;
  return ctx.bool_arg(pos, kw);
}

inline void interpolate(runtime::LowerContext& ctx, const InterpolateArgs& a) {
  const runtime::Layout& l = ctx.layout(a.input);
  if (l.rank() < 3 || l.rank() > 5)
    ctx.fail("interpolate takes a 3-, 4- or 5-d input (N, C and 1 to 3 spatial dims), got " + runtime::shape_str(l.shape));
  const std::size_t nd = l.rank() - 2;
  const InterpolateMode* m = nullptr;
  for (const InterpolateMode& x : kInterpolateModes)
    if (a.mode == x.name) m = &x;
  if (!m)
    ctx.fail("interpolate mode '" + a.mode +
             "' has no kernel (nearest, nearest-exact, area, linear, bilinear, bicubic and trilinear have)");
  if (m->nd != 0 && m->nd != nd)
    ctx.fail("interpolate mode '" + a.mode + "' takes a " + std::to_string(m->nd + 2) + "-d input, got " +
             runtime::shape_str(l.shape));
  if (!m->interpolating && a.align_corners)
    ctx.fail("align_corners is set for mode '" + a.mode + "'; only linear, bilinear, bicubic and trilinear take it");
  if (a.antialias) ctx.fail("antialias=True has no kernel");
  if (a.size.is_none() == a.scale_factor.is_none()) ctx.fail("exactly one of size and scale_factor must be given");
  const bool recompute = a.recompute_scale_factor.value_or(false) || (a.mode == "area" && a.size.is_none());
  if (a.recompute_scale_factor.value_or(false) && !a.size.is_none())
    ctx.fail("recompute_scale_factor is set with an explicit size");
  std::vector<std::int64_t> out_size;
  std::vector<std::optional<double>> scales(nd);
  if (!a.size.is_none()) {
    out_size = per_dim_ints(ctx, a.size, nd, "size");
  } else {
    const std::vector<double> factors = per_dim_floats(ctx, a.scale_factor, nd, "scale_factor");
    out_size = scaled_size(l, factors);
    if (!recompute) scales.assign(factors.begin(), factors.end());  // else the scale is in / out, from the sizes
  }
  if (a.mode == "area") {
    ArgList sizes(out_size.begin(), out_size.end());
    ctx.lower_as("torch.nn.functional.adaptive_avg_pool" + std::to_string(nd) + "d",
                 {runtime::CallArg::of_tensor(a.input), runtime::CallArg::of(Arg(std::move(sizes)))});
    return;
  }
  ctx.set_result(lower_resize(ctx, a.input, m->mode, out_size, scales, a.align_corners.value_or(false)));
}

// F.interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None,
// recompute_scale_factor=None, antialias=False); F.upsample takes the first
// five. F.upsample_nearest(input, size=None, scale_factor=None) and
// F.upsample_bilinear(...) take the first three: interpolate in mode nearest,
// or bilinear with corners aligned.
enum class InterpolateForm { interpolate, upsample_nearest, upsample_bilinear };
template <InterpolateForm Form>
struct Interpolate {
  static void lower(runtime::LowerContext& ctx) {
    InterpolateArgs a;
    a.input = ctx.tensor(0, "input");
    a.size = ctx.value(1, "size");
    a.scale_factor = ctx.value(2, "scale_factor");
    if constexpr (Form == InterpolateForm::interpolate) {
      a.mode = ctx.string_arg(3, "mode", std::string("nearest"));
      a.align_corners = optional_bool(ctx, 4, "align_corners");
      a.recompute_scale_factor = optional_bool(ctx, 5, "recompute_scale_factor");
      a.antialias = ctx.bool_arg(6, "antialias", false);
    } else if constexpr (Form == InterpolateForm::upsample_bilinear) {
      a.mode = "bilinear";
      a.align_corners = true;
    }
    interpolate(ctx, a);
  }
};

// ATen's upsample ops. .vec: (input, output_size?, [align_corners,] scale_factors?),
// exactly one of the two given; .default: (self, output_size, [align_corners,]
// one optional scale per spatial dim).
template <ResizeMode Mode, std::size_t ND, bool Vec>
struct AtenUpsample {
  static constexpr bool kAligns = Mode == ResizeMode::linear || Mode == ResizeMode::cubic;
  static void lower(runtime::LowerContext& ctx) {
    const runtime::ValueId in = ctx.tensor(0, Vec ? "input" : "self");
    const runtime::Layout& l = ctx.layout(in);
    if (l.rank() != ND + 2)
      ctx.fail("takes a " + std::to_string(ND + 2) + "-d input, got " + runtime::shape_str(l.shape));
    const bool align = kAligns && ctx.bool_arg(2, "align_corners");
    const std::size_t at = kAligns ? 3 : 2;  // where the scales start
    std::vector<std::int64_t> out_size;
    std::vector<std::optional<double>> scales(ND);
    if (Vec) {
      const bool sized = ctx.has(1, "output_size"), scaled = ctx.has(at, "scale_factors");
      if (sized == scaled) ctx.fail("exactly one of output_size and scale_factors must be given");
      if (sized) {
        out_size = per_dim_ints(ctx, ctx.value(1, "output_size"), ND, "output_size");
      } else {
        const std::vector<double> factors = per_dim_floats(ctx, ctx.value(at, "scale_factors"), ND, "scale_factors");
        out_size = scaled_size(l, factors);
        scales.assign(factors.begin(), factors.end());
      }
    } else {
      static constexpr const char* kScaleNames[3][3] = {{"scales"}, {"scales_h", "scales_w"}, {"scales_d", "scales_h", "scales_w"}};
      out_size = per_dim_ints(ctx, ctx.value(1, "output_size"), ND, "output_size");
      for (std::size_t k = 0; k < ND; ++k)
        if (ctx.has(at + k, kScaleNames[ND - 1][k])) scales[k] = ctx.scalar_arg(at + k, kScaleNames[ND - 1][k]);
    }
    ctx.set_result(lower_resize(ctx, in, Mode, out_size, scales, align));
  }
};

template <std::size_t ND>
using Nearest = AtenUpsample<ResizeMode::nearest, ND, false>;
template <std::size_t ND>
using NearestVec = AtenUpsample<ResizeMode::nearest, ND, true>;
template <std::size_t ND>
using NearestExact = AtenUpsample<ResizeMode::nearest_exact, ND, false>;
template <std::size_t ND>
using NearestExactVec = AtenUpsample<ResizeMode::nearest_exact, ND, true>;
template <std::size_t ND>
using Linear = AtenUpsample<ResizeMode::linear, ND, false>;
template <std::size_t ND>
using LinearVec = AtenUpsample<ResizeMode::linear, ND, true>;

}  // namespace resize_detail

using resize_kernels = KernelGroup<
    KernelEntry<"torch.nn.functional.interpolate", resize_detail::Interpolate<resize_detail::InterpolateForm::interpolate>>,
    KernelEntry<"torch.nn.functional.upsample", resize_detail::Interpolate<resize_detail::InterpolateForm::interpolate>>,
    KernelEntry<"torch.nn.functional.upsample_nearest",
                resize_detail::Interpolate<resize_detail::InterpolateForm::upsample_nearest>>,
    KernelEntry<"torch.nn.functional.upsample_bilinear",
                resize_detail::Interpolate<resize_detail::InterpolateForm::upsample_bilinear>>,
    KernelEntry<"aten.upsample_nearest1d.default", resize_detail::Nearest<1>>,
    KernelEntry<"aten.upsample_nearest1d.vec", resize_detail::NearestVec<1>>,
    KernelEntry<"aten.upsample_nearest2d.default", resize_detail::Nearest<2>>,
    KernelEntry<"aten.upsample_nearest2d.vec", resize_detail::NearestVec<2>>,
    KernelEntry<"aten.upsample_nearest3d.default", resize_detail::Nearest<3>>,
    KernelEntry<"aten.upsample_nearest3d.vec", resize_detail::NearestVec<3>>,
    KernelEntry<"aten._upsample_nearest_exact1d.default", resize_detail::NearestExact<1>>,
    KernelEntry<"aten._upsample_nearest_exact1d.vec", resize_detail::NearestExactVec<1>>,
    KernelEntry<"aten._upsample_nearest_exact2d.default", resize_detail::NearestExact<2>>,
    KernelEntry<"aten._upsample_nearest_exact2d.vec", resize_detail::NearestExactVec<2>>,
    KernelEntry<"aten._upsample_nearest_exact3d.default", resize_detail::NearestExact<3>>,
    KernelEntry<"aten._upsample_nearest_exact3d.vec", resize_detail::NearestExactVec<3>>,
    KernelEntry<"aten.upsample_linear1d.default", resize_detail::Linear<1>>,
    KernelEntry<"aten.upsample_linear1d.vec", resize_detail::LinearVec<1>>,
    KernelEntry<"aten.upsample_bilinear2d.default", resize_detail::Linear<2>>,
    KernelEntry<"aten.upsample_bilinear2d.vec", resize_detail::LinearVec<2>>,
    KernelEntry<"aten.upsample_trilinear3d.default", resize_detail::Linear<3>>,
    KernelEntry<"aten.upsample_trilinear3d.vec", resize_detail::LinearVec<3>>,
    KernelEntry<"aten.upsample_bicubic2d.default", resize_detail::AtenUpsample<detail::ResizeMode::cubic, 2, false>>,
    KernelEntry<"aten.upsample_bicubic2d.vec", resize_detail::AtenUpsample<detail::ResizeMode::cubic, 2, true>>>;

}  // namespace kiln::kernels
