#pragma once
// Layer normalization over the trailing dims, on oneDNN's
// layer_normalization primitive (the input seen as [rows, C]); weight and
// bias as its scale and shift. Where aten.native_layer_norm's mean and rstd
// are read, the primitive's training form writes each row's mean and
// variance, and a loop turns the variance into 1 / sqrt(var + eps).
#include <algorithm>
#include <cmath>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace onednn_detail {

// Per-row statistics, shaped as PyTorch gives them: the input's leading dims, then 1s.
struct LayerNormStats {
  runtime::ValueId mean = 0, rstd = 0;
};

// Returns the normalized tensor; `normalized` are the trailing dims' sizes.
// With `stats`, also the rows' mean and rstd.
inline runtime::ValueId lower_layer_norm(runtime::LowerContext& ctx, runtime::ValueId in,
                                         const std::vector<std::int64_t>& normalized, std::optional<runtime::ValueId> weight,
                                         std::optional<runtime::ValueId> bias, double eps, LayerNormStats* stats = nullptr) {
  const runtime::Layout l0 = ctx.layout(in);
  if (l0.dtype != DType::float32) ctx.fail("layer_norm takes float32, got " + std::string(dtype_name(l0.dtype)));
  if (normalized.empty() || normalized.size() > l0.rank()) ctx.fail("normalized_shape does not fit the input");
  std::int64_t C = 1;
  for (std::size_t k = 0; k < normalized.size(); ++k) {
    if (l0.shape[l0.rank() - normalized.size() + k] != normalized[k])
      ctx.fail("normalized_shape " + runtime::shape_str(normalized) + " does not match the input's trailing dims " +
               runtime::shape_str(l0.shape));
    C *= normalized[k];
  }
  const std::int64_t R = l0.numel() / std::max<std::int64_t>(C, 1);
  const std::vector<std::int64_t> rows_shape{R, C};
  auto flat = runtime::viewed(l0, rows_shape);
  runtime::ValueId src;
  if (flat && flat->strides[1] == 1 && (R == 1 || flat->strides[0] == C)) {
    src = ctx.view(in, *flat);
  } else {
    const auto dense = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l0.shape, l0.dtype));
    src = ctx.view(dense, runtime::Layout::contiguous({R, C}));
  }
  const auto out = ctx.buffer(runtime::Layout::contiguous({R, C}));
  const auto md = onednn::desc_of(ctx.layout(src));
  dnnl::normalization_flags flags = dnnl::normalization_flags::none;
  const runtime::Layout vec = runtime::Layout::contiguous({C});
  std::vector<onednn::PrimitiveStep::Bound> bound{{DNNL_ARG_SRC, src, md}, {DNNL_ARG_DST, out, md}};
  std::vector<runtime::ValueId> reads{src};
  auto param = [&](std::optional<runtime::ValueId> v, dnnl::normalization_flags flag, int arg, const char* what) {
    if (!v) return;
    if (ctx.layout(*v).numel() != C || ctx.layout(*v).dtype != DType::float32)
      ctx.fail(std::string(what) + " must hold " + std::to_string(C) + " float32 values");
    runtime::ValueId p = *v;
    if (!ctx.layout(p).is_contiguous()) p = shape_detail::copy_into_new(ctx, p, vec);
    p = ctx.view(p, vec);
    flags = flags | flag;
    bound.push_back({arg, p, onednn::desc_of(vec)});
    reads.push_back(p);
  };
  param(weight, dnnl::normalization_flags::use_scale, DNNL_ARG_SCALE, "weight");
  param(bias, dnnl::normalization_flags::use_shift, DNNL_ARG_SHIFT, "bias");
  dnnl::layer_normalization_forward::primitive_desc pd;
  const auto prop = stats ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  try {
    pd = dnnl::layer_normalization_forward::primitive_desc(
        dnnl::layer_normalization_forward::desc(prop, md, static_cast<float>(eps), flags), onednn::primitive_attr_for(ctx),
        onednn::engine());
  } catch (const dnnl::error& e) {
    ctx.fail(std::string("oneDNN refused the layer norm: ") + e.what());
  }
  std::vector<runtime::ValueId> writes{out};
  runtime::ValueId mean = 0, rstd = 0;
  if (stats) {
    // The variance is written where the rstd goes, and turned into it in place after.
    mean = ctx.buffer(runtime::Layout::contiguous({R}));
    rstd = ctx.buffer(runtime::Layout::contiguous({R}));
    bound.push_back({DNNL_ARG_MEAN, mean, pd.mean_desc()});
    bound.push_back({DNNL_ARG_VARIANCE, rstd, pd.variance_desc()});
    writes.push_back(mean);
    writes.push_back(rstd);
  }
  onednn::add_primitive_step(
      ctx, std::make_unique<onednn::PrimitiveStep>(dnnl::layer_normalization_forward(pd), bound, pd.scratchpad_desc()), reads,
      writes);
  if (stats) {
    const float e = static_cast<float>(eps);  // PyTorch's float arithmetic for float32
    ctx.add_step(runtime::make_step([rstd, R, e](runtime::Frame& f) {
                   float* v = f.data_as<float>(rstd);
                   for (std::int64_t i = 0; i < R; ++i) v[i] = 1.0f / std::sqrt(std::max(v[i], 0.0f) + e);
                 }),
                 {rstd}, {rstd});
    runtime::Shape stat_shape(l0.shape.begin(), l0.shape.end() - static_cast<std::ptrdiff_t>(normalized.size()));
    stat_shape.resize(l0.rank(), 1);
    stats->mean = ctx.view(mean, runtime::Layout::contiguous(stat_shape));
    stats->rstd = ctx.view(rstd, runtime::Layout::contiguous(stat_shape));
  }
  return ctx.view(out, runtime::Layout::contiguous(l0.shape));
}

// F.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5), aten.layer_norm likewise.
struct LayerNorm {
  static void lower(runtime::LowerContext& ctx) {
    ctx.set_result(lower_layer_norm(ctx, ctx.tensor(0, "input"), ctx.ints_arg(1, "normalized_shape"),
                                    ctx.optional_tensor(2, "weight"), ctx.optional_tensor(3, "bias"), ctx.scalar_arg(4, "eps", 1e-5)));
  }
};
// aten.native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd); the
// statistics are computed only where something reads them.
struct NativeLayerNorm {
  static void lower(runtime::LowerContext& ctx) {
    LayerNormStats stats;
    const bool read = !onednn::only_first_result_read(ctx.node());
    const auto out = lower_layer_norm(ctx, ctx.tensor(0, "input"), ctx.ints_arg(1, "normalized_shape"),
                                      ctx.optional_tensor(2, "weight"), ctx.optional_tensor(3, "bias"), ctx.scalar_arg(4, "eps"),
                                      read ? &stats : nullptr);
    if (read)
      ctx.set_result(runtime::Lowered::tuple(
          {runtime::Lowered::tensor(out), runtime::Lowered::tensor(stats.mean), runtime::Lowered::tensor(stats.rstd)}));
    else
      ctx.set_result(runtime::Lowered::tuple({runtime::Lowered::tensor(out), runtime::Lowered{}, runtime::Lowered{}}));
  }
};

}  // namespace onednn_detail

}  // namespace kiln::kernels
