#pragma once
// cosine_similarity(x1, x2, dim=1, eps=1e-8) and pairwise_distance(x1, x2,
// p=2, eps=1e-6, keepdim=False) on float32, at the aten and torch levels (the
// modules CosineSimilarity and PairwiseDistance lower as these, modules.hpp).
// Both inputs broadcast to one shape; each output element reduces one line of
// it, a loop whose lines spread over OpenMP threads. PyTorch's eps:
// cosine_similarity divides by max(||x1||, eps) * max(||x2||, eps), each norm
// clamped on its own; pairwise_distance is the p-norm of x1 - x2 + eps over
// the last dim.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace distance_detail {

inline constexpr std::size_t kMaxRank = 8;
inline constexpr std::int64_t kParallelElements = 32768;

// The broadcast inputs as lines: the outer dims (the output's, row-major) and the reduced one.
struct LinePlan {
  runtime::ValueId a = 0, b = 0, out = 0;
  std::size_t outer_rank = 0;
  std::array<std::int64_t, kMaxRank> outer_shape{}, a_outer{}, b_outer{};
  std::int64_t outer_numel = 1, len = 1, a_step = 0, b_step = 0;
};

// Plans x1 and x2 broadcast together and reduced along `dim` (of the broadcast
// rank); the output, a new buffer, keeps that dim as 1 when `keepdim`.
inline LinePlan plan_lines(runtime::LowerContext& ctx, runtime::ValueId a, runtime::ValueId b, std::int64_t dim, bool keepdim) {
  const runtime::Layout la = ctx.layout(a), lb = ctx.layout(b);  // copies: ctx.buffer() below may move the value table
  if (la.dtype != DType::float32 || lb.dtype != DType::float32)
    ctx.fail("takes float32 inputs, got " + std::string(dtype_name(la.dtype)) + " and " + std::string(dtype_name(lb.dtype)));
  const runtime::Shape shape = shape_detail::checked(ctx, [&] { return runtime::broadcast_shapes(la.shape, lb.shape); });
  if (shape.empty() || shape.size() > kMaxRank)
    ctx.fail("takes inputs of rank 1 to " + std::to_string(kMaxRank) + ", got " + runtime::shape_str(shape));
  const auto d = static_cast<std::size_t>(
      shape_detail::checked(ctx, [&] { return runtime::normalize_dim(dim, static_cast<std::int64_t>(shape.size())); }));
  const runtime::Layout ea = runtime::expanded(la, shape), eb = runtime::expanded(lb, shape);
  LinePlan p{a, b};
  p.len = shape[d];
  p.a_step = ea.strides[d];
  p.b_step = eb.strides[d];
  runtime::Shape out_shape;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k == d) {
      if (keepdim) out_shape.push_back(1);
      continue;
    }
    out_shape.push_back(shape[k]);
    p.outer_shape[p.outer_rank] = shape[k];
    p.a_outer[p.outer_rank] = ea.strides[k];
    p.b_outer[p.outer_rank] = eb.strides[k];
    p.outer_numel *= shape[k];
    ++p.outer_rank;
  }
  p.out = ctx.buffer(out_shape, DType::float32);
  return p;
}

// Runs `line(a, b, p)` for every output element, a and b pointing at the start of its line.
template <class Line>
void run_lines(const runtime::Frame& fr, const LinePlan& p, const Line& line) {
  const float* a = fr.data_as<float>(p.a);
  const float* b = fr.data_as<float>(p.b);
  float* out = fr.data_as<float>(p.out);
  auto one = [&](std::int64_t o) {
    std::int64_t ao = 0, bo = 0;
    for (std::size_t k = p.outer_rank, rest = static_cast<std::size_t>(o); k-- > 0;) {
      const auto i = static_cast<std::int64_t>(rest % static_cast<std::size_t>(p.outer_shape[k]));
      rest /= static_cast<std::size_t>(p.outer_shape[k]);
      ao += i * p.a_outer[k];
      bo += i * p.b_outer[k];
    }
    out[o] = line(a + ao, b + bo, p);
  };
  if (fr.threads() > 1 && p.outer_numel > 1 && p.outer_numel * p.len >= kParallelElements) {
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t o = 0; o < p.outer_numel; ++o) one(o);
  } else {
    for (std::int64_t o = 0; o < p.outer_numel; ++o) one(o);
  }
}

// x1 . x2 / (max(||x1||, eps) * max(||x2||, eps)) along one line.
struct CosineLine {
  double eps;
  float operator()(const float* a, const float* b, const LinePlan& p) const {
    double dot = 0, na = 0, nb = 0;
    for (std::int64_t k = 0; k < p.len; ++k) {
      const double x = a[k * p.a_step], y = b[k * p.b_step];
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
    return static_cast<float>(dot / (std::max(std::sqrt(na), eps) * std::max(std::sqrt(nb), eps)));
  }
};

// ||x1 - x2 + eps||_p along one line: p = inf the largest magnitude, -inf the
// smallest, 0 the count of non-zeros, any other p (sum |d|^p)^(1/p), as torch.norm.
struct DistanceLine {
  double p_norm;
  float eps;
  float operator()(const float* a, const float* b, const LinePlan& p) const {
    const bool inf = std::isinf(p_norm);
    double acc = inf && p_norm < 0 ? std::numeric_limits<double>::infinity() : 0.0;
    for (std::int64_t k = 0; k < p.len; ++k) {
      const double d = std::abs(static_cast<double>(a[k * p.a_step] - b[k * p.b_step] + eps));
      if (inf) acc = p_norm > 0 ? std::max(acc, d) : std::min(acc, d);
      else if (p_norm == 0) acc += d != 0;
      else if (p_norm == 1) acc += d;
      else if (p_norm == 2) acc += d * d;
      else acc += std::pow(d, p_norm);
    }
    if (inf || p_norm == 0 || p_norm == 1) return static_cast<float>(acc);
    return static_cast<float>(p_norm == 2 ? std::sqrt(acc) : std::pow(acc, 1.0 / p_norm));
  }
};

struct CosineSimilarity {
  static void lower(runtime::LowerContext& ctx) {
    const double eps = ctx.scalar_arg(3, "eps", 1e-8);
    const LinePlan p = plan_lines(ctx, ctx.tensor(0, "x1"), ctx.tensor(1, "x2"), ctx.int_arg(2, "dim", 1), false);
    ctx.add_step(runtime::make_step([p, eps](runtime::Frame& fr) { run_lines(fr, p, CosineLine{eps}); }), {p.a, p.b}, {p.out});
    ctx.set_result(p.out);
  }
};

// The norm runs over the last dim of the broadcast shape.
struct PairwiseDistance {
  static void lower(runtime::LowerContext& ctx) {
    const double p_norm = ctx.scalar_arg(2, "p", 2.0);
    if (std::isnan(p_norm)) ctx.fail("p is nan");
    const auto eps = static_cast<float>(ctx.scalar_arg(3, "eps", 1e-6));
    const LinePlan p = plan_lines(ctx, ctx.tensor(0, "x1"), ctx.tensor(1, "x2"), -1, ctx.bool_arg(4, "keepdim", false));
    ctx.add_step(runtime::make_step([p, p_norm, eps](runtime::Frame& fr) { run_lines(fr, p, DistanceLine{p_norm, eps}); }),
                 {p.a, p.b}, {p.out});
    ctx.set_result(p.out);
  }
};

}  // namespace distance_detail

using distance_kernels = KernelGroup<
    KernelEntry<"torch.cosine_similarity", distance_detail::CosineSimilarity>,
    KernelEntry<"torch.nn.functional.cosine_similarity", distance_detail::CosineSimilarity>,
    KernelEntry<"aten.cosine_similarity.default", distance_detail::CosineSimilarity>,
    KernelEntry<"torch.pairwise_distance", distance_detail::PairwiseDistance>,
    KernelEntry<"torch.nn.functional.pairwise_distance", distance_detail::PairwiseDistance>,
    KernelEntry<"aten.pairwise_distance.default", distance_detail::PairwiseDistance>>;

}  // namespace kiln::kernels
