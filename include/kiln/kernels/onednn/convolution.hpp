#pragma once
// 2-d convolution on oneDNN's convolution primitive, at the aten
// (aten.convolution) and torch (torch.conv2d, F.conv2d) levels. The result is
// channels-last when the graph's layout decision says so (then oneDNN reads
// and writes NHWC directly); the source is reordered in the step only when
// the primitive wants another layout (a graph's NCHW input). Constant weights
// are reordered once, with a following inference batch-norm folded in, and a
// relu or residual add after it become post-ops (onednn/epilogue.hpp).
// A 3x3 stride-1 convolution with no residual add may run oneDNN's Winograd
// primitive where it exists (CompileOptions::conv_algorithm, onednn/conv_algorithm.hpp):
// it writes its own blocked layout, which the step reorders into the result.
#include <cmath>
#include <optional>

#include "kiln/kernels/detail/strided_copy.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/onednn/conv_algorithm.hpp"
#include "kiln/kernels/onednn/epilogue.hpp"

namespace kiln::kernels {

namespace onednn_detail {

inline std::vector<std::int64_t> pair_arg(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw,
                                          std::int64_t dflt) {
  auto v = ctx.ints_arg(pos, kw, std::vector<std::int64_t>{dflt, dflt});
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) ctx.fail(std::string(kw) + " must have 1 or 2 values for a 2-d convolution");
  return v;
}

struct ConvArgs {
  runtime::ValueId input, weight;
  std::optional<runtime::ValueId> bias;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  bool same_padding = false;
};

inline void lower_conv2d(runtime::LowerContext& ctx, const ConvArgs& a) {
  const runtime::Layout& in = ctx.layout(a.input);
  const runtime::Layout& w = ctx.layout(a.weight);
  if (in.dtype != DType::float32 || w.dtype != DType::float32) ctx.fail("convolution takes float32");
  if (in.rank() != 4 || w.rank() != 4)
    ctx.fail("a 2-d convolution takes a 4-d input and weight, got " + runtime::shape_str(in.shape) + " and " +
             runtime::shape_str(w.shape));
  const std::int64_t N = in.shape[0], C = in.shape[1], H = in.shape[2], W = in.shape[3];
  const std::int64_t OC = w.shape[0], KH = w.shape[2], KW = w.shape[3], G = a.groups;
  if (G < 1 || C % G != 0 || OC % G != 0 || w.shape[1] * G != C)
    ctx.fail("weight " + runtime::shape_str(w.shape) + " with groups=" + std::to_string(G) + " does not fit input " +
             runtime::shape_str(in.shape));
  std::vector<std::int64_t> pad_l = a.padding, pad_r = a.padding;
  if (a.same_padding) {
    for (int k = 0; k < 2; ++k) {
      const std::int64_t total = a.dilation[k] * ((k ? KW : KH) - 1);
      pad_l[k] = total / 2;
      pad_r[k] = total - pad_l[k];
    }
  }
  const std::int64_t OH = (H + pad_l[0] + pad_r[0] - a.dilation[0] * (KH - 1) - 1) / a.stride[0] + 1;
  const std::int64_t OW = (W + pad_l[1] + pad_r[1] - a.dilation[1] * (KW - 1) - 1) / a.stride[1] + 1;
  if (OH <= 0 || OW <= 0) ctx.fail("the kernel is larger than the padded input " + runtime::shape_str(in.shape));
  const runtime::Shape out_shape{N, OC, OH, OW};
  const runtime::Layout out_layout =
      ctx.channels_last() ? runtime::channels_last(out_shape) : runtime::Layout::contiguous(out_shape);

  const auto wconst = ctx.constant(a.weight);
  const std::optional<runtime::Tensor> bconst = a.bias ? ctx.constant(*a.bias) : std::nullopt;
  const bool foldable = wconst && (!a.bias || bconst);
  onednn::Epilogue e = onednn::find_epilogue(ctx, ctx.node(), out_layout, OC, foldable);

  // Weights (and bias) with a folded batch-norm, as constants.
  std::optional<runtime::Tensor> wv, bv;
  if (wconst) wv = wconst->contiguous();
  if (bconst) bv = bconst->contiguous();
  if (e.has_affine()) {
    runtime::Tensor w2 = runtime::Tensor::empty(w.shape);
    const std::int64_t per = w.numel() / OC;
    for (std::int64_t o = 0; o < OC; ++o)
      for (std::int64_t i = 0; i < per; ++i) w2.data<float>()[o * per + i] = wv->data<float>()[o * per + i] * e.scale[o];
    runtime::Tensor b2 = runtime::Tensor::empty({OC});
    for (std::int64_t o = 0; o < OC; ++o) b2.data<float>()[o] = (bv ? bv->data<float>()[o] * e.scale[o] : 0.0f) + e.shift[o];
    wv = std::move(w2);
    bv = std::move(b2);
  }

  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::dims wdims = G > 1 ? dnnl::memory::dims{G, OC / G, C / G, KH, KW} : dnnl::memory::dims{OC, C, KH, KW};
  const dnnl::memory::desc w_plain(wdims, dt::f32, G > 1 ? tag::goihw : tag::oihw);
  const dnnl::memory::desc src_given = onednn::desc_of(in);
  const dnnl::memory::desc dst_md = onednn::desc_of(out_layout);
  const dnnl::memory::desc src_any({N, C, H, W}, dt::f32, tag::any), w_any(wdims, dt::f32, tag::any);
  const bool has_bias = bv.has_value() || (a.bias.has_value() && !bconst);
  const dnnl::memory::desc b_md({OC}, dt::f32, tag::a);

  dnnl::primitive_attr attr = onednn::primitive_attr_for(ctx);
  attr.set_post_ops(e.post_ops);
  const dnnl::memory::dims strides(a.stride.begin(), a.stride.end());
  const dnnl::memory::dims dil{a.dilation[0] - 1, a.dilation[1] - 1};  // oneDNN counts the gaps
  const dnnl::memory::dims pl(pad_l.begin(), pad_l.end()), pr(pad_r.begin(), pad_r.end());
  auto make_pd = [&](dnnl::algorithm algo, const dnnl::memory::desc& dst) {
    auto d = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algo, src_any, w_any, b_md, dst,
                                                        strides, dil, pl, pr)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algo, src_any, w_any, dst,
                                                        strides, dil, pl, pr);
    return dnnl::convolution_forward::primitive_desc(d, attr, onednn::engine());
  };
  dnnl::convolution_forward::primitive_desc pd;
  bool winograd = false;
  // Winograd writes its own blocked layout, reordered out after; an addend
  // pre-filled into the destination would not reach it, so a residual add keeps direct.
  if (KH == 3 && KW == 3 && a.stride == std::vector<std::int64_t>{1, 1} && a.dilation == std::vector<std::int64_t>{1, 1} &&
      G == 1 && !e.addend && onednn::wants_winograd(ctx.options(), N * OC * OH * OW * C * KH * KW)) {
    try {
      pd = make_pd(dnnl::algorithm::convolution_winograd, dnnl::memory::desc({N, OC, OH, OW}, dt::f32, tag::any));
      winograd = true;
    } catch (const dnnl::error&) {
      // no Winograd implementation here (no AVX-512, or a post-op it does not take): direct
    }
  }
  if (!winograd) {
    try {
      pd = make_pd(dnnl::algorithm::convolution_direct, dst_md);
    } catch (const dnnl::error& err) {
      ctx.fail(std::string("oneDNN refused the convolution: ") + err.what());
    }
  }

  std::size_t scratch = 0;
  auto reserve = [&](std::size_t n) {
    const std::size_t at = scratch;
    scratch += (n + 63) / 64 * 64;
    return at;
  };
  std::vector<onednn::PrimitiveStep::In> ins;
  std::vector<runtime::ValueId> reads;
  ins.push_back({DNNL_ARG_SRC, a.input, src_given, pd.src_desc(), 0});
  if (!(src_given == pd.src_desc())) ins.back().scratch_offset = reserve(pd.src_desc().get_size());
  reads.push_back(a.input);
  if (wv) {
    const auto packed = ctx.constant_value(onednn::reorder_once(*wv, w_plain, pd.weights_desc()), ctx.node().name() + ".packed_weight");
    ins.push_back({DNNL_ARG_WEIGHTS, packed, pd.weights_desc(), pd.weights_desc(), 0});
    reads.push_back(packed);
  } else {
    if (!w.is_contiguous()) ctx.fail("a non-constant weight must be contiguous");
    ins.push_back({DNNL_ARG_WEIGHTS, a.weight, w_plain, pd.weights_desc(), 0});
    if (!(w_plain == pd.weights_desc())) ins.back().scratch_offset = reserve(pd.weights_desc().get_size());
    reads.push_back(a.weight);
  }
  if (bv) {
    const auto b = ctx.constant_value(std::move(*bv), ctx.node().name() + ".bias");
    ins.push_back({DNNL_ARG_BIAS, b, b_md, b_md, 0});
    reads.push_back(b);
  } else if (a.bias) {
    if (!ctx.layout(*a.bias).is_contiguous() || ctx.layout(*a.bias).numel() != OC) ctx.fail("the bias must hold one value per output channel");
    ins.push_back({DNNL_ARG_BIAS, *a.bias, b_md, b_md, 0});
    reads.push_back(*a.bias);
  }

  // The destination: the addend's own buffer when no later step reads it
  // (LowerContext::may_overwrite), else a new one filled with the addend.
  runtime::ValueId out;
  std::optional<runtime::ValueId> pre_fill;
  detail::CopyPlan pre_copy{};
  if (e.addend) {
    const runtime::ValueInfo& ai = ctx.info(*e.addend);
    if (ai.layout == out_layout && ctx.may_overwrite(*e.addend_node, *e.addend, *e.add_node)) {
      out = ctx.view(*e.addend, out_layout);
    } else {
      out = ctx.buffer(out_layout);
      pre_fill = *e.addend;
      pre_copy = detail::plan_copy(ctx.layout(*e.addend), out_layout);
    }
    reads.push_back(*e.addend);
  } else {
    out = ctx.buffer(out_layout);
  }
  std::optional<onednn::PrimitiveStep::DstReorder> written;
  if (!(pd.dst_desc() == dst_md)) written = onednn::PrimitiveStep::DstReorder{pd.dst_desc(), reserve(pd.dst_desc().get_size())};
  const std::size_t pad_at = reserve(pd.scratchpad_desc().get_size());
  ctx.add_step(std::make_unique<onednn::PrimitiveStep>(dnnl::convolution_forward(pd), std::move(ins), out, dst_md, pre_fill,
                                                        pre_copy, pd.scratchpad_desc(), pad_at, std::move(written)),
               reads, {out}, scratch);
  for (const Node* n : e.nodes) ctx.absorb(*n, runtime::Lowered::tensor(out));
  for (const Node* n : e.tuple_nodes) ctx.absorb(*n, runtime::Lowered::tensor(out));
  ctx.set_result(out);
}

// aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups).
struct AtenConvolution {
  static void lower(runtime::LowerContext& ctx) {
    if (ctx.bool_arg(6, "transposed", false)) ctx.fail("transposed convolution is not supported yet");
    ConvArgs a{ctx.tensor(0, "input"), ctx.tensor(1, "weight"), ctx.optional_tensor(2, "bias"),
               pair_arg(ctx, 3, "stride", 1), pair_arg(ctx, 4, "padding", 0), pair_arg(ctx, 5, "dilation", 1),
               ctx.int_arg(8, "groups", 1)};
    lower_conv2d(ctx, a);
  }
};
// torch.conv2d / F.conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1).
struct TorchConv2d {
  static void lower(runtime::LowerContext& ctx) {
    ConvArgs a{ctx.tensor(0, "input"), ctx.tensor(1, "weight"), ctx.optional_tensor(2, "bias"), pair_arg(ctx, 3, "stride", 1),
               {0, 0}, pair_arg(ctx, 5, "dilation", 1), ctx.int_arg(6, "groups", 1)};
    const Arg pad = ctx.value(4, "padding");
    if (const auto* s = pad.get_if<std::string>()) {
      if (*s == "same") a.same_padding = true;
      else if (*s != "valid") ctx.fail("padding '" + *s + "' is neither 'same' nor 'valid'");
    } else {
      a.padding = pair_arg(ctx, 4, "padding", 0);
    }
    lower_conv2d(ctx, a);
  }
};

}  // namespace onednn_detail

template <> struct Kernel<"aten.convolution.default"> : onednn_detail::AtenConvolution {};
template <> struct Kernel<"torch.conv2d"> : onednn_detail::TorchConv2d {};
template <> struct Kernel<"torch.nn.functional.conv2d"> : onednn_detail::TorchConv2d {};

}  // namespace kiln::kernels
