#pragma once
// Binary element-wise ops with NumPy broadcasting and Python scalars on either
// side (add/sub with alpha, mul, div and its rounding modes, fmod, rsub, pow,
// minimum, maximum) and where.self, at the aten, torch, Tensor-method and
// operator levels. Operands promote as PyTorch does over float32, int64 and
// bool; a scalar stays a scalar in the expression (no broadcast buffer). When
// both operands of an operator.* are static numbers (shapes), the result is a
// static number with Python's semantics.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/kernels/detail/xtensor.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/pointwise/dtypes.hpp"
#include "kiln/kernels/pointwise/inplace.hpp"
#include "kiln/kernels/pointwise/unary.hpp"

namespace kiln::kernels::pointwise_detail {

// A static number operand: a Python scalar or a 0-d constant tensor.
struct Scalar {
  double f = 0;
  std::int64_t i = 0;
  DType dtype = DType::float32;  // float32 for floats, int64 for ints, bool_ for bools
  template <class T>
  T as() const {
    return dtype == DType::float32 ? static_cast<T>(f) : static_cast<T>(i);
  }
};

struct Operand {
  std::optional<runtime::ValueId> tensor;
  Scalar scalar;
};

inline std::optional<Scalar> scalar_of(const Arg& a) {
  if (const auto* b = a.get_if<bool>()) return Scalar{double(*b), *b, DType::bool_};
  if (const auto* i = a.get_if<std::int64_t>()) return Scalar{double(*i), *i, DType::int64};
  if (const auto* d = a.get_if<double>()) return Scalar{*d, static_cast<std::int64_t>(*d), DType::float32};
  return std::nullopt;
}

// A 0-d constant tensor's value as a scalar (get_attr constants fold here).
inline std::optional<Scalar> constant_scalar(const runtime::LowerContext& ctx, runtime::ValueId v) {
  const auto c = ctx.constant(v);
  if (!c || c->rank() != 0) return std::nullopt;
  switch (c->dtype()) {
    case DType::float32: return Scalar{*c->data<float>(), 0, DType::float32};
    case DType::int64: return Scalar{double(*c->data<std::int64_t>()), *c->data<std::int64_t>(), DType::int64};
    case DType::bool_: return Scalar{double(*c->data<bool>()), *c->data<bool>(), DType::bool_};
    default: return std::nullopt;
  }
}

inline Operand read_operand(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw) {
  const Arg a = ctx.value(pos, kw);
  if (a.node()) {
    const auto v = ctx.tensor(pos, kw);
    if (auto s = constant_scalar(ctx, v)) return {std::nullopt, *s};
    return {v, {}};
  }
  if (auto s = scalar_of(a)) return {std::nullopt, *s};
  ctx.fail("args[" + std::to_string(pos) + "] is neither a tensor nor a number");
}

// PyTorch's promotion for float32/int64/bool: tensors decide within a category,
// a scalar only lifts the category (a float scalar makes int tensors float32).
inline DType promote(const runtime::LowerContext& ctx, const Operand& a, const Operand& b) {
  int tensor_cat = -1, scalar_cat = -1;
  for (const Operand* o : {&a, &b}) {
    if (o->tensor) tensor_cat = std::max(tensor_cat, dtype_category(ctx.layout(*o->tensor).dtype));
    else scalar_cat = std::max(scalar_cat, dtype_category(o->scalar.dtype));
  }
  const int cat = std::max(tensor_cat, scalar_cat);
  return cat == 2 ? DType::float32 : cat == 1 ? DType::int64 : DType::bool_;
}

// add, sub and rsub are all ca * a + cb * b (alpha folded into the
// coefficients); with a scalar operand they are x * scale + shift, as is mul by
// a scalar. One expression each keeps the instantiations (compile time) down.
struct Linear {
  double ca = 1, cb = 1;
  auto operator()(auto&& a, auto&& b) const {
    using T = elem_t<decltype(a)>;
    return a * static_cast<T>(ca) + b * static_cast<T>(cb);
  }
};
struct Affine {
  double scale = 1, shift = 0;
  std::int64_t iscale = 1, ishift = 0;  // exact for int64 tensors
  auto operator()(auto&& x) const {
    using T = elem_t<decltype(x)>;
    if constexpr (std::is_integral_v<T>) return x * static_cast<T>(iscale) + static_cast<T>(ishift);
    else return x * static_cast<T>(scale) + static_cast<T>(shift);
  }
};
struct Mul {
  auto operator()(auto&& a, auto&& b) const { return a * b; }
};
struct TrueDiv {
  auto operator()(auto&& a, auto&& b) const { return a / b; }
};
struct TruncDiv {
  auto operator()(auto&& a, auto&& b) const {
    if constexpr (std::is_integral_v<elem_t<decltype(a / b)>>) return a / b;
    else return xt::trunc(a / b);
  }
};
struct FloorDiv {
  auto operator()(auto&& a, auto&& b) const {
    using T = elem_t<decltype(a / b)>;
    if constexpr (std::is_integral_v<T>) {
      // C++ truncates; one less where the remainder is nonzero and the signs differ.
      return a / b - xt::cast<T>(xt::not_equal(a % b, T(0)) && ((a % b) ^ b) < T(0));
    } else {
      return xt::floor(a / b);
    }
  }
};
// fmod: the remainder of a truncating division, with the dividend's sign (C's
// fmod). An integer divisor of zero gives 0 here (PyTorch raises) rather than a trap.
struct FMod {
  auto operator()(auto&& a, auto&& b) const {
    using T = elem_t<decltype(a / b)>;
    if constexpr (std::is_integral_v<T>) return a % (b + xt::cast<T>(xt::equal(b, T(0))));
    else return xt::fmod(a, b);
  }
};
struct Pow {
  auto operator()(auto&& a, auto&& b) const { return xt::pow(a, b); }
};
struct Minimum {
  auto operator()(auto&& a, auto&& b) const { return xt::minimum(a, b); }
};
struct Maximum {
  auto operator()(auto&& a, auto&& b) const { return xt::maximum(a, b); }
};

// The dtype a binary op computes in: promoted, float32 for true division, int64 for bools.
inline DType binary_dtype(const runtime::LowerContext& ctx, const Operand& a, const Operand& b, bool float_result,
                          bool integers) {
  if (!a.tensor && !b.tensor) ctx.fail("neither operand is a tensor");
  DType dt = promote(ctx, a, b);
  if (float_result) dt = DType::float32;
  if (dt == DType::bool_) dt = DType::int64;  // arithmetic on bools computes in int64
  if (dt == DType::int64 && !integers) ctx.fail("this op takes float32 tensors (got integers)");
  return dt;
}

// A scalar as a 0-d constant of `dt` (it broadcasts like any tensor).
inline runtime::ValueId scalar_constant(runtime::LowerContext& ctx, const Scalar& s, DType dt) {
  runtime::Tensor t = runtime::Tensor::empty({}, dt);
  if (dt == DType::float32) *t.data<float>() = s.as<float>();
  else *t.data<std::int64_t>() = s.as<std::int64_t>();
  return ctx.constant_value(std::move(t), ctx.node().name() + ".scalar");
}

// out = op(a, b) into a new buffer of the promoted dtype. A float32 scalar
// stays a scalar in the expression; int64 ops (shape arithmetic, small) take
// scalars as 0-d constants, which saves their instantiations.
template <class Op>
runtime::ValueId lower_binary(runtime::LowerContext& ctx, const Op& op, const Operand& a, const Operand& b,
                              bool float_result = false, bool integers = true) {
  const DType dt = binary_dtype(ctx, a, b, float_result, integers);
  if (dt == DType::int64) {
    const auto as_tensor = [&](const Operand& o) { return o.tensor ? cast_to(ctx, *o.tensor, dt) : scalar_constant(ctx, o.scalar, dt); };
    const runtime::ValueId ta = as_tensor(a), tb = as_tensor(b);
    return lower_map<std::int64_t, std::int64_t, std::int64_t>(ctx, dt, {ta, tb}, op);
  }
  const auto cast = [&](const Operand& o) { return o.tensor ? cast_to(ctx, *o.tensor, dt) : runtime::ValueId{}; };
  const runtime::ValueId ta = cast(a), tb = cast(b);
  if (a.tensor && b.tensor) return lower_map<float, float, float>(ctx, dt, {ta, tb}, op);
  if (a.tensor) return lower_map<float, float>(ctx, dt, {ta}, [op, s = b.scalar.as<float>()](auto&& x) { return op(x, s); });
  return lower_map<float, float>(ctx, dt, {tb}, [op, s = a.scalar.as<float>()](auto&& x) { return op(s, x); });
}

// ca * a + cb * b for add, sub, rsub and mul by a scalar.
inline runtime::ValueId lower_linear(runtime::LowerContext& ctx, const Operand& a, const Operand& b, double ca, double cb) {
  const DType dt = binary_dtype(ctx, a, b, false, true);
  if (a.tensor && b.tensor) {
    const runtime::ValueId ta = cast_to(ctx, *a.tensor, dt), tb = cast_to(ctx, *b.tensor, dt);
    if (dt == DType::float32) return lower_map<float, float, float>(ctx, dt, {ta, tb}, Linear{ca, cb});
    return lower_map<std::int64_t, std::int64_t, std::int64_t>(ctx, dt, {ta, tb}, Linear{ca, cb});
  }
  const bool tensor_first = a.tensor.has_value();
  const Scalar& s = tensor_first ? b.scalar : a.scalar;
  const double c_tensor = tensor_first ? ca : cb, c_scalar = tensor_first ? cb : ca;
  const Affine f{c_tensor, c_scalar * s.f, static_cast<std::int64_t>(c_tensor), static_cast<std::int64_t>(c_scalar) * s.i};
  const runtime::ValueId t = cast_to(ctx, tensor_first ? *a.tensor : *b.tensor, dt);
  if (dt == DType::float32) return lower_map<float, float>(ctx, dt, {t}, f);
  return lower_map<std::int64_t, std::int64_t>(ctx, dt, {t}, f);
}

inline runtime::ValueId lower_mul(runtime::LowerContext& ctx, const Operand& a, const Operand& b) {
  if (a.tensor && b.tensor) {
    const DType dt = binary_dtype(ctx, a, b, false, true);
    const runtime::ValueId ta = cast_to(ctx, *a.tensor, dt), tb = cast_to(ctx, *b.tensor, dt);
    if (dt == DType::float32) return lower_map<float, float, float>(ctx, dt, {ta, tb}, Mul{});
    return lower_map<std::int64_t, std::int64_t, std::int64_t>(ctx, dt, {ta, tb}, Mul{});
  }
  // x * s is the affine x * s + 0 (exact up to the sign of a zero).
  const DType dt = binary_dtype(ctx, a, b, false, true);
  const Operand& t = a.tensor ? a : b;
  const Scalar& s = a.tensor ? b.scalar : a.scalar;
  const runtime::ValueId x = cast_to(ctx, *t.tensor, dt);
  const Affine f{s.f, 0, s.i, 0};
  if (dt == DType::float32) return lower_map<float, float>(ctx, dt, {x}, f);
  return lower_map<std::int64_t, std::int64_t>(ctx, dt, {x}, f);
}

// fmod(a, b); an integer scalar divisor of zero is refused when compiling, as PyTorch raises.
inline runtime::ValueId lower_fmod(runtime::LowerContext& ctx, const Operand& a, const Operand& b) {
  if (!b.tensor && b.scalar.dtype != DType::float32 && b.scalar.i == 0 && binary_dtype(ctx, a, b, false, true) == DType::int64)
    ctx.fail("fmod: integer division by zero");
  return lower_binary(ctx, FMod{}, a, b);
}

// Python's arithmetic on two static numbers (ints stay ints, `/` gives a float, `//` floors).
template <class IntOp, class FloatOp>
void static_arith(runtime::LowerContext& ctx, const Scalar& a, const Scalar& b, IntOp iop, FloatOp fop) {
  if (a.dtype != DType::float32 && b.dtype != DType::float32) return ctx.set_static_result(Arg(iop(a.i, b.i)));
  ctx.set_static_result(Arg(fop(a.f, b.f)));
}

enum class BinaryOp { add, sub, mul, div, floordiv, fmod, rsub, pow, minimum, maximum };

template <BinaryOp K, bool InPlace = false>
struct BinaryKernel {
  static void lower(runtime::LowerContext& ctx) {
    const bool is_aten = ctx.node().target_name().starts_with("aten.");
    const bool is_operator = ctx.node().target_name().starts_with("operator.");
    const Arg first = ctx.value(0, is_aten ? "self" : "input");
    const Arg second = ctx.value(1, K == BinaryOp::pow ? "exponent" : "other");
    if (is_operator && !first.node() && !second.node()) return lower_static(ctx, first, second);
    const Operand a = read_operand(ctx, 0, is_aten ? "self" : "input");
    const Operand b = read_operand(ctx, 1, K == BinaryOp::pow ? "exponent" : "other");
    if (InPlace) check_no_later_reads(ctx, 0, "self");
    runtime::ValueId out = 0;
    if constexpr (K == BinaryOp::add) out = lower_linear(ctx, a, b, 1, ctx.scalar_arg(2, "alpha", 1.0));
    else if constexpr (K == BinaryOp::sub) out = lower_linear(ctx, a, b, 1, -ctx.scalar_arg(2, "alpha", 1.0));
    else if constexpr (K == BinaryOp::rsub) out = lower_linear(ctx, a, b, -ctx.scalar_arg(2, "alpha", 1.0), 1);
    else if constexpr (K == BinaryOp::mul) out = lower_mul(ctx, a, b);
    else if constexpr (K == BinaryOp::floordiv) out = lower_binary(ctx, FloorDiv{}, a, b);
    else if constexpr (K == BinaryOp::fmod) out = lower_fmod(ctx, a, b);
    else if constexpr (K == BinaryOp::pow) out = lower_binary(ctx, Pow{}, a, b, false, false);
    else if constexpr (K == BinaryOp::minimum) out = lower_binary(ctx, Minimum{}, a, b);
    else if constexpr (K == BinaryOp::maximum) out = lower_binary(ctx, Maximum{}, a, b);
    else {
      const std::string mode = ctx.has(2, "rounding_mode") ? ctx.string_arg(2, "rounding_mode") : "";
      if (mode.empty()) out = lower_binary(ctx, TrueDiv{}, a, b, true);
      else if (mode == "trunc") out = lower_binary(ctx, TruncDiv{}, a, b);
      else if (mode == "floor") out = lower_binary(ctx, FloorDiv{}, a, b);
      else ctx.fail("div: rounding_mode must be None, 'trunc' or 'floor', got '" + mode + "'");
    }
    if (InPlace && a.tensor && ctx.layout(out).dtype != ctx.layout(*a.tensor).dtype)
      ctx.fail("the in-place result is " + std::string(dtype_name(ctx.layout(out).dtype)) + " but self is " +
               std::string(dtype_name(ctx.layout(*a.tensor).dtype)));
    if (InPlace && a.tensor && ctx.layout(out).shape != ctx.layout(*a.tensor).shape)
      ctx.fail("the in-place result " + runtime::shape_str(ctx.layout(out).shape) + " does not fit self " +
               runtime::shape_str(ctx.layout(*a.tensor).shape));
    ctx.set_result(out);
  }

  static void lower_static(runtime::LowerContext& ctx, const Arg& x, const Arg& y) {
    if constexpr (K == BinaryOp::add) {
      // Shapes are lists: `x.shape[:1] + [4]` concatenates.
      if (x.list() && y.list()) {
        ArgList out = *x.list();
        out.insert(out.end(), y.list()->begin(), y.list()->end());
        return ctx.set_static_result(Arg(std::move(out)));
      }
    }
    const auto a = scalar_of(x), b = scalar_of(y);
    if (!a || !b) ctx.fail("operands are neither tensors nor numbers");
    if constexpr (K == BinaryOp::add)
      static_arith(ctx, *a, *b, [](auto p, auto q) { return p + q; }, [](double p, double q) { return p + q; });
    else if constexpr (K == BinaryOp::sub)
      static_arith(ctx, *a, *b, [](auto p, auto q) { return p - q; }, [](double p, double q) { return p - q; });
    else if constexpr (K == BinaryOp::mul)
      static_arith(ctx, *a, *b, [](auto p, auto q) { return p * q; }, [](double p, double q) { return p * q; });
    else if constexpr (K == BinaryOp::div) {
      if (b->f == 0) ctx.fail("division by zero");
      ctx.set_static_result(Arg(a->f / b->f));
    } else if constexpr (K == BinaryOp::floordiv) {
      if (b->f == 0) ctx.fail("division by zero");
      static_arith(
          ctx, *a, *b,
          [](std::int64_t p, std::int64_t q) { return p / q - ((p % q != 0) && ((p % q < 0) != (q < 0))); },
          [](double p, double q) { return std::floor(p / q); });
    } else {
      ctx.fail("this operator on two static values is not supported");
    }
  }
};

// where.self(condition, self, other): a bool condition picks between two promoted operands.
struct WhereKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto cond = ctx.tensor(0, "condition");
    if (ctx.layout(cond).dtype != DType::bool_)
      ctx.fail("condition is " + std::string(dtype_name(ctx.layout(cond).dtype)) + "; where takes a bool condition");
    const bool is_aten = ctx.node().target_name().starts_with("aten.");
    Operand a = read_operand(ctx, 1, is_aten ? "self" : "input");
    Operand b = read_operand(ctx, 2, "other");
    DType dt = promote(ctx, a, b);
    if (dt == DType::bool_) ctx.fail("where of two bool operands is not supported");
    // Scalars become 0-d constants: the condition's shape still broadcasts with them.
    auto as_tensor = [&](const Operand& o) {
      if (o.tensor) return cast_to(ctx, *o.tensor, dt);
      runtime::Tensor t = runtime::Tensor::empty({}, dt);
      if (dt == DType::float32) *t.data<float>() = o.scalar.as<float>();
      else *t.data<std::int64_t>() = o.scalar.as<std::int64_t>();
      return ctx.constant_value(std::move(t), ctx.node().name() + ".scalar");
    };
    const runtime::ValueId ta = as_tensor(a), tb = as_tensor(b);
    const auto pick = [](auto&& c, auto&& x, auto&& y) { return xt::where(c, x, y); };
    if (dt == DType::float32) ctx.set_result(lower_map<float, bool, float, float>(ctx, dt, {cond, ta, tb}, pick));
    else ctx.set_result(lower_map<std::int64_t, bool, std::int64_t, std::int64_t>(ctx, dt, {cond, ta, tb}, pick));
  }
};

// clamp(self, min=None, max=None) with tensor bounds (torch 2.11's
// aten.clamp.Tensor): a maximum with min, then a minimum with max, each
// broadcasting as a binary op; min above max gives max, as in PyTorch.
struct ClampTensor {
  static bool given(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw) {
    const Arg* a = ctx.find_arg(pos, kw);
    return a && !a->is_none();
  }
  static void lower(runtime::LowerContext& ctx) {
    const bool lo = given(ctx, 1, "min"), hi = given(ctx, 2, "max");
    if (!lo && !hi) ctx.fail("clamp needs min or max; both are None");
    Operand x = read_operand(ctx, 0, "self");
    if (lo) x = Operand{lower_binary(ctx, Maximum{}, x, read_operand(ctx, 1, "min")), {}};
    if (hi) x = Operand{lower_binary(ctx, Minimum{}, x, read_operand(ctx, 2, "max")), {}};
    ctx.set_result(*x.tensor);
  }
};

}  // namespace kiln::kernels::pointwise_detail

namespace kiln::kernels {

using pointwise_detail::BinaryKernel;
using pointwise_detail::BinaryOp;

using binary_kernels = KernelGroup<
    KernelEntry<"aten.add.Tensor", BinaryKernel<BinaryOp::add>>,
    KernelEntry<"aten.add", BinaryKernel<BinaryOp::add>>,  // the packet, as Inductor's passes call it
    KernelEntry<"aten.add.Scalar", BinaryKernel<BinaryOp::add>>,
    KernelEntry<"aten.add_.Tensor", BinaryKernel<BinaryOp::add, true>>,
    KernelEntry<"torch.add", BinaryKernel<BinaryOp::add>>,
    KernelEntry<"Tensor.add", BinaryKernel<BinaryOp::add>>,
    KernelEntry<"operator.add", BinaryKernel<BinaryOp::add>>,
    KernelEntry<"operator.iadd", BinaryKernel<BinaryOp::add, true>>,
    KernelEntry<"aten.sub.Tensor", BinaryKernel<BinaryOp::sub>>,
    KernelEntry<"aten.sub.Scalar", BinaryKernel<BinaryOp::sub>>,
    KernelEntry<"torch.sub", BinaryKernel<BinaryOp::sub>>,
    KernelEntry<"Tensor.sub", BinaryKernel<BinaryOp::sub>>,
    KernelEntry<"operator.sub", BinaryKernel<BinaryOp::sub>>,
    KernelEntry<"aten.rsub.Tensor", BinaryKernel<BinaryOp::rsub>>,
    KernelEntry<"aten.rsub.Scalar", BinaryKernel<BinaryOp::rsub>>,
    KernelEntry<"torch.rsub", BinaryKernel<BinaryOp::rsub>>,
    KernelEntry<"aten.mul.Tensor", BinaryKernel<BinaryOp::mul>>,
    KernelEntry<"aten.mul.Scalar", BinaryKernel<BinaryOp::mul>>,
    KernelEntry<"aten.mul_.Tensor", BinaryKernel<BinaryOp::mul, true>>,
    KernelEntry<"torch.mul", BinaryKernel<BinaryOp::mul>>,
    KernelEntry<"Tensor.mul", BinaryKernel<BinaryOp::mul>>,
    KernelEntry<"operator.mul", BinaryKernel<BinaryOp::mul>>,
    KernelEntry<"aten.div.Tensor", BinaryKernel<BinaryOp::div>>,
    KernelEntry<"aten.div.Scalar", BinaryKernel<BinaryOp::div>>,
    KernelEntry<"aten.div.Tensor_mode", BinaryKernel<BinaryOp::div>>,
    KernelEntry<"aten.div.Scalar_mode", BinaryKernel<BinaryOp::div>>,
    KernelEntry<"torch.div", BinaryKernel<BinaryOp::div>>,
    KernelEntry<"Tensor.div", BinaryKernel<BinaryOp::div>>,
    KernelEntry<"operator.truediv", BinaryKernel<BinaryOp::div>>,
    KernelEntry<"operator.floordiv", BinaryKernel<BinaryOp::floordiv>>,
    KernelEntry<"aten.floor_divide.default", BinaryKernel<BinaryOp::floordiv>>,
    KernelEntry<"torch.floor_divide", BinaryKernel<BinaryOp::floordiv>>,
    KernelEntry<"aten.fmod.Scalar", BinaryKernel<BinaryOp::fmod>>,
    KernelEntry<"aten.fmod.Tensor", BinaryKernel<BinaryOp::fmod>>,
    KernelEntry<"torch.fmod", BinaryKernel<BinaryOp::fmod>>,
    KernelEntry<"Tensor.fmod", BinaryKernel<BinaryOp::fmod>>,
    KernelEntry<"aten.pow.Tensor_Scalar", BinaryKernel<BinaryOp::pow>>,
    KernelEntry<"aten.pow.Tensor_Tensor", BinaryKernel<BinaryOp::pow>>,
    KernelEntry<"torch.pow", BinaryKernel<BinaryOp::pow>>,
    KernelEntry<"Tensor.pow", BinaryKernel<BinaryOp::pow>>,
    KernelEntry<"operator.pow", BinaryKernel<BinaryOp::pow>>,
    KernelEntry<"aten.minimum.default", BinaryKernel<BinaryOp::minimum>>,
    KernelEntry<"torch.minimum", BinaryKernel<BinaryOp::minimum>>,
    KernelEntry<"aten.maximum.default", BinaryKernel<BinaryOp::maximum>>,
    KernelEntry<"torch.maximum", BinaryKernel<BinaryOp::maximum>>,
    // Bounds given as tensors: what torch 2.11 writes for cosine_similarity's clamped norms.
    KernelEntry<"aten.clamp_min.Tensor", BinaryKernel<BinaryOp::maximum>>,
    KernelEntry<"aten.clamp_min_.Tensor", BinaryKernel<BinaryOp::maximum, true>>,
    KernelEntry<"aten.clamp_max.Tensor", BinaryKernel<BinaryOp::minimum>>,
    KernelEntry<"aten.clamp_max_.Tensor", BinaryKernel<BinaryOp::minimum, true>>,
    KernelEntry<"aten.clamp.Tensor", pointwise_detail::ClampTensor>,
    KernelEntry<"aten.where.self", pointwise_detail::WhereKernel>,
    KernelEntry<"torch.where", pointwise_detail::WhereKernel>,
    KernelEntry<"aten.sub_.Tensor", BinaryKernel<BinaryOp::sub, true>>,
    KernelEntry<"aten.div_.Tensor", BinaryKernel<BinaryOp::div, true>>,
    KernelEntry<"Tensor.add_", BinaryKernel<BinaryOp::add, true>>,
    KernelEntry<"Tensor.sub_", BinaryKernel<BinaryOp::sub, true>>,
    KernelEntry<"Tensor.mul_", BinaryKernel<BinaryOp::mul, true>>,
    KernelEntry<"Tensor.div_", BinaryKernel<BinaryOp::div, true>>,
    KernelEntry<"operator.imul", BinaryKernel<BinaryOp::mul, true>>,
    KernelEntry<"operator.isub", BinaryKernel<BinaryOp::sub, true>>,
    KernelEntry<"operator.itruediv", BinaryKernel<BinaryOp::div, true>>>;

}  // namespace kiln::kernels
