#pragma once
// Reductions (sum, mean, amax, amin over a list of dims, keepdim) at the aten,
// torch-function and Tensor-method levels. Lowering splits the input's dims
// into kept (outer) and reduced (inner) ones and merges inner dims that are
// contiguous with each other, so the common cases (a row, or the H*W plane of
// NCHW) reduce one contiguous run with a SIMD loop; outer positions spread
// over OpenMP threads. Loops, not xtensor reducers: those allocate per call.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"

namespace kiln::kernels {

namespace reduction_detail {

enum class Reduce { sum, mean, amax, amin };

inline constexpr std::size_t kMaxReduceRank = 8;
inline constexpr std::int64_t kParallelReduceElements = 32768;

struct ReducePlan {
  runtime::ValueId in = 0, out = 0;
  std::size_t outer_rank = 0, inner_rank = 0;
  std::array<std::int64_t, kMaxReduceRank> outer_shape{}, outer_strides{}, inner_shape{}, inner_strides{};
  std::int64_t outer_numel = 1, inner_numel = 1;
};

// Folds the inner elements starting at `base`.
template <class T, Reduce K>
T reduce_inner(const T* base, const ReducePlan& p) {
  T acc = K == Reduce::amax ? std::numeric_limits<T>::lowest() : K == Reduce::amin ? std::numeric_limits<T>::max() : T(0);
  const std::int64_t run = p.inner_rank ? p.inner_shape[p.inner_rank - 1] : 1;
  const std::int64_t step = p.inner_rank ? p.inner_strides[p.inner_rank - 1] : 1;
  std::array<std::int64_t, kMaxReduceRank> idx{};
  std::int64_t off = 0;
  for (std::int64_t done = 0; done < p.inner_numel; done += run) {
    const T* x = base + off;
    if (step == 1) {
      if constexpr (K == Reduce::amax) {
#pragma omp simd reduction(max : acc)
        for (std::int64_t i = 0; i < run; ++i) acc = std::max(acc, x[i]);
      } else if constexpr (K == Reduce::amin) {
#pragma omp simd reduction(min : acc)
        for (std::int64_t i = 0; i < run; ++i) acc = std::min(acc, x[i]);
      } else {
#pragma omp simd reduction(+ : acc)
        for (std::int64_t i = 0; i < run; ++i) acc += x[i];
      }
    } else {
      for (std::int64_t i = 0; i < run; ++i) {
        const T v = x[i * step];
        if constexpr (K == Reduce::amax) acc = std::max(acc, v);
        else if constexpr (K == Reduce::amin) acc = std::min(acc, v);
        else acc += v;
      }
    }
    // Next run: an odometer over the inner dims but the last.
    for (std::size_t k = p.inner_rank - 1; k-- > 0;) {
      if (++idx[k] < p.inner_shape[k]) {
        off += p.inner_strides[k];
        break;
      }
      off -= (p.inner_shape[k] - 1) * p.inner_strides[k];
      idx[k] = 0;
    }
  }
  if constexpr (K == Reduce::mean) acc = acc / static_cast<T>(p.inner_numel);
  return acc;
}

template <class T, Reduce K>
void run_reduce(const runtime::Frame& fr, const ReducePlan& p) {
  const T* in = fr.data_as<T>(p.in);
  T* out = fr.data_as<T>(p.out);
  auto one = [&](std::int64_t o) {
    std::int64_t off = 0;
    for (std::size_t k = p.outer_rank, rest = static_cast<std::size_t>(o); k-- > 0;) {
      off += static_cast<std::int64_t>(rest % p.outer_shape[k]) * p.outer_strides[k];
      rest /= p.outer_shape[k];
    }
    out[o] = reduce_inner<T, K>(in + off, p);
  };
  if (fr.threads() > 1 && p.outer_numel > 1 && p.outer_numel * p.inner_numel >= kParallelReduceElements) {
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t o = 0; o < p.outer_numel; ++o) one(o);
  } else {
    for (std::int64_t o = 0; o < p.outer_numel; ++o) one(o);
  }
}

template <Reduce K>
struct ReduceKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.find_arg(0, "input") ? ctx.tensor(0, "input") : ctx.tensor(0, "self");
    const runtime::Layout& l = ctx.layout(in);
    const auto rank = static_cast<std::int64_t>(l.rank());
    if (l.rank() > kMaxReduceRank) ctx.fail("reductions take tensors of rank <= 8, got " + runtime::shape_str(l.shape));
    if (ctx.has(1000, "dtype")) {
      const Arg d = ctx.value(1000, "dtype");
      if (!d.get_if<DType>() || *d.get_if<DType>() != l.dtype)
        ctx.fail("a dtype argument that changes the dtype is not supported");
    }
    const bool integers_ok = K != Reduce::mean;
    if (l.dtype != DType::float32 && !(integers_ok && l.dtype == DType::int64))
      ctx.fail("input is " + std::string(dtype_name(l.dtype)) + "; this reduction takes float32" +
               (integers_ok ? " or int64" : ""));

    // dim: absent, None or [] reduce every dim.
    std::vector<bool> reduced(l.rank(), false);
    const auto dims = ctx.has(1, "dim") ? ctx.ints_arg(1, "dim") : std::vector<std::int64_t>{};
    if (dims.empty()) std::fill(reduced.begin(), reduced.end(), true);
    for (auto d : dims) {
      std::int64_t k = 0;
      try {
        k = runtime::normalize_dim(d, rank, "dim");
      } catch (const runtime::ShapeError& e) {
        ctx.fail(std::string(e.what()) + " (input " + runtime::shape_str(l.shape) + ")");
      }
      if (rank > 0 && reduced[k] && dims.size() > 1) ctx.fail("dim " + std::to_string(d) + " appears twice");
      if (rank > 0) reduced[k] = true;
    }
    const bool keepdim = ctx.bool_arg(2, "keepdim", false);

    ReducePlan p;
    p.in = in;
    runtime::Shape out_shape;
    for (std::size_t k = 0; k < l.rank(); ++k) {
      if (!reduced[k]) {
        out_shape.push_back(l.shape[k]);
        p.outer_shape[p.outer_rank] = l.shape[k];
        p.outer_strides[p.outer_rank++] = l.strides[k];
        p.outer_numel *= l.shape[k];
        continue;
      }
      if (keepdim) out_shape.push_back(1);
      p.inner_numel *= l.shape[k];
      if (l.shape[k] == 1) continue;
      // Merge with the previous inner dim when together they are one strided run.
      if (p.inner_rank && p.inner_strides[p.inner_rank - 1] == l.shape[k] * l.strides[k]) {
        p.inner_shape[p.inner_rank - 1] *= l.shape[k];
        p.inner_strides[p.inner_rank - 1] = l.strides[k];
      } else {
        p.inner_shape[p.inner_rank] = l.shape[k];
        p.inner_strides[p.inner_rank++] = l.strides[k];
      }
    }
    if (p.inner_rank == 0) {
      p.inner_shape[0] = 1;
      p.inner_strides[0] = 1;
      p.inner_rank = 1;
    }
    if (p.inner_numel == 0 && (K == Reduce::amax || K == Reduce::amin))
      ctx.fail("amax/amin of an empty dimension (input " + runtime::shape_str(l.shape) + ")");
    p.out = ctx.buffer(out_shape, l.dtype);
    if (l.dtype == DType::float32)
      ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_reduce<float, K>(fr, p); }), {in}, {p.out});
    else
      ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_reduce<std::int64_t, K>(fr, p); }), {in}, {p.out});
    ctx.set_result(p.out);
  }
};

}  // namespace reduction_detail

using reductions_kernels = KernelGroup<
    KernelEntry<"aten.mean.dim", reduction_detail::ReduceKernel<reduction_detail::Reduce::mean>>,
    KernelEntry<"aten.mean.default", reduction_detail::ReduceKernel<reduction_detail::Reduce::mean>>,
    KernelEntry<"torch.mean", reduction_detail::ReduceKernel<reduction_detail::Reduce::mean>>,
    KernelEntry<"Tensor.mean", reduction_detail::ReduceKernel<reduction_detail::Reduce::mean>>,
    KernelEntry<"aten.sum.dim_IntList", reduction_detail::ReduceKernel<reduction_detail::Reduce::sum>>,
    KernelEntry<"aten.sum.default", reduction_detail::ReduceKernel<reduction_detail::Reduce::sum>>,
    KernelEntry<"torch.sum", reduction_detail::ReduceKernel<reduction_detail::Reduce::sum>>,
    KernelEntry<"Tensor.sum", reduction_detail::ReduceKernel<reduction_detail::Reduce::sum>>,
    KernelEntry<"aten.amax.default", reduction_detail::ReduceKernel<reduction_detail::Reduce::amax>>,
    KernelEntry<"torch.amax", reduction_detail::ReduceKernel<reduction_detail::Reduce::amax>>,
    KernelEntry<"Tensor.amax", reduction_detail::ReduceKernel<reduction_detail::Reduce::amax>>,
    KernelEntry<"aten.amin.default", reduction_detail::ReduceKernel<reduction_detail::Reduce::amin>>,
    KernelEntry<"torch.amin", reduction_detail::ReduceKernel<reduction_detail::Reduce::amin>>,
    KernelEntry<"Tensor.amin", reduction_detail::ReduceKernel<reduction_detail::Reduce::amin>>>;

}  // namespace kiln::kernels
