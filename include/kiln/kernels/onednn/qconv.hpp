#pragma once
// The int8 convolution ops Inductor's quantization passes write:
// onednn.qconv_prepack, onednn.qconv_pointwise (.default/.tensor, and the older
// qconv2d_pointwise.default) with a unary post-op, and
// onednn.qconv2d_pointwise.binary(_tensor) adding a tensor (qaccum) then a
// unary op, on oneDNN 2.6's int8 convolution_forward.
//
// The arithmetic is qlinear.hpp's (see there): output scales
// x_scale * w_scale[oc], the bias in accumulator units with the source zero
// point folded in as - x_zp * sum(W[oc]), post-ops on y, an eltwise linear for
// a quantized output. The fold assumes every window reads real source values;
// a zero-padded border would read 0 where the real value x_zp is meant, so
// with padding and a non-zero x_zp the source is first copied into a buffer
// padded with x_zp and the convolution runs without padding.
// kiln's qconv_prepack keeps the logical [OC, IC/groups, k...] weight; it is
// reordered once, at compile time, into the layout the primitive picks.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/onednn/qlinear.hpp"

namespace kiln::kernels::onednn_detail {

// A unary post-op as Inductor names it, with its scalars (hardtanh's min and max).
struct QConvUnary {
  std::string name = "none";
  std::vector<double> scalars;
};

inline QConvUnary qconv_unary(const runtime::LowerContext& ctx, std::size_t name_pos, std::string_view name_kw, std::size_t scalars_pos,
                              std::string_view scalars_kw) {
  QConvUnary u{ctx.string_arg(name_pos, name_kw, "none"), {}};
  const Arg a = ctx.value(scalars_pos, scalars_kw);
  if (const ArgList* l = a.list())
    for (const Arg& x : *l) {
      if (const auto* d = x.get_if<double>()) u.scalars.push_back(*d);
      else if (const auto* i = x.get_if<std::int64_t>()) u.scalars.push_back(static_cast<double>(*i));
      else if (!x.is_none()) ctx.fail(std::string(scalars_kw) + " holds something that is not a number");
    }
  return u;
}

// relu, hardtanh(min, max), hardswish and swish (SiLU, also spelled silu) as oneDNN 2.6 eltwise post-ops.
inline void append_conv_unary(const runtime::LowerContext& ctx, dnnl::post_ops& po, const QConvUnary& u) {
  using alg = dnnl::algorithm;
  if (u.name == "none" || u.name.empty()) return;
  if (u.name == "relu") return po.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
  if (u.name == "hardswish") return po.append_eltwise(1.0f, alg::eltwise_hardswish, 0.0f, 0.0f);
  if (u.name == "swish" || u.name == "silu") return po.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0.0f);
  if (u.name == "hardtanh") {
    if (u.scalars.size() != 2 || u.scalars[0] > u.scalars[1]) ctx.fail("hardtanh takes two scalars, min <= max");
    return po.append_eltwise(1.0f, alg::eltwise_clip, static_cast<float>(u.scalars[0]), static_cast<float>(u.scalars[1]));
  }
  ctx.fail("unary post-op '" + u.name + "' is not supported (none, relu, hardtanh, hardswish and swish are)");
}

// Everything but the source's quantization; `g` is where stride..groups start (7 unary, 8 binary).
struct QConvSpec {
  std::optional<runtime::ValueId> bias;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  QLinearTail tail;  // output quantization, and the float addend of the binary forms
  QConvUnary unary, after_add;
};

inline void read_geometry(const runtime::LowerContext& ctx, QConvSpec& s, std::size_t g, std::size_t nd) {
  const auto spatial = [&](std::size_t pos, std::string_view kw, std::int64_t dflt, std::int64_t lo) {
    auto v = ctx.ints_arg(pos, kw, std::vector<std::int64_t>{dflt});
    if (v.size() == 1) v.resize(nd, v[0]);
    if (v.size() != nd) ctx.fail(std::string(kw) + " must have 1 or " + std::to_string(nd) + " values");
    for (std::int64_t x : v)
      if (x < lo || x > (std::int64_t{1} << 31)) ctx.fail(std::string(kw) + " " + std::to_string(x) + " is out of range");
    return v;
  };
  s.stride = spatial(g, "stride", 1, 1);
  s.padding = spatial(g + 1, "padding", 0, 0);
  s.dilation = spatial(g + 2, "dilation", 1, 1);
  s.groups = ctx.int_arg(g + 3, "groups", 1);
  if (s.groups < 1) ctx.fail("groups must be at least 1");
}

// The output dtype at `pos`: None means the source's dtype, as PyTorch's CPU kernel takes it.
inline DType qconv_output_dtype(const runtime::LowerContext& ctx, std::size_t pos, DType source) {
  const Arg a = ctx.value(pos, "output_dtype");
  if (a.is_none()) return source;
  const auto* d = a.get_if<DType>();
  if (!d || (*d != DType::uint8 && *d != DType::int8 && *d != DType::float32 && *d != DType::bfloat16))
    ctx.fail("output_dtype must be uint8, int8, float32 or bfloat16" + (d ? ", got " + std::string(dtype_name(*d)) : std::string()));
  return *d;
}

// Checks the source, weight, post-ops, float output and addend; gives the output shape.
inline runtime::Shape check_qconv(const runtime::LowerContext& ctx, const runtime::Layout& xl, const QConvSpec& s) {
  if (xl.dtype != DType::uint8 && xl.dtype != DType::int8)
    ctx.fail("the input is " + std::string(dtype_name(xl.dtype)) + "; qconv takes uint8 or int8");
  const runtime::Layout& wl = ctx.layout(ctx.tensor(3, "qw"));
  if (wl.dtype != DType::int8 || wl.rank() != xl.rank())
    ctx.fail("the weight must be an int8 tensor of the input's rank, got " + std::string(dtype_name(wl.dtype)) + " " +
             runtime::shape_str(wl.shape) + " for the input " + runtime::shape_str(xl.shape));
  const std::size_t nd = xl.rank() - 2;
  if (wl.shape[1] * s.groups != xl.shape[1] || wl.shape[0] % s.groups != 0)
    ctx.fail("the weight " + runtime::shape_str(wl.shape) + " with groups " + std::to_string(s.groups) + " does not take the input " +
             runtime::shape_str(xl.shape));
  runtime::Shape out{xl.shape[0], wl.shape[0]};
  for (std::size_t i = 0; i < nd; ++i) {
    const std::int64_t span = s.dilation[i] * (wl.shape[2 + i] - 1) + 1;
    const std::int64_t o = (xl.shape[2 + i] + 2 * s.padding[i] - span) / s.stride[i] + 1;
    if (xl.shape[2 + i] + 2 * s.padding[i] < span || o < 1) ctx.fail("the padded input is smaller than the kernel");
    out.push_back(o);
  }
  dnnl::post_ops probe;
  append_conv_unary(ctx, probe, s.unary);
  append_conv_unary(ctx, probe, s.after_add);
  const bool quantized = s.tail.out == DType::uint8 || s.tail.out == DType::int8;
  if (!quantized && (s.tail.output_scale != 1.0 || s.tail.output_zero_point != 0))
    ctx.fail("a float output takes output_scale 1 and output_zero_point 0");
  if (s.tail.other) {
    const runtime::Layout& ol = ctx.layout(*s.tail.other);
    if (ol.shape != out || ol.dtype != DType::float32)
      ctx.fail("the addend must be float32 of the output's shape " + runtime::shape_str(out) + ", got " + std::string(dtype_name(ol.dtype)) +
               " " + runtime::shape_str(ol.shape));
  }
  return out;
}

// The per-channel int8 weight, constant, with output-channel scales and zero weight zero points.
inline QWeight qconv_weight(const runtime::LowerContext& ctx) {
  const auto wv = ctx.tensor(3, "qw");
  QWeight q{ctx.constant(wv)->contiguous(), constant_numbers(ctx, ctx.tensor(4, "w_scale"), "w_scale")};
  const auto n = static_cast<std::size_t>(q.w.shape()[0]);
  if (q.scale.size() == 1) q.scale.assign(n, q.scale[0]);
  if (q.scale.size() != n) ctx.fail("w_scale has " + std::to_string(q.scale.size()) + " elements for " + std::to_string(n) + " output channels");
  return q;
}

// The source copied into a contiguous buffer with `pad` cells of `value` on each side of every spatial dim.
inline runtime::ValueId padded_source(runtime::LowerContext& ctx, runtime::ValueId x, const std::vector<std::int64_t>& pad, std::int64_t value) {
  const runtime::Layout xl = ctx.layout(x);
  runtime::Shape shape = xl.shape;
  for (std::size_t i = 0; i < pad.size(); ++i) shape[2 + i] += 2 * pad[i];
  const runtime::Layout pl = runtime::Layout::contiguous(shape, xl.dtype);
  const auto out = ctx.buffer(pl);
  const auto fill = static_cast<unsigned char>(value);
  ctx.add_step(runtime::make_step([x, out, xl, pl, pad, fill](runtime::Frame& f) {
                 const auto* src = reinterpret_cast<const unsigned char*>(f.data(x));
                 auto* dst = reinterpret_cast<unsigned char*>(f.data(out));
                 std::memset(dst, fill, pl.nbytes());
                 const std::size_t r = xl.rank();
                 std::vector<std::int64_t> idx(r, 0);
                 // One innermost row at a time, the other indices counted like an odometer.
                 for (std::int64_t row = 0, rows = xl.numel() / xl.shape[r - 1]; row < rows; ++row) {
                   std::int64_t so = 0, d = 0;
                   for (std::size_t k = 0; k + 1 < r; ++k) {
                     so += idx[k] * xl.strides[k];
                     d += (idx[k] + (k >= 2 ? pad[k - 2] : 0)) * pl.strides[k];
                   }
                   d += pad.back();
                   for (std::int64_t j = 0; j < xl.shape[r - 1]; ++j) dst[d + j] = src[so + j * xl.strides[r - 1]];
                   for (std::size_t k = r - 1; k-- > 0;) {
                     if (++idx[k] < xl.shape[k]) break;
                     idx[k] = 0;
                   }
                 }
               }),
               {x}, {out});
  return out;
}

// The primitive's attributes: per-channel output scales, the unary op, the addend, the
// op after it, and a quantized output's scale and zero point.
inline dnnl::primitive_attr qconv_attr(const runtime::LowerContext& ctx, const SourceQuant& xq, const QWeight& q, const QConvSpec& s) {
  dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
  std::vector<float> scales(q.scale.size());
  for (std::size_t j = 0; j < scales.size(); ++j) scales[j] = static_cast<float>(xq.scale * q.scale[j]);
  attr.set_output_scales(1 << 1, scales);
  dnnl::post_ops po;
  append_conv_unary(ctx, po, s.unary);
  if (s.tail.other) po.append_binary(dnnl::algorithm::binary_add, onednn::desc_of(ctx.layout(*s.tail.other)));
  append_conv_unary(ctx, po, s.after_add);
  if (s.tail.out == DType::uint8 || s.tail.out == DType::int8)
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, static_cast<float>(1.0 / s.tail.output_scale),
                      static_cast<float>(s.tail.output_zero_point));
  attr.set_post_ops(po);
  return attr;
}

// The unfused computation (see lower_qlinear_composed for when): dequantize, aten.convolution, post-ops, quantize.
inline void lower_qconv_composed(runtime::LowerContext& ctx, bool tensors, const QConvSpec& s) {
  using runtime::CallArg;
  const auto ints = [](const std::vector<std::int64_t>& v) {
    ArgList l;
    for (std::int64_t x : v) l.push_back(Arg(x));
    return CallArg::of(Arg(l));
  };
  const auto x = dequantized_source(ctx, tensors);
  const auto w = dequantized_weight(ctx);
  auto y = piece(ctx, "aten.convolution.default",
                 {CallArg::of_tensor(x), CallArg::of_tensor(w), s.bias ? CallArg::of_tensor(*s.bias) : CallArg::of(Arg()), ints(s.stride),
                  ints(s.padding), ints(s.dilation), CallArg::of(Arg(false)), ints(std::vector<std::int64_t>(s.stride.size(), 0)),
                  CallArg::of(Arg(s.groups))});
  const auto unary_op = [&](runtime::ValueId v, const QConvUnary& u) {
    if (u.name == "relu") return piece(ctx, "aten.relu.default", {CallArg::of_tensor(v)});
    if (u.name == "hardswish") return piece(ctx, "aten.hardswish.default", {CallArg::of_tensor(v)});
    if (u.name == "swish" || u.name == "silu") return piece(ctx, "aten.silu.default", {CallArg::of_tensor(v)});
    if (u.name == "hardtanh")
      return piece(ctx, "aten.hardtanh.default", {CallArg::of_tensor(v), CallArg::of(Arg(u.scalars[0])), CallArg::of(Arg(u.scalars[1]))});
    return v;
  };
  y = unary_op(y, s.unary);
  if (s.tail.other) y = add_float(ctx, y, *s.tail.other);
  finish_composed(ctx, unary_op(y, s.after_add), s.tail);
}

inline void lower_qconv(runtime::LowerContext& ctx, bool tensors, const QConvSpec& s) {
  const auto xv = ctx.tensor(0, "qx");
  const runtime::Layout xl = ctx.layout(xv);
  const runtime::Shape out_shape = check_qconv(ctx, xl, s);
  if (!int8_primitive_applies(ctx, tensors, s.bias)) return lower_qconv_composed(ctx, tensors, s);
  const SourceQuant xq = source_quant(ctx, tensors);
  const QWeight q = qconv_weight(ctx);
  const std::size_t nd = xl.rank() - 2;
  const std::int64_t OC = q.w.shape()[0], G = s.groups;
  bool padded = false;
  for (std::int64_t p : s.padding) padded |= p > 0;
  padded &= xq.zero_point != 0;
  const auto src = padded ? padded_source(ctx, xv, s.padding, xq.zero_point) : xv;
  const runtime::Layout sl = ctx.layout(src);
  const dnnl::memory::dims pad = padded ? dnnl::memory::dims(nd, 0) : dnnl::memory::dims(s.padding.begin(), s.padding.end());
  dnnl::memory::dims dil(nd);
  for (std::size_t i = 0; i < nd; ++i) dil[i] = s.dilation[i] - 1;  // oneDNN counts the gaps

  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::memory::dims wdims;
  if (G > 1) wdims.push_back(G);
  wdims.push_back(OC / G);
  for (std::size_t i = 1; i < q.w.shape().size(); ++i) wdims.push_back(q.w.shape()[i]);
  static constexpr tag plain[] = {tag::oiw, tag::oihw, tag::oidhw}, grouped[] = {tag::goiw, tag::goihw, tag::goidhw};
  const dnnl::memory::desc w_plain(wdims, dt::s8, G > 1 ? grouped[nd - 1] : plain[nd - 1]);
  const dnnl::memory::desc w_any(wdims, dt::s8, tag::any);
  const dnnl::memory::desc b_md({OC}, dt::f32, tag::x);
  const runtime::Layout dst = runtime::Layout::contiguous(out_shape, s.tail.out);
  dnnl::convolution_forward::primitive_desc pd;
  try {
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, onednn::desc_of(sl),
                                            w_any, b_md, onednn::desc_of(dst), dnnl::memory::dims(s.stride.begin(), s.stride.end()), dil,
                                            pad, pad);
    pd = dnnl::convolution_forward::primitive_desc(d, qconv_attr(ctx, xq, q, s), onednn::engine());
  } catch (const dnnl::error& err) {
    ctx.fail(std::string("oneDNN refused the int8 convolution: ") + err.what());
  }
  const auto name = ctx.node().name();
  const auto wp = ctx.constant_value(onednn::reorder_once(q.w, w_plain, pd.weights_desc()), name + ".packed_weight");
  const auto bp = ctx.constant_value(accumulator_bias(ctx, q, xq, s.bias), name + ".accumulator_bias");
  const auto out = ctx.buffer(dst);
  std::vector<onednn::PrimitiveStep::Bound> args{{DNNL_ARG_SRC, src, onednn::desc_of(sl)},
                                                 {DNNL_ARG_WEIGHTS, wp, pd.weights_desc()},
                                                 {DNNL_ARG_BIAS, bp, b_md},
                                                 {DNNL_ARG_DST, out, onednn::desc_of(dst)}};
  std::vector<runtime::ValueId> reads{src, wp, bp};
  if (s.tail.other) {
    const int index = s.unary.name == "none" || s.unary.name.empty() ? 0 : 1;
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, *s.tail.other, onednn::desc_of(ctx.layout(*s.tail.other))});
    reads.push_back(*s.tail.other);
  }
  onednn::add_primitive_step(ctx, std::make_unique<onednn::PrimitiveStep>(dnnl::convolution_forward(pd), args, pd.scratchpad_desc()),
                             std::move(reads), {out});
  ctx.set_result(out);
}

// onednn.qconv_prepack(weight, w_scales, x_scale, x_zp, stride, padding, dilation, groups, x_shape): the weight itself.
struct QConvPrepack {
  static void lower(runtime::LowerContext& ctx) {
    const auto w = ctx.tensor(0, "weight");
    const runtime::Layout& l = ctx.layout(w);
    if (l.dtype != DType::int8 || l.rank() < 3 || l.rank() > 5)
      ctx.fail("qconv_prepack takes an int8 weight of rank 3 to 5, got " + std::string(dtype_name(l.dtype)) + " " + runtime::shape_str(l.shape));
    ctx.set_result(w);
  }
};

inline void check_source_rank(const runtime::LowerContext& ctx) {
  const runtime::Layout& xl = ctx.layout(ctx.tensor(0, "qx"));
  if (xl.rank() < 3 || xl.rank() > 5) ctx.fail("qconv takes an input of rank 3 to 5, got " + runtime::shape_str(xl.shape));
}

// qconv_pointwise(qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, bias, stride, padding, dilation,
//   groups, output_scale, output_zero_point, output_dtype, attr, scalars, algorithm).
template <bool Tensors>
struct QConvPointwise {
  static void lower(runtime::LowerContext& ctx) {
    check_source_rank(ctx);
    const runtime::Layout& xl = ctx.layout(ctx.tensor(0, "qx"));
    QConvSpec s;
    s.bias = ctx.optional_tensor(6, "bias");
    read_geometry(ctx, s, 7, xl.rank() - 2);
    s.tail = {ctx.scalar_arg(11, "output_scale"), ctx.int_arg(12, "output_zero_point"), qconv_output_dtype(ctx, 13, xl.dtype), std::nullopt};
    s.unary = qconv_unary(ctx, 14, "attr", 15, "scalars");
    lower_qconv(ctx, Tensors, s);
  }
};

// qconv2d_pointwise.binary(qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, qaccum, bias, stride,
//   padding, dilation, groups, output_scale, output_zero_point, output_dtype, accum_scale,
//   accum_zero_point, binary_attr, alpha, unary_attr, unary_scalars, unary_algorithm):
//   y + accum (a quantized accum dequantized first), then the unary op. "sum" (PyTorch
//   accumulates into qaccum's buffer) gives the same values as "add" here.
template <bool Tensors>
struct QConvPointwiseBinary {
  static void lower(runtime::LowerContext& ctx) {
    check_source_rank(ctx);
    const runtime::Layout& xl = ctx.layout(ctx.tensor(0, "qx"));
    QConvSpec s;
    s.bias = ctx.optional_tensor(7, "bias");
    read_geometry(ctx, s, 8, xl.rank() - 2);
    s.tail = {ctx.scalar_arg(12, "output_scale"), ctx.int_arg(13, "output_zero_point"), qconv_output_dtype(ctx, 14, xl.dtype), std::nullopt};
    const std::string binary = ctx.string_arg(17, "binary_attr", "none");
    if (binary != "add" && binary != "sum") ctx.fail("binary post-op '" + binary + "' is not supported (add and sum are)");
    if (ctx.scalar_arg(18, "alpha", 1.0) != 1.0) ctx.fail("alpha must be 1");
    s.after_add = qconv_unary(ctx, 19, "unary_attr", 20, "unary_scalars");
    s.tail.other = accum_as_float(ctx);
    lower_qconv(ctx, Tensors, s);
  }

  // qaccum in float32: dequantized with accum_scale and accum_zero_point when it is uint8/int8.
  static runtime::ValueId accum_as_float(runtime::LowerContext& ctx) {
    using runtime::CallArg;
    const auto a = ctx.tensor(6, "qaccum");
    const DType d = ctx.layout(a).dtype;
    const double scale = ctx.scalar_arg(15, "accum_scale", 1.0);
    const std::int64_t zp = ctx.int_arg(16, "accum_zero_point", 0);
    if (d == DType::float32) {
      if (scale != 1.0 || zp != 0) ctx.fail("a float32 qaccum takes accum_scale 1 and accum_zero_point 0");
      return a;
    }
    if (d != DType::uint8 && d != DType::int8)
      ctx.fail("qaccum is " + std::string(dtype_name(d)) + "; uint8, int8 or float32 expected");
    const std::int64_t lo = d == DType::uint8 ? 0 : -128, hi = d == DType::uint8 ? 255 : 127;
    return piece(ctx, "quantized_decomposed.dequantize_per_tensor.default",
                 {CallArg::of_tensor(a), CallArg::of(Arg(scale)), CallArg::of(Arg(zp)), CallArg::of(Arg(lo)), CallArg::of(Arg(hi)),
                  CallArg::of(Arg(d))});
  }
};

}  // namespace kiln::kernels::onednn_detail
