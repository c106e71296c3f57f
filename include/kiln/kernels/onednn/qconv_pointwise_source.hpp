#pragma once
// MobileNet's expand folded into the depthwise convolution after it: where the
// source of a depthwise convolution on kiln's kernel is a 1x1 int8 convolution
// (qconv_pointwise.default: stride 1, no padding, one group, 4 to 32 input
// channels in multiples of 4, a uint8 channels-last input, a constant weight,
// none/relu/hardtanh, a uint8 output) that nothing else reads, the depthwise
// kernel computes the 1x1's rows itself as it needs them
// (detail::Int8PointwiseSource) and the 1x1's step, which nothing reads any
// more, is dropped. The expanded tensor (6x its input's channels) then never
// goes through memory: at batch 16 on 16 threads MobileNetV2's 16->96 expand
// wrote 19 MB for its depthwise convolution to read back.
//
// A narrow input only: each output channel costs C / 4 vpdpbusd per 16 pixels,
// against oneDNN's AMX where the reduction is 64 or more.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/detail/int8_depthwise.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/qlinear.hpp"

namespace kiln::kernels::onednn_detail {

// The clamp of relu, hardtanh(lo, hi) or none before an output quantized by
// (inv = 1 / scale, zp) into [qmin, qmax], in output units, as kiln's int8
// kernels apply it: quantization is monotonic, so clamping y at a bound is
// clamping its quantized value at the bound's. nullopt for any other op.
struct QuantizedClamp {
  std::int32_t lo, hi;
};
inline std::optional<QuantizedClamp> quantized_clamp(std::string_view unary, const std::vector<double>& scalars, double inv, double zp,
                                                     std::int32_t qmin, std::int32_t qmax) {
  const auto quantized = [&](double y) { return detail::int8_depthwise_quantize(static_cast<float>(std::clamp(y * inv + zp, -1e9, 1e9))); };
  QuantizedClamp c{qmin, qmax};
  if (unary == "relu") c.lo = quantized(0.0);
  else if (unary == "hardtanh" && scalars.size() == 2) c.lo = quantized(scalars[0]), c.hi = quantized(scalars[1]);
  else if (!(unary == "none" || unary.empty())) return std::nullopt;
  // Bounds past the output's range are its ends: every result saturates there.
  c.lo = std::clamp(c.lo, qmin, qmax), c.hi = std::clamp(c.hi, qmin, qmax);
  return c;
}

// The 1x1 convolution to fold, its input and the step it ran in.
struct PointwiseSourceFold {
  detail::Int8PointwiseSource source;
  runtime::ValueId input = 0;
  std::size_t step = 0;
};

// The fold for a depthwise convolution of `channels` outputs whose source is `xv`, or nullopt.
inline std::optional<PointwiseSourceFold> pointwise_source(const runtime::LowerContext& ctx, runtime::ValueId xv, std::int64_t channels) {
  const Arg* a = ctx.find_arg(0, "qx");
  const Node* p = a ? a->node() : nullptr;
  if (!p || p->op() != OpKind::call_function || p->num_users() != 1 || !ctx.is_lowered(p) || !ctx.lowered(p).is_tensor() ||
      ctx.lowered(p).id != xv)
    return std::nullopt;
  const std::string_view target = p->target_name();
  if (target != "onednn.qconv_pointwise.default" && target != "onednn.qconv2d_pointwise.default") return std::nullopt;
  // Its operands: a channels-last uint8 input, a constant [channels, C, 1, 1] weight, scales, zero weights' zero points, a bias.
  const auto node_value = [&](std::size_t pos, std::string_view kw) -> std::optional<runtime::ValueId> {
    const Arg* v = given_arg(*p, pos, kw);
    const Node* n = v ? v->node() : nullptr;
    if (!n || !ctx.is_lowered(n) || !ctx.lowered(n).is_tensor()) return std::nullopt;
    return ctx.lowered(n).id;
  };
  const auto x = node_value(0, "qx"), w = node_value(3, "qw"), ws = node_value(4, "w_scale"), wz = node_value(5, "w_zero_point");
  if (!x || !w || !ws || !wz) return std::nullopt;
  const runtime::Layout& xl = ctx.layout(*x);
  if (xl.rank() != 4 || xl.dtype != DType::uint8 || xl.strides != runtime::channels_last(xl.shape, xl.dtype).strides) return std::nullopt;
  const std::int64_t C = xl.shape[1];
  if (C % 4 != 0 || C > detail::kInt8PointwiseMaxChannels) return std::nullopt;
  const auto weight = ctx.constant(*w);
  if (!weight || !ctx.constant(*ws) || !ctx.constant(*wz) || weight->dtype() != DType::int8 ||
      weight->shape() != runtime::Shape{channels, C, 1, 1})
    return std::nullopt;
  std::optional<runtime::ValueId> bias;
  if (const Arg* b = given_arg(*p, 6, "bias"); b && !b->is_none()) {
    bias = node_value(6, "bias");
    if (!bias || !ctx.constant(*bias)) return std::nullopt;
  }
  // Geometry: stride 1, no padding, undilated, one group.
  const auto ints = [&](std::size_t pos, std::string_view kw, std::int64_t want) {
    const Arg* v = given_arg(*p, pos, kw);
    if (!v) return true;  // the defaults (stride and dilation 1, padding 0, one group) are what is wanted
    if (const auto* i = v->get_if<std::int64_t>()) return *i == want;
    const ArgList* l = v->list();
    if (!l) return false;
    return std::all_of(l->begin(), l->end(), [&](const Arg& e) { const auto* i = e.get_if<std::int64_t>(); return i && *i == want; });
  };
  if (!ints(7, "stride", 1) || !ints(8, "padding", 0) || !ints(9, "dilation", 1) || !ints(10, "groups", 1)) return std::nullopt;
  // Scalars: the source's and the output's quantization, a uint8 output.
  const auto x_scale = number_arg(*p, 1, "x_scale"), x_zp = number_arg(*p, 2, "x_zero_point"), o_scale = number_arg(*p, 11, "output_scale"),
             o_zp = number_arg(*p, 12, "output_zero_point");
  if (!x_scale || !x_zp || !o_scale || !o_zp || !(*o_scale > 0)) return std::nullopt;
  // A uint8 output: given, or None (the source's dtype).
  const Arg* od = given_arg(*p, 13, "output_dtype");
  const auto* out_dtype = od ? od->get_if<DType>() : nullptr;
  if (out_dtype ? *out_dtype != DType::uint8 : od && !od->is_none()) return std::nullopt;
  const Arg* attr = given_arg(*p, 14, "attr");
  const auto* unary = attr ? attr->get_if<std::string>() : nullptr;
  std::vector<double> scalars;
  if (const Arg* sv = given_arg(*p, 15, "scalars"); sv && sv->list())
    for (const Arg& e : *sv->list())
      if (const auto number = as_number(e)) scalars.push_back(*number);
  const auto clamp = quantized_clamp(unary ? *unary : std::string("none"), scalars, 1.0 / *o_scale, *o_zp, 0, 255);
  if (!clamp) return std::nullopt;
  const runtime::Tensor wt = weight->contiguous();
  QWeight q{wt, constant_numbers(ctx, *ws, "w_scale")};
  if (q.scale.size() == 1) q.scale.assign(static_cast<std::size_t>(channels), q.scale[0]);
  if (static_cast<std::int64_t>(q.scale.size()) != channels) return std::nullopt;
  for (double z : constant_numbers(ctx, *wz, "w_zero_point"))
    if (z != 0) return std::nullopt;
  const auto step = ctx.unread_step_writing(xv);
  if (!step) return std::nullopt;

  PointwiseSourceFold f;
  f.input = *x, f.step = *step;
  detail::Int8PointwiseSource& e = f.source;
  const std::int64_t padded = (channels + 15) / 16 * 16, groups = padded / 16;
  e.C = C;
  e.weight.assign(static_cast<std::size_t>(C * padded), 0);
  for (std::int64_t oc = 0; oc < channels; ++oc)
    for (std::int64_t ic = 0; ic < C; ++ic)
      e.weight[static_cast<std::size_t>((((ic / 4) * groups + oc / 16) * 16 + oc % 16) * 4 + ic % 4)] = wt.data<std::int8_t>()[oc * C + ic];
  // The depthwise kernel's epilogue: one multiply-add of the int32 sum, the bias in accumulator
  // units (x_zp folded in, as oneDNN gets it: qlinear.hpp) scaled with it.
  const runtime::Tensor acc_bias = accumulator_bias(ctx, q, SourceQuant{*x_scale, static_cast<std::int64_t>(*x_zp)}, bias);
  e.bias.assign(static_cast<std::size_t>(padded), 0.0f), e.scale.assign(static_cast<std::size_t>(padded), 0.0f);
  for (std::int64_t oc = 0; oc < channels; ++oc) {
    const auto at = static_cast<std::size_t>(oc);
    const double scale = *x_scale * q.scale[at] / *o_scale;
    e.scale[at] = static_cast<float>(scale);
    e.bias[at] = static_cast<float>(static_cast<double>(acc_bias.data<float>()[oc]) * scale + *o_zp);
  }
  e.q_lo = clamp->lo, e.q_hi = clamp->hi;
  return f;
}

}  // namespace kiln::kernels::onednn_detail
