#pragma once
// Inference batch-norm on oneDNN's batch_normalization primitive with the
// running statistics (use_global_stats), where no convolution before it took
// it in. NCHW-shaped input of any dense layout (channels-last stays so). A
// relu that alone reads it runs inside the primitive (DenseNet's
// batch-norm, relu, convolution). Training mode (batch statistics) runs
// group_norm.hpp's loop.
#include "kiln/kernels/group_norm.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/onednn/epilogue.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace onednn_detail {

struct BatchNormArgs {
  runtime::ValueId input, mean, var;
  std::optional<runtime::ValueId> weight, bias;
  double eps = 1e-5;
};

// The relu that alone reads the batch-norm being lowered (through its
// getitem(0) in aten's tuple forms), with that getitem; nothing when there is none.
struct ReluAfter {
  const Node* relu = nullptr;
  const Node* getitem = nullptr;
};
inline ReluAfter relu_after(const runtime::LowerContext& ctx) {
  ReluAfter r;
  if (!ctx.may_fuse_users()) return r;
  const Node* next = onednn::detail::only_user(&ctx.node());
  if (next && onednn::detail::target_is(next, {"operator.getitem"})) {
    if (onednn::item_index(*next) != 0) return r;
    r.getitem = next;
    next = onednn::detail::only_user(next);
  }
  const auto op = next ? onednn::detail::eltwise_of(*next) : std::nullopt;
  if (!op || op->alg != dnnl::algorithm::eltwise_relu || op->alpha != 0.0f) return {};
  r.relu = next;
  return r;
}

inline runtime::ValueId lower_batch_norm(runtime::LowerContext& ctx, const BatchNormArgs& a) {
  runtime::ValueId in = a.input;
  const runtime::Layout l0 = ctx.layout(in);
  if (l0.dtype != DType::float32) ctx.fail("batch_norm takes float32");
  if (l0.rank() < 2) ctx.fail("batch_norm needs an input with a channel dim, got " + runtime::shape_str(l0.shape));
  const std::int64_t C = l0.shape[1];
  if (runtime::dense_like(l0, l0.dtype) != l0) in = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l0.shape));
  const runtime::Layout& l = ctx.layout(in);
  const auto out = ctx.buffer(l);
  const auto md = onednn::desc_of(l);
  const runtime::Layout vec = runtime::Layout::contiguous({C});
  std::vector<onednn::PrimitiveStep::Bound> bound{{DNNL_ARG_SRC, in, md}, {DNNL_ARG_DST, out, md}};
  std::vector<runtime::ValueId> reads{in};
  dnnl::normalization_flags flags = dnnl::normalization_flags::use_global_stats;
  auto param = [&](runtime::ValueId v, int arg, const char* what) {
    if (ctx.layout(v).numel() != C || ctx.layout(v).dtype != DType::float32)
      ctx.fail(std::string(what) + " must hold " + std::to_string(C) + " float32 values");
    if (!ctx.layout(v).is_contiguous()) v = shape_detail::copy_into_new(ctx, v, vec);
    v = ctx.view(v, vec);
    bound.push_back({arg, v, onednn::desc_of(vec)});
    reads.push_back(v);
  };
  param(a.mean, DNNL_ARG_MEAN, "running_mean");
  param(a.var, DNNL_ARG_VARIANCE, "running_var");
  if (a.weight) flags = flags | dnnl::normalization_flags::use_scale, param(*a.weight, DNNL_ARG_SCALE, "weight");
  if (a.bias) flags = flags | dnnl::normalization_flags::use_shift, param(*a.bias, DNNL_ARG_SHIFT, "bias");
  const ReluAfter relu = relu_after(ctx);
  if (relu.relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  dnnl::batch_normalization_forward::primitive_desc pd;
  try {
    pd = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, md, static_cast<float>(a.eps), flags),
        onednn::primitive_attr_for(ctx), onednn::engine());
  } catch (const dnnl::error& e) {
    ctx.fail(std::string("oneDNN refused the batch norm: ") + e.what());
  }
  onednn::add_primitive_step(
      ctx, std::make_unique<onednn::PrimitiveStep>(dnnl::batch_normalization_forward(pd), bound, pd.scratchpad_desc()), reads, {out});
  for (const Node* n : {relu.getitem, relu.relu})
    if (n) ctx.absorb(*n, runtime::Lowered::tensor(out));
  return out;
}

// Training mode normalizes by the batch's own statistics (norm_detail); running
// statistics given with it would be updated in place, which inference does not do.
inline bool batch_statistics(const runtime::LowerContext& ctx, std::size_t training_pos, std::size_t mean_pos,
                             std::string_view mean_kw, std::size_t var_pos, std::string_view var_kw) {
  if (!ctx.bool_arg(training_pos, "training", false)) return false;
  if (ctx.optional_tensor(mean_pos, mean_kw) || ctx.optional_tensor(var_pos, var_kw))
    ctx.fail("batch_norm in training mode with running statistics (which it would update) is not supported (kiln runs inference)");
  return true;
}
// The tuple of an aten batch-norm: its other results must be unread.
inline void tuple_result(runtime::LowerContext& ctx, runtime::ValueId out) {
  if (!onednn::only_first_result_read(ctx.node())) ctx.fail("its saved statistics are read, which inference does not give");
  ctx.set_result(runtime::Lowered::tuple({runtime::Lowered::tensor(out), runtime::Lowered{}, runtime::Lowered{}}));
}

// F.batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5).
struct FBatchNorm {
  static void lower(runtime::LowerContext& ctx) {
    if (batch_statistics(ctx, 5, 1, "running_mean", 2, "running_var")) {
      ctx.set_result(norm_detail::lower_norm(ctx, ctx.tensor(0, "input"), 0, ctx.optional_tensor(3, "weight"),
                                             ctx.optional_tensor(4, "bias"), ctx.scalar_arg(7, "eps", 1e-5))
                         .out);
      return;
    }
    ctx.set_result(lower_batch_norm(ctx, {ctx.tensor(0, "input"), ctx.tensor(1, "running_mean"), ctx.tensor(2, "running_var"),
                                          ctx.optional_tensor(3, "weight"), ctx.optional_tensor(4, "bias"), ctx.scalar_arg(7, "eps", 1e-5)}));
  }
};
// aten.batch_norm / native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, ...).
template <bool Tuple>
struct AtenBatchNorm {
  static void lower(runtime::LowerContext& ctx) {
    if (batch_statistics(ctx, 5, 3, "running_mean", 4, "running_var")) {
      const auto r = norm_detail::lower_norm(ctx, ctx.tensor(0, "input"), 0, ctx.optional_tensor(1, "weight"),
                                             ctx.optional_tensor(2, "bias"), ctx.scalar_arg(7, "eps", 1e-5));
      if (Tuple) norm_detail::set_tuple(ctx, r);
      else ctx.set_result(r.out);
      return;
    }
    const auto out = lower_batch_norm(ctx, {ctx.tensor(0, "input"), ctx.tensor(3, "running_mean"), ctx.tensor(4, "running_var"),
                                            ctx.optional_tensor(1, "weight"), ctx.optional_tensor(2, "bias"), ctx.scalar_arg(7, "eps", 1e-5)});
    if (Tuple) tuple_result(ctx, out);
    else ctx.set_result(out);
  }
};
// aten._native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps).
struct LegitNoTraining {
  static void lower(runtime::LowerContext& ctx) {
    tuple_result(ctx, lower_batch_norm(ctx, {ctx.tensor(0, "input"), ctx.tensor(3, "running_mean"), ctx.tensor(4, "running_var"),
                                             ctx.optional_tensor(1, "weight"), ctx.optional_tensor(2, "bias"), ctx.scalar_arg(6, "eps", 1e-5)}));
  }
};

// aten._native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps).
struct Legit {
  static void lower(runtime::LowerContext& ctx) {
    if (batch_statistics(ctx, 5, 3, "running_mean", 4, "running_var")) {
      norm_detail::set_tuple(ctx, norm_detail::lower_norm(ctx, ctx.tensor(0, "input"), 0, ctx.optional_tensor(1, "weight"),
                                                          ctx.optional_tensor(2, "bias"), ctx.scalar_arg(7, "eps")));
      return;
    }
    tuple_result(ctx, lower_batch_norm(ctx, {ctx.tensor(0, "input"), ctx.tensor(3, "running_mean"), ctx.tensor(4, "running_var"),
                                             ctx.optional_tensor(1, "weight"), ctx.optional_tensor(2, "bias"), ctx.scalar_arg(7, "eps")}));
  }
};
// aten._native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps): batch statistics.
struct LegitNoStats {
  static void lower(runtime::LowerContext& ctx) {
    if (!ctx.bool_arg(3, "training")) ctx.fail("batch_norm without running statistics needs training=True");
    norm_detail::set_tuple(ctx, norm_detail::lower_norm(ctx, ctx.tensor(0, "input"), 0, ctx.optional_tensor(1, "weight"),
                                                        ctx.optional_tensor(2, "bias"), ctx.scalar_arg(5, "eps")));
  }
};

}  // namespace onednn_detail

}  // namespace kiln::kernels
