#pragma once
// quantized_decomposed's quantize and dequantize (PT2E graphs), per tensor
// (`.default` with numbers, `.tensor` with one-element tensors) and per
// channel along any axis, computed in the order and precision PyTorch computes
// them, so that the results are equal bit for bit:
//   quantize: clamp(round(x * inv_scale) + zero_point, quant_min, quant_max),
//     rounding half to even, with inv_scale = float32(1.0 / scale) per tensor
//     and 1.0f / scales[c] per channel; a bfloat16 input is widened first.
//   dequantize per tensor: (q - zero_point) * float32(scale) in out_dtype
//     (float32, or bfloat16 with each step rounded to it);
//   dequantize per channel: (q - zero_points[c]) * scales[c] in float32, then
//     converted to out_dtype.
#include <algorithm>
#include <cstdint>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/bfloat16.hpp"
#include "kiln/kernels/detail/quantize_run.hpp"
#include "kiln/kernels/detail/xtensor.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/pointwise/dequantized_mean.hpp"
#include "kiln/kernels/pointwise/dtypes.hpp"

namespace kiln::kernels::pointwise_detail {

inline DType quantized_dtype(const runtime::LowerContext& ctx, std::size_t pos) {
  const Arg a = ctx.value(pos, "dtype");
  const auto* d = a.get_if<DType>();
  if (!d) ctx.fail("the quantized dtype (args[" + std::to_string(pos) + "]) is missing");
  if (*d != DType::uint8 && *d != DType::int8) ctx.fail("quantized dtype " + std::string(dtype_name(*d)) + " is not supported (uint8 and int8 are)");
  return *d;
}

// quant_min and quant_max at `pos` and `pos + 1`, which must lie in the range
// of `q` (PyTorch's bounds check; dequantize per tensor does not make it).
inline std::pair<float, float> quant_bounds(const runtime::LowerContext& ctx, std::size_t pos, DType q, bool check) {
  const std::int64_t qmin = ctx.int_arg(pos, "quant_min"), qmax = ctx.int_arg(pos + 1, "quant_max");
  const std::int64_t lo = q == DType::uint8 ? 0 : -128, hi = q == DType::uint8 ? 255 : 127;
  const std::string range = std::string(dtype_name(q)) + "'s range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (check && qmin < lo) ctx.fail("quant_min " + std::to_string(qmin) + " is outside " + range);
  if (check && qmax > hi) ctx.fail("quant_max " + std::to_string(qmax) + " is outside " + range);
  return {static_cast<float>(qmin), static_cast<float>(qmax)};
}

// The input of a quantize: float32, or bfloat16 widened to it as PyTorch does.
inline runtime::ValueId float_input(runtime::LowerContext& ctx) {
  const auto in = ctx.tensor(0, "input");
  const DType d = ctx.layout(in).dtype;
  if (d != DType::float32 && d != DType::bfloat16)
    ctx.fail("the input is " + std::string(dtype_name(d)) + "; quantize takes float32 or bfloat16");
  return cast_to(ctx, in, DType::float32);
}

// Dequantize's out_dtype: float32 when absent.
inline DType dequantized_dtype(const runtime::LowerContext& ctx, std::size_t pos) {
  const Arg a = ctx.value(pos, "out_dtype");
  if (a.is_none()) return DType::float32;
  const auto* d = a.get_if<DType>();
  if (!d || (*d != DType::float32 && *d != DType::bfloat16))
    ctx.fail("out_dtype must be float32 or bfloat16" + (d ? ", got " + std::string(dtype_name(*d)) : std::string()));
  return *d;
}

// clamp(round(scaled) + zero_point, lo, hi) as Q; clamp is min(max(v, lo), hi), as torch.clamp.
// The expression refers to lo and hi: they must outlive it (the map's function holds them).
template <class Q, class E, class Z>
auto quantized(E&& scaled, Z&& zero_point, const float& lo, const float& hi) {
  return xt::cast<Q>(xt::minimum(xt::maximum(xt::nearbyint(std::forward<E>(scaled)) + std::forward<Z>(zero_point), lo), hi));
}

// Scale and zero point of a per-tensor op: numbers in the node (`.default`),
// or one-element tensors (`.tensor`) read when the step runs, as item() reads them.
struct PerTensorParams {
  double scale = 1;
  std::int64_t zero_point = 0;
  std::optional<runtime::ValueId> scale_tensor, zero_point_tensor;
  DType scale_dtype = DType::float32, zero_point_dtype = DType::int64;

  std::vector<runtime::ValueId> tensors() const {
    std::vector<runtime::ValueId> v;
    if (scale_tensor) v.push_back(*scale_tensor);
    if (zero_point_tensor) v.push_back(*zero_point_tensor);
    return v;
  }
  std::pair<double, std::int64_t> at_run(const runtime::Frame& fr) const {
    double s = scale;
    std::int64_t z = zero_point;
    if (scale_tensor)
      s = scale_dtype == DType::float64 ? fr.data_as<double>(*scale_tensor)[0] : fr.data_as<float>(*scale_tensor)[0];
    if (zero_point_tensor)
      z = zero_point_dtype == DType::int32 ? fr.data_as<std::int32_t>(*zero_point_tensor)[0]
                                           : fr.data_as<std::int64_t>(*zero_point_tensor)[0];
    return {s, z};
  }
};

// A one-element tensor argument of one of `dtypes`.
inline runtime::ValueId one_element(const runtime::LowerContext& ctx, std::size_t pos, const char* name, DType a, DType b) {
  const auto v = ctx.tensor(pos, name);
  const auto& l = ctx.layout(v);
  if (l.numel() != 1) ctx.fail(std::string(name) + " must hold one element, got shape " + runtime::shape_str(l.shape));
  if (l.dtype != a && l.dtype != b)
    ctx.fail(std::string(name) + " must be " + std::string(dtype_name(a)) + " or " + std::string(dtype_name(b)) + ", got " +
             std::string(dtype_name(l.dtype)));
  return v;
}

template <bool FromTensors>
PerTensorParams per_tensor_params(const runtime::LowerContext& ctx) {
  PerTensorParams p;
  if constexpr (FromTensors) {
    p.scale_tensor = one_element(ctx, 1, "scale", DType::float32, DType::float64);
    p.zero_point_tensor = one_element(ctx, 2, "zero_point", DType::int64, DType::int32);
    p.scale_dtype = ctx.layout(*p.scale_tensor).dtype;
    p.zero_point_dtype = ctx.layout(*p.zero_point_tensor).dtype;
  } else {
    p.scale = ctx.scalar_arg(1, "scale");
    p.zero_point = ctx.int_arg(2, "zero_point");
  }
  return p;
}

// A dense float32 input (the graph's input, a convolution's result): one flat
// loop split among the threads, instead of xtensor's expression per row.
template <class Q>
runtime::ValueId lower_dense_quantize(runtime::LowerContext& ctx, runtime::ValueId in, DType q, const PerTensorParams& p, float lo,
                                      float hi) {
  const runtime::Layout layout = ctx.layout(in);
  const auto out = ctx.buffer(runtime::dense_like(layout, q));
  std::vector<runtime::ValueId> reads{in};
  for (runtime::ValueId v : p.tensors()) reads.push_back(v);
  const std::int64_t n = layout.numel();
  ctx.add_step(runtime::make_step([in, out, p, lo, hi, n](runtime::Frame& fr) {
                 const auto [scale, zero_point] = p.at_run(fr);
                 const float inv_scale = static_cast<float>(1.0 / scale), z = static_cast<float>(zero_point);
                 const float* x = fr.data_as<float>(in);
                 Q* y = reinterpret_cast<Q*>(fr.data(out));
                 constexpr std::int64_t chunk = 16384;
#pragma omp parallel for num_threads(fr.threads()) schedule(static) if (fr.threads() > 1 && n >= kParallelElements)
                 for (std::int64_t b = 0; b < n; b += chunk)
                   detail::quantize_run<Q>(x + b, y + b, std::min(chunk, n - b), inv_scale, z, lo, hi);
               }),
               std::move(reads), {out});
  return out;
}

template <bool FromTensors>
struct QuantizePerTensorKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = float_input(ctx);
    const DType q = quantized_dtype(ctx, 5);
    // Named, not a structured binding: clang cannot capture one in a lambda before C++20 P1091 lands.
    const std::pair<float, float> bounds = quant_bounds(ctx, 3, q, true);
    const float lo = bounds.first, hi = bounds.second;
    const PerTensorParams p = per_tensor_params<FromTensors>(ctx);
    const runtime::Layout& l = ctx.layout(in);
    // A global average pool's dequantize -> mean -> quantize as one step (pointwise/dequantized_mean.hpp).
    if constexpr (!FromTensors)
      if (q == DType::uint8 || q == DType::int8)
        if (const auto m = dequantized_mean_source(ctx, in)) {
          const float inv_scale = static_cast<float>(1.0 / p.scale), z = static_cast<float>(p.zero_point);
          const runtime::Layout result = runtime::dense_like(l, q);
          return ctx.set_result(q == DType::uint8 ? lower_quantized_mean<std::uint8_t>(ctx, *m, result, inv_scale, z, lo, hi)
                                                  : lower_quantized_mean<std::int8_t>(ctx, *m, result, inv_scale, z, lo, hi));
        }
    if (runtime::dense_like(l, l.dtype) == l)
      return ctx.set_result(with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
        return lower_dense_quantize<typename decltype(tag)::type>(ctx, in, q, p, lo, hi);
      }));
    ctx.set_result(with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      return lower_map_late<Q, float>(ctx, q, in, p.tensors(), [p, lo, hi](const runtime::Frame& fr) {
        const auto [scale, zero_point] = p.at_run(fr);
        const float inv_scale = static_cast<float>(1.0 / scale), z = static_cast<float>(zero_point);
        return [=](auto&& x) { return quantized<Q>(x * inv_scale, z, lo, hi); };
      });
    }));
  }
};

template <bool FromTensors>
struct DequantizePerTensorKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const DType q = quantized_dtype(ctx, 5);
    if (ctx.layout(in).dtype != q)
      ctx.fail("the input is " + std::string(dtype_name(ctx.layout(in).dtype)) + " but dtype says " + std::string(dtype_name(q)));
    const DType out = dequantized_dtype(ctx, 6);
    const PerTensorParams p = per_tensor_params<FromTensors>(ctx);
    ctx.set_result(with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      if (out == DType::bfloat16)
        return lower_map_late<std::uint16_t, Q>(ctx, out, in, p.tensors(), [p](const runtime::Frame& fr) {
          const auto [scale, zero_point] = p.at_run(fr);
          const float s = static_cast<float>(scale), z = static_cast<float>(zero_point);
          return [=](auto&& x) {
            return xt::vectorize([=](Q v) -> std::uint16_t { return float_to_bf16(round_to_bf16(float(v) - z) * s); })(x);
          };
        });
      return lower_map_late<float, Q>(ctx, out, in, p.tensors(), [p](const runtime::Frame& fr) {
        const auto [scale, zero_point] = p.at_run(fr);
        const float s = static_cast<float>(scale), z = static_cast<float>(zero_point);
        return [=](auto&& x) { return (xt::cast<float>(x) - z) * s; };
      });
    }));
  }
};

// A per-channel parameter (scales, zero points) of `want` dtype, one element
// per index of `axis` or one for all, viewed with stride 0 on every other dim
// so that the map broadcasts it.
inline runtime::ValueId along_axis(runtime::LowerContext& ctx, std::size_t pos, const char* name, DType want,
                                   runtime::ValueId in, std::size_t axis) {
  const auto v = ctx.tensor(pos, name);
  const auto& c = ctx.layout(v);
  const auto& l = ctx.layout(in);
  if (c.dtype != want) ctx.fail(std::string(name) + " must be " + std::string(dtype_name(want)) + ", got " + std::string(dtype_name(c.dtype)));
  if (c.rank() != 1 || (c.shape[0] != l.shape[axis] && c.shape[0] != 1))
    ctx.fail(std::string(name) + " must have shape [" + std::to_string(l.shape[axis]) + "] (the size of axis " +
             std::to_string(axis) + " of the input), got " + runtime::shape_str(c.shape));
  runtime::Layout along{c.dtype, runtime::Shape(l.rank(), 1), runtime::Shape(l.rank(), 0)};
  along.shape[axis] = c.shape[0];
  along.strides[axis] = c.strides[0];
  return ctx.view(v, runtime::expanded(along, l.shape), 0);
}

inline std::size_t channel_axis(const runtime::LowerContext& ctx, runtime::ValueId in) {
  if (ctx.layout(in).rank() == 0) ctx.fail("a per-channel op takes an input of rank 1 or more, got a 0-d tensor");
  try {
    return static_cast<std::size_t>(
        runtime::normalize_dim(ctx.int_arg(3, "axis"), static_cast<std::int64_t>(ctx.layout(in).rank()), "axis"));
  } catch (const runtime::ShapeError& e) {
    ctx.fail(e.what());
  }
}

struct QuantizePerChannelKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = float_input(ctx);
    const std::size_t axis = channel_axis(ctx, in);
    const DType q = quantized_dtype(ctx, 6);
    // Named, not a structured binding: clang cannot capture one in a lambda before C++20 P1091 lands.
    const std::pair<float, float> bounds = quant_bounds(ctx, 4, q, true);
    const float lo = bounds.first, hi = bounds.second;
    const auto s = along_axis(ctx, 1, "scales", DType::float32, in, axis);
    const auto z = along_axis(ctx, 2, "zero_points", DType::int64, in, axis);
    ctx.set_result(with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      return lower_map<Q, float, float, std::int64_t>(ctx, q, {in, s, z}, [lo, hi](auto&& x, auto&& sc, auto&& zp) {
        return quantized<Q>(x * (1.0f / sc), xt::cast<float>(zp), lo, hi);
      });
    }));
  }
};

struct DequantizePerChannelKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const std::size_t axis = channel_axis(ctx, in);
    const DType q = quantized_dtype(ctx, 6);
    if (ctx.layout(in).dtype != q)
      ctx.fail("the input is " + std::string(dtype_name(ctx.layout(in).dtype)) + " but dtype says " + std::string(dtype_name(q)));
    quant_bounds(ctx, 4, q, true);
    const DType out = dequantized_dtype(ctx, 7);
    const auto s = along_axis(ctx, 1, "scales", DType::float32, in, axis);
    const auto z = ctx.has(2, "zero_points") ? std::optional(along_axis(ctx, 2, "zero_points", DType::int64, in, axis))
                                             : std::nullopt;
    const auto res = with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      // The difference in int64, as PyTorch's integer subtraction, is exact whatever the zero point.
      if (z)
        return lower_map<float, Q, float, std::int64_t>(ctx, DType::float32, {in, s, *z}, [](auto&& x, auto&& sc, auto&& zp) {
          return xt::cast<float>(xt::cast<std::int64_t>(x) - zp) * sc;
        });
      return lower_map<float, Q, float>(ctx, DType::float32, {in, s}, [](auto&& x, auto&& sc) { return xt::cast<float>(x) * sc; });
    });
    ctx.set_result(cast_to(ctx, res, out));
  }
};

}  // namespace kiln::kernels::pointwise_detail

namespace kiln::kernels {

using quantize_kernels = KernelGroup<
    KernelEntry<"quantized_decomposed.quantize_per_tensor.default", pointwise_detail::QuantizePerTensorKernel<false>>,
    KernelEntry<"quantized_decomposed.quantize_per_tensor.tensor", pointwise_detail::QuantizePerTensorKernel<true>>,
    KernelEntry<"quantized_decomposed.dequantize_per_tensor.default", pointwise_detail::DequantizePerTensorKernel<false>>,
    KernelEntry<"quantized_decomposed.dequantize_per_tensor.tensor", pointwise_detail::DequantizePerTensorKernel<true>>,
    KernelEntry<"quantized_decomposed.quantize_per_channel.default", pointwise_detail::QuantizePerChannelKernel>,
    KernelEntry<"quantized_decomposed.dequantize_per_channel.default", pointwise_detail::DequantizePerChannelKernel>>;

}  // namespace kiln::kernels
