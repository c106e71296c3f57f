#pragma once
// 2-d max and average pooling, and adaptive average and max pooling where the
// output size divides the input's, on oneDNN's pooling_v2 primitive; the
// result keeps the input's dim order (channels-last stays so). Adaptive sizes
// that do not divide, max pooling whose indices are read and average pooling
// with a divisor_override run detail/window_pool.hpp's loop instead.
#include "kiln/kernels/detail/window_pool.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace onednn_detail {

struct PoolArgs {
  runtime::ValueId input;
  std::vector<std::int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
};

inline std::vector<std::int64_t> two(const runtime::LowerContext& ctx, std::vector<std::int64_t> v, const char* what) {
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) ctx.fail(std::string(what) + " must have 1 or 2 values for 2-d pooling");
  return v;
}

// The pooled size along spatial dim `k` (0: H, 1: W) of the 4-d input `l`.
inline std::int64_t pooled_size(const runtime::LowerContext& ctx, const runtime::Layout& l, const PoolArgs& a, int k) {
  const std::int64_t n = l.shape[2 + k], eff = a.dilation[k] * (a.kernel[k] - 1) + 1;
  if (a.padding[k] * 2 > a.kernel[k]) ctx.fail("padding must be at most half the kernel size");
  const std::int64_t span = n + 2 * a.padding[k] - eff;
  if (span < 0) ctx.fail("the kernel is larger than the padded input " + runtime::shape_str(l.shape));
  std::int64_t o = (a.ceil_mode ? (span + a.stride[k] - 1) / a.stride[k] : span / a.stride[k]) + 1;
  // PyTorch: the last window must start inside the input or its left padding.
  if (a.ceil_mode && (o - 1) * a.stride[k] >= n + a.padding[k]) --o;
  return o;
}

inline void check_pool_input(const runtime::LowerContext& ctx, const runtime::Layout& l) {
  if (l.rank() != 4 || l.dtype != DType::float32) ctx.fail("2-d pooling takes a 4-d float32 input, got " + runtime::shape_str(l.shape));
}

inline runtime::ValueId lower_pool2d(runtime::LowerContext& ctx, PoolArgs a) {
  runtime::ValueId in = a.input;
  const runtime::Layout l0 = ctx.layout(in);
  check_pool_input(ctx, l0);
  if (runtime::dense_like(l0, l0.dtype) != l0) in = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l0.shape));
  const runtime::Layout& l = ctx.layout(in);
  runtime::Shape out_shape{l.shape[0], l.shape[1], 0, 0};
  std::vector<std::int64_t> pad_r(2);
  for (int k = 0; k < 2; ++k) {
    const std::int64_t n = l.shape[2 + k], eff = a.dilation[k] * (a.kernel[k] - 1) + 1;
    const std::int64_t o = pooled_size(ctx, l, a, k);
    out_shape[2 + k] = o;
    pad_r[k] = (o - 1) * a.stride[k] + eff - n - a.padding[k];
  }
  const auto out = ctx.buffer(runtime::dense_in_order_of(l, out_shape, l.dtype));
  const auto src_md = onednn::desc_of(l), dst_md = onednn::desc_of(ctx.layout(out));
  dnnl::pooling_v2_forward::primitive_desc pd;
  try {
    pd = dnnl::pooling_v2_forward::primitive_desc(
        dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, a.alg, src_md, dst_md,
                                       {a.stride[0], a.stride[1]}, {a.kernel[0], a.kernel[1]},
                                       {a.dilation[0] - 1, a.dilation[1] - 1}, {a.padding[0], a.padding[1]}, {pad_r[0], pad_r[1]}),
        onednn::primitive_attr_for(ctx), onednn::engine());
  } catch (const dnnl::error& e) {
    ctx.fail(std::string("oneDNN refused the pooling: ") + e.what());
  }
  onednn::add_primitive_step(ctx,
                             std::make_unique<onednn::PrimitiveStep>(
                                 dnnl::pooling_v2_forward(pd),
                                 std::vector<onednn::PrimitiveStep::Bound>{{DNNL_ARG_SRC, in, src_md}, {DNNL_ARG_DST, out, dst_md}},
                                 pd.scratchpad_desc()),
                             {in}, {out});
  return out;
}

// (input, kernel_size, stride=None/[] (the kernel's), padding=0, ...): what every 2-d pooling starts with.
inline PoolArgs window_args(const runtime::LowerContext& ctx) {
  PoolArgs a;
  a.input = ctx.tensor(0, "input");
  a.kernel = two(ctx, ctx.ints_arg(1, "kernel_size"), "kernel_size");
  auto stride = ctx.ints_arg(2, "stride", std::vector<std::int64_t>{});
  a.stride = stride.empty() ? a.kernel : two(ctx, stride, "stride");
  a.padding = two(ctx, ctx.ints_arg(3, "padding", std::vector<std::int64_t>{0}), "padding");
  a.dilation = {1, 1};
  return a;
}

// (result, indices) of a tuple-valued pooling; indices empty where nobody reads them.
inline runtime::Lowered pooled_pair(runtime::ValueId out, std::optional<runtime::ValueId> indices) {
  return runtime::Lowered::tuple({runtime::Lowered::tensor(out), indices ? runtime::Lowered::tensor(*indices) : runtime::Lowered{}});
}

// (input, kernel_size, stride=None/[], padding=0, dilation=1, ceil_mode=False[, return_indices=False]):
// F.max_pool2d and aten's forms; Tuple: always (result, indices), else as return_indices says.
template <bool Tuple>
struct MaxPool2d {
  static void lower(runtime::LowerContext& ctx) {
    PoolArgs a = window_args(ctx);
    a.dilation = two(ctx, ctx.ints_arg(4, "dilation", std::vector<std::int64_t>{1}), "dilation");
    a.ceil_mode = ctx.bool_arg(5, "ceil_mode", false);
    const bool tuple = Tuple || ctx.bool_arg(6, "return_indices", false);
    if (tuple && !onednn::only_first_result_read(ctx.node())) {
      // The indices are read: the loop, which gives them as PyTorch does.
      const runtime::Layout& l = ctx.layout(a.input);
      check_pool_input(ctx, l);
      detail::WindowAxis axes[2];
      for (int k = 0; k < 2; ++k)
        axes[k] = detail::max_pool_axis(l.shape[2 + k], pooled_size(ctx, l, a, k), a.kernel[k], a.stride[k], a.padding[k],
                                        a.dilation[k]);
      const auto [out, indices] =
          detail::lower_window_pool(ctx, a.input, std::move(axes[0]), std::move(axes[1]), detail::WindowReduce::max, true);
      ctx.set_result(pooled_pair(out, indices));
      return;
    }
    const auto out = lower_pool2d(ctx, a);
    if (tuple) ctx.set_result(pooled_pair(out, std::nullopt));
    else ctx.set_result(out);
  }
};
// (input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None).
struct AvgPool2d {
  static void lower(runtime::LowerContext& ctx) {
    PoolArgs a = window_args(ctx);
    a.ceil_mode = ctx.bool_arg(4, "ceil_mode", false);
    a.alg = ctx.bool_arg(5, "count_include_pad", true) ? dnnl::algorithm::pooling_avg_include_padding
                                                        : dnnl::algorithm::pooling_avg_exclude_padding;
    if (ctx.has(6, "divisor_override")) {
      // Not a oneDNN algorithm: the loop, dividing every window's sum by it.
      const std::int64_t d = ctx.int_arg(6, "divisor_override");
      if (d == 0) ctx.fail("divisor_override must not be zero");
      const runtime::Layout& l = ctx.layout(a.input);
      check_pool_input(ctx, l);
      const bool include_pad = a.alg == dnnl::algorithm::pooling_avg_include_padding;
      detail::WindowAxis axes[2];
      for (int k = 0; k < 2; ++k)
        axes[k] = detail::avg_pool_axis(l.shape[2 + k], pooled_size(ctx, l, a, k), a.kernel[k], a.stride[k], a.padding[k], include_pad);
      ctx.set_result(detail::lower_window_pool(ctx, a.input, std::move(axes[0]), std::move(axes[1]), detail::WindowReduce::mean,
                                               false, static_cast<double>(d))
                         .first);
      return;
    }
    ctx.set_result(lower_pool2d(ctx, a));
  }
};
// The output_size of an adaptive pooling of the 4-d `l`: one int, or two (None keeps the input's size).
inline std::vector<std::int64_t> adaptive_output_size(const runtime::LowerContext& ctx, const runtime::Layout& l) {
  const Arg os = ctx.value(1, "output_size");
  std::vector<std::int64_t> out;
  if (const auto* i = os.get_if<std::int64_t>()) out = {*i, *i};
  else if (const ArgList* list = os.list()) {
    for (std::size_t k = 0; k < list->size() && k < 2; ++k) {
      const Arg& x = (*list)[k];
      out.push_back(x.is_none() ? l.shape[2 + k] : x.get_if<std::int64_t>() ? *x.get_if<std::int64_t>() : -1);
    }
    if (list->size() != 2) out.clear();
  }
  if (out.size() != 2 || out[0] <= 0 || out[1] <= 0) ctx.fail("output_size must be one or two positive ints");
  return out;
}

// adaptive_{avg,max}_pool2d(input, output_size): a oneDNN pooling where the sizes
// divide (and no index is read), else the loop over PyTorch's adaptive windows.
// Tuple: the result is (result, indices) (aten's max form, or return_indices).
inline void lower_adaptive_pool2d(runtime::LowerContext& ctx, detail::WindowReduce reduce, bool tuple) {
  PoolArgs a;
  a.input = ctx.tensor(0, "input");
  const auto& l = ctx.layout(a.input);
  if (l.rank() != 4) ctx.fail("adaptive pooling takes a 4-d input here, got " + runtime::shape_str(l.shape));
  const std::vector<std::int64_t> out = adaptive_output_size(ctx, l);
  const bool indices_read = tuple && !onednn::only_first_result_read(ctx.node());
  const bool divides = l.shape[2] % out[0] == 0 && l.shape[3] % out[1] == 0;
  if (!divides || indices_read) {
    auto [result, indices] = detail::lower_window_pool(ctx, a.input, detail::adaptive_axis(l.shape[2], out[0]),
                                                       detail::adaptive_axis(l.shape[3], out[1]), reduce, indices_read);
    if (tuple) ctx.set_result(pooled_pair(result, indices));
    else ctx.set_result(result);
    return;
  }
  for (int k = 0; k < 2; ++k) a.kernel.push_back(l.shape[2 + k] / out[k]);
  a.stride = a.kernel;
  a.padding = {0, 0};
  a.dilation = {1, 1};
  a.alg = reduce == detail::WindowReduce::max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  const auto result = lower_pool2d(ctx, a);
  if (tuple) ctx.set_result(pooled_pair(result, std::nullopt));
  else ctx.set_result(result);
}

struct AdaptiveAvgPool2d {
  static void lower(runtime::LowerContext& ctx) { lower_adaptive_pool2d(ctx, detail::WindowReduce::mean, false); }
};
// F.adaptive_max_pool2d(input, output_size, return_indices=False); Tuple: always (result, indices).
template <bool Tuple>
struct AdaptiveMaxPool2d {
  static void lower(runtime::LowerContext& ctx) {
    lower_adaptive_pool2d(ctx, detail::WindowReduce::max, Tuple || ctx.bool_arg(2, "return_indices", false));
  }
};

}  // namespace onednn_detail

template <> struct Kernel<"torch.nn.functional.max_pool2d"> : onednn_detail::MaxPool2d<false> {};
template <> struct Kernel<"torch.max_pool2d"> : onednn_detail::MaxPool2d<false> {};
template <> struct Kernel<"aten.max_pool2d.default"> : onednn_detail::MaxPool2d<false> {};
template <> struct Kernel<"aten.max_pool2d_with_indices.default"> : onednn_detail::MaxPool2d<true> {};
template <> struct Kernel<"torch.nn.functional.max_pool2d_with_indices"> : onednn_detail::MaxPool2d<true> {};
template <> struct Kernel<"torch.nn.functional.avg_pool2d"> : onednn_detail::AvgPool2d {};
template <> struct Kernel<"aten.avg_pool2d.default"> : onednn_detail::AvgPool2d {};
template <> struct Kernel<"torch.nn.functional.adaptive_avg_pool2d"> : onednn_detail::AdaptiveAvgPool2d {};
template <> struct Kernel<"aten.adaptive_avg_pool2d.default"> : onednn_detail::AdaptiveAvgPool2d {};
template <> struct Kernel<"aten._adaptive_avg_pool2d.default"> : onednn_detail::AdaptiveAvgPool2d {};
template <> struct Kernel<"torch.nn.functional.adaptive_max_pool2d"> : onednn_detail::AdaptiveMaxPool2d<false> {};
template <> struct Kernel<"torch.nn.functional.adaptive_max_pool2d_with_indices"> : onednn_detail::AdaptiveMaxPool2d<true> {};
template <> struct Kernel<"aten.adaptive_max_pool2d.default"> : onednn_detail::AdaptiveMaxPool2d<true> {};

}  // namespace kiln::kernels
