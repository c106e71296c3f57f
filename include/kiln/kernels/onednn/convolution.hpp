#pragma once
// 1-, 2- and 3-d convolution on oneDNN's convolution primitive, and transposed
// convolution on its deconvolution primitive, at the aten (aten.convolution)
// and torch (torch.convNd, F.convNd, torch.conv_transposeNd, F.conv_transposeNd)
// levels; an unbatched input runs as a batch of one. A 2-d result is
// channels-last when the graph's layout decision says so (then oneDNN reads
// and writes NHWC directly); 1-d and 3-d results are row-major. The source is
// reordered in the step only when the primitive wants another layout (a
// graph's NCHW input). Constant weights are reordered once,
// with a following inference batch-norm folded in (not into a transposed one),
// and a relu or residual add after it become post-ops (onednn/epilogue.hpp).
// A 2-d 3x3 stride-1 convolution with no residual add may run oneDNN's Winograd
// primitive where it exists (CompileOptions::conv_algorithm, onednn/conv_algorithm.hpp):
// it writes its own blocked layout, which the step reorders into the result.
// Under --fpmath bf16 the primitive reads bf16 (the step converts the source,
// the weights are packed as bf16) and writes fp32, where oneDNN has native code.
// bfloat16 operands (autocast's convolutions) are widened to float32, convolved
// with nothing fused and the result rounded once to bfloat16, as PyTorch sums a
// bfloat16 convolution in float32 (every bfloat16 value is a float32 one).
#include <cmath>
#include <optional>

#include "kiln/runtime/strided_copy.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/onednn/conv_algorithm.hpp"
#include "kiln/kernels/onednn/epilogue.hpp"

namespace kiln::kernels {

namespace onednn_detail {

// A stride / padding / dilation / output_padding: one value for every spatial dim, or one per dim.
inline std::vector<std::int64_t> spatial_arg(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw,
                                             std::int64_t dflt, std::size_t nd) {
  auto v = ctx.ints_arg(pos, kw, std::vector<std::int64_t>{dflt});
  if (v.size() == 1) v.resize(nd, v[0]);
  if (v.size() != nd)
    ctx.fail(std::string(kw) + " must have " + (nd == 1 ? "1 value" : "1 or " + std::to_string(nd) + " values") + " for a " +
             std::to_string(nd) + "-d convolution");
  return v;
}

struct ConvArgs {
  runtime::ValueId input, weight;
  std::optional<runtime::ValueId> bias;
  std::vector<std::int64_t> stride, padding, dilation;  // one value per spatial dim
  std::int64_t groups = 1;
  bool same_padding = false;
  bool transposed = false;
  std::vector<std::int64_t> output_padding{};  // transposed only
};

// Strides and dilations of at least 1 and paddings of at least 0, as PyTorch
// takes them; bounded too, so that the output size computed from them cannot overflow.
inline void check_spatial_args(const runtime::LowerContext& ctx, const ConvArgs& a) {
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  auto check = [&](const std::vector<std::int64_t>& v, std::int64_t lo, const char* kw) {
    for (std::int64_t x : v)
      if (x < lo || x > kMax)
        ctx.fail(std::string(kw) + " " + std::to_string(x) + " is out of range (" + std::to_string(lo) + " to 2^31)");
  };
  check(a.stride, 1, "stride");
  check(a.dilation, 1, "dilation");
  check(a.padding, 0, "padding");
}

// The primitive picked (a convolution or a deconvolution) and the layouts it reads and writes.
struct ConvPrimitive {
  dnnl::primitive prim;
  dnnl::memory::desc src, weights, dst, scratchpad;
  template <class PD>
  static ConvPrimitive of(dnnl::primitive prim, const PD& pd) {
    return {std::move(prim), pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()};
  }
};

inline void lower_conv(runtime::LowerContext& ctx, const ConvArgs& given) {
  // An unbatched input ([C, L], [C, H, W], [C, D, H, W], as PyTorch takes them)
  // runs as a batch of one; the result drops that dim again.
  ConvArgs a = given;
  const bool unbatched = ctx.layout(given.input).rank() == given.stride.size() + 1;
  if (unbatched) a.input = ctx.view(given.input, runtime::unsqueezed(ctx.layout(given.input), 0));
  const DType in_dtype = ctx.layout(a.input).dtype, w_dtype = ctx.layout(a.weight).dtype;
  const bool bf16_operands = in_dtype == DType::bfloat16 && w_dtype == DType::bfloat16;
  if (!bf16_operands && (in_dtype != DType::float32 || w_dtype != DType::float32))
    ctx.fail("convolution takes a float32 or a bfloat16 input and weight, got " + std::string(dtype_name(in_dtype)) + " and " +
             std::string(dtype_name(w_dtype)));
  if (bf16_operands) {
    a.input = convert_piece(ctx, a.input, DType::float32), a.weight = convert_piece(ctx, a.weight, DType::float32);
    if (a.bias && ctx.layout(*a.bias).dtype == DType::bfloat16) a.bias = convert_piece(ctx, *a.bias, DType::float32);
  }
  const runtime::Layout& in = ctx.layout(a.input);
  const runtime::Layout& w = ctx.layout(a.weight);
  const std::size_t nd = a.stride.size();
  if (nd < 1 || nd > 3 || in.rank() != nd + 2 || w.rank() != nd + 2)
    ctx.fail("a " + std::to_string(nd) + "-d convolution takes a " + std::to_string(nd + 2) + "-d input and weight, got " +
             runtime::shape_str(in.shape) + " and " + runtime::shape_str(w.shape));
  check_spatial_args(ctx, a);
  // PyTorch's weight is [OC, C / G, k...], a transposed one [C, OC / G, k...].
  const std::int64_t N = in.shape[0], C = in.shape[1], G = a.groups;
  const std::int64_t OC = a.transposed ? w.shape[1] * G : w.shape[0];
  const runtime::Shape K(w.shape.begin() + 2, w.shape.end());
  if (G < 1 || C % G != 0 || OC % G != 0 || (a.transposed ? w.shape[0] != C : w.shape[1] * G != C))
    ctx.fail("weight " + runtime::shape_str(w.shape) + " with groups=" + std::to_string(G) + " does not fit input " +
             runtime::shape_str(in.shape));
  // Winograd (below) is for 2-d convolutions only: its test reads these, 0 for the others.
  const std::int64_t KH = nd == 2 && !a.transposed ? K[0] : 0, KW = nd == 2 && !a.transposed ? K[1] : 0;
  std::vector<std::int64_t> pad_l = a.padding, pad_r = a.padding;
  runtime::Shape out_shape{N, OC};
  for (std::size_t k = 0; k < nd; ++k) {
    const std::int64_t span = a.dilation[k] * (K[k] - 1), I = in.shape[2 + k];
    if (a.same_padding) {
      pad_l[k] = span / 2;
      pad_r[k] = span - pad_l[k];
    }
    std::int64_t o = 0;
    if (a.transposed) {
      if (a.output_padding[k] < 0 || a.output_padding[k] >= std::max(a.stride[k], a.dilation[k]))
        ctx.fail("output_padding must be smaller than the stride or the dilation");
      o = (I - 1) * a.stride[k] - 2 * a.padding[k] + span + a.output_padding[k] + 1;
      pad_r[k] = a.padding[k] - a.output_padding[k];  // oneDNN sizes the result from both paddings
    } else {
      const std::int64_t room = I + pad_l[k] + pad_r[k] - span - 1;
      o = room < 0 ? 0 : room / a.stride[k] + 1;
    }
    if (o <= 0) ctx.fail("the kernel is larger than the padded input " + runtime::shape_str(in.shape));
    out_shape.push_back(o);
  }
  const runtime::Layout out_layout =
      ctx.channels_last() && nd == 2 ? runtime::channels_last(out_shape) : runtime::Layout::contiguous(out_shape);

  const auto wconst = ctx.constant(a.weight);
  const std::optional<runtime::Tensor> bconst = a.bias ? ctx.constant(*a.bias) : std::nullopt;
  // A batch-norm folds into [OC, ...] weights only (a transposed weight holds OC in dim 1).
  const bool foldable = wconst && (!a.bias || bconst) && !a.transposed;
  // The ops after a bfloat16 convolution read its rounded result: none is fused.
  onednn::Epilogue e = bf16_operands ? onednn::Epilogue{} : onednn::find_epilogue(ctx, ctx.node(), out_layout, OC, foldable);

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
  // oneDNN's weight dims are [G,] OC/G, C/G, k... for both primitives; a
  // transposed weight holds them in PyTorch's [C, OC/G, k...] order, given by strides.
  dnnl::memory::dims wdims;
  if (G > 1) wdims.push_back(G);
  wdims.push_back(OC / G);
  wdims.push_back(C / G);
  wdims.insert(wdims.end(), K.begin(), K.end());
  dnnl::memory::desc w_plain;
  if (a.transposed) {
    std::int64_t ksize = 1;
    for (std::int64_t k : K) ksize *= k;
    // In memory: [G][C/G][OC/G][k...], the kernel dims row-major.
    dnnl::memory::dims ws(wdims.size());
    std::int64_t acc = 1;
    for (std::size_t k = wdims.size(); k-- > wdims.size() - nd;) ws[k] = acc, acc *= wdims[k];
    const std::size_t o = G > 1 ? 1 : 0;
    ws[o] = ksize;
    ws[o + 1] = (OC / G) * ksize;
    if (G > 1) ws[0] = (C / G) * (OC / G) * ksize;
    w_plain = dnnl::memory::desc(wdims, dt::f32, ws);
  } else {
    static constexpr tag plain[] = {tag::oiw, tag::oihw, tag::oidhw}, grouped[] = {tag::goiw, tag::goihw, tag::goidhw};
    w_plain = dnnl::memory::desc(wdims, dt::f32, G > 1 ? grouped[nd - 1] : plain[nd - 1]);
  }
  const dnnl::memory::desc src_given = onednn::desc_of(in);
  const dnnl::memory::desc dst_md = onednn::desc_of(out_layout);
  const dnnl::memory::dims src_dims(in.shape.begin(), in.shape.end()), out_dims(out_shape.begin(), out_shape.end());
  const bool has_bias = bv.has_value() || (a.bias.has_value() && !bconst);
  const dnnl::memory::desc b_md({OC}, dt::f32, tag::a);

  dnnl::primitive_attr attr = onednn::primitive_attr_for(ctx);
  attr.set_post_ops(e.post_ops);
  const dnnl::memory::dims strides(a.stride.begin(), a.stride.end());
  dnnl::memory::dims dil;
  for (std::int64_t d : a.dilation) dil.push_back(d - 1);  // oneDNN counts the gaps
  const dnnl::memory::dims pl(pad_l.begin(), pad_l.end()), pr(pad_r.begin(), pad_r.end());
  // `compute`: the type the primitive reads source and weights in (bf16 under --fpmath bf16).
  auto make_pd = [&](dnnl::algorithm algo, const dnnl::memory::desc& dst, dt compute = dt::f32) {
    const dnnl::memory::desc src_any(src_dims, compute, tag::any), w_any(wdims, compute, tag::any);
    if (a.transposed) {
      using D = dnnl::deconvolution_forward;
      auto d = has_bias ? D::desc(dnnl::prop_kind::forward_inference, algo, src_any, w_any, b_md, dst, strides, dil, pl, pr)
                        : D::desc(dnnl::prop_kind::forward_inference, algo, src_any, w_any, dst, strides, dil, pl, pr);
      const D::primitive_desc pd(d, attr, onednn::engine());
      return ConvPrimitive::of(D(pd), pd);
    }
    auto d = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algo, src_any, w_any, b_md, dst,
                                                        strides, dil, pl, pr)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algo, src_any, w_any, dst,
                                                        strides, dil, pl, pr);
    const dnnl::convolution_forward::primitive_desc pd(d, attr, onednn::engine());
    return ConvPrimitive::of(dnnl::convolution_forward(pd), pd);
  };
  ConvPrimitive pd;
  bool winograd = false, bf16 = false;
  const auto direct = a.transposed ? dnnl::algorithm::deconvolution_direct : dnnl::algorithm::convolution_direct;
  if (onednn::bf16_products(ctx)) {
    // oneDNN's bf16 code may want its own (blocked) result layout, reordered
    // out like Winograd's; not with a residual add, which is pre-filled into the result.
    for (const bool own_layout : {false, true}) {
      if (bf16 || (own_layout && e.addend)) break;
      try {
        pd = make_pd(direct, own_layout ? dnnl::memory::desc(out_dims, dt::f32, tag::any) : dst_md, dt::bf16);
        bf16 = onednn::runs_bf16_natively(onednn::implementation_of(pd.prim));
      } catch (const dnnl::error&) {
        // no bf16 implementation for this shape, layout or epilogue: fp32
      }
    }
  }
  // Winograd writes its own blocked layout, reordered out after; an addend
  // pre-filled into the destination would not reach it, so a residual add keeps direct.
  const auto macs = [&] { return out_shape[0] * out_shape[1] * out_shape[2] * out_shape[3] * C * KH * KW; };  // 2-d only
  if (KH == 3 && KW == 3 && a.stride == std::vector<std::int64_t>{1, 1} && a.dilation == std::vector<std::int64_t>{1, 1} &&
      G == 1 && !e.addend && !bf16 && onednn::wants_winograd(ctx.options(), macs())) {
    try {
      pd = make_pd(dnnl::algorithm::convolution_winograd, dnnl::memory::desc(out_dims, dt::f32, tag::any));
      winograd = true;
    } catch (const dnnl::error&) {
      // no Winograd implementation here (no AVX-512, or a post-op it does not take): direct
    }
  }
  if (!winograd && !bf16) {
    try {
      pd = make_pd(direct, dst_md);
    } catch (const dnnl::error& err) {
      ctx.fail(std::string("oneDNN refused the ") + (a.transposed ? "transposed " : "") + "convolution: " + err.what());
    }
    // Where the layout kiln chose has only oneDNN's reference code (channels-last
    // on AVX2 machines), the primitive writes its own blocked layout, reordered out.
    if (onednn::is_reference(onednn::implementation_of(pd.prim))) {
      try {
        ConvPrimitive own = make_pd(direct, dnnl::memory::desc(out_dims, dt::f32, tag::any));
        if (!onednn::is_reference(onednn::implementation_of(own.prim))) pd = std::move(own);
      } catch (const dnnl::error&) {
        // none better: the reference code it is
      }
    }
  }

  onednn::ScratchPlan scratch;
  std::vector<onednn::PrimitiveStep::In> ins;
  std::vector<runtime::ValueId> reads;
  ins.push_back({DNNL_ARG_SRC, a.input, src_given, pd.src, 0});
  if (!(src_given == pd.src)) ins.back().scratch_offset = scratch.take(pd.src.get_size());
  reads.push_back(a.input);
  if (wv) {
    const auto packed = ctx.constant_value(onednn::reorder_once(*wv, w_plain, pd.weights), ctx.node().name() + ".packed_weight");
    ins.push_back({DNNL_ARG_WEIGHTS, packed, pd.weights, pd.weights, 0});
    reads.push_back(packed);
  } else {
    if (!w.is_contiguous()) ctx.fail("a non-constant weight must be contiguous");
    ins.push_back({DNNL_ARG_WEIGHTS, a.weight, w_plain, pd.weights, 0});
    if (!(w_plain == pd.weights)) ins.back().scratch_offset = scratch.take(pd.weights.get_size());
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
  runtime::CopyPlan pre_copy{};
  if (e.addend) {
    const runtime::ValueInfo& ai = ctx.info(*e.addend);
    if (ai.layout == out_layout && ctx.may_overwrite(*e.addend_node, *e.addend, *e.add_node)) {
      out = ctx.view(*e.addend, out_layout);
    } else {
      out = ctx.buffer(out_layout);
      pre_fill = *e.addend;
      pre_copy = runtime::plan_copy(ctx.layout(*e.addend), out_layout);
    }
    reads.push_back(*e.addend);
  } else {
    out = ctx.buffer(out_layout);
  }
  std::optional<onednn::PrimitiveStep::DstReorder> written;
  if (!(pd.dst == dst_md)) written = onednn::PrimitiveStep::DstReorder{pd.dst, scratch.take(pd.dst.get_size()), e.addend.has_value()};
  const std::size_t pad_at = scratch.take(pd.scratchpad.get_size());
  ctx.add_step(std::make_unique<onednn::PrimitiveStep>(pd.prim, std::move(ins), out, dst_md, pre_fill,
                                                        pre_copy, pd.scratchpad, pad_at, std::move(written)),
               reads, {out}, scratch.bytes);
  const std::int64_t batch_dim[] = {0};
  runtime::ValueId result = unbatched ? ctx.view(out, runtime::squeezed(ctx.layout(out), batch_dim)) : out;
  if (bf16_operands) result = convert_piece(ctx, result, DType::bfloat16);
  for (const Node* n : e.nodes) ctx.absorb(*n, runtime::Lowered::tensor(result));
  for (const Node* n : e.tuple_nodes) ctx.absorb(*n, runtime::Lowered::tensor(result));
  ctx.set_result(result);
}

// aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
// the weight's rank gives the spatial dims.
struct AtenConvolution {
  static void lower(runtime::LowerContext& ctx) {
    const auto weight = ctx.tensor(1, "weight");
    const runtime::Layout& wl = ctx.layout(weight);
    if (wl.rank() < 3 || wl.rank() > 5) ctx.fail("the weight must be 3-, 4- or 5-d, got " + runtime::shape_str(wl.shape));
    const std::size_t nd = wl.rank() - 2;
    ConvArgs a{ctx.tensor(0, "input"), weight, ctx.optional_tensor(2, "bias"), spatial_arg(ctx, 3, "stride", 1, nd),
               spatial_arg(ctx, 4, "padding", 0, nd), spatial_arg(ctx, 5, "dilation", 1, nd), ctx.int_arg(8, "groups", 1)};
    a.transposed = ctx.bool_arg(6, "transposed", false);
    if (a.transposed) a.output_padding = spatial_arg(ctx, 7, "output_padding", 0, nd);
    lower_conv(ctx, a);
  }
};
// torch.convNd / F.convNd / aten.convNd(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1).
template <std::size_t ND>
struct TorchConv {
  static void lower(runtime::LowerContext& ctx) {
    ConvArgs a{ctx.tensor(0, "input"), ctx.tensor(1, "weight"), ctx.optional_tensor(2, "bias"), spatial_arg(ctx, 3, "stride", 1, ND),
               std::vector<std::int64_t>(ND, 0), spatial_arg(ctx, 5, "dilation", 1, ND), ctx.int_arg(6, "groups", 1)};
    const Arg pad = ctx.value(4, "padding");
    if (const auto* s = pad.get_if<std::string>()) {
      if (*s == "same") a.same_padding = true;
      else if (*s != "valid") ctx.fail("padding '" + *s + "' is neither 'same' nor 'valid'");
    } else {
      a.padding = spatial_arg(ctx, 4, "padding", 0, ND);
    }
    lower_conv(ctx, a);
  }
};
// torch.conv_transposeNd / F.conv_transposeNd(input, weight, bias=None, stride=1, padding=0, output_padding=0,
// groups=1, dilation=1): groups come before dilation here.
template <std::size_t ND>
struct TorchConvTranspose {
  static void lower(runtime::LowerContext& ctx) {
    ConvArgs a{ctx.tensor(0, "input"), ctx.tensor(1, "weight"), ctx.optional_tensor(2, "bias"), spatial_arg(ctx, 3, "stride", 1, ND),
               spatial_arg(ctx, 4, "padding", 0, ND), spatial_arg(ctx, 7, "dilation", 1, ND), ctx.int_arg(6, "groups", 1)};
    a.transposed = true;
    a.output_padding = spatial_arg(ctx, 5, "output_padding", 0, ND);
    lower_conv(ctx, a);
  }
};

}  // namespace onednn_detail

}  // namespace kiln::kernels
