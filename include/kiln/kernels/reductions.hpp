#pragma once
// Reductions (sum, mean, amax, amin, and the p-norms over a list of dims,
// keepdim) at the aten, torch-function and Tensor-method levels. Lowering splits the input's dims
// into kept (outer) and reduced (inner) ones and merges inner dims that are
// contiguous with each other, so the common cases (a row, or the H*W plane of
// NCHW) reduce one contiguous run with a SIMD loop; outer positions spread
// over OpenMP threads. Loops, not xtensor reducers: those allocate per call.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace reduction_detail {

// norm_p: any other finite, non-zero p, given in the plan; norm0 counts the non-zeros.
enum class Reduce { sum, mean, amax, amin, norm1, norm2, norm_inf, norm_neg_inf, norm0, norm_p };

inline constexpr std::size_t kMaxReduceRank = 8;
inline constexpr std::int64_t kParallelReduceElements = 32768;

struct ReducePlan {
  runtime::ValueId in = 0, out = 0;
  std::size_t outer_rank = 0, inner_rank = 0;
  std::array<std::int64_t, kMaxReduceRank> outer_shape{}, outer_strides{}, inner_shape{}, inner_strides{};
  std::int64_t outer_numel = 1, inner_numel = 1;
  double order = 2;  // norm_p's p
};

constexpr bool integers_ok_for(Reduce k) { return k == Reduce::sum || k == Reduce::amax || k == Reduce::amin; }

// Folds the inner elements starting at `base`.
template <class T, Reduce K>
T reduce_inner(const T* base, const ReducePlan& p) {
  constexpr bool takes_max = K == Reduce::amax || K == Reduce::norm_inf;
  constexpr bool takes_min = K == Reduce::amin || K == Reduce::norm_neg_inf;
  T acc = takes_max ? std::numeric_limits<T>::lowest() : takes_min ? std::numeric_limits<T>::max() : T(0);
  // What each element adds: itself, or its magnitude, square, |v|^p or non-zero-ness for the norms.
  const auto term = [&](T v) {
    if constexpr (K == Reduce::norm1 || K == Reduce::norm_inf || K == Reduce::norm_neg_inf) return std::abs(v);
    else if constexpr (K == Reduce::norm2) return v * v;
    else if constexpr (K == Reduce::norm_p) return static_cast<T>(std::pow(std::abs(v), p.order));
    else if constexpr (K == Reduce::norm0) return static_cast<T>(v != T(0));
    else return v;
  };
  const std::int64_t run = p.inner_rank ? p.inner_shape[p.inner_rank - 1] : 1;
  const std::int64_t step = p.inner_rank ? p.inner_strides[p.inner_rank - 1] : 1;
  std::array<std::int64_t, kMaxReduceRank> idx{};
  std::int64_t off = 0;
  for (std::int64_t done = 0; done < p.inner_numel; done += run) {
    const T* x = base + off;
    if (step == 1) {
      if constexpr (takes_max) {
#pragma omp simd reduction(max : acc)
        for (std::int64_t i = 0; i < run; ++i) acc = std::max(acc, term(x[i]));
      } else if constexpr (takes_min) {
#pragma omp simd reduction(min : acc)
        for (std::int64_t i = 0; i < run; ++i) acc = std::min(acc, term(x[i]));
      } else {
#pragma omp simd reduction(+ : acc)
        for (std::int64_t i = 0; i < run; ++i) acc += term(x[i]);
      }
    } else {
      for (std::int64_t i = 0; i < run; ++i) {
        const T v = term(x[i * step]);
        if constexpr (takes_max) acc = std::max(acc, v);
        else if constexpr (takes_min) acc = std::min(acc, v);
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
  if constexpr (K == Reduce::norm2) acc = std::sqrt(acc);
  if constexpr (K == Reduce::norm_p) acc = static_cast<T>(std::pow(acc, 1.0 / p.order));
  return acc;
}

// The input offset of element `o` of the first `rank` outer dims, the last fastest.
inline std::int64_t outer_offset(const ReducePlan& p, std::size_t rank, std::int64_t o) {
  std::int64_t off = 0;
  for (std::size_t k = rank, rest = static_cast<std::size_t>(o); k-- > 0;) {
    off += static_cast<std::int64_t>(rest % p.outer_shape[k]) * p.outer_strides[k];
    rest /= p.outer_shape[k];
  }
  return off;
}

// A sum or mean whose outputs lie contiguous in the input and whose inner elements
// do not (a channels-last tensor averaged over its spatial dims, the global average
// pool): up to kAcrossBlock outputs summed side by side, one vector add per inner
// element, each output's elements still added one by one in the order reduce_inner adds them.
inline constexpr std::int64_t kAcrossBlock = 64;

template <Reduce K>
bool sums_across(const ReducePlan& p) {
  return (K == Reduce::sum || K == Reduce::mean) && p.outer_rank > 0 && p.outer_strides[p.outer_rank - 1] == 1 &&
         p.inner_strides[p.inner_rank - 1] != 1 && p.inner_numel > 0;
}

template <class T, Reduce K>
void run_reduce_across(const runtime::Frame& fr, const ReducePlan& p) {
  const T* in = fr.data_as<T>(p.in);
  T* out = fr.data_as<T>(p.out);
  const std::int64_t last = p.outer_shape[p.outer_rank - 1], per_row = (last + kAcrossBlock - 1) / kAcrossBlock;
  const std::int64_t tasks = p.outer_numel / last * per_row;
  auto one = [&](std::int64_t t) {
    const std::int64_t row = t / per_row, j0 = t % per_row * kAcrossBlock, n = std::min(kAcrossBlock, last - j0);
    const std::int64_t off = outer_offset(p, p.outer_rank - 1, row) + j0;
    T acc[kAcrossBlock] = {};
    std::array<std::int64_t, kMaxReduceRank> idx{};
    std::int64_t inner = 0;
    for (std::int64_t done = 0; done < p.inner_numel; ++done) {
      const T* x = in + off + inner;
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) acc[j] += x[j];
      for (std::size_t k = p.inner_rank; k-- > 0;) {  // the next inner element, the last inner dim fastest
        if (++idx[k] < p.inner_shape[k]) {
          inner += p.inner_strides[k];
          break;
        }
        inner -= (p.inner_shape[k] - 1) * p.inner_strides[k];
        idx[k] = 0;
      }
    }
    T* o = out + row * last + j0;
    for (std::int64_t j = 0; j < n; ++j) o[j] = K == Reduce::mean ? acc[j] / static_cast<T>(p.inner_numel) : acc[j];
  };
  if (fr.threads() > 1 && tasks > 1 && p.outer_numel * p.inner_numel >= kParallelReduceElements) {
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t t = 0; t < tasks; ++t) one(t);
  } else {
    for (std::int64_t t = 0; t < tasks; ++t) one(t);
  }
}

template <class T, Reduce K>
void run_reduce(const runtime::Frame& fr, const ReducePlan& p) {
  if (sums_across<K>(p)) return run_reduce_across<T, K>(fr, p);
  const T* in = fr.data_as<T>(p.in);
  T* out = fr.data_as<T>(p.out);
  auto one = [&](std::int64_t o) { out[o] = reduce_inner<T, K>(in + outer_offset(p, p.outer_rank, o), p); };
  if (fr.threads() > 1 && p.outer_numel > 1 && p.outer_numel * p.inner_numel >= kParallelReduceElements) {
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t o = 0; o < p.outer_numel; ++o) one(o);
  } else {
    for (std::int64_t o = 0; o < p.outer_numel; ++o) one(o);
  }
}

inline runtime::ValueId reduction_input(runtime::LowerContext& ctx) {
  const auto in = ctx.find_arg(0, "input") ? ctx.tensor(0, "input") : ctx.tensor(0, "self");
  if (ctx.has(1000, "dtype")) {
    const Arg d = ctx.value(1000, "dtype");
    if (!d.get_if<DType>() || *d.get_if<DType>() != ctx.layout(in).dtype)
      ctx.fail("a dtype argument that changes the dtype is not supported");
  }
  return in;
}

// Reduces `in` over `dims` (empty: every dim) into a new buffer, the node's result.
template <Reduce K>
void lower_reduction(runtime::LowerContext& ctx, runtime::ValueId in, const std::vector<std::int64_t>& dims, bool keepdim,
                     double order = 2) {
  const runtime::Layout l = ctx.layout(in);  // a copy: ctx.buffer() below may move the value table
  const auto rank = static_cast<std::int64_t>(l.rank());
  if (l.rank() > kMaxReduceRank) ctx.fail("reductions take tensors of rank <= 8, got " + runtime::shape_str(l.shape));
  constexpr bool integers_ok = integers_ok_for(K);
  if (l.dtype != DType::float32 && !(integers_ok && l.dtype == DType::int64))
    ctx.fail("input is " + std::string(dtype_name(l.dtype)) + "; this reduction takes float32" +
             (integers_ok ? " or int64" : ""));

  std::vector<bool> reduced(l.rank(), false);
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

  ReducePlan p;
  p.in = in;
  p.order = order;
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
  if constexpr (integers_ok_for(K)) {
    if (l.dtype == DType::int64) {
      ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_reduce<std::int64_t, K>(fr, p); }), {in}, {p.out});
      return ctx.set_result(p.out);
    }
  }
  ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_reduce<float, K>(fr, p); }), {in}, {p.out});
  ctx.set_result(p.out);
}

// sum, mean, amax, amin(input, dim, keepdim): dim absent, None or [] reduces every dim.
template <Reduce K>
struct ReduceKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = reduction_input(ctx);
    const auto dims = ctx.has(1, "dim") ? ctx.ints_arg(1, "dim") : std::vector<std::int64_t>{};
    lower_reduction<K>(ctx, in, dims, ctx.bool_arg(2, "keepdim", false));
  }
};

// norm(input, p, dim, keepdim) and linalg_vector_norm(input, ord, dim, keepdim):
// any p (2 also as None and "fro", the default; 0 counts the non-zeros, -inf
// is the smallest magnitude), in float32.
struct NormKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = reduction_input(ctx);
    const bool ord = ctx.node().target_name().find("vector_norm") != std::string_view::npos;
    const char* p_name = ord ? "ord" : "p";
    double p = 2.0;
    if (ctx.has(1, p_name)) {
      const Arg a = ctx.value(1, p_name);
      if (const auto* s = a.get_if<std::string>()) {
        if (*s != "fro") ctx.fail(std::string(p_name) + " '" + *s + "' is not supported; numbers and 'fro' are");
      } else {
        p = ctx.scalar_arg(1, p_name);
      }
    }
    const auto dims = ctx.has(2, "dim") ? ctx.ints_arg(2, "dim") : std::vector<std::int64_t>{};
    lower_norm(ctx, in, p, p_name, dims, ctx.bool_arg(3, "keepdim", false));
  }
  static void lower_norm(runtime::LowerContext& ctx, runtime::ValueId in, double p, const char* p_name,
                         const std::vector<std::int64_t>& dims, bool keepdim) {
    if (p == 2.0) return lower_reduction<Reduce::norm2>(ctx, in, dims, keepdim);
    if (p == 1.0) return lower_reduction<Reduce::norm1>(ctx, in, dims, keepdim);
    if (p == std::numeric_limits<double>::infinity()) return lower_reduction<Reduce::norm_inf>(ctx, in, dims, keepdim);
    if (p == -std::numeric_limits<double>::infinity()) return lower_reduction<Reduce::norm_neg_inf>(ctx, in, dims, keepdim);
    if (p == 0.0) return lower_reduction<Reduce::norm0>(ctx, in, dims, keepdim);
    if (std::isnan(p)) ctx.fail(std::string(p_name) + " is nan");
    lower_reduction<Reduce::norm_p>(ctx, in, dims, keepdim, p);
  }
};

// F.normalize(input, p, dim, eps): input / max(norm_p over dim, eps), the
// division PyTorch does (not a product with the reciprocal).
struct NormalizeKernel {
  static void lower(runtime::LowerContext& ctx) {
    runtime::ValueId in = ctx.tensor(0, "input");
    if (ctx.has(4, "out")) ctx.fail("out= is not supported");
    const runtime::Layout l = ctx.layout(in);
    if (l.dtype != DType::float32) ctx.fail("normalize takes float32, got " + std::string(dtype_name(l.dtype)));
    std::int64_t dim = 0;
    try {
      dim = runtime::normalize_dim(ctx.int_arg(2, "dim", 1), static_cast<std::int64_t>(l.rank()), "dim");
    } catch (const runtime::ShapeError& e) {
      ctx.fail(std::string(e.what()) + " (input " + runtime::shape_str(l.shape) + ")");
    }
    const auto eps = static_cast<float>(ctx.scalar_arg(3, "eps", 1e-12));
    if (!l.is_contiguous()) in = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l.shape, l.dtype));
    NormKernel::lower_norm(ctx, in, ctx.scalar_arg(1, "p", 2.0), "p", {dim}, true);
    const runtime::ValueId norm = ctx.take_result().id;
    const runtime::ValueId out = ctx.buffer(l.shape, l.dtype);
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t k = 0; k < dim; ++k) outer *= l.shape[k];
    for (auto k = static_cast<std::size_t>(dim) + 1; k < l.rank(); ++k) inner *= l.shape[k];
    const std::int64_t d = l.rank() ? l.shape[dim] : 1;
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   const float* x = f.data_as<float>(in);
                   const float* n = f.data_as<float>(norm);
                   float* y = f.data_as<float>(out);
#pragma omp parallel for num_threads(f.threads()) schedule(static) if (f.threads() > 1 && outer * d * inner >= kParallelReduceElements)
                   for (std::int64_t o = 0; o < outer; ++o)
                     for (std::int64_t t = 0; t < d; ++t)
                       for (std::int64_t i = 0; i < inner; ++i)
                         y[(o * d + t) * inner + i] = x[(o * d + t) * inner + i] / std::max(n[o * inner + i], eps);
                 }),
                 {in, norm}, {out});
    ctx.set_result(out);
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
    KernelEntry<"Tensor.amin", reduction_detail::ReduceKernel<reduction_detail::Reduce::amin>>,
    KernelEntry<"aten.norm.ScalarOpt_dim", reduction_detail::NormKernel>,
    KernelEntry<"aten.norm.Scalar", reduction_detail::NormKernel>,
    KernelEntry<"aten.linalg_vector_norm.default", reduction_detail::NormKernel>,
    KernelEntry<"torch.norm", reduction_detail::NormKernel>,
    KernelEntry<"Tensor.norm", reduction_detail::NormKernel>,
    KernelEntry<"torch.linalg.vector_norm", reduction_detail::NormKernel>,
    KernelEntry<"torch.functional.norm", reduction_detail::NormKernel>,
    KernelEntry<"torch.nn.functional.normalize", reduction_detail::NormalizeKernel>>;

}  // namespace kiln::kernels
