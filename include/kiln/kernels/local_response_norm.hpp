#pragma once
// F.local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0): each
// element divided by (k + alpha / size * sum of squares over the `size`
// channels around it) ^ beta, the window cut at the channel edges but the
// sum still divided by `size` (PyTorch averages over a zero-padded window).
// A loop over the input seen as contiguous [N, C, S], planes over OpenMP threads.
#include <cmath>
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels::norm_detail {

struct LrnPlan {
  runtime::ValueId in = 0, out = 0;
  std::int64_t N = 1, C = 1, S = 1, size = 1;
  float alpha = 1e-4f, beta = 0.75f, k = 1.0f;
};

inline void lrn_plane(const float* x, float* y, const LrnPlan& p, std::int64_t plane) {
  const std::int64_t n = plane / p.C, c = plane % p.C;
  const std::int64_t lo = std::max<std::int64_t>(0, c - p.size / 2), hi = std::min<std::int64_t>(p.C - 1, c + (p.size - 1) / 2);
  const float* xs = x + n * p.C * p.S;
  for (std::int64_t i = 0; i < p.S; ++i) {
    float sum = 0;
    for (std::int64_t j = lo; j <= hi; ++j) sum += xs[j * p.S + i] * xs[j * p.S + i];
    y[plane * p.S + i] = x[plane * p.S + i] / std::pow(p.k + p.alpha * (sum / static_cast<float>(p.size)), p.beta);
  }
}

struct LocalResponseNorm {
  static void lower(runtime::LowerContext& ctx) {
    auto in = ctx.tensor(0, "input");
    const runtime::Layout l = ctx.layout(in);
    if (l.dtype != DType::float32) ctx.fail("local_response_norm takes float32");
    if (l.rank() < 3) ctx.fail("local_response_norm needs an input of rank >= 3, got " + runtime::shape_str(l.shape));
    LrnPlan p;
    p.size = ctx.int_arg(1, "size");
    if (p.size < 1) ctx.fail("local_response_norm: size must be >= 1, got " + std::to_string(p.size));
    p.alpha = static_cast<float>(ctx.scalar_arg(2, "alpha", 1e-4));
    p.beta = static_cast<float>(ctx.scalar_arg(3, "beta", 0.75));
    p.k = static_cast<float>(ctx.scalar_arg(4, "k", 1.0));
    p.N = l.shape[0];
    p.C = l.shape[1];
    p.S = l.numel() / std::max<std::int64_t>(p.N * p.C, 1);
    p.in = l.is_contiguous() ? in : shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l.shape));
    p.out = ctx.buffer(runtime::Layout::contiguous(l.shape));
    ctx.add_step(runtime::make_step([p](runtime::Frame& fr) {
                   const float* x = fr.data_as<float>(p.in);
                   float* y = fr.data_as<float>(p.out);
                   const std::int64_t planes = p.N * p.C;
#pragma omp parallel for num_threads(fr.threads()) schedule(static) if (fr.threads() > 1 && planes * p.S >= 32768)
                   for (std::int64_t q = 0; q < planes; ++q) lrn_plane(x, y, p, q);
                 }),
                 {p.in}, {p.out});
    ctx.set_result(p.out);
  }
};

}  // namespace kiln::kernels::norm_detail
