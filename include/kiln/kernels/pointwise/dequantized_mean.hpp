#pragma once
// dequantize_per_tensor -> mean over H and W -> quantize_per_tensor, as the x86
// recipe leaves a network's global average pool (MobileNetV2's last layer),
// lowered as one step when the quantize is lowered: each channel's quantized
// values summed in int32 (exact), the mean taken once in double from that sum,
// then quantized as the quantize does (detail/quantize_run.hpp); the
// dequantize's and the mean's steps, which nothing else reads, are dropped.
// Unfused, the dequantize writes the whole float tensor and the mean reads it
// back; Inductor's code generation fuses the three the same way. The mean
// differs from the float32 sum of the dequantized values only by that sum's
// roundings (a few ulps), so a result moves one step at most, where a mean lies
// within those ulps of a rounding boundary.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/kernels/detail/quantize_run.hpp"
#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels::pointwise_detail {

// The quantized tensor under a quantize's input, when that input is such a mean.
struct DequantizedMeanSource {
  runtime::ValueId q = 0;  // uint8 or int8 [N, C, H, W]
  runtime::ValueId dequantized = 0;  // the dequantize's float32 result, which the mean read
  double scale = 1;                  // the dequantize's
  std::int64_t zero_point = 0;
  std::size_t mean_step = 0;
};

// Whether `mean` is aten.mean.dim over dims 2 and 3 of a 4-d input, in its input's dtype.
inline bool is_spatial_mean(const Node& mean) {
  if (mean.op() != OpKind::call_function || mean.target_name() != "aten.mean.dim") return false;
  if (mean.args().size() < 2 || mean.args().size() > 3) return false;
  for (const auto& [key, value] : mean.kwargs())
    if (!(key == "keepdim" && value.get_if<bool>()) && !(key == "dtype" && value.is_none())) return false;
  const ArgList* dims = mean.arg(1).list();
  if (!dims || dims->size() != 2) return false;
  std::vector<std::int64_t> d;
  for (const Arg& a : *dims) {
    const auto* i = a.get_if<std::int64_t>();
    if (!i || *i < -4 || *i > 3) return false;
    d.push_back((*i + 4) % 4);
  }
  std::sort(d.begin(), d.end());
  return d == std::vector<std::int64_t>{2, 3};
}

// The node being lowered is a quantize of `input`; a DequantizedMeanSource when
// input = mean(dequantize_per_tensor(q), [2, 3]), each the only user of the one
// before, with numbers for the dequantize's parameters, a float32 result, and
// steps nothing else reads.
inline std::optional<DequantizedMeanSource> dequantized_mean_source(const runtime::LowerContext& ctx, runtime::ValueId input) {
  const Arg* a = ctx.find_arg(0, "input");
  const Node* mean = a ? a->node() : nullptr;
  if (!mean || mean->num_users() != 1 || !is_spatial_mean(*mean) || !ctx.is_lowered(mean) || !ctx.lowered(mean).is_tensor() ||
      ctx.lowered(mean).id != input)
    return std::nullopt;
  const Node* dq = mean->arg(0).node();
  if (!dq || dq->num_users() != 1 || dq->op() != OpKind::call_function ||
      dq->target_name() != "quantized_decomposed.dequantize_per_tensor.default" || !dq->kwargs().empty() || dq->args().size() < 6 ||
      dq->args().size() > 7 || !ctx.is_lowered(dq) || !ctx.lowered(dq).is_tensor())
    return std::nullopt;
  if (dq->args().size() == 7 && !dq->arg(6).is_none() && !(dq->arg(6).get_if<DType>() && *dq->arg(6).get_if<DType>() == DType::float32))
    return std::nullopt;  // out_dtype
  const Node* src = dq->arg(0).node();
  if (!src || !ctx.is_lowered(src) || !ctx.lowered(src).is_tensor()) return std::nullopt;
  DequantizedMeanSource m;
  m.q = ctx.lowered(src).id;
  m.dequantized = ctx.lowered(dq).id;
  const runtime::Layout& l = ctx.layout(m.q);
  if (l.rank() != 4 || (l.dtype != DType::uint8 && l.dtype != DType::int8) || ctx.layout(m.dequantized).dtype != DType::float32)
    return std::nullopt;
  if (l.shape[2] * l.shape[3] > (std::int64_t{1} << 23)) return std::nullopt;  // 255 per value: the sums stay in int32
  const auto scale = number_arg(*dq, 1, "scale"), zero_point = number_arg(*dq, 2, "zero_point");
  if (!scale || !zero_point) return std::nullopt;
  m.scale = *scale, m.zero_point = static_cast<std::int64_t>(*zero_point);
  const auto mean_step = ctx.unread_step_writing(input);
  if (!mean_step) return std::nullopt;
  m.mean_step = *mean_step;
  return m;
}

// Sums of channels [c0, c0 + count) of image n over H x W: sums[k] for channel c0 + k.
template <class Q>
inline void channel_sums(const Q* x, const runtime::Layout& l, std::int64_t n, std::int64_t c0, std::int64_t count, std::int32_t* sums) {
  const std::int64_t H = l.shape[2], W = l.shape[3];
  const std::int64_t sc = l.strides[1], sh = l.strides[2], sw = l.strides[3];
  const Q* image = x + n * l.strides[0] + c0 * sc;
  std::fill(sums, sums + count, 0);
  if (sc == 1) {
    // Channels-last (what kiln's int8 convolutions write): each pixel's channels in a row.
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w) {
        const Q* px = image + h * sh + w * sw;
        for (std::int64_t k = 0; k < count; ++k) sums[k] += px[k];
      }
    return;
  }
  for (std::int64_t k = 0; k < count; ++k)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w) sums[k] += image[k * sc + h * sh + w * sw];
}

// The quantize (to Out, with quantize_run's parameters) of the mean as one step
// reading the quantized source; drops the mean's and the dequantize's steps.
template <class Out>
runtime::ValueId lower_quantized_mean(runtime::LowerContext& ctx, DequantizedMeanSource m, const runtime::Layout& result, float inv_scale,
                                      float zero_point, float lo, float hi) {
  // The mean's step is dropped first: it was the dequantize's only reader.
  ctx.drop_step(m.mean_step);
  const auto dequantize_step = ctx.unread_step_writing(m.dequantized);
  if (dequantize_step) ctx.drop_step(*dequantize_step);
  const runtime::Layout l = ctx.layout(m.q);
  const std::int64_t N = l.shape[0], C = l.shape[1], HW = l.shape[2] * l.shape[3];
  const auto out = ctx.buffer(runtime::dense_like(result, result.dtype));
  const float s = static_cast<float>(m.scale);  // the dequantize's float32 scale
  constexpr std::int64_t kBlock = 64;          // channels a thread sums at once
  const std::int64_t blocks = (C + kBlock - 1) / kBlock, zp = m.zero_point;
  const runtime::ValueId in = m.q;
  const auto sum_and_quantize = [=]<class Q>(const Q* x, Out* y, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) collapse(2) if (threads > 1 && N * C * HW >= 32768)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t c0 = b * kBlock, count = std::min(C, c0 + kBlock) - c0;
        std::int32_t sums[kBlock];
        float means[kBlock];
        channel_sums(x, l, n, c0, count, sums);
        for (std::int64_t k = 0; k < count; ++k)
          means[k] = static_cast<float>((static_cast<double>(sums[k]) - static_cast<double>(zp * HW)) * static_cast<double>(s) /
                                        static_cast<double>(HW));
        detail::quantize_run(means, y + n * C + c0, count, inv_scale, zero_point, lo, hi);
      }
  };
  const bool unsigned_source = l.dtype == DType::uint8;
  auto step = runtime::make_step([=](runtime::Frame& fr) {
    if (unsigned_source) sum_and_quantize(fr.data_as<const std::uint8_t>(in), fr.data_as<Out>(out), fr.threads());
    else sum_and_quantize(fr.data_as<const std::int8_t>(in), fr.data_as<Out>(out), fr.threads());
  });
  step->implementation = "kiln_quantized_mean";
  ctx.add_step(std::move(step), {in}, {out});
  return out;
}

}  // namespace kiln::kernels::pointwise_detail
