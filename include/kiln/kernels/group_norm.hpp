#pragma once
// Normalization by statistics of the input itself: group norm (per sample and
// group of channels), instance norm (a group per channel) and batch norm in
// training mode (per channel over the batch: aten writes instance norm as one
// over the input viewed as [1, N*C, ...]). oneDNN 2.6 has no group norm, so a
// loop: the input seen as contiguous [N, C, S]; one pass per statistics unit
// (mean, then the centred sum of squares, in double), then one over the
// (n, c) planes with the unit's scale and shift folded with weight and bias.
// Units and planes spread over OpenMP threads. The mean and rstd are outputs
// too, as aten's tuple forms give them.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace norm_detail {

inline constexpr std::int64_t kParallelNormElements = 32768;

// Unit u covers `blocks` runs of `run` elements from u * unit_stride, block_stride apart;
// plane (n, c) is normalized by unit n * units_per_n + c / channels_per_unit.
struct NormPlan {
  runtime::ValueId in = 0, out = 0, mean = 0, rstd = 0;
  std::optional<runtime::ValueId> weight, bias;
  std::int64_t N = 1, C = 1, S = 1;
  std::int64_t units = 1, unit_stride = 0, blocks = 1, block_stride = 0, run = 0;
  std::int64_t units_per_n = 0, channels_per_unit = 1;
  float eps = 1e-5f;
};

inline void unit_stats(const float* x, const NormPlan& p, std::int64_t u, float* mean, float* rstd) {
  const float* base = x + u * p.unit_stride;
  double sum = 0;
  for (std::int64_t b = 0; b < p.blocks; ++b) {
    const float* r = base + b * p.block_stride;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t i = 0; i < p.run; ++i) sum += r[i];
  }
  const double count = static_cast<double>(p.blocks * p.run);
  const double m = sum / count;
  double sq = 0;
  for (std::int64_t b = 0; b < p.blocks; ++b) {
    const float* r = base + b * p.block_stride;
#pragma omp simd reduction(+ : sq)
    for (std::int64_t i = 0; i < p.run; ++i) sq += (r[i] - m) * (r[i] - m);
  }
  mean[u] = static_cast<float>(m);
  rstd[u] = static_cast<float>(1.0 / std::sqrt(sq / count + static_cast<double>(p.eps)));
}

inline void normalize_plane(const float* x, float* y, const NormPlan& p, const float* w, const float* b, const float* mean,
                            const float* rstd, std::int64_t plane) {
  const std::int64_t n = plane / p.C, c = plane % p.C;
  const std::int64_t u = n * p.units_per_n + c / p.channels_per_unit;
  const float scale = rstd[u] * (w ? w[c] : 1.0f);
  const float shift = (b ? b[c] : 0.0f) - mean[u] * scale;
  const float* xi = x + plane * p.S;
  float* yi = y + plane * p.S;
#pragma omp simd
  for (std::int64_t i = 0; i < p.S; ++i) yi[i] = xi[i] * scale + shift;
}

inline void run_norm(const runtime::Frame& fr, const NormPlan& p) {
  const float* x = fr.data_as<float>(p.in);
  float* y = fr.data_as<float>(p.out);
  float* mean = fr.data_as<float>(p.mean);
  float* rstd = fr.data_as<float>(p.rstd);
  const float* w = p.weight ? fr.data_as<float>(*p.weight) : nullptr;
  const float* b = p.bias ? fr.data_as<float>(*p.bias) : nullptr;
  const std::int64_t planes = p.N * p.C;
  if (fr.threads() > 1 && planes * p.S >= kParallelNormElements) {
#pragma omp parallel num_threads(fr.threads())
    {
#pragma omp for schedule(static)
      for (std::int64_t u = 0; u < p.units; ++u) unit_stats(x, p, u, mean, rstd);
#pragma omp for schedule(static)
      for (std::int64_t q = 0; q < planes; ++q) normalize_plane(x, y, p, w, b, mean, rstd, q);
    }
  } else {
    for (std::int64_t u = 0; u < p.units; ++u) unit_stats(x, p, u, mean, rstd);
    for (std::int64_t q = 0; q < planes; ++q) normalize_plane(x, y, p, w, b, mean, rstd, q);
  }
}

struct NormResult {
  runtime::ValueId out = 0, mean = 0, rstd = 0;
};

// A per-channel parameter as a contiguous [C] value.
inline std::optional<runtime::ValueId> channel_param(runtime::LowerContext& ctx, std::optional<runtime::ValueId> v,
                                                     std::int64_t C, const char* what) {
  if (!v) return v;
  const runtime::Layout& l = ctx.layout(*v);
  if (l.numel() != C || l.dtype != DType::float32)
    ctx.fail(std::string(what) + " must hold " + std::to_string(C) + " float32 values, got " + runtime::shape_str(l.shape) +
             " " + std::string(dtype_name(l.dtype)));
  const runtime::Layout vec = runtime::Layout::contiguous({C});
  runtime::ValueId p = *v;
  if (!l.is_contiguous()) p = shape_detail::copy_into_new(ctx, p, vec);
  return ctx.view(p, vec);
}

// groups > 0: group norm with that many groups (mean and rstd [N, groups]); groups == 0:
// batch norm with the batch's statistics (mean and rstd [C]).
inline NormResult lower_norm(runtime::LowerContext& ctx, runtime::ValueId in, std::int64_t groups,
                             std::optional<runtime::ValueId> weight, std::optional<runtime::ValueId> bias, double eps) {
  const runtime::Layout l0 = ctx.layout(in);
  const char* what = groups ? "group_norm" : "batch_norm with batch statistics";
  if (l0.dtype != DType::float32) ctx.fail(std::string(what) + " takes float32, got " + std::string(dtype_name(l0.dtype)));
  if (l0.rank() < 2) ctx.fail(std::string(what) + " needs an input [N, C, ...], got " + runtime::shape_str(l0.shape));
  NormPlan p;
  p.N = l0.shape[0];
  p.C = l0.shape[1];
  p.S = l0.numel() / std::max<std::int64_t>(p.N * p.C, 1);
  if (groups < 0 || (groups > 0 && p.C % groups != 0))
    ctx.fail("the input's " + std::to_string(p.C) + " channels do not split into " + std::to_string(groups) + " groups");
  if (groups) {
    p.channels_per_unit = p.C / groups;
    p.units_per_n = groups;
    p.units = p.N * groups;
    p.run = p.unit_stride = p.channels_per_unit * p.S;
  } else {
    if (p.N * p.S <= 1)
      ctx.fail("batch statistics need more than 1 value per channel, got input " + runtime::shape_str(l0.shape));
    p.units = p.C;
    p.unit_stride = p.run = p.S;
    p.blocks = p.N;
    p.block_stride = p.C * p.S;
  }
  if (l0.numel() == 0) ctx.fail(std::string(what) + " of an empty input " + runtime::shape_str(l0.shape));
  p.in = l0.is_contiguous() ? in : shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l0.shape));
  p.weight = channel_param(ctx, weight, p.C, "weight");
  p.bias = channel_param(ctx, bias, p.C, "bias");
  p.eps = static_cast<float>(eps);
  p.out = ctx.buffer(runtime::Layout::contiguous(l0.shape));
  const runtime::Shape stat_shape = groups ? runtime::Shape{p.N, groups} : runtime::Shape{p.C};
  p.mean = ctx.buffer(runtime::Layout::contiguous(stat_shape));
  p.rstd = ctx.buffer(runtime::Layout::contiguous(stat_shape));
  std::vector<runtime::ValueId> reads{p.in};
  for (const auto& v : {p.weight, p.bias})
    if (v) reads.push_back(*v);
  ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_norm(fr, p); }), reads, {p.out, p.mean, p.rstd});
  return {p.out, p.mean, p.rstd};
}

inline void set_tuple(runtime::LowerContext& ctx, const NormResult& r) {
  ctx.set_result(runtime::Lowered::tuple(
      {runtime::Lowered::tensor(r.out), runtime::Lowered::tensor(r.mean), runtime::Lowered::tensor(r.rstd)}));
}

// F.group_norm(input, num_groups, weight=None, bias=None, eps=1e-5); aten.group_norm adds cudnn_enabled.
struct GroupNorm {
  static void lower(runtime::LowerContext& ctx) {
    ctx.set_result(lower_norm(ctx, ctx.tensor(0, "input"), ctx.int_arg(1, "num_groups"), ctx.optional_tensor(2, "weight"),
                              ctx.optional_tensor(3, "bias"), ctx.scalar_arg(4, "eps", 1e-5))
                       .out);
  }
};

// aten.native_group_norm(input, weight, bias, N, C, HxW, group, eps) -> (out, mean, rstd).
struct NativeGroupNorm {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const runtime::Layout& l = ctx.layout(in);
    const std::int64_t N = ctx.int_arg(3, "N"), C = ctx.int_arg(4, "C"), HxW = ctx.int_arg(5, "HxW");
    if (l.rank() < 2 || l.shape[0] != N || l.shape[1] != C || l.numel() != N * C * HxW)
      ctx.fail("N, C, HxW = " + std::to_string(N) + ", " + std::to_string(C) + ", " + std::to_string(HxW) +
               " do not describe the input " + runtime::shape_str(l.shape));
    set_tuple(ctx, lower_norm(ctx, in, ctx.int_arg(6, "group"), ctx.optional_tensor(1, "weight"),
                              ctx.optional_tensor(2, "bias"), ctx.scalar_arg(7, "eps")));
  }
};

}  // namespace norm_detail

}  // namespace kiln::kernels
