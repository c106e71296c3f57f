#pragma once
// quantized_decomposed's per-tensor quantize and per-tensor/per-channel
// dequantize (PT2E graphs): quantize = clamp(round(x / scale) + zero_point,
// qmin, qmax) in the quantized dtype, rounding half to even as torch.round;
// dequantize = (q - zero_point) * scale in float32.
#include <cstdint>
#include <string>

#include "kiln/kernels/detail/xtensor.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/pointwise/dtypes.hpp"

namespace kiln::kernels::pointwise_detail {

inline DType quantized_dtype(const runtime::LowerContext& ctx, std::size_t pos) {
  const Arg a = ctx.value(pos, "dtype");
  const auto* d = a.get_if<DType>();
  if (!d) ctx.fail("the quantized dtype (args[" + std::to_string(pos) + "]) is missing");
  if (*d != DType::uint8 && *d != DType::int8) ctx.fail("quantized dtype " + std::string(dtype_name(*d)) + " is not supported (uint8 and int8 are)");
  return *d;
}

struct QuantizePerTensorKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    if (ctx.layout(in).dtype != DType::float32) ctx.fail("quantize_per_tensor takes a float32 input");
    const float inv_scale = static_cast<float>(1.0 / ctx.scalar_arg(1, "scale"));
    const float zero_point = static_cast<float>(ctx.int_arg(2, "zero_point"));
    const float qmin = static_cast<float>(ctx.int_arg(3, "quant_min"));
    const float qmax = static_cast<float>(ctx.int_arg(4, "quant_max"));
    const DType q = quantized_dtype(ctx, 5);
    ctx.set_result(with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      return lower_map<Q, float>(ctx, q, {in}, [=](auto&& x) {
        return xt::cast<Q>(xt::clip(xt::nearbyint(x * inv_scale) + zero_point, qmin, qmax));
      });
    }));
  }
};

struct DequantizePerTensorKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const float scale = static_cast<float>(ctx.scalar_arg(1, "scale"));
    const float zero_point = static_cast<float>(ctx.int_arg(2, "zero_point"));
    const DType q = quantized_dtype(ctx, 5);
    if (ctx.layout(in).dtype != q)
      ctx.fail("the input is " + std::string(dtype_name(ctx.layout(in).dtype)) + " but dtype says " + std::string(dtype_name(q)));
    ctx.set_result(with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      return lower_map<float, Q>(ctx, DType::float32, {in},
                                 [=](auto&& x) { return (xt::cast<float>(x) - zero_point) * scale; });
    }));
  }
};

// Per channel along `axis`: scales (float32) and zero points (int64) are viewed
// with stride 0 on every other dim, so the map broadcasts them.
struct DequantizePerChannelKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto scales = ctx.tensor(1, "scales");
    const auto zero_points = ctx.tensor(2, "zero_points");
    const auto& l = ctx.layout(in);
    const auto rank = static_cast<std::int64_t>(l.rank());
    std::int64_t axis = 0;
    try {
      axis = runtime::normalize_dim(ctx.int_arg(3, "axis"), rank, "axis");
    } catch (const runtime::ShapeError& e) {
      ctx.fail(e.what());
    }
    const DType q = quantized_dtype(ctx, 6);
    if (l.dtype != q) ctx.fail("the input is " + std::string(dtype_name(l.dtype)) + " but dtype says " + std::string(dtype_name(q)));
    const auto per_channel = [&](runtime::ValueId v, DType want, const char* what) {
      const auto& c = ctx.layout(v);
      if (c.rank() != 1 || c.shape[0] != l.shape[axis] || c.dtype != want)
        ctx.fail(std::string(what) + " must be " + std::string(dtype_name(want)) + " of shape [" + std::to_string(l.shape[axis]) +
                 "], got " + std::string(dtype_name(c.dtype)) + " " + runtime::shape_str(c.shape));
      runtime::Layout along{c.dtype, runtime::Shape(l.rank(), 1), runtime::Shape(l.rank(), 0)};
      along.shape[axis] = c.shape[0];
      along.strides[axis] = c.strides[0];
      return ctx.view(v, runtime::expanded(along, l.shape), 0);
    };
    const auto s = per_channel(scales, DType::float32, "scales");
    const auto z = per_channel(zero_points, DType::int64, "zero_points");
    ctx.set_result(with_dtype(ctx, q, "the quantized dtype", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      return lower_map<float, Q, float, std::int64_t>(ctx, DType::float32, {in, s, z}, [](auto&& x, auto&& sc, auto&& zp) {
        return (xt::cast<float>(x) - xt::cast<float>(zp)) * sc;
      });
    }));
  }
};

}  // namespace kiln::kernels::pointwise_detail

namespace kiln::kernels {

using quantize_kernels = KernelGroup<
    KernelEntry<"quantized_decomposed.quantize_per_tensor.default", pointwise_detail::QuantizePerTensorKernel>,
    KernelEntry<"quantized_decomposed.dequantize_per_tensor.default", pointwise_detail::DequantizePerTensorKernel>,
    KernelEntry<"quantized_decomposed.dequantize_per_channel.default", pointwise_detail::DequantizePerChannelKernel>>;

}  // namespace kiln::kernels
