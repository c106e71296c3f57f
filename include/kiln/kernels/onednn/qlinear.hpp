#pragma once
// The int8 linear ops Inductor's quantization passes write: onednn.qlinear_prepack
// and onednn.qlinear_pointwise (.default/.tensor with a unary post-op,
// .binary/.binary_tensor with an add of a float tensor, then relu), on oneDNN
// 2.6's int8 matmul.
//
// kiln's qlinear_prepack keeps the logical int8 weight [N, K]: the packing
// happens once, when qlinear_pointwise is compiled, into the layout the
// primitive chose. The computation, in the real domain, is
//   y = (x - x_zp) * x_scale @ (W * w_scale[n]).T + bias, post-ops on y,
//   then (uint8/int8 output) clamp(round(y / output_scale) + output_zp).
// oneDNN 2.6 adds the bias before the output scales, so the bias is given in
// accumulator units, bias[n] / (x_scale * w_scale[n]), with the source zero
// point folded into it as - x_zp * sum_k W[n, k] (exact in int32, and small
// enough to be exact in the float32 sum too); the output scales are
// x_scale * w_scale[n]; the post-ops act on y, and an eltwise linear of
// 1 / output_scale and output_zp ends a quantized output (oneDNN rounds half
// to even and saturates, as quantize_per_tensor does).
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/bfloat16.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"

namespace kiln::kernels::onednn_detail {

// A constant per-tensor or per-channel parameter as doubles (float32, float64,
// int32 or int64; bfloat16 too, the bias of an int8-mixed-bf16 graph).
inline std::vector<double> constant_numbers(const runtime::LowerContext& ctx, runtime::ValueId v, const std::string& what) {
  const auto c = ctx.constant(v);
  if (!c) ctx.fail(what + " must be a constant");
  const runtime::Tensor t = c->contiguous();
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) switch (t.dtype()) {
      case DType::float32: out[i] = t.data<float>()[i]; break;
      case DType::float64: out[i] = t.data<double>()[i]; break;
      case DType::int32: out[i] = t.data<std::int32_t>()[i]; break;
      case DType::int64: out[i] = static_cast<double>(t.data<std::int64_t>()[i]); break;
      case DType::bfloat16: out[i] = bf16_to_float(t.data<std::uint16_t>()[i]); break;
      default: ctx.fail(what + " has dtype " + std::string(dtype_name(t.dtype())) + "; float32, float64, int32, int64 or bfloat16 expected");
    }
  return out;
}

// The source's scale and zero point: numbers (.default, .binary) or constant
// one-element tensors (.tensor, .binary_tensor).
struct SourceQuant {
  double scale = 1;
  std::int64_t zero_point = 0;
};
inline SourceQuant source_quant(const runtime::LowerContext& ctx, bool tensors) {
  if (!tensors) return {ctx.scalar_arg(1, "x_scale"), ctx.int_arg(2, "x_zero_point")};
  const auto s = constant_numbers(ctx, ctx.tensor(1, "x_scale"), "x_scale");
  const auto z = constant_numbers(ctx, ctx.tensor(2, "x_zero_point"), "x_zero_point");
  if (s.size() != 1 || z.size() != 1) ctx.fail("x_scale and x_zero_point must hold one element each");
  return {s[0], static_cast<std::int64_t>(z[0])};
}

// output_dtype: None means uint8, as PyTorch's CPU kernel takes it.
inline DType qlinear_output_dtype(const runtime::LowerContext& ctx) {
  const Arg a = ctx.value(9, "output_dtype");
  if (a.is_none()) return DType::uint8;
  const auto* d = a.get_if<DType>();
  if (!d || (*d != DType::uint8 && *d != DType::int8 && *d != DType::float32 && *d != DType::bfloat16))
    ctx.fail("output_dtype must be uint8, int8, float32 or bfloat16" + (d ? ", got " + std::string(dtype_name(*d)) : std::string()));
  return *d;
}

// relu, gelu (algorithm "none" or "tanh") or nothing, as a post-op on y.
inline void append_unary(const runtime::LowerContext& ctx, dnnl::post_ops& po, const std::string& name, const std::string& algorithm) {
  if (name == "none" || name.empty()) return;
  if (name == "relu") return po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (name == "gelu" && (algorithm == "none" || algorithm.empty()))
    return po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  if (name == "gelu" && algorithm == "tanh") return po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  ctx.fail("unary post-op '" + name + "' (algorithm '" + algorithm + "') is not supported (none, relu, gelu with none or tanh are)");
}

// The int8 weight [N, K] (through its qlinear_prepack), checked, with its
// per-channel scales; weight zero points must be 0 (oneDNN's s8 weights are symmetric).
struct QWeight {
  runtime::Tensor w;  // contiguous int8 [N, K]
  std::vector<double> scale;
};
inline QWeight qweight(const runtime::LowerContext& ctx, std::int64_t k) {
  const auto wv = ctx.tensor(3, "qw");
  const auto c = ctx.constant(wv);
  const runtime::Layout& l = ctx.layout(wv);
  if (!c) ctx.fail("the weight must be a constant (it is packed once at compile time)");
  if (l.dtype != DType::int8 || l.rank() != 2)
    ctx.fail("the weight must be a 2-d int8 tensor [N, K], got " + std::string(dtype_name(l.dtype)) + " " + runtime::shape_str(l.shape));
  if (l.shape[1] != k) ctx.fail("the weight " + runtime::shape_str(l.shape) + " does not take " + std::to_string(k) + " input features");
  QWeight q{c->contiguous(), constant_numbers(ctx, ctx.tensor(4, "w_scale"), "w_scale")};
  const auto n = static_cast<std::size_t>(l.shape[0]);
  if (q.scale.size() == 1) q.scale.assign(n, q.scale[0]);
  if (q.scale.size() != n) ctx.fail("w_scale has " + std::to_string(q.scale.size()) + " elements for " + std::to_string(n) + " output channels");
  for (double z : constant_numbers(ctx, ctx.tensor(5, "w_zero_point"), "w_zero_point"))
    if (z != 0) ctx.fail("weight zero points must be 0, got " + std::to_string(static_cast<std::int64_t>(z)));
  return q;
}

// The constant float bias of n outputs, zeros where there is none.
inline std::vector<double> bias_numbers(const runtime::LowerContext& ctx, std::optional<runtime::ValueId> bias, std::int64_t n) {
  if (!bias) return std::vector<double>(static_cast<std::size_t>(n), 0.0);
  std::vector<double> b = constant_numbers(ctx, *bias, "the bias");
  if (static_cast<std::int64_t>(b.size()) != n) ctx.fail("the bias has " + std::to_string(b.size()) + " elements for " + std::to_string(n) + " outputs");
  return b;
}

// The bias in accumulator units with the source zero point folded in (see the top).
inline runtime::Tensor accumulator_bias(const runtime::LowerContext& ctx, const QWeight& q, const SourceQuant& x,
                                        std::optional<runtime::ValueId> bias) {
  // Each output channel's weights are one contiguous run of k (a linear's row, a convolution's [IC/groups, k...]).
  const std::int64_t n = q.w.shape()[0], k = q.w.numel() / n;
  const std::vector<double> b = bias_numbers(ctx, bias, n);
  runtime::Tensor out = runtime::Tensor::empty({n});
  for (std::int64_t j = 0; j < n; ++j) {
    std::int64_t colsum = 0;
    for (std::int64_t i = 0; i < k; ++i) colsum += q.w.data<std::int8_t>()[j * k + i];
    out.data<float>()[j] = static_cast<float>(b[j] / (x.scale * q.scale[j]) - static_cast<double>(x.zero_point * colsum));
  }
  return out;
}

// What follows the product: the output's quantization, and (binary forms) the float addend.
struct QLinearTail {
  double output_scale = 1;
  std::int64_t output_zero_point = 0;
  DType out = DType::uint8;
  std::optional<runtime::ValueId> other;  // added to y after the unary post-op
};

// Whether oneDNN's int8 products are exact for this weight. Without VNNI
// (AVX2, AVX-512 before VNNI) oneDNN multiplies u8 by s8 with vpmaddubsw, which
// adds pairs of products in 16 bits and saturates (an s8 source is shifted to
// u8 first); weights within [-64, 64] keep every pair inside int16.
inline bool int8_products_exact(const runtime::Tensor& w) {
  using isa = dnnl::cpu_isa;
  const isa have = dnnl::get_effective_cpu_isa();
  if (have == isa::avx512_core_vnni || have == isa::avx512_core_bf16 || have == isa::avx512_core_amx || have == isa::avx2_vnni)
    return true;
  const runtime::Tensor c = w.contiguous();
  for (std::int64_t i = 0; i < c.numel(); ++i)
    if (c.data<std::int8_t>()[i] < -64 || c.data<std::int8_t>()[i] > 64) return false;
  return true;
}

// Whether the int8 primitive can take the node: a constant weight (packed once),
// constant scales, zero points and bias (folded once), symmetric weights, and
// products the CPU computes exactly.
inline bool int8_primitive_applies(const runtime::LowerContext& ctx, bool tensors, std::optional<runtime::ValueId> bias) {
  std::vector<runtime::ValueId> fixed{ctx.tensor(3, "qw"), ctx.tensor(4, "w_scale"), ctx.tensor(5, "w_zero_point")};
  if (bias) fixed.push_back(*bias);
  if (tensors) fixed.push_back(ctx.tensor(1, "x_scale")), fixed.push_back(ctx.tensor(2, "x_zero_point"));
  for (runtime::ValueId v : fixed)
    if (!ctx.constant(v)) return false;
  if (!int8_products_exact(*ctx.constant(ctx.tensor(3, "qw")))) return false;
  const auto c = ctx.constant(ctx.tensor(5, "w_zero_point"))->contiguous();
  for (std::int64_t i = 0; i < c.numel(); ++i)
    if ((c.dtype() == DType::int64 && c.data<std::int64_t>()[i] != 0) || (c.dtype() == DType::int32 && c.data<std::int32_t>()[i] != 0))
      return false;
  return true;
}

// a + b of float32 tensors of one shape, into a new buffer (the binary kernel
// reads its operands from the node, which a piece cannot give it).
inline runtime::ValueId add_float(runtime::LowerContext& ctx, runtime::ValueId a, runtime::ValueId b) {
  const runtime::Layout la = ctx.layout(a), lb = ctx.layout(b);
  if (!la.is_contiguous() || !lb.is_contiguous()) ctx.fail("a strided addend is not supported");
  const auto out = ctx.buffer(la.shape, DType::float32);
  const std::int64_t n = la.numel();
  ctx.add_step(runtime::make_step([a, b, out, n](runtime::Frame& f) {
                 const auto* x = reinterpret_cast<const float*>(f.data(a));
                 const auto* y = reinterpret_cast<const float*>(f.data(b));
                 auto* z = reinterpret_cast<float*>(f.data(out));
                 for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
               }),
               {a, b}, {out});
  return out;
}

// The source dequantized (qx, x_scale, x_zero_point at 0, 1, 2).
inline runtime::ValueId dequantized_source(runtime::LowerContext& ctx, bool tensors) {
  using runtime::CallArg;
  const auto xv = ctx.tensor(0, "qx");
  const DType xd = ctx.layout(xv).dtype;
  const std::int64_t lo = xd == DType::uint8 ? 0 : -128, hi = xd == DType::uint8 ? 255 : 127;
  std::vector<CallArg> dq{CallArg::of_tensor(xv), CallArg::of(ctx.value(1, "x_scale")), CallArg::of(ctx.value(2, "x_zero_point")),
                          CallArg::of(Arg(lo)), CallArg::of(Arg(hi)), CallArg::of(Arg(xd))};
  if (tensors) dq[1] = CallArg::of_tensor(ctx.tensor(1, "x_scale")), dq[2] = CallArg::of_tensor(ctx.tensor(2, "x_zero_point"));
  return piece(ctx, tensors ? "quantized_decomposed.dequantize_per_tensor.tensor" : "quantized_decomposed.dequantize_per_tensor.default", dq);
}

// The per-channel int8 weight (qw, w_scale, w_zero_point at 3, 4, 5) dequantized along dim 0.
inline runtime::ValueId dequantized_weight(runtime::LowerContext& ctx) {
  using runtime::CallArg;
  return piece(ctx, "quantized_decomposed.dequantize_per_channel.default",
                       {CallArg::of_tensor(ctx.tensor(3, "qw")), CallArg::of_tensor(ctx.tensor(4, "w_scale")),
                        CallArg::of_tensor(ctx.tensor(5, "w_zero_point")), CallArg::of(Arg(std::int64_t{0})),
                        CallArg::of(Arg(std::int64_t{-128})), CallArg::of(Arg(std::int64_t{127})), CallArg::of(Arg(DType::int8))});
}

// The bias as the float32 kernels of the composed path take it (an
// int8-mixed-bf16 graph's bias is bfloat16), or None.
inline runtime::CallArg float32_bias(runtime::LowerContext& ctx, std::optional<runtime::ValueId> bias) {
  using runtime::CallArg;
  if (!bias) return CallArg::of(Arg());
  if (ctx.layout(*bias).dtype != DType::bfloat16) return CallArg::of_tensor(*bias);
  return CallArg::of_tensor(convert_piece(ctx, *bias, DType::float32));
}

// A float result in the tail's output dtype: quantized (uint8/int8), bfloat16 or as it is; the node's result.
inline void finish_composed(runtime::LowerContext& ctx, runtime::ValueId y, const QLinearTail& tail) {
  using runtime::CallArg;
  if (tail.out == DType::uint8 || tail.out == DType::int8) {
    const std::int64_t olo = tail.out == DType::uint8 ? 0 : -128, ohi = tail.out == DType::uint8 ? 255 : 127;
    y = piece(ctx, "quantized_decomposed.quantize_per_tensor.default",
              {CallArg::of_tensor(y), CallArg::of(Arg(tail.output_scale)), CallArg::of(Arg(tail.output_zero_point)), CallArg::of(Arg(olo)),
               CallArg::of(Arg(ohi)), CallArg::of(Arg(tail.out))});
  } else if (tail.out == DType::bfloat16) {
    y = convert_piece(ctx, y, DType::bfloat16);
  }
  ctx.set_result(y);
}

// The unfused computation, through the q/dq and float kernels: for weights,
// scales or zero points known only when the graph runs (a graph whose buffers
// are inputs, as kiln-opt's numeric check feeds them), asymmetric weights, and
// full-range weights on a CPU without VNNI.
inline void lower_qlinear_composed(runtime::LowerContext& ctx, bool tensors, const QLinearTail& tail, const std::string& unary,
                                   const std::string& algorithm, const std::string& after_add, std::optional<runtime::ValueId> bias) {
  using runtime::CallArg;
  const auto x = dequantized_source(ctx, tensors);
  const auto w = dequantized_weight(ctx);
  auto y = piece(ctx, "aten.linear.default",
                 {CallArg::of_tensor(x), CallArg::of_tensor(w), float32_bias(ctx, bias)});
  const auto unary_op = [&](runtime::ValueId v, const std::string& name, const std::string& alg) {
    if (name == "relu") return piece(ctx, "aten.relu.default", {CallArg::of_tensor(v)});
    if (name == "gelu") return piece(ctx, "aten.gelu.default", {CallArg::of_tensor(v), CallArg::of(Arg(alg == "tanh" ? std::string("tanh") : std::string("none")))});
    return v;
  };
  y = unary_op(y, unary, algorithm);
  if (tail.other) y = add_float(ctx, y, *tail.other);
  finish_composed(ctx, unary_op(y, after_add, "none"), tail);
}

// Lowers one qlinear; `unary` and `after_add` name the post-ops before and after the addend.
// What both paths check: the weight's layout, the post-op names, a float
// output's trivial quantization, the addend's shape; gives the output shape.
inline runtime::Shape check_qlinear(const runtime::LowerContext& ctx, const runtime::Layout& xl, const QLinearTail& tail,
                                    const std::string& unary, const std::string& algorithm, const std::string& after_add) {
  if (xl.dtype != DType::uint8 && xl.dtype != DType::int8)
    ctx.fail("the input is " + std::string(dtype_name(xl.dtype)) + "; qlinear takes uint8 or int8");
  if (xl.rank() < 1 || xl.numel() == 0) ctx.fail("qlinear needs a non-empty input of rank >= 1, got " + runtime::shape_str(xl.shape));
  const runtime::Layout& wl = ctx.layout(ctx.tensor(3, "qw"));
  if (wl.dtype != DType::int8 || wl.rank() != 2)
    ctx.fail("the weight must be a 2-d int8 tensor [N, K], got " + std::string(dtype_name(wl.dtype)) + " " + runtime::shape_str(wl.shape));
  if (wl.shape[1] != xl.shape.back())
    ctx.fail("the weight " + runtime::shape_str(wl.shape) + " does not take " + std::to_string(xl.shape.back()) + " input features");
  dnnl::post_ops probe;
  append_unary(ctx, probe, unary, algorithm);
  append_unary(ctx, probe, after_add, "none");
  const bool quantized = tail.out == DType::uint8 || tail.out == DType::int8;
  if (!quantized && (tail.output_scale != 1.0 || tail.output_zero_point != 0))
    ctx.fail("a float output takes output_scale 1 and output_zero_point 0");
  runtime::Shape out_shape = xl.shape;
  out_shape.back() = wl.shape[0];
  if (tail.other) {
    const runtime::Layout& ol = ctx.layout(*tail.other);
    if (ol.shape != out_shape || ol.dtype != DType::float32)
      ctx.fail("the addend must be float32 of the output's shape " + runtime::shape_str(out_shape) + ", got " +
               std::string(dtype_name(ol.dtype)) + " " + runtime::shape_str(ol.shape));
  }
  return out_shape;
}

// The primitive's attributes: output scales x_scale * w_scale[n], then the
// unary op, the addend (binary post-op `other_index`), relu, and a quantized output's scale and zero point.
inline dnnl::primitive_attr qlinear_attr(const runtime::LowerContext& ctx, const SourceQuant& xq, const QWeight& q,
                                         const QLinearTail& tail, const std::string& unary, const std::string& algorithm,
                                         const std::string& after_add, const std::optional<runtime::Layout>& other2d) {
  dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
  std::vector<float> scales(q.scale.size());
  for (std::size_t j = 0; j < scales.size(); ++j) scales[j] = static_cast<float>(xq.scale * q.scale[j]);
  attr.set_output_scales(1 << 1, scales);
  dnnl::post_ops po;
  append_unary(ctx, po, unary, algorithm);
  if (other2d) po.append_binary(dnnl::algorithm::binary_add, onednn::desc_of(*other2d));
  append_unary(ctx, po, after_add, "none");
  if (tail.out == DType::uint8 || tail.out == DType::int8)
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, static_cast<float>(1.0 / tail.output_scale),
                      static_cast<float>(tail.output_zero_point));
  attr.set_post_ops(po);
  return attr;
}

// Lowers one qlinear; `unary` and `after_add` name the post-ops before and after the addend.
inline void lower_qlinear(runtime::LowerContext& ctx, bool tensors, const QLinearTail& tail, const std::string& unary,
                          const std::string& algorithm, const std::string& after_add, std::optional<runtime::ValueId> bias) {
  auto xv = ctx.tensor(0, "qx");
  const runtime::Layout xl = ctx.layout(xv);
  const runtime::Shape out_shape = check_qlinear(ctx, xl, tail, unary, algorithm, after_add);
  if (!int8_primitive_applies(ctx, tensors, bias)) return lower_qlinear_composed(ctx, tensors, tail, unary, algorithm, after_add, bias);
  const std::int64_t k = xl.shape.back(), m = xl.numel() / k;
  auto x2d = runtime::viewed(xl, std::vector<std::int64_t>{m, k});
  if (!x2d || (x2d->strides[1] != 1 && k != 1)) {
    // An input no [M, K] view reaches (the permuted activation of a linear
    // Inductor decomposed into bmm) runs from a dense copy.
    xv = piece(ctx, "Tensor.contiguous", {runtime::CallArg::of_tensor(xv)});
    x2d = runtime::viewed(ctx.layout(xv), std::vector<std::int64_t>{m, k});
    if (!x2d) ctx.fail("the input " + runtime::shape_str(xl.shape) + " has no [M, K] view after a dense copy");
  }
  const SourceQuant xq = source_quant(ctx, tensors);
  const QWeight q = qweight(ctx, k);
  const std::int64_t n = q.w.shape()[0];
  std::optional<runtime::Layout> other2d;
  if (tail.other) {
    other2d = runtime::viewed(ctx.layout(*tail.other), std::vector<std::int64_t>{m, n});
    if (!other2d) ctx.fail("a strided addend " + runtime::shape_str(ctx.layout(*tail.other).shape) + " is not supported");
  }
  const dnnl::primitive_attr attr = qlinear_attr(ctx, xq, q, tail, unary, algorithm, after_add, other2d);
  const int other_index = unary == "none" || unary.empty() ? 0 : 1;

  const runtime::Layout dst = runtime::Layout::contiguous({m, n}, tail.out);
  const runtime::Layout wt = runtime::transposed(runtime::Layout::contiguous({n, k}, DType::int8), 0, 1);  // [K, N] over [N, K]
  const dnnl::memory::desc w_any({k, n}, dnnl::memory::data_type::s8, dnnl::memory::format_tag::any);
  const dnnl::memory::desc b_md({1, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(onednn::desc_of(*x2d), w_any, b_md, onednn::desc_of(dst)), attr,
                                      onednn::engine());
  } catch (const dnnl::error& err) {
    ctx.fail(std::string("oneDNN refused the int8 matmul: ") + err.what());
  }
  const auto name = ctx.node().name();
  const auto wp = ctx.constant_value(onednn::reorder_once(q.w, onednn::desc_of(wt), pd.weights_desc()), name + ".packed_weight");
  const auto bp = ctx.constant_value(accumulator_bias(ctx, q, xq, bias), name + ".accumulator_bias");
  const auto xin = ctx.view(xv, *x2d);
  const auto out = ctx.buffer(dst);
  std::vector<onednn::PrimitiveStep::Bound> args{
      {DNNL_ARG_SRC, xin, onednn::desc_of(*x2d)}, {DNNL_ARG_WEIGHTS, wp, pd.weights_desc()}, {DNNL_ARG_BIAS, bp, b_md},
      {DNNL_ARG_DST, out, onednn::desc_of(dst)}};
  std::vector<runtime::ValueId> reads{xin, wp, bp};
  if (tail.other) {
    const auto ov = ctx.view(*tail.other, *other2d);
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(other_index) | DNNL_ARG_SRC_1,
                    ov, onednn::desc_of(*other2d)});
    reads.push_back(ov);
  }
  onednn::add_primitive_step(ctx, std::make_unique<onednn::PrimitiveStep>(dnnl::matmul(pd), args, pd.scratchpad_desc()),
                             std::move(reads), {out});
  ctx.set_result(ctx.view(out, runtime::Layout::contiguous(out_shape, tail.out)));
}

// onednn.qlinear_prepack(weight, x_shape): the weight itself (packed by qlinear_pointwise).
struct QLinearPrepack {
  static void lower(runtime::LowerContext& ctx) {
    const auto w = ctx.tensor(0, "weight");
    if (ctx.layout(w).dtype != DType::int8 || ctx.layout(w).rank() != 2)
      ctx.fail("qlinear_prepack takes a 2-d int8 weight, got " + std::string(dtype_name(ctx.layout(w).dtype)) + " " +
               runtime::shape_str(ctx.layout(w).shape));
    ctx.set_result(w);
  }
};

inline QLinearTail qlinear_tail(const runtime::LowerContext& ctx) {
  return {ctx.scalar_arg(7, "output_scale"), ctx.int_arg(8, "output_zero_point"), qlinear_output_dtype(ctx), std::nullopt};
}

// qlinear_pointwise(qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, bias,
//   output_scale, output_zero_point, output_dtype, post_op_name, post_op_args, post_op_algorithm).
template <bool Tensors>
struct QLinearPointwise {
  static void lower(runtime::LowerContext& ctx) {
    const QLinearTail tail = qlinear_tail(ctx);
    lower_qlinear(ctx, Tensors, tail, ctx.string_arg(10, "post_op_name", "none"), ctx.string_arg(12, "post_op_algorithm", "none"),
                  "none", ctx.optional_tensor(6, "bias"));
  }
};

// qlinear_pointwise.binary(qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, other, bias,
//   output_scale, output_zero_point, output_dtype, other_scale, other_zp, binary_post_op,
//   binary_alpha, unary_post_op, unary_post_op_args, unary_post_op_algorithm): y + other, then the unary op.
// "sum" (PyTorch accumulates into other's buffer) gives the same values as "add" here.
template <bool Tensors>
struct QLinearPointwiseBinary {
  static void lower(runtime::LowerContext& ctx) {
    QLinearTail tail{ctx.scalar_arg(8, "output_scale"), ctx.int_arg(9, "output_zero_point"), DType::uint8, std::nullopt};
    const Arg d = ctx.value(10, "output_dtype");
    if (!d.is_none()) {
      const auto* dt = d.get_if<DType>();
      if (!dt || (*dt != DType::uint8 && *dt != DType::int8 && *dt != DType::float32 && *dt != DType::bfloat16))
        ctx.fail("output_dtype must be uint8, int8, float32 or bfloat16");
      tail.out = *dt;
    }
    const std::string binary = ctx.string_arg(13, "binary_post_op", "none");
    if (binary != "add" && binary != "sum") ctx.fail("binary post-op '" + binary + "' is not supported (add and sum are)");
    if (ctx.scalar_arg(14, "binary_alpha", 1.0) != 1.0) ctx.fail("binary_alpha must be 1");
    if (ctx.scalar_arg(11, "other_scale", 1.0) != 1.0 || ctx.int_arg(12, "other_zp", 0) != 0)
      ctx.fail("a quantized addend (other_scale != 1 or other_zp != 0) is not supported");
    tail.other = ctx.optional_tensor(6, "other");
    if (!tail.other) ctx.fail("the binary form needs its addend (other)");
    // An int8-mixed-bf16 graph's addend is bfloat16: added as float32 (widening is exact).
    if (ctx.layout(*tail.other).dtype == DType::bfloat16)
      tail.other = convert_piece(ctx, *tail.other, DType::float32);
    const std::string after = ctx.string_arg(15, "unary_post_op", "none");
    if (after != "none" && after != "relu") ctx.fail("unary post-op '" + after + "' after the add is not supported (none and relu are)");
    lower_qlinear(ctx, Tensors, tail, "none", "none", after, ctx.optional_tensor(7, "bias"));
  }
};

}  // namespace kiln::kernels::onednn_detail
