#pragma once
// torch.nn's remaining activations, at the levels torch.fx and aten write
// them: the element-wise ones as unary.hpp's functors (elu and its selu and
// celu forms, softplus, mish, the shrinks, threshold, log-sigmoid, rrelu in
// eval), PReLU as a map of the input and its weight broadcast along dim 1,
// GLU as a loop over the two halves, softmin as softmax of the negation;
// sign, and LP pooling as average pooling of the powers.
#include <cmath>
#include <string>

#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/onednn/softmax.hpp"
#include "kiln/kernels/pointwise/unary.hpp"

namespace kiln::kernels::pointwise_detail {

// x > 0 ? scale * x : scale * alpha * (exp(x * input_scale) - 1), as aten.elu; selu and celu are its forms.
struct Elu : FloatOnly {
  float alpha = 1.0f, scale = 1.0f, input_scale = 1.0f;
  auto operator()(auto&& x) const { return xt::where(x > 0.0f, scale * x, (scale * alpha) * (xt::exp(x * input_scale) - 1.0f)); }
};
struct EluF : Elu {  // F.elu(input, alpha=1.0, inplace=False)
  static constexpr std::size_t inplace_pos = 2;
  static Elu read(const runtime::LowerContext& ctx) { return {{}, static_cast<float>(ctx.scalar_arg(1, "alpha", 1.0)), 1.0f, 1.0f}; }
};
struct EluAten : Elu {  // aten.elu(self, alpha=1, scale=1, input_scale=1): selu is written as one
  static Elu read(const runtime::LowerContext& ctx) {
    return {{}, static_cast<float>(ctx.scalar_arg(1, "alpha", 1.0)), static_cast<float>(ctx.scalar_arg(2, "scale", 1.0)),
            static_cast<float>(ctx.scalar_arg(3, "input_scale", 1.0))};
  }
};
struct Selu : Elu {  // F.selu(input, inplace=False): PyTorch's fixed alpha and scale
  static constexpr std::size_t inplace_pos = 1;
  static Elu read(const runtime::LowerContext&) { return {{}, 1.6732632423543772f, 1.0507009873554805f, 1.0f}; }
};
struct Celu : Elu {  // F.celu(input, alpha=1.0, inplace=False), aten.celu(self, alpha): elu of x / alpha, times alpha
  static constexpr std::size_t inplace_pos = 2;
  static Elu read(const runtime::LowerContext& ctx) {
    const double alpha = ctx.scalar_arg(1, "alpha", 1.0);
    if (alpha == 0.0) ctx.fail("celu: alpha must not be 0");
    return {{}, static_cast<float>(alpha), 1.0f, static_cast<float>(1.0 / alpha)};
  }
};
// log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold.
struct Softplus : FloatOnly {
  float beta = 1.0f, threshold = 20.0f;
  static Softplus read(const runtime::LowerContext& ctx) {
    return {{}, static_cast<float>(ctx.scalar_arg(1, "beta", 1.0)), static_cast<float>(ctx.scalar_arg(2, "threshold", 20.0))};
  }
  auto operator()(auto&& x) const { return xt::where(x * beta > threshold, x, xt::log1p(xt::exp(x * beta)) / beta); }
};
struct Mish : FloatOnly {  // x * tanh(softplus(x))
  static constexpr std::size_t inplace_pos = 1;
  static Mish read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return x * xt::tanh(xt::where(x > 20.0f, x, xt::log1p(xt::exp(x)))); }
};
struct Softsign : FloatOnly {
  static Softsign read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return x / (1.0f + xt::abs(x)); }
};
struct Tanhshrink : FloatOnly {
  static Tanhshrink read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return x - xt::tanh(x); }
};
struct Softshrink : FloatOnly {  // (input, lambd=0.5)
  float lambd = 0.5f;
  static Softshrink read(const runtime::LowerContext& ctx) {
    const double l = ctx.scalar_arg(1, "lambd", 0.5);
    if (l < 0) ctx.fail("softshrink: lambd must be >= 0, got " + std::to_string(l));
    return {{}, static_cast<float>(l)};
  }
  auto operator()(auto&& x) const { return xt::where(x > lambd, x - lambd, xt::where(x < -lambd, x + lambd, 0.0f)); }
};
struct Hardshrink : FloatOnly {  // (input, lambd=0.5)
  float lambd = 0.5f;
  static Hardshrink read(const runtime::LowerContext& ctx) { return {{}, static_cast<float>(ctx.scalar_arg(1, "lambd", 0.5))}; }
  auto operator()(auto&& x) const { return xt::where(xt::abs(x) > lambd, x, 0.0f); }
};
struct Threshold : FloatOnly {  // (input, threshold, value[, inplace]): x > threshold ? x : value
  static constexpr std::size_t inplace_pos = 3;
  float threshold = 0.0f, value = 0.0f;
  static Threshold read(const runtime::LowerContext& ctx) {
    return {{}, static_cast<float>(ctx.scalar_arg(1, "threshold")), static_cast<float>(ctx.scalar_arg(2, "value"))};
  }
  auto operator()(auto&& x) const { return xt::where(x > threshold, x, value); }
};
struct LogSigmoid : FloatOnly {  // min(x, 0) - log1p(exp(-|x|)), stable for either sign
  static LogSigmoid read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::minimum(x, 0.0f) - xt::log1p(xt::exp(-xt::abs(x))); }
};
// rrelu in eval: a leaky relu of slope (lower + upper) / 2; training draws random slopes.
struct RreluEval : LeakyRelu {
  static constexpr std::size_t inplace_pos = 4;
  static LeakyRelu read(const runtime::LowerContext& ctx) {
    const bool aten = ctx.node().target_name().starts_with("aten.");
    const std::size_t lo = aten ? 2 : 1;  // aten.rrelu_with_noise(self, noise, lower, upper, training, generator)
    if (ctx.bool_arg(lo + 2, "training", false)) ctx.fail("rrelu in training mode draws random slopes; not supported (kiln runs inference)");
    LeakyRelu op;
    op.slope = static_cast<float>((ctx.scalar_arg(lo, "lower", 1.0 / 8) + ctx.scalar_arg(lo + 1, "upper", 1.0 / 3)) / 2);
    return op;
  }
};

struct Sign : FloatOnly {  // aten's LPPool decomposition writes it
  static Sign read(const runtime::LowerContext&) { return {}; }
  auto operator()(auto&& x) const { return xt::where(x > 0.0f, 1.0f, xt::where(x < 0.0f, -1.0f, 0.0f)); }
};

// lp_pool{1,2}d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
// (avg_pool(x^p) * kernel elements)^(1/p), as PyTorch computes it (its
// sign(a) * relu(|a|) is a itself).
template <std::size_t ND>
struct LpPool {
  static void lower(runtime::LowerContext& ctx) {
    const double p = ctx.scalar_arg(1, "norm_type");
    if (p == 0.0) ctx.fail("lp_pool: norm_type must not be 0");
    const Arg k = ctx.value(2, "kernel_size");
    std::int64_t elements = 1;
    if (const auto* i = k.get_if<std::int64_t>()) {
      for (std::size_t d = 0; d < ND; ++d) elements *= *i;
    } else {
      for (std::int64_t v : ctx.ints_arg(2, "kernel_size")) elements *= v;
    }
    using runtime::CallArg;
    const auto in = ctx.tensor(0, "input");
    if (ctx.layout(in).dtype != DType::float32) ctx.fail("lp_pool takes float32");
    const float pf = static_cast<float>(p);
    const auto powered = lower_map<float, float>(ctx, DType::float32, {in}, [pf](auto&& x) { return xt::pow(x, pf); });
    const auto pooled = ctx.lower_piece(ND == 1 ? "torch.nn.functional.avg_pool1d" : "torch.nn.functional.avg_pool2d",
                                        {CallArg::of_tensor(powered), CallArg::of(k), CallArg::of(ctx.value(3, "stride")),
                                         CallArg::of(Arg(std::int64_t{0})), CallArg::of(Arg(ctx.bool_arg(4, "ceil_mode", false)))});
    const float scale = static_cast<float>(elements), inv = static_cast<float>(1.0 / p);
    ctx.set_result(lower_map<float, float>(ctx, DType::float32, {pooled.id},
                                           [scale, inv](auto&& a) { return xt::pow(a * scale, inv); }));
  }
};

// aten.rrelu_with_noise_functional(self, noise, lower, upper, training, generator)
// -> (out, noise_out), torch 2.11's form: in eval the leaky relu above, and
// noise comes back unchanged (training would write the drawn slopes into it).
struct RreluWithNoiseFunctional {
  static void lower(runtime::LowerContext& ctx) {
    lower_unary(ctx, RreluEval::read(ctx), false);
    const runtime::Lowered out = ctx.take_result();
    const auto noise = ctx.tensor(1, "noise");
    ctx.set_result(runtime::Lowered::tuple({out, runtime::Lowered::tensor(ctx.view(noise, ctx.layout(noise)))}));
  }
};

// aten.log_sigmoid_forward(self) -> (output, buffer): the buffer is for the backward pass.
struct LogSigmoidForward {
  static void lower(runtime::LowerContext& ctx) {
    if (!onednn::only_first_result_read(ctx.node())) ctx.fail("its buffer (for the backward pass) is read, which inference does not give");
    lower_unary(ctx, LogSigmoid{}, false);
    ctx.set_result(runtime::Lowered::tuple({ctx.take_result(), runtime::Lowered{}}));
  }
};

// prelu(input, weight): weight holds 1 or C = input.shape[1] slopes.
struct Prelu {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = input_tensor(ctx);
    auto w = ctx.tensor(1, "weight");
    const runtime::Layout l = ctx.layout(in), lw = ctx.layout(w);
    if (l.dtype != DType::float32 || lw.dtype != DType::float32) ctx.fail("prelu takes float32 input and weight");
    const std::int64_t C = l.rank() >= 2 ? l.shape[1] : 1;
    if (lw.numel() != 1 && lw.numel() != C)
      ctx.fail("prelu's weight holds " + std::to_string(lw.numel()) + " values; the input " + runtime::shape_str(l.shape) +
               " needs 1 or " + std::to_string(C));
    // The weight as [C, 1, ...] (or one value), broadcast against the input.
    runtime::Shape ws(l.rank() >= 2 ? l.rank() - 1 : 1, 1);
    ws[0] = lw.numel();
    if (!lw.is_contiguous()) w = shape_detail::copy_into_new(ctx, w, runtime::Layout::contiguous(lw.shape));
    w = ctx.view(w, runtime::Layout::contiguous(ws));
    ctx.set_result(lower_map<float, float, float>(ctx, DType::float32, {in, w},
                                                  [](auto&& x, auto&& a) { return xt::where(x > 0.0f, x, x * a); }));
  }
};

// glu(input, dim=-1): a * sigmoid(b) of the two halves along dim.
struct Glu {
  static void lower(runtime::LowerContext& ctx) {
    auto in = input_tensor(ctx);
    const runtime::Layout l = ctx.layout(in);
    if (l.dtype != DType::float32) ctx.fail("glu takes float32");
    const auto d = shape_detail::checked(ctx, [&] { return runtime::normalize_dim(ctx.int_arg(1, "dim", -1), static_cast<std::int64_t>(l.rank())); });
    if (l.shape[d] % 2 != 0) ctx.fail("glu halves dim " + std::to_string(d) + " of " + runtime::shape_str(l.shape) + ", which is odd");
    if (!l.is_contiguous()) in = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l.shape));
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t k = 0; k < d; ++k) outer *= l.shape[k];
    for (std::size_t k = d + 1; k < l.rank(); ++k) inner *= l.shape[k];
    const std::int64_t half = l.shape[d] / 2 * inner;
    runtime::Shape os = l.shape;
    os[d] /= 2;
    const auto out = ctx.buffer(runtime::Layout::contiguous(os));
    ctx.add_step(runtime::make_step([in, out, outer, half](runtime::Frame& fr) {
                   const float* x = fr.data_as<float>(in);
                   float* y = fr.data_as<float>(out);
                   for (std::int64_t o = 0; o < outer; ++o)
                     for (std::int64_t i = 0; i < half; ++i)
                       y[o * half + i] = x[o * 2 * half + i] / (1.0f + std::exp(-x[o * 2 * half + half + i]));
                 }),
                 {in}, {out});
    ctx.set_result(out);
  }
};

// softmin(input, dim): softmax of -input.
struct Softmin {
  static void lower(runtime::LowerContext& ctx) {
    if (!ctx.has(1, "dim")) ctx.fail("softmin needs dim (PyTorch's implicit choice of dim is deprecated)");
    if (ctx.has(3, "dtype")) ctx.fail("softmin's dtype argument is not supported");
    const std::int64_t dim = ctx.int_arg(1, "dim");
    const auto in = input_tensor(ctx);
    const auto neg = lower_map<float, float>(ctx, DType::float32, {in}, [](auto&& x) { return -x; });
    onednn_detail::lower_softmax(ctx, neg, dim, false);
  }
};

}  // namespace kiln::kernels::pointwise_detail

namespace kiln::kernels {

using activation_kernels = KernelGroup<
    KernelEntry<"torch.nn.functional.elu", pointwise_detail::UnaryKernel<pointwise_detail::EluF>>,
    KernelEntry<"aten.elu.default", pointwise_detail::UnaryKernel<pointwise_detail::EluAten>>,
    KernelEntry<"aten.elu_.default", pointwise_detail::UnaryKernel<pointwise_detail::EluAten, true>>,
    KernelEntry<"torch.nn.functional.selu", pointwise_detail::UnaryKernel<pointwise_detail::Selu>>,
    KernelEntry<"torch.selu", pointwise_detail::UnaryKernel<pointwise_detail::Selu>>,
    KernelEntry<"aten.selu.default", pointwise_detail::UnaryKernel<pointwise_detail::Selu>>,
    KernelEntry<"torch.nn.functional.celu", pointwise_detail::UnaryKernel<pointwise_detail::Celu>>,
    KernelEntry<"aten.celu.default", pointwise_detail::UnaryKernel<pointwise_detail::Celu>>,
    KernelEntry<"torch.nn.functional.softplus", pointwise_detail::UnaryKernel<pointwise_detail::Softplus>>,
    KernelEntry<"aten.softplus.default", pointwise_detail::UnaryKernel<pointwise_detail::Softplus>>,
    KernelEntry<"torch.nn.functional.mish", pointwise_detail::UnaryKernel<pointwise_detail::Mish>>,
    KernelEntry<"aten.mish.default", pointwise_detail::UnaryKernel<pointwise_detail::Mish>>,
    KernelEntry<"torch.nn.functional.softsign", pointwise_detail::UnaryKernel<pointwise_detail::Softsign>>,
    KernelEntry<"torch.nn.functional.tanhshrink", pointwise_detail::UnaryKernel<pointwise_detail::Tanhshrink>>,
    KernelEntry<"torch.nn.functional.softshrink", pointwise_detail::UnaryKernel<pointwise_detail::Softshrink>>,
    KernelEntry<"aten.softshrink.default", pointwise_detail::UnaryKernel<pointwise_detail::Softshrink>>,
    KernelEntry<"torch.nn.functional.hardshrink", pointwise_detail::UnaryKernel<pointwise_detail::Hardshrink>>,
    KernelEntry<"torch.hardshrink", pointwise_detail::UnaryKernel<pointwise_detail::Hardshrink>>,
    KernelEntry<"aten.hardshrink.default", pointwise_detail::UnaryKernel<pointwise_detail::Hardshrink>>,
    KernelEntry<"torch.nn.functional._threshold", pointwise_detail::UnaryKernel<pointwise_detail::Threshold>>,
    KernelEntry<"torch.nn.functional.threshold", pointwise_detail::UnaryKernel<pointwise_detail::Threshold>>,
    KernelEntry<"aten.threshold.default", pointwise_detail::UnaryKernel<pointwise_detail::Threshold>>,
    KernelEntry<"torch.nn.functional.log_sigmoid", pointwise_detail::UnaryKernel<pointwise_detail::LogSigmoid>>,
    KernelEntry<"aten.log_sigmoid.default", pointwise_detail::UnaryKernel<pointwise_detail::LogSigmoid>>,
    KernelEntry<"aten.log_sigmoid_forward.default", pointwise_detail::LogSigmoidForward>,
    KernelEntry<"torch.nn.functional.rrelu", pointwise_detail::UnaryKernel<pointwise_detail::RreluEval>>,
    KernelEntry<"aten.rrelu_with_noise.default", pointwise_detail::UnaryKernel<pointwise_detail::RreluEval>>,
    KernelEntry<"aten.rrelu_with_noise_functional.default", pointwise_detail::RreluWithNoiseFunctional>,
    KernelEntry<"torch.prelu", pointwise_detail::Prelu>,
    KernelEntry<"torch.nn.functional.prelu", pointwise_detail::Prelu>,
    KernelEntry<"aten.prelu.default", pointwise_detail::Prelu>,
    KernelEntry<"aten._prelu_kernel.default", pointwise_detail::Prelu>,
    KernelEntry<"torch.nn.functional.glu", pointwise_detail::Glu>,
    KernelEntry<"aten.glu.default", pointwise_detail::Glu>,
    KernelEntry<"torch.nn.functional.softmin", pointwise_detail::Softmin>,
    KernelEntry<"aten.sign.default", pointwise_detail::UnaryKernel<pointwise_detail::Sign>>,
    KernelEntry<"torch.sign", pointwise_detail::UnaryKernel<pointwise_detail::Sign>>,
    KernelEntry<"Tensor.sign", pointwise_detail::UnaryKernel<pointwise_detail::Sign>>,
    KernelEntry<"aten.sqrt_.default", pointwise_detail::UnaryKernel<pointwise_detail::Sqrt, true>>,
    KernelEntry<"aten.clamp_min_.default", pointwise_detail::UnaryKernel<pointwise_detail::ClampMin, true>>,
    KernelEntry<"torch.nn.functional.lp_pool1d", pointwise_detail::LpPool<1>>,
    KernelEntry<"torch.nn.functional.lp_pool2d", pointwise_detail::LpPool<2>>>;

}  // namespace kiln::kernels
