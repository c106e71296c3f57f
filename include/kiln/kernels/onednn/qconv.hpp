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
// padded with x_zp and the convolution runs without padding. A uint8/int8
// qaccum with a quantized output is summed in the destination (QuantizedAccum).
// kiln's qconv_prepack keeps the logical [OC, IC/groups, k...] weight; it is
// reordered once, at compile time, into the layout the primitive picks.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/kernels/detail/int8_depthwise.hpp"
#include "kiln/kernels/detail/quantize_run.hpp"
#include "kiln/kernels/detail/widen_channels.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/onednn/qconv_pointwise_source.hpp"
#include "kiln/kernels/onednn/qlinear.hpp"
#include "kiln/runtime/strided_copy.hpp"

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

// The binary forms' uint8/int8 accum with its quantization. With a quantized
// output it is copied into the destination and added there by oneDNN's sum
// post-op, scale * (accum - zero_point): no float32 copy of it is made, and
// the primitive can be one of oneDNN's brgemm kernels (which take a sum but
// not a full-tensor binary add).
struct QuantizedAccum {
  runtime::ValueId value;
  double scale = 1;
  std::int64_t zero_point = 0;
};

// Everything but the source's quantization; `g` is where stride..groups start (7 unary, 8 binary).
struct QConvSpec {
  std::optional<runtime::ValueId> bias;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  QLinearTail tail;  // output quantization, and the float addend of the binary forms
  QConvUnary unary, after_add;
  std::optional<QuantizedAccum> accum;  // summed in the destination (a quantized output only)
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
  if (s.accum) {
    const runtime::Layout& al = ctx.layout(s.accum->value);
    if (!quantized || al.shape != out || (al.dtype != DType::uint8 && al.dtype != DType::int8))
      ctx.fail("a quantized qaccum must be uint8 or int8 of the output's shape " + runtime::shape_str(out) + " with a quantized output");
  }
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

// The source copied into a new buffer with `pad` cells of `value` on each side of every spatial dim.
inline runtime::ValueId padded_source(runtime::LowerContext& ctx, runtime::ValueId x, const std::vector<std::int64_t>& pad, std::int64_t value) {
  const runtime::Layout xl = ctx.layout(x);
  runtime::Shape shape = xl.shape;
  for (std::size_t i = 0; i < pad.size(); ++i) shape[2 + i] += 2 * pad[i];
  // Channels-last for 2-d, the layout the convolution reads.
  const runtime::Layout pl = xl.rank() == 4 ? runtime::channels_last(shape, xl.dtype) : runtime::Layout::contiguous(shape, xl.dtype);
  const auto out = ctx.buffer(pl);
  const auto fill = static_cast<unsigned char>(value);
  // The source lands in the interior of the padded buffer: its strides, offset by the padding.
  std::int64_t interior = 0;
  for (std::size_t i = 0; i < pad.size(); ++i) interior += pad[i] * pl.strides[2 + i] * static_cast<std::int64_t>(pl.itemsize());
  const runtime::CopyPlan copy = runtime::plan_copy(xl, runtime::Layout{xl.dtype, xl.shape, pl.strides});
  ctx.add_step(runtime::make_step([x, out, pl, interior, copy, fill](runtime::Frame& f) {
                 std::memset(f.data(out), fill, pl.nbytes());
                 runtime::run_copy(copy, f.data(x), f.data(out) + interior, f.threads());
               }),
               {x}, {out});
  return out;
}

// A relu or hardtanh right before a quantized output whose range already clamps there:
// y below the low bound quantizes to the output's lowest value or under it, y above the
// high bound to its highest or over it, so the output's saturation gives the same bytes
// and oneDNN's epilogue runs one post-op less (MobileNetV2's ReLU6 before a scale of
// at most 6/255 and a zero point of 0; a relu before a zero point of 0). A quarter step
// of margin keeps float32's rounding of y / scale + zero_point on the safe side.
inline bool unary_is_saturation(const QConvSpec& s) {
  if (s.tail.other || s.accum || !(s.after_add.name.empty() || s.after_add.name == "none")) return false;
  if ((s.tail.out != DType::uint8 && s.tail.out != DType::int8) || !(s.tail.output_scale > 0)) return false;
  const bool u8 = s.tail.out == DType::uint8;
  const double qmin = u8 ? 0 : -128, qmax = u8 ? 255 : 127;
  const auto at = [&](double y) { return y / s.tail.output_scale + static_cast<double>(s.tail.output_zero_point); };
  if (s.unary.name == "relu") return at(0.0) <= qmin + 0.25;
  if (s.unary.name == "hardtanh" && s.unary.scalars.size() == 2)
    return at(s.unary.scalars[0]) <= qmin + 0.25 && at(s.unary.scalars[1]) >= qmax - 0.25;
  return false;
}

// The primitive's attributes: per-channel output scales, the unary op, the addend, the
// op after it, and a quantized output's scale and zero point.
inline dnnl::primitive_attr qconv_attr(const runtime::LowerContext& ctx, const SourceQuant& xq, const QWeight& q, const QConvSpec& s,
                                       const dnnl::memory::desc& other_md) {
  dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
  std::vector<float> scales(q.scale.size());
  for (std::size_t j = 0; j < scales.size(); ++j) scales[j] = static_cast<float>(xq.scale * q.scale[j]);
  attr.set_output_scales(1 << 1, scales);
  dnnl::post_ops po;
  if (!unary_is_saturation(s)) append_conv_unary(ctx, po, s.unary);
  if (s.tail.other) po.append_binary(dnnl::algorithm::binary_add, other_md);
  if (s.accum)
    po.append_sum(static_cast<float>(s.accum->scale), static_cast<std::int32_t>(s.accum->zero_point),
                  onednn::data_type(ctx.layout(s.accum->value).dtype));
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
                 {CallArg::of_tensor(x), CallArg::of_tensor(w), float32_bias(ctx, s.bias), ints(s.stride),
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

// The accum as a float32 addend: dequantized with its scale and zero point.
inline runtime::ValueId dequantized_accum(runtime::LowerContext& ctx, const QuantizedAccum& a) {
  using runtime::CallArg;
  const DType d = ctx.layout(a.value).dtype;
  const std::int64_t lo = d == DType::uint8 ? 0 : -128, hi = d == DType::uint8 ? 255 : 127;
  return piece(ctx, "quantized_decomposed.dequantize_per_tensor.default",
               {CallArg::of_tensor(a.value), CallArg::of(Arg(a.scale)), CallArg::of(Arg(a.zero_point)), CallArg::of(Arg(lo)),
                CallArg::of(Arg(hi)), CallArg::of(Arg(d))});
}

// Whether oneDNN named an AMX implementation.
inline bool runs_on_amx(const dnnl::primitive_desc_base& pd) { return std::string_view(pd.impl_info_str()).find("amx") != std::string_view::npos; }

// Below this reduction an int8 convolution skips oneDNN's AMX kernels for its
// next implementation (AVX-512 VNNI): AMX multiplies int8 tiles 64 deep, so a
// reduction of 16 to 32 (MobileNetV2's narrow 1x1 convolutions) pads most of
// each tile. Measured on the device in MobileNetV2 at batch 16, 16 threads:
// its 16->96 1x1 convolution 0.71 ms on AMX against 0.44 on VNNI, the 24->144
// ones 0.29 against 0.19-0.22 (bench/README).
inline constexpr std::int64_t kAmxMinReduction = 64;
// And below this many output channels per group: MobileNetV2's 96->24 and
// 144->24/32 projections ran 0.13, 0.23 and 0.058 ms on AMX against 0.11, 0.19
// and 0.036 on VNNI (batch 16, 16 threads; 192->32 0.06 on both, bench/README).
inline constexpr std::int64_t kAmxMinOutputs = 64;

// kiln's own kernel for a 2-d depthwise convolution (groups = channels, one
// output per channel; kernels/detail/int8_depthwise.hpp) where this build has
// it and the convolution is MobileNet's kind: a uint8 channels-last source (what
// kiln's int8 convolutions write), up to 4 kernel rows undilated, relu or
// hardtanh or no post-op, a uint8 or int8 output, any stride (lower_qconv keeps
// it to stride 1 unless the source is a folded 1x1 convolution). Anything else
// runs on oneDNN.
inline std::optional<detail::Int8DepthwisePlan> int8_depthwise_plan(const runtime::LowerContext& ctx, const runtime::Layout& xl,
                                                                   const SourceQuant& xq, const QWeight& q, const QConvSpec& s,
                                                                   const runtime::Shape& out) {
  if constexpr (!detail::kInt8DepthwiseBuilt) return std::nullopt;
  const runtime::Shape& ws = q.w.shape();
  if (xl.rank() != 4 || xl.dtype != DType::uint8 || s.groups == 1 || s.groups != xl.shape[1] || ws[0] != s.groups || ws[1] != 1)
    return std::nullopt;
  if (xl.strides != runtime::channels_last(xl.shape, xl.dtype).strides || ws[2] > detail::kInt8DepthwiseMaxRows || s.dilation[0] != 1)
    return std::nullopt;
  if (s.accum || s.tail.other || !(s.after_add.name == "none" || s.after_add.name.empty())) return std::nullopt;
  if (s.tail.out != DType::uint8 && s.tail.out != DType::int8) return std::nullopt;
  if (xq.zero_point < 0 || xq.zero_point > 255) return std::nullopt;
  const bool s8 = s.tail.out == DType::int8;
  const double inv = 1.0 / s.tail.output_scale, zo = static_cast<double>(s.tail.output_zero_point);
  const auto clamp = quantized_clamp(s.unary.name, s.unary.scalars, inv, zo, s8 ? -128 : 0, s8 ? 127 : 255);
  if (!clamp) return std::nullopt;

  detail::Int8DepthwisePlan p;
  p.N = xl.shape[0], p.C = xl.shape[1], p.H = xl.shape[2], p.W = xl.shape[3], p.OH = out[2], p.OW = out[3];
  p.KH = ws[2], p.KW = ws[3], p.PH = s.padding[0], p.PW = s.padding[1];
  p.DW = s.dilation[1];
  p.SH = s.stride[0], p.SW = s.stride[1];
  p.source_zero_point = static_cast<std::uint8_t>(xq.zero_point);
  p.signed_output = s8;
  // hardtanh(-6, -3) into a uint8 output is all zeros; the kernel's byte clamp needs bounds that fit a byte.
  p.q_lo = clamp->lo, p.q_hi = clamp->hi;
  const std::vector<double> bias = bias_numbers(ctx, s.bias, p.C);
  const std::int64_t padded = p.padded_channels(), KH = p.KH, KW = p.KW;
  p.weight.assign(static_cast<std::size_t>(4 * padded * KW * 4), 0);
  p.compensation.assign(static_cast<std::size_t>(padded), 0);
  p.scale.assign(static_cast<std::size_t>(padded), 0.0f), p.bias.assign(static_cast<std::size_t>(padded), 0.0f);
  const auto* w = q.w.data<std::int8_t>();
  for (std::int64_t c = 0; c < p.C; ++c) {
    std::int64_t sum = 0;
    for (std::int64_t kh = 0; kh < KH; ++kh)
      for (std::int64_t kw = 0; kw < KW; ++kw) {
        const std::int8_t v = w[(c * KH + kh) * KW + kw];
        for (std::int64_t rot = 0; rot < 4; ++rot)
          p.weight[static_cast<std::size_t>((((rot * (padded / 16) + c / 16) * KW + kw) * 16 + c % 16) * 4 + (rot + kh) % 4)] = v;
        sum += v;
      }
    const auto at = static_cast<std::size_t>(c);
    p.compensation[at] = static_cast<std::int32_t>(-xq.zero_point * sum);
    p.scale[at] = static_cast<float>(xq.scale * q.scale[at] * inv);
    p.bias[at] = static_cast<float>(bias[at] * inv + zo);
  }
  return p;
}

// An image's first convolution reads 1 to 3 channels, which oneDNN 2.6 runs on its
// jit_int8 kernel; with 4 it picks brgconv. Such a source (2-d, uint8, one group,
// undilated) is copied channels-last with its channels filled to 4 and its border
// padded, both with the zero point, and the weight gets zero weights for the new
// channels, so the sums are unchanged and the convolution pads nothing. Measured on
// the device in bench/README (MobileNetV2's first convolution at batch 16).
inline bool widens_narrow_source(const runtime::Layout& xl, const QWeight& q, const QConvSpec& s, const SourceQuant& xq) {
  if (xl.rank() != 4 || xl.dtype != DType::uint8 || s.groups != 1 || xl.shape[1] >= 4 || q.w.shape()[1] != xl.shape[1]) return false;
  return s.dilation[0] == 1 && s.dilation[1] == 1 && xq.zero_point >= 0 && xq.zero_point <= 255;
}

// The source [N, C, H, W] (any strides) as [N, 4, H + 2 ph, W + 2 pw] channels-last,
// every cell that is not a source value the zero point (see widens_narrow_source).
inline runtime::ValueId widened_source(runtime::LowerContext& ctx, runtime::ValueId x, const std::vector<std::int64_t>& pad,
                                       std::int64_t zero_point) {
  const runtime::Layout xl = ctx.layout(x);
  const std::int64_t N = xl.shape[0], C = xl.shape[1], H = xl.shape[2], W = xl.shape[3], PH = pad[0], PW = pad[1];
  const runtime::Layout wl = runtime::channels_last({N, 4, H + 2 * PH, W + 2 * PW}, DType::uint8);
  const auto out = ctx.buffer(wl);
  const std::array<std::int64_t, 4> st{xl.strides[0], xl.strides[1], xl.strides[2], xl.strides[3]};
  const auto zp = static_cast<std::uint8_t>(zero_point);
  auto step = runtime::make_step([=](runtime::Frame& f) {
    detail::widen_channels(f.data_as<const std::uint8_t>(x), st, N, C, H, W, PH, PW, zp, f.data_as<std::uint8_t>(out), f.threads());
  });
  step->implementation = "kiln_widen_channels";
  ctx.add_step(std::move(step), {x}, {out});
  return out;
}

// The float32 input of the quantize_per_tensor (numbers for its parameters)
// whose only user is this convolution, as a network's input is quantized for
// its first convolution: the widened copy then quantizes the floats as it
// copies them, as that quantize would (detail/quantize_run.hpp), and the
// quantize's step, which nothing reads any more, is dropped.
struct QuantizedFloatSource {
  runtime::ValueId x = 0;
  float inv_scale = 1, zero_point = 0, lo = 0, hi = 255;
  std::size_t quantize_step = 0;
};
inline std::optional<QuantizedFloatSource> quantized_float_source(const runtime::LowerContext& ctx, runtime::ValueId xv) {
  const Arg* a = ctx.find_arg(0, "qx");
  const Node* q = a ? a->node() : nullptr;
  if (!q || q->op() != OpKind::call_function || q->target_name() != "quantized_decomposed.quantize_per_tensor.default" ||
      q->num_users() != 1 || q->args().size() < 5 || !ctx.is_lowered(q) || !ctx.lowered(q).is_tensor() || ctx.lowered(q).id != xv)
    return std::nullopt;
  const Node* in = q->arg(0).node();
  if (!in || !ctx.is_lowered(in) || !ctx.lowered(in).is_tensor()) return std::nullopt;
  QuantizedFloatSource f;
  f.x = ctx.lowered(in).id;
  const runtime::Layout& fl = ctx.layout(f.x), &xl = ctx.layout(xv);
  if (fl.dtype != DType::float32 || fl.shape != xl.shape || fl.rank() != 4 || fl.strides[3] != 1) return std::nullopt;
  const auto scale = number_arg(*q, 1, "scale"), zero_point = number_arg(*q, 2, "zero_point"), lo = number_arg(*q, 3, "quant_min"),
             hi = number_arg(*q, 4, "quant_max");
  if (!scale || !zero_point || !lo || !hi) return std::nullopt;
  const auto step = ctx.unread_step_writing(xv);
  if (!step) return std::nullopt;
  // As the quantize kernel computes them (pointwise/quantize.hpp).
  f.inv_scale = static_cast<float>(1.0 / *scale), f.zero_point = static_cast<float>(*zero_point);
  f.lo = static_cast<float>(*lo), f.hi = static_cast<float>(*hi);
  f.quantize_step = *step;
  return f;
}

// widened_source's copy made from the quantize's float input (see quantized_float_source).
inline runtime::ValueId widened_quantized_source(runtime::LowerContext& ctx, const QuantizedFloatSource& f, const std::vector<std::int64_t>& pad,
                                                 std::int64_t zero_point) {
  const runtime::Layout xl = ctx.layout(f.x);
  const std::int64_t N = xl.shape[0], C = xl.shape[1], H = xl.shape[2], W = xl.shape[3], PH = pad[0], PW = pad[1];
  const auto out = ctx.buffer(runtime::channels_last({N, 4, H + 2 * PH, W + 2 * PW}, DType::uint8));
  const std::array<std::int64_t, 4> st{xl.strides[0], xl.strides[1], xl.strides[2], xl.strides[3]};
  const auto zp = static_cast<std::uint8_t>(zero_point);
  const auto x = f.x;
  const float inv = f.inv_scale, z = f.zero_point, lo = f.lo, hi = f.hi;
  auto step = runtime::make_step([=](runtime::Frame& fr) {
    detail::widen_channels_quantized(fr.data_as<const float>(x), st, N, C, H, W, PH, PW, zp, fr.data_as<std::uint8_t>(out), fr.threads(),
                                     [=](const float* row, std::uint8_t* q, std::int64_t n) { detail::quantize_run(row, q, n, inv, z, lo, hi); });
  });
  step->implementation = "kiln_widen_channels:quantizing";
  ctx.add_step(std::move(step), {x}, {out});
  ctx.drop_step(f.quantize_step);
  return out;
}

// The weight [OC, C, KH, KW] as [OC, 4, KH, KW], zero for the channels past C.
inline runtime::Tensor widened_weight(const runtime::Tensor& w) {
  const runtime::Shape& ws = w.shape();
  runtime::Tensor out = runtime::Tensor::empty({ws[0], 4, ws[2], ws[3]}, DType::int8);
  std::memset(out.raw(), 0, out.nbytes());
  const std::int64_t k = ws[2] * ws[3];
  for (std::int64_t o = 0; o < ws[0]; ++o)
    for (std::int64_t c = 0; c < ws[1]; ++c)
      std::memcpy(out.data<std::int8_t>() + (o * 4 + c) * k, w.data<std::int8_t>() + (o * ws[1] + c) * k, static_cast<std::size_t>(k));
  return out;
}

inline void lower_qconv(runtime::LowerContext& ctx, bool tensors, QConvSpec s) {
  const auto xv = ctx.tensor(0, "qx");
  const runtime::Layout xl = ctx.layout(xv);
  const bool applies = int8_primitive_applies(ctx, tensors, s.bias);
  // A float output, or the unfused computation, adds the accum in float32.
  if (s.accum && (!applies || (s.tail.out != DType::uint8 && s.tail.out != DType::int8))) {
    s.tail.other = dequantized_accum(ctx, *s.accum);
    s.accum.reset();
  }
  const runtime::Shape out_shape = check_qconv(ctx, xl, s);
  if (!applies) return lower_qconv_composed(ctx, tensors, s);
  const SourceQuant xq = source_quant(ctx, tensors);
  QWeight q = qconv_weight(ctx);
  const std::size_t nd = xl.rank() - 2;
  // A depthwise convolution on kiln's kernel, its source's 1x1 convolution folded in where it can be.
  // Unfolded, at stride 1 only: at stride 2 each output row needs two new source rows interleaved
  // for half a row of outputs, and oneDNN's brdgmm_dw measured faster (bench/README).
  auto plan = int8_depthwise_plan(ctx, xl, xq, q, s, out_shape);
  std::optional<PointwiseSourceFold> fold;
  if (plan) fold = pointwise_source(ctx, xv, xl.shape[1]);
  if (plan && !fold && (plan->SH != 1 || plan->SW != 1)) plan.reset();
  if (plan) {
    const auto out = ctx.buffer(runtime::channels_last(out_shape, s.tail.out));
    const runtime::ValueId read = fold ? fold->input : xv;
    if (fold) plan->pointwise = std::move(fold->source);
    auto step = runtime::make_step([p = std::move(*plan), read, out](runtime::Frame& f) {
      detail::run_int8_depthwise(p, f.data_as<const std::uint8_t>(read), f.data_as<std::uint8_t>(out), f.threads());
    });
    step->implementation = fold ? "kiln_int8_depthwise:avx512_vnni+1x1" : "kiln_int8_depthwise:avx512_vnni";
    ctx.add_step(std::move(step), {read}, {out});
    if (fold) ctx.drop_step(fold->step);
    return ctx.set_result(out);
  }
  // The convolution's source: the widened copy, which holds the padding, or the value itself.
  runtime::ValueId source = xv;
  if (widens_narrow_source(xl, q, s, xq)) {
    const auto from_float = quantized_float_source(ctx, xv);
    source = from_float ? widened_quantized_source(ctx, *from_float, s.padding, xq.zero_point) : widened_source(ctx, xv, s.padding, xq.zero_point);
    q.w = widened_weight(q.w);
    s.padding.assign(nd, 0);
  }
  const std::int64_t OC = q.w.shape()[0], G = s.groups;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::memory::dims dil(nd);
  for (std::size_t i = 0; i < nd; ++i) dil[i] = s.dilation[i] - 1;  // oneDNN counts the gaps
  dnnl::memory::dims wdims;
  if (G > 1) wdims.push_back(G);
  wdims.push_back(OC / G);
  for (std::size_t i = 1; i < q.w.shape().size(); ++i) wdims.push_back(q.w.shape()[i]);
  static constexpr tag plain[] = {tag::oiw, tag::oihw, tag::oidhw}, grouped[] = {tag::goiw, tag::goihw, tag::goidhw};
  const dnnl::memory::desc w_plain(wdims, dt::s8, G > 1 ? grouped[nd - 1] : plain[nd - 1]);
  const dnnl::memory::desc w_any(wdims, dt::s8, tag::any);
  const dnnl::memory::desc b_md({OC}, dt::f32, tag::x), zp_md({1}, dt::s32, tag::x);
  // 1-d and 2-d results are channels-last: oneDNN's fast int8 convolutions and pooling
  // read and write NWC/NHWC (NCW/NCHW runs its gemm or reference code), so int8
  // activations stay channels-last.
  const auto result_layout = [&](DType dtype) {
    return nd <= 2 ? runtime::channels_last(out_shape, dtype) : runtime::Layout::contiguous(out_shape, dtype);
  };
  const runtime::Layout dst = result_layout(s.tail.out);
  const dnnl::memory::desc dst_md = onednn::desc_of(dst);
  // The addend is read in the destination's layout (reordered in when it has another).
  const dnnl::memory::desc other_md = onednn::desc_of(result_layout(DType::float32));
  // The sum each output takes over: input channels per group times the kernel's cells.
  std::int64_t reduction = q.w.shape()[1];
  for (std::size_t i = 2; i < q.w.shape().size(); ++i) reduction *= q.w.shape()[i];
  const auto make_pd = [&](const runtime::Layout& sl, const dnnl::memory::dims& pad, bool zp_attr) {
    const dnnl::memory::desc src_any(dnnl::memory::dims(sl.shape.begin(), sl.shape.end()), onednn::desc_of(sl).data_type(), tag::any);
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_any, w_any, b_md,
                                            dst_md, dnnl::memory::dims(s.stride.begin(), s.stride.end()), dil, pad, pad);
    dnnl::primitive_attr attr = qconv_attr(ctx, xq, q, s, other_md);
    if (zp_attr) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::convolution_forward::primitive_desc pd(d, attr, onednn::engine());
    if ((reduction >= kAmxMinReduction && OC / G >= kAmxMinOutputs) || !runs_on_amx(pd)) return pd;
    dnnl::convolution_forward::primitive_desc other(d, attr, onednn::engine());
    while (other.next_impl())
      if (!runs_on_amx(other) && !onednn::is_reference(other.impl_info_str())) return other;
    return pd;
  };

  // A non-zero source zero point with padding: oneDNN's own zero-point attribute, which
  // treats the padding as the zero point, where its fast code takes it; else the source
  // is copied into a buffer padded with the zero point and the convolution pads nothing.
  bool padded = false;
  for (std::int64_t p : s.padding) padded |= p > 0;
  padded &= xq.zero_point != 0;
  const dnnl::memory::dims given_pad(s.padding.begin(), s.padding.end());
  dnnl::convolution_forward::primitive_desc pd;
  bool zp_attr = false;
  if (padded) try {
      pd = make_pd(xl, given_pad, true);
      zp_attr = !onednn::is_reference(pd.impl_info_str());
    } catch (const dnnl::error&) {
      // no zero-point support here: the padded copy
    }
  const auto src = padded && !zp_attr ? padded_source(ctx, source, s.padding, xq.zero_point) : source;
  const runtime::Layout sl = ctx.layout(src);
  const dnnl::memory::desc src_given = onednn::desc_of(sl);
  if (!zp_attr) try {
      pd = make_pd(sl, padded ? dnnl::memory::dims(nd, 0) : given_pad, false);
    } catch (const dnnl::error& err) {
      ctx.fail(std::string("oneDNN refused the int8 convolution: ") + err.what());
    }
  // With the attribute, the bias no longer folds the zero point in.
  SourceQuant bias_quant = xq;
  if (zp_attr) bias_quant.zero_point = 0;
  const auto name = ctx.node().name();
  const auto wp = ctx.constant_value(onednn::reorder_once(q.w, w_plain, pd.weights_desc()), name + ".packed_weight");
  const auto bp = ctx.constant_value(accumulator_bias(ctx, q, bias_quant, s.bias), name + ".accumulator_bias");
  const auto out = ctx.buffer(dst);
  onednn::ScratchPlan scratch;
  // A reorder target only where the primitive wants another layout than the value's.
  const auto reserve = [&](const dnnl::memory::desc& given, const dnnl::memory::desc& wanted) -> std::size_t {
    return given == wanted ? 0 : scratch.take(wanted.get_size());
  };
  std::vector<onednn::PrimitiveStep::In> ins{{DNNL_ARG_SRC, src, src_given, pd.src_desc(), reserve(src_given, pd.src_desc())},
                                             {DNNL_ARG_WEIGHTS, wp, pd.weights_desc(), pd.weights_desc(), 0},
                                             {DNNL_ARG_BIAS, bp, b_md, b_md, 0}};
  std::vector<runtime::ValueId> reads{src, wp, bp};
  if (s.tail.other) {
    const int index = s.unary.name == "none" || s.unary.name.empty() ? 0 : 1;
    const dnnl::memory::desc given = onednn::desc_of(ctx.layout(*s.tail.other));
    ins.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, *s.tail.other, given, other_md, reserve(given, other_md)});
    reads.push_back(*s.tail.other);
  }
  // The sum post-op adds to what the destination holds: the accum, copied in first.
  std::optional<runtime::ValueId> pre_fill;
  runtime::CopyPlan pre_copy{};
  if (s.accum) {
    pre_fill = s.accum->value;
    pre_copy = runtime::plan_copy(ctx.layout(s.accum->value), dst);
    reads.push_back(s.accum->value);
  }
  if (zp_attr) {
    runtime::Tensor zp = runtime::Tensor::empty({1}, DType::int32);
    zp.data<std::int32_t>()[0] = static_cast<std::int32_t>(xq.zero_point);
    const auto zv = ctx.constant_value(std::move(zp), name + ".source_zero_point");
    ins.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zv, zp_md, zp_md, 0});
    reads.push_back(zv);
  }
  const std::size_t pad_at = scratch.take(pd.scratchpad_desc().get_size());
  ctx.add_step(std::make_unique<onednn::PrimitiveStep>(dnnl::convolution_forward(pd), std::move(ins), out, dst_md, pre_fill, pre_copy,
                                                        pd.scratchpad_desc(), pad_at),
               std::move(reads), {out}, scratch.bytes);
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

// The source's rank checked, then bias at `bias_pos`, followed by stride, padding,
// dilation, groups, output_scale, output_zero_point and output_dtype (both forms' order).
inline QConvSpec read_qconv_spec(const runtime::LowerContext& ctx, std::size_t bias_pos) {
  const runtime::Layout& xl = ctx.layout(ctx.tensor(0, "qx"));
  if (xl.rank() < 3 || xl.rank() > 5) ctx.fail("qconv takes an input of rank 3 to 5, got " + runtime::shape_str(xl.shape));
  QConvSpec s;
  s.bias = ctx.optional_tensor(bias_pos, "bias");
  read_geometry(ctx, s, bias_pos + 1, xl.rank() - 2);
  s.tail = {ctx.scalar_arg(bias_pos + 5, "output_scale"), ctx.int_arg(bias_pos + 6, "output_zero_point"),
            qconv_output_dtype(ctx, bias_pos + 7, xl.dtype), std::nullopt};
  return s;
}

// qconv_pointwise(qx, x_scale, x_zero_point, qw, w_scale, w_zero_point, bias, stride, padding, dilation,
//   groups, output_scale, output_zero_point, output_dtype, attr, scalars, algorithm).
template <bool Tensors>
struct QConvPointwise {
  static void lower(runtime::LowerContext& ctx) {
    QConvSpec s = read_qconv_spec(ctx, 6);
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
    QConvSpec s = read_qconv_spec(ctx, 7);
    const std::string binary = ctx.string_arg(17, "binary_attr", "none");
    if (binary != "add" && binary != "sum") ctx.fail("binary post-op '" + binary + "' is not supported (add and sum are)");
    if (ctx.scalar_arg(18, "alpha", 1.0) != 1.0) ctx.fail("alpha must be 1");
    s.after_add = qconv_unary(ctx, 19, "unary_attr", 20, "unary_scalars");
    read_accum(ctx, s);
    lower_qconv(ctx, Tensors, s);
  }

  // qaccum: a float32 addend, or uint8/int8 with accum_scale and accum_zero_point.
  static void read_accum(const runtime::LowerContext& ctx, QConvSpec& s) {
    const auto a = ctx.tensor(6, "qaccum");
    const DType d = ctx.layout(a).dtype;
    const double scale = ctx.scalar_arg(15, "accum_scale", 1.0);
    const std::int64_t zp = ctx.int_arg(16, "accum_zero_point", 0);
    if (d == DType::float32) {
      if (scale != 1.0 || zp != 0) ctx.fail("a float32 qaccum takes accum_scale 1 and accum_zero_point 0");
      s.tail.other = a;
      return;
    }
    if (d != DType::uint8 && d != DType::int8)
      ctx.fail("qaccum is " + std::string(dtype_name(d)) + "; uint8, int8 or float32 expected");
    s.accum = QuantizedAccum{a, scale, zp};
  }
};

}  // namespace kiln::kernels::onednn_detail
