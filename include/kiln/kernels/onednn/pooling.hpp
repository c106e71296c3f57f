#pragma once
// 1-, 2- and 3-d max and average pooling, and adaptive average and max
// pooling where the output size divides the input's, on oneDNN's pooling_v2
// primitive; the result keeps the input's dim order (channels-last stays so).
// Adaptive sizes that do not divide, max pooling whose indices are read and
// average pooling with a divisor_override run detail/window_pool.hpp's loop
// instead.
#include "kiln/kernels/detail/window_pool.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace onednn_detail {

struct PoolArgs {
  runtime::ValueId input;
  std::vector<std::int64_t> kernel, stride, padding, dilation;  // one per spatial dim
  bool ceil_mode = false;
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  bool int8 = false;  // a uint8/int8 input (quantized max pooling) instead of float32
  std::size_t nd() const { return kernel.size(); }
};

// One value for every spatial dim, or one per dim.
inline std::vector<std::int64_t> per_dim(const runtime::LowerContext& ctx, std::vector<std::int64_t> v, const char* what,
                                         std::size_t nd) {
  if (v.size() == 1) v.resize(nd, v[0]);
  if (v.size() != nd)
    ctx.fail(std::string(what) + " must have 1" + (nd > 1 ? " or " + std::to_string(nd) : std::string()) + " values for " +
             std::to_string(nd) + "-d pooling");
  return v;
}

// The pooled size along spatial dim `k` of the input `l`.
inline std::int64_t pooled_size(const runtime::LowerContext& ctx, const runtime::Layout& l, const PoolArgs& a, std::size_t k) {
  if (a.kernel[k] < 1 || a.stride[k] < 1 || a.dilation[k] < 1 || a.padding[k] < 0)
    ctx.fail("kernel_size, stride and dilation must be positive and padding not negative, got kernel_size " +
             std::to_string(a.kernel[k]) + ", stride " + std::to_string(a.stride[k]) + ", dilation " +
             std::to_string(a.dilation[k]) + ", padding " + std::to_string(a.padding[k]));
  const std::int64_t n = l.shape[2 + k], eff = a.dilation[k] * (a.kernel[k] - 1) + 1;
  if (a.padding[k] * 2 > a.kernel[k]) ctx.fail("padding must be at most half the kernel size");
  const std::int64_t span = n + 2 * a.padding[k] - eff;
  if (span < 0) ctx.fail("the kernel is larger than the padded input " + runtime::shape_str(l.shape));
  std::int64_t o = (a.ceil_mode ? (span + a.stride[k] - 1) / a.stride[k] : span / a.stride[k]) + 1;
  // PyTorch: the last window must start inside the input or its left padding.
  if (a.ceil_mode && (o - 1) * a.stride[k] >= n + a.padding[k]) --o;
  return o;
}

inline void check_pool_input(const runtime::LowerContext& ctx, const runtime::Layout& l, std::size_t nd, bool int8 = false) {
  const bool dtype_ok = int8 ? (l.dtype == DType::uint8 || l.dtype == DType::int8) : l.dtype == DType::float32;
  if (l.rank() != nd + 2 || !dtype_ok)
    ctx.fail(std::to_string(nd) + "-d pooling takes a " + std::to_string(nd + 2) + "-d " + (int8 ? "uint8 or int8" : "float32") +
             " input, got " + runtime::shape_str(l.shape) + " " + std::string(dtype_name(l.dtype)));
}

inline runtime::ValueId lower_pool(runtime::LowerContext& ctx, PoolArgs a) {
  const std::size_t nd = a.nd();
  runtime::ValueId in = a.input;
  const runtime::Layout l0 = ctx.layout(in);
  check_pool_input(ctx, l0, nd, a.int8);
  if (runtime::dense_like(l0, l0.dtype) != l0) in = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l0.shape, l0.dtype));
  const runtime::Layout& l = ctx.layout(in);
  runtime::Shape out_shape{l.shape[0], l.shape[1]};
  dnnl::memory::dims strides, kernel, dilation, pad_l, pad_r;
  for (std::size_t k = 0; k < nd; ++k) {
    const std::int64_t n = l.shape[2 + k], eff = a.dilation[k] * (a.kernel[k] - 1) + 1;
    const std::int64_t o = pooled_size(ctx, l, a, k);
    out_shape.push_back(o);
    strides.push_back(a.stride[k]);
    kernel.push_back(a.kernel[k]);
    dilation.push_back(a.dilation[k] - 1);  // oneDNN counts the gaps
    pad_l.push_back(a.padding[k]);
    pad_r.push_back((o - 1) * a.stride[k] + eff - n - a.padding[k]);
  }
  const auto out = ctx.buffer(runtime::dense_in_order_of(l, out_shape, l.dtype));
  const auto src_md = onednn::desc_of(l), dst_md = onednn::desc_of(ctx.layout(out));
  dnnl::pooling_v2_forward::primitive_desc pd;
  try {
    pd = dnnl::pooling_v2_forward::primitive_desc(
        dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, a.alg, src_md, dst_md, strides, kernel, dilation,
                                       pad_l, pad_r),
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

// (input, kernel_size, stride=None/[] (the kernel's), padding=0, ...): what every pooling starts with.
inline PoolArgs window_args(const runtime::LowerContext& ctx, std::size_t nd) {
  PoolArgs a;
  a.input = ctx.tensor(0, "input");
  a.kernel = per_dim(ctx, ctx.ints_arg(1, "kernel_size"), "kernel_size", nd);
  auto stride = ctx.ints_arg(2, "stride", std::vector<std::int64_t>{});
  a.stride = stride.empty() ? a.kernel : per_dim(ctx, stride, "stride", nd);
  a.padding = per_dim(ctx, ctx.ints_arg(3, "padding", std::vector<std::int64_t>{0}), "padding", nd);
  a.dilation.assign(nd, 1);
  return a;
}

// (result, indices) of a tuple-valued pooling; indices empty where nobody reads them.
inline runtime::Lowered pooled_pair(runtime::ValueId out, std::optional<runtime::ValueId> indices) {
  return runtime::Lowered::tuple({runtime::Lowered::tensor(out), indices ? runtime::Lowered::tensor(*indices) : runtime::Lowered{}});
}

// (input, kernel_size, stride=None/[], padding=0, dilation=1, ceil_mode=False[, return_indices=False]):
// F.max_poolNd and aten's forms; Tuple: always (result, indices), else as return_indices says.
template <std::size_t ND, bool Tuple>
struct MaxPool {
  static void lower(runtime::LowerContext& ctx) {
    PoolArgs a = window_args(ctx, ND);
    a.dilation = per_dim(ctx, ctx.ints_arg(4, "dilation", std::vector<std::int64_t>{1}), "dilation", ND);
    a.ceil_mode = ctx.bool_arg(5, "ceil_mode", false);
    const bool tuple = Tuple || ctx.bool_arg(6, "return_indices", false);
    if (tuple && !onednn::only_first_result_read(ctx.node())) {
      // The indices are read: the loop, which gives them as PyTorch does.
      const runtime::Layout& l = ctx.layout(a.input);
      check_pool_input(ctx, l, ND);
      std::vector<detail::WindowAxis> axes;
      for (std::size_t k = 0; k < ND; ++k)
        axes.push_back(detail::max_pool_axis(l.shape[2 + k], pooled_size(ctx, l, a, k), a.kernel[k], a.stride[k], a.padding[k],
                                             a.dilation[k]));
      const auto [out, indices] = detail::lower_window_pool(ctx, a.input, std::move(axes), detail::WindowReduce::max, true);
      ctx.set_result(pooled_pair(out, indices));
      return;
    }
    const auto out = lower_pool(ctx, a);
    if (tuple) ctx.set_result(pooled_pair(out, std::nullopt));
    else ctx.set_result(out);
  }
};
// (input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None);
// 1-d pooling has no divisor_override.
template <std::size_t ND>
struct AvgPool {
  static void lower(runtime::LowerContext& ctx) {
    PoolArgs a = window_args(ctx, ND);
    a.ceil_mode = ctx.bool_arg(4, "ceil_mode", false);
    a.alg = ctx.bool_arg(5, "count_include_pad", true) ? dnnl::algorithm::pooling_avg_include_padding
                                                        : dnnl::algorithm::pooling_avg_exclude_padding;
    if (ND > 1 && ctx.has(6, "divisor_override")) {
      // Not a oneDNN algorithm: the loop, dividing every window's sum by it.
      const std::int64_t d = ctx.int_arg(6, "divisor_override");
      if (d == 0) ctx.fail("divisor_override must not be zero");
      const runtime::Layout& l = ctx.layout(a.input);
      check_pool_input(ctx, l, ND);
      const bool include_pad = a.alg == dnnl::algorithm::pooling_avg_include_padding;
      std::vector<detail::WindowAxis> axes;
      for (std::size_t k = 0; k < ND; ++k)
        axes.push_back(
            detail::avg_pool_axis(l.shape[2 + k], pooled_size(ctx, l, a, k), a.kernel[k], a.stride[k], a.padding[k], include_pad));
      ctx.set_result(
          detail::lower_window_pool(ctx, a.input, std::move(axes), detail::WindowReduce::mean, false, static_cast<double>(d)).first);
      return;
    }
    ctx.set_result(lower_pool(ctx, a));
  }
};
// The output_size of an adaptive pooling of `l`: one int, or one per spatial dim (None keeps the input's size).
inline std::vector<std::int64_t> adaptive_output_size(const runtime::LowerContext& ctx, const runtime::Layout& l, std::size_t nd) {
  const Arg os = ctx.value(1, "output_size");
  std::vector<std::int64_t> out;
  if (const auto* i = os.get_if<std::int64_t>()) out.assign(nd, *i);
  else if (const ArgList* list = os.list()) {
    for (std::size_t k = 0; k < list->size() && k < nd; ++k) {
      const Arg& x = (*list)[k];
      out.push_back(x.is_none() ? l.shape[2 + k] : x.get_if<std::int64_t>() ? *x.get_if<std::int64_t>() : -1);
    }
    if (list->size() == 1 && nd > 1) out.assign(nd, out[0]);
    else if (list->size() != nd) out.clear();
  }
  bool ok = out.size() == nd;
  for (std::int64_t o : out) ok = ok && o > 0;
  if (!ok) ctx.fail("output_size must be one or " + std::to_string(nd) + " positive ints");
  return out;
}

// adaptive_{avg,max}_poolNd(input, output_size): a oneDNN pooling where the sizes
// divide (and no index is read), else the loop over PyTorch's adaptive windows.
// Tuple: the result is (result, indices) (aten's max form, or return_indices).
inline void lower_adaptive_pool(runtime::LowerContext& ctx, std::size_t nd, detail::WindowReduce reduce, bool tuple) {
  PoolArgs a;
  a.input = ctx.tensor(0, "input");
  const auto& l = ctx.layout(a.input);
  if (l.rank() != nd + 2)
    ctx.fail(std::to_string(nd) + "-d adaptive pooling takes a " + std::to_string(nd + 2) + "-d input here, got " +
             runtime::shape_str(l.shape));
  const std::vector<std::int64_t> out = adaptive_output_size(ctx, l, nd);
  const bool indices_read = tuple && !onednn::only_first_result_read(ctx.node());
  bool divides = true;
  for (std::size_t k = 0; k < nd; ++k) divides = divides && l.shape[2 + k] % out[k] == 0;
  if (!divides || indices_read) {
    std::vector<detail::WindowAxis> axes;
    for (std::size_t k = 0; k < nd; ++k) axes.push_back(detail::adaptive_axis(l.shape[2 + k], out[k]));
    auto [result, indices] = detail::lower_window_pool(ctx, a.input, std::move(axes), reduce, indices_read);
    if (tuple) ctx.set_result(pooled_pair(result, indices));
    else ctx.set_result(result);
    return;
  }
  for (std::size_t k = 0; k < nd; ++k) a.kernel.push_back(l.shape[2 + k] / out[k]);
  a.stride = a.kernel;
  a.padding.assign(nd, 0);
  a.dilation.assign(nd, 1);
  a.alg = reduce == detail::WindowReduce::max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  const auto result = lower_pool(ctx, a);
  if (tuple) ctx.set_result(pooled_pair(result, std::nullopt));
  else ctx.set_result(result);
}

template <std::size_t ND>
struct AdaptiveAvgPool {
  static void lower(runtime::LowerContext& ctx) { lower_adaptive_pool(ctx, ND, detail::WindowReduce::mean, false); }
};
// F.adaptive_max_poolNd(input, output_size, return_indices=False); Tuple: always (result, indices).
template <std::size_t ND, bool Tuple>
struct AdaptiveMaxPool {
  static void lower(runtime::LowerContext& ctx) {
    lower_adaptive_pool(ctx, ND, detail::WindowReduce::max, Tuple || ctx.bool_arg(2, "return_indices", false));
  }
};

}  // namespace onednn_detail

}  // namespace kiln::kernels
