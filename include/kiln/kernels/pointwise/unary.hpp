#pragma once
// Unary element-wise ops as one table: a functor per op (its parameters read
// from the node once, its math an xtensor expression) and one generic lower,
// UnaryKernel<Op>, that every level of every op inherits from.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kiln/kernels/detail/xtensor.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/pointwise/dtypes.hpp"
#include "kiln/kernels/pointwise/inplace.hpp"

namespace kiln::kernels::pointwise_detail {

// The element type of an xtensor expression or a scalar.
template <class E>
using elem_t = typename std::decay_t<E>::value_type;

// The input tensor: `input` in torch functions, `self` in aten overloads.
inline runtime::ValueId input_tensor(const runtime::LowerContext& ctx) {
  return ctx.find_arg(0, "input") ? ctx.tensor(0, "input") : ctx.tensor(0, "self");
}

// Ops whose math is float-only take float32; those marked IntegerToo take int64 as well.
struct FloatOnly {
  static constexpr bool integers = false;
  static constexpr std::size_t inplace_pos = 0;  // 0: no `inplace` argument
};
struct IntegerToo : FloatOnly {
  static constexpr bool integers = true;
};

struct Relu : IntegerToo {
  static constexpr std::size_t inplace_pos = 1;
  static Relu read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::maximum(x, elem_t<decltype(x)>(0)); }
};
struct Sigmoid : FloatOnly {
  static Sigmoid read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return 1.0f / (1.0f + xt::exp(-x)); }
};
struct Tanh : FloatOnly {
  static Tanh read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::tanh(x); }
};
struct GeluErf : FloatOnly {
  auto operator()(auto&& x) const { return 0.5f * x * (1.0f + xt::erf(x * 0.70710678118654752f)); }
};
struct GeluTanh : FloatOnly {
  auto operator()(auto&& x) const {
    return 0.5f * x * (1.0f + xt::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  }
};
struct Silu : FloatOnly {
  static constexpr std::size_t inplace_pos = 1;
  static Silu read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return x / (1.0f + xt::exp(-x)); }
};
struct Exp : FloatOnly {
  static Exp read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::exp(x); }
};
struct Log : FloatOnly {
  static Log read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::log(x); }
};
// exp(x) - 1 and log(1 + x) without the cancellation near 0 that the two-op forms have.
struct Expm1 : FloatOnly {
  static Expm1 read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::expm1(x); }
};
struct Log1p : FloatOnly {
  static Log1p read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::log1p(x); }
};
struct Neg : IntegerToo {
  static Neg read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return -x; }
};
struct Abs : IntegerToo {
  static Abs read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::abs(x); }
};
struct Sqrt : FloatOnly {
  static Sqrt read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::sqrt(x); }
};
struct Rsqrt : FloatOnly {
  static Rsqrt read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return 1.0f / xt::sqrt(x); }
};
struct Reciprocal : FloatOnly {
  static Reciprocal read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return 1.0f / x; }
};
struct Hardswish : FloatOnly {
  static constexpr std::size_t inplace_pos = 1;
  static Hardswish read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return x * xt::clip(x + 3.0f, 0.0f, 6.0f) / 6.0f; }
};
struct Hardsigmoid : FloatOnly {  // relu6(x + 3) / 6
  static constexpr std::size_t inplace_pos = 1;
  static Hardsigmoid read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::clip(x + 3.0f, 0.0f, 6.0f) / 6.0f; }
};
struct LeakyRelu : FloatOnly {
  static constexpr std::size_t inplace_pos = 2;
  float slope = 0.01f;
  static LeakyRelu read(const runtime::LowerContext& ctx) {
    LeakyRelu op;
    op.slope = static_cast<float>(ctx.scalar_arg(1, "negative_slope", 0.01));
    return op;
  }
  auto operator()(auto&& x) const { return xt::where(x > 0.0f, x, x * slope); }
};
// clamp, clamp_min, clamp_max and hardtanh: bounds that are absent clamp nothing.
struct Clamp : IntegerToo {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool integral_bounds = true;
  void set_lo(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw) {
    if (!ctx.has(pos, kw)) return;
    lo = ctx.scalar_arg(pos, kw);
    integral_bounds = integral_bounds && !ctx.value(pos, kw).get_if<double>();
  }
  void set_hi(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw) {
    if (!ctx.has(pos, kw)) return;
    hi = ctx.scalar_arg(pos, kw);
    integral_bounds = integral_bounds && !ctx.value(pos, kw).get_if<double>();
  }
  static Clamp read(const runtime::LowerContext& ctx) {
    Clamp c;
    c.set_lo(ctx, 1, "min");
    c.set_hi(ctx, 2, "max");
    if (!ctx.has(1, "min") && !ctx.has(2, "max")) ctx.fail("clamp needs min or max (both are None)");
    return c;
  }
  bool takes_integers() const { return integral_bounds; }
  template <class T>
  static T bound(double v) {
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
  auto operator()(auto&& x) const {
    using T = elem_t<decltype(x)>;
    // Bounds go in as prvalues: xtensor keeps lvalue scalars by reference.
    return xt::clip(x, bound<T>(lo), bound<T>(hi));
  }
};
struct ClampMin : Clamp {
  static Clamp read(const runtime::LowerContext& ctx) {
    Clamp c;
    c.set_lo(ctx, 1, "min");
    return c;
  }
};
struct ClampMax : Clamp {
  static Clamp read(const runtime::LowerContext& ctx) {
    Clamp c;
    c.set_hi(ctx, 1, "max");
    return c;
  }
};
struct Hardtanh : Clamp {
  static constexpr std::size_t inplace_pos = 3;
  static Clamp read(const runtime::LowerContext& ctx) {
    Clamp c;
    c.integral_bounds = false;
    c.lo = ctx.scalar_arg(1, "min_val", -1.0);
    c.hi = ctx.scalar_arg(2, "max_val", 1.0);
    return c;
  }
};
struct Relu6 : Clamp {
  static constexpr std::size_t inplace_pos = 1;
  static Clamp read(const runtime::LowerContext&) {
    Clamp c;
    c.integral_bounds = false;
    c.lo = 0;
    c.hi = 6;
    return c;
  }
};
struct NanToNum : FloatOnly {
  float nan = 0.0f;
  float posinf = std::numeric_limits<float>::max();
  float neginf = std::numeric_limits<float>::lowest();
  static NanToNum read(const runtime::LowerContext& ctx) {
    NanToNum n;
    n.nan = static_cast<float>(ctx.scalar_arg(1, "nan", 0.0));
    if (ctx.has(2, "posinf")) n.posinf = static_cast<float>(ctx.scalar_arg(2, "posinf"));
    if (ctx.has(3, "neginf")) n.neginf = static_cast<float>(ctx.scalar_arg(3, "neginf"));
    return n;
  }
  auto operator()(auto&& x) const {
    return xt::where(xt::isnan(x), nan, xt::where(xt::isinf(x), xt::where(x > 0.0f, posinf, neginf), x));
  }
};

template <class Op>
bool op_takes_integers(const Op& op) {
  if constexpr (requires { op.takes_integers(); }) return Op::integers && op.takes_integers();
  else return Op::integers;
}

// out = op(input) into a new contiguous buffer, float32 (and int64 where the op allows;
// bfloat16 computes in float32).
template <class Op>
void lower_unary(runtime::LowerContext& ctx, const Op& op, bool in_place) {
  const auto in = input_tensor(ctx);
  if (in_place) check_no_later_reads(ctx, 0, "input");
  const DType dt = ctx.layout(in).dtype;
  runtime::ValueId out = 0;
  if (dt == DType::float32) out = lower_map<float, float>(ctx, dt, {in}, op);
  // bfloat16 in float32: lowering rounds the result back, as PyTorch rounds a bfloat16 op's.
  else if (dt == DType::bfloat16) out = lower_map<float, float>(ctx, DType::float32, {cast_to(ctx, in, DType::float32)}, op);
  else if (dt == DType::int64 && op_takes_integers(op)) out = lower_map<std::int64_t, std::int64_t>(ctx, dt, {in}, op);
  else ctx.fail("input is " + std::string(dtype_name(dt)) + "; this op takes float32" +
                (op_takes_integers(op) ? " or int64" : ""));
  ctx.set_result(out);
}

// The kernel of a unary op; InPlace for the aten overloads that mutate (relu_).
template <class Op, bool InPlace = false>
struct UnaryKernel {
  static void lower(runtime::LowerContext& ctx) {
    bool in_place = InPlace;
    if constexpr (Op::inplace_pos != 0) in_place = in_place || ctx.bool_arg(Op::inplace_pos, "inplace", false);
    lower_unary(ctx, Op::read(ctx), in_place);
  }
};

// gelu's `approximate` picks one of two expressions.
struct GeluKernel {
  static void lower(runtime::LowerContext& ctx) {
    const std::string approximate = ctx.string_arg(1, "approximate", "none");
    if (approximate == "tanh") lower_unary(ctx, GeluTanh{}, false);
    else if (approximate == "none") lower_unary(ctx, GeluErf{}, false);
    else ctx.fail("gelu: approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
};

// Dropout in inference is the identity: a view of the input.
struct DropoutKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = input_tensor(ctx);
    if (ctx.bool_arg(2, ctx.node().target_name().starts_with("aten.") ? "train" : "training",
                     !ctx.node().target_name().starts_with("aten.")))
      ctx.fail("dropout in training mode is not supported (the executor runs inference)");
    ctx.set_result(ctx.view(in, ctx.layout(in), 0));
  }
};

// The dtype a `.to(...)`/_to_copy call asks for: a dtype argument anywhere, or `dtype=`.
inline std::optional<DType> requested_dtype(const runtime::LowerContext& ctx) {
  const Arg kw = ctx.value(1000, "dtype");
  if (const auto* d = kw.get_if<DType>()) return *d;
  for (std::size_t i = 1; i < ctx.node().args().size(); ++i) {
    const Arg a = ctx.value(i, "");
    if (const auto* d = a.get_if<DType>()) return *d;
  }
  return std::nullopt;
}

// aten._to_copy, prims.convert_element_type and Tensor.to: a cast (or, for Tensor.to to the same dtype, the tensor itself).
template <bool AlwaysCopy>
struct ToDtypeKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = input_tensor(ctx);
    const DType from = ctx.layout(in).dtype;
    const DType to = requested_dtype(ctx).value_or(from);
    const bool copy = AlwaysCopy || ctx.bool_arg(1000, "copy", false);
    if (from == to && !copy) return ctx.set_result(ctx.view(in, ctx.layout(in), 0));
    ctx.set_result(cast_to(ctx, in, to, true));
  }
};

}  // namespace kiln::kernels::pointwise_detail

namespace kiln::kernels {

// Every level an exported graph writes each unary op at.
using unary_kernels = KernelGroup<
    KernelEntry<"aten.relu.default", pointwise_detail::UnaryKernel<pointwise_detail::Relu>>,
    KernelEntry<"aten.relu_.default", pointwise_detail::UnaryKernel<pointwise_detail::Relu, true>>,
    KernelEntry<"torch.relu", pointwise_detail::UnaryKernel<pointwise_detail::Relu>>,
    KernelEntry<"torch.relu_", pointwise_detail::UnaryKernel<pointwise_detail::Relu, true>>,
    KernelEntry<"torch.nn.functional.relu", pointwise_detail::UnaryKernel<pointwise_detail::Relu>>,
    KernelEntry<"Tensor.relu", pointwise_detail::UnaryKernel<pointwise_detail::Relu>>,
    KernelEntry<"Tensor.relu_", pointwise_detail::UnaryKernel<pointwise_detail::Relu, true>>,
    KernelEntry<"aten.sigmoid.default", pointwise_detail::UnaryKernel<pointwise_detail::Sigmoid>>,
    KernelEntry<"torch.sigmoid", pointwise_detail::UnaryKernel<pointwise_detail::Sigmoid>>,
    KernelEntry<"torch.nn.functional.sigmoid", pointwise_detail::UnaryKernel<pointwise_detail::Sigmoid>>,
    KernelEntry<"Tensor.sigmoid", pointwise_detail::UnaryKernel<pointwise_detail::Sigmoid>>,
    KernelEntry<"aten.tanh.default", pointwise_detail::UnaryKernel<pointwise_detail::Tanh>>,
    KernelEntry<"torch.tanh", pointwise_detail::UnaryKernel<pointwise_detail::Tanh>>,
    KernelEntry<"torch.nn.functional.tanh", pointwise_detail::UnaryKernel<pointwise_detail::Tanh>>,
    KernelEntry<"Tensor.tanh", pointwise_detail::UnaryKernel<pointwise_detail::Tanh>>,
    KernelEntry<"aten.gelu.default", pointwise_detail::GeluKernel>,
    KernelEntry<"torch.nn.functional.gelu", pointwise_detail::GeluKernel>,
    KernelEntry<"aten.silu.default", pointwise_detail::UnaryKernel<pointwise_detail::Silu>>,
    KernelEntry<"aten.silu_.default", pointwise_detail::UnaryKernel<pointwise_detail::Silu, true>>,
    KernelEntry<"torch.nn.functional.silu", pointwise_detail::UnaryKernel<pointwise_detail::Silu>>,
    KernelEntry<"aten.exp.default", pointwise_detail::UnaryKernel<pointwise_detail::Exp>>,
    KernelEntry<"torch.exp", pointwise_detail::UnaryKernel<pointwise_detail::Exp>>,
    KernelEntry<"Tensor.exp", pointwise_detail::UnaryKernel<pointwise_detail::Exp>>,
    KernelEntry<"aten.log.default", pointwise_detail::UnaryKernel<pointwise_detail::Log>>,
    KernelEntry<"torch.log", pointwise_detail::UnaryKernel<pointwise_detail::Log>>,
    KernelEntry<"Tensor.log", pointwise_detail::UnaryKernel<pointwise_detail::Log>>,
    KernelEntry<"aten.expm1.default", pointwise_detail::UnaryKernel<pointwise_detail::Expm1>>,
    KernelEntry<"torch.expm1", pointwise_detail::UnaryKernel<pointwise_detail::Expm1>>,
    KernelEntry<"Tensor.expm1", pointwise_detail::UnaryKernel<pointwise_detail::Expm1>>,
    KernelEntry<"aten.log1p.default", pointwise_detail::UnaryKernel<pointwise_detail::Log1p>>,
    KernelEntry<"torch.log1p", pointwise_detail::UnaryKernel<pointwise_detail::Log1p>>,
    KernelEntry<"Tensor.log1p", pointwise_detail::UnaryKernel<pointwise_detail::Log1p>>,
    KernelEntry<"aten.neg.default", pointwise_detail::UnaryKernel<pointwise_detail::Neg>>,
    KernelEntry<"torch.neg", pointwise_detail::UnaryKernel<pointwise_detail::Neg>>,
    KernelEntry<"Tensor.neg", pointwise_detail::UnaryKernel<pointwise_detail::Neg>>,
    KernelEntry<"operator.neg", pointwise_detail::UnaryKernel<pointwise_detail::Neg>>,
    KernelEntry<"aten.abs.default", pointwise_detail::UnaryKernel<pointwise_detail::Abs>>,
    KernelEntry<"torch.abs", pointwise_detail::UnaryKernel<pointwise_detail::Abs>>,
    KernelEntry<"Tensor.abs", pointwise_detail::UnaryKernel<pointwise_detail::Abs>>,
    KernelEntry<"aten.sqrt.default", pointwise_detail::UnaryKernel<pointwise_detail::Sqrt>>,
    KernelEntry<"torch.sqrt", pointwise_detail::UnaryKernel<pointwise_detail::Sqrt>>,
    KernelEntry<"Tensor.sqrt", pointwise_detail::UnaryKernel<pointwise_detail::Sqrt>>,
    KernelEntry<"aten.rsqrt.default", pointwise_detail::UnaryKernel<pointwise_detail::Rsqrt>>,
    KernelEntry<"torch.rsqrt", pointwise_detail::UnaryKernel<pointwise_detail::Rsqrt>>,
    KernelEntry<"Tensor.rsqrt", pointwise_detail::UnaryKernel<pointwise_detail::Rsqrt>>,
    KernelEntry<"aten.reciprocal.default", pointwise_detail::UnaryKernel<pointwise_detail::Reciprocal>>,
    KernelEntry<"torch.reciprocal", pointwise_detail::UnaryKernel<pointwise_detail::Reciprocal>>,
    KernelEntry<"Tensor.reciprocal", pointwise_detail::UnaryKernel<pointwise_detail::Reciprocal>>,
    KernelEntry<"aten.hardswish.default", pointwise_detail::UnaryKernel<pointwise_detail::Hardswish>>,
    KernelEntry<"torch.nn.functional.hardswish", pointwise_detail::UnaryKernel<pointwise_detail::Hardswish>>,
    KernelEntry<"aten.hardsigmoid.default", pointwise_detail::UnaryKernel<pointwise_detail::Hardsigmoid>>,
    KernelEntry<"aten.hardsigmoid_.default", pointwise_detail::UnaryKernel<pointwise_detail::Hardsigmoid, true>>,
    KernelEntry<"torch.nn.functional.hardsigmoid", pointwise_detail::UnaryKernel<pointwise_detail::Hardsigmoid>>,
    KernelEntry<"aten.hardtanh.default", pointwise_detail::UnaryKernel<pointwise_detail::Hardtanh>>,
    KernelEntry<"torch.nn.functional.hardtanh", pointwise_detail::UnaryKernel<pointwise_detail::Hardtanh>>,
    KernelEntry<"aten.leaky_relu.default", pointwise_detail::UnaryKernel<pointwise_detail::LeakyRelu>>,
    KernelEntry<"torch.nn.functional.leaky_relu", pointwise_detail::UnaryKernel<pointwise_detail::LeakyRelu>>,
    KernelEntry<"aten.clamp.default", pointwise_detail::UnaryKernel<pointwise_detail::Clamp>>,
    KernelEntry<"torch.clamp", pointwise_detail::UnaryKernel<pointwise_detail::Clamp>>,
    KernelEntry<"torch.clip", pointwise_detail::UnaryKernel<pointwise_detail::Clamp>>,
    KernelEntry<"Tensor.clamp", pointwise_detail::UnaryKernel<pointwise_detail::Clamp>>,
    KernelEntry<"Tensor.clip", pointwise_detail::UnaryKernel<pointwise_detail::Clamp>>,
    KernelEntry<"aten.clamp_min.default", pointwise_detail::UnaryKernel<pointwise_detail::ClampMin>>,
    KernelEntry<"torch.clamp_min", pointwise_detail::UnaryKernel<pointwise_detail::ClampMin>>,
    KernelEntry<"Tensor.clamp_min", pointwise_detail::UnaryKernel<pointwise_detail::ClampMin>>,
    KernelEntry<"aten.clamp_max.default", pointwise_detail::UnaryKernel<pointwise_detail::ClampMax>>,
    KernelEntry<"torch.clamp_max", pointwise_detail::UnaryKernel<pointwise_detail::ClampMax>>,
    KernelEntry<"Tensor.clamp_max", pointwise_detail::UnaryKernel<pointwise_detail::ClampMax>>,
    KernelEntry<"aten.nan_to_num.default", pointwise_detail::UnaryKernel<pointwise_detail::NanToNum>>,
    KernelEntry<"torch.nan_to_num", pointwise_detail::UnaryKernel<pointwise_detail::NanToNum>>,
    KernelEntry<"Tensor.nan_to_num", pointwise_detail::UnaryKernel<pointwise_detail::NanToNum>>,
    KernelEntry<"aten.dropout.default", pointwise_detail::DropoutKernel>,
    KernelEntry<"torch.nn.functional.dropout", pointwise_detail::DropoutKernel>,
    KernelEntry<"aten._to_copy.default", pointwise_detail::ToDtypeKernel<true>>,
    KernelEntry<"prims.convert_element_type.default", pointwise_detail::ToDtypeKernel<true>>,
    KernelEntry<"Tensor.to", pointwise_detail::ToDtypeKernel<false>>,
    KernelEntry<"aten.hardtanh_.default", pointwise_detail::UnaryKernel<pointwise_detail::Hardtanh, true>>,
    KernelEntry<"torch.nn.functional.relu6", pointwise_detail::UnaryKernel<pointwise_detail::Relu6>>,
    KernelEntry<"aten.hardswish_.default", pointwise_detail::UnaryKernel<pointwise_detail::Hardswish, true>>,
    KernelEntry<"aten.leaky_relu_.default", pointwise_detail::UnaryKernel<pointwise_detail::LeakyRelu, true>>,
    KernelEntry<"aten.clamp_.default", pointwise_detail::UnaryKernel<pointwise_detail::Clamp, true>>,
    KernelEntry<"Tensor.clamp_", pointwise_detail::UnaryKernel<pointwise_detail::Clamp, true>>,
    KernelEntry<"aten.sigmoid_.default", pointwise_detail::UnaryKernel<pointwise_detail::Sigmoid, true>>,
    KernelEntry<"aten.tanh_.default", pointwise_detail::UnaryKernel<pointwise_detail::Tanh, true>>>;

}  // namespace kiln::kernels
