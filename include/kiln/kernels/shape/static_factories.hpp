#pragma once
// Factories whose values are known when compiling: arange (at the aten and
// torch levels) and scalar_tensor. Each becomes a constant, so the arithmetic
// an exported graph does on it (roll's index math, where's fill value) folds
// while lowering.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/copies.hpp"

namespace kiln::kernels {

namespace shape_detail {

// A static number argument: an int (exact) or a float.
struct StaticNumber {
  double f = 0;
  std::int64_t i = 0;
  bool integral = true;
};

inline StaticNumber static_number(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw,
                                  std::optional<StaticNumber> dflt = std::nullopt) {
  const Arg a = ctx.value(pos, kw);
  if (a.is_none() && dflt) return *dflt;
  if (const auto* i = a.get_if<std::int64_t>()) return {static_cast<double>(*i), *i, true};
  if (const auto* b = a.get_if<bool>()) return {*b ? 1.0 : 0.0, *b ? 1 : 0, true};
  if (const auto* d = a.get_if<double>()) return {*d, static_cast<std::int64_t>(*d), false};
  ctx.fail("argument '" + std::string(kw) + "' must be a number known when compiling");
}

// start + k * step for k < n, computed in int64 or double as PyTorch's CPU kernel does, then stored as T.
template <class T, class Acc>
void write_range(runtime::Tensor& t, Acc start, Acc step, std::int64_t n) {
  T* p = t.data<T>();
  for (std::int64_t k = 0; k < n; ++k) p[k] = static_cast<T>(start + static_cast<Acc>(k) * step);
}

// arange(start, end, step): ceil((end - start) / step) values; int64 when all
// three are ints, else float32, unless dtype is given.
inline void arange(runtime::LowerContext& ctx, StaticNumber start, StaticNumber end, StaticNumber step) {
  const DType dt = dtype_kwarg(ctx, start.integral && end.integral && step.integral ? DType::int64 : DType::float32);
  if (dt != DType::float32 && dt != DType::float64 && dt != DType::int64 && dt != DType::int32)
    ctx.fail("arange to " + std::string(dtype_name(dt)) + " is not supported (float32, float64, int64 and int32 are)");
  const bool integral = dt == DType::int64 || dt == DType::int32;
  if (integral ? step.i == 0 : step.f == 0) ctx.fail("arange: step must be nonzero");
  if ((step.f > 0 && end.f < start.f) || (step.f < 0 && end.f > start.f))
    ctx.fail("arange: the bounds [" + std::to_string(start.f) + ", " + std::to_string(end.f) +
             ") are inconsistent with the sign of step " + std::to_string(step.f));
  // An integer range counts in integers (no rounding of large bounds), a float one in double.
  const std::int64_t sign = step.i > 0 ? 1 : -1;
  const std::int64_t n = integral ? std::max<std::int64_t>(0, (end.i - start.i + step.i - sign) / step.i)
                                  : static_cast<std::int64_t>(std::ceil((end.f - start.f) / step.f));
  runtime::Tensor t = runtime::Tensor::empty({n}, dt);
  switch (dt) {
    case DType::float32: write_range<float>(t, start.f, step.f, n); break;
    case DType::float64: write_range<double>(t, start.f, step.f, n); break;
    case DType::int64: write_range<std::int64_t>(t, start.i, step.i, n); break;
    default: write_range<std::int32_t>(t, start.i, step.i, n); break;
  }
  ctx.set_result(ctx.constant_value(std::move(t), ctx.node().name()));
}

// aten.arange.default(end), .start(start, end) and .start_step(start, end, step=1).
template <int Given>
struct AtenArange {
  static void lower(runtime::LowerContext& ctx) {
    constexpr StaticNumber zero{0, 0, true}, one{1, 1, true};
    if constexpr (Given == 1) arange(ctx, zero, static_number(ctx, 0, "end"), one);
    else if constexpr (Given == 2) arange(ctx, static_number(ctx, 0, "start"), static_number(ctx, 1, "end"), one);
    else arange(ctx, static_number(ctx, 0, "start"), static_number(ctx, 1, "end"), static_number(ctx, 2, "step", one));
  }
};

// torch.arange(end) or torch.arange(start, end, step=1), positionally or by keyword.
struct TorchArange {
  static void lower(runtime::LowerContext& ctx) {
    constexpr StaticNumber zero{0, 0, true}, one{1, 1, true};
    if (ctx.node().args().size() == 1 && !ctx.has(99, "end")) return arange(ctx, zero, static_number(ctx, 0, "end"), one);
    arange(ctx, static_number(ctx, 0, "start", zero), static_number(ctx, 1, "end"), static_number(ctx, 2, "step", one));
  }
};

// scalar_tensor(s, dtype=None): a 0-d constant, float32 unless dtype is given
// (a where(mask, scalar_tensor(v), x) then takes v as a number).
struct ScalarTensor {
  static void lower(runtime::LowerContext& ctx) {
    const DType dt = dtype_kwarg(ctx, DType::float32);
    if (dt != DType::float32 && dt != DType::float64 && dt != DType::int64 && dt != DType::int32 && dt != DType::bool_ &&
        dt != DType::uint8 && dt != DType::int8)
      ctx.fail("scalar_tensor of dtype " + std::string(dtype_name(dt)) + " is not supported");
    const StaticNumber s = static_number(ctx, 0, "s");
    runtime::Tensor t = runtime::Tensor::empty({}, dt);
    if (dt == DType::int64) *t.data<std::int64_t>() = s.integral ? s.i : static_cast<std::int64_t>(s.f);
    else fill_elements(static_cast<std::byte*>(t.raw()), 1, dt, s.f);
    ctx.set_result(ctx.constant_value(std::move(t), ctx.node().name()));
  }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
