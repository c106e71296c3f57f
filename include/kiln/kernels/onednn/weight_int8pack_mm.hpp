#pragma once
// aten._weight_int8pack_mm(self [M, K] float32/bfloat16, mat2 [N, K] int8,
// scales [N] of self's dtype): weight-only int8, out = (self @ mat2^T) * scales
// in self's dtype. Lowered as float32 pieces: the weight dequantized per output
// channel (mat2[n, k] * scales[n]; once, by the constant folder, for a constant
// weight), oneDNN's linear, and a bfloat16 result rounded once at the end.
// PyTorch scales the sums instead of the weights: the two differ by float32
// rounding, within one bfloat16 step of a bfloat16 result.
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/qlinear.hpp"

namespace kiln::kernels::onednn_detail {

struct WeightInt8PackMm {
  static void lower(runtime::LowerContext& ctx) {
    using runtime::CallArg;
    const auto x = ctx.tensor(0, "self"), w = ctx.tensor(1, "mat2"), s = ctx.tensor(2, "scales");
    const runtime::Layout &xl = ctx.layout(x), &wl = ctx.layout(w), &sl = ctx.layout(s);
    if (xl.rank() != 2 || (xl.dtype != DType::float32 && xl.dtype != DType::bfloat16))
      ctx.fail("self must be a 2-d float32 or bfloat16 matrix, got " + std::string(dtype_name(xl.dtype)) + " " + runtime::shape_str(xl.shape));
    if (wl.rank() != 2 || wl.dtype != DType::int8 || wl.shape[1] != xl.shape[1])
      ctx.fail("mat2 must be an int8 [N, " + std::to_string(xl.shape[1]) + "] matrix, got " + std::string(dtype_name(wl.dtype)) + " " +
               runtime::shape_str(wl.shape));
    if (sl.rank() != 1 || sl.shape[0] != wl.shape[0] || sl.dtype != xl.dtype)
      ctx.fail("scales must be " + std::string(dtype_name(xl.dtype)) + " [" + std::to_string(wl.shape[0]) + "], got " +
               std::string(dtype_name(sl.dtype)) + " " + runtime::shape_str(sl.shape));
    const auto as_float = [&](runtime::ValueId v) {
      return ctx.layout(v).dtype == DType::float32 ? v : convert_piece(ctx, v, DType::float32);
    };
    // The weight dequantized per output channel (zero points 0): mat2[n, k] * scales[n].
    runtime::Tensor zeros = runtime::Tensor::empty({wl.shape[0]}, DType::int64);
    for (std::int64_t j = 0; j < wl.shape[0]; ++j) zeros.data<std::int64_t>()[j] = 0;
    const auto zp = ctx.constant_value(std::move(zeros), ctx.node().name() + ".zero_points");
    const auto wd = piece(ctx, "quantized_decomposed.dequantize_per_channel.default",
                          {CallArg::of_tensor(w), CallArg::of_tensor(as_float(s)), CallArg::of_tensor(zp), CallArg::of(Arg(std::int64_t{0})),
                           CallArg::of(Arg(std::int64_t{-128})), CallArg::of(Arg(std::int64_t{127})), CallArg::of(Arg(DType::int8))});
    auto y = piece(ctx, "aten.linear.default", {CallArg::of_tensor(as_float(x)), CallArg::of_tensor(wd), CallArg::of(Arg())});
    if (xl.dtype == DType::bfloat16) y = convert_piece(ctx, y, DType::bfloat16);
    ctx.set_result(y);
  }
};

}  // namespace kiln::kernels::onednn_detail
