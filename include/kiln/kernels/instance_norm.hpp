#pragma once
// Instance norm: each (sample, channel) plane by its own statistics
// (group_norm.hpp's loop with a group per channel), or, where use_input_stats
// is false (a module tracking running statistics, in eval), by the running
// statistics as an inference batch norm on oneDNN.
#include <optional>
#include <string>

#include "kiln/kernels/group_norm.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/batch_norm.hpp"

namespace kiln::kernels {

namespace norm_detail {

struct InstanceNormArgs {
  runtime::ValueId input;
  std::optional<runtime::ValueId> weight, bias, running_mean, running_var;
  bool use_input_stats = true;
  double eps = 1e-5;
};

inline runtime::ValueId lower_instance_norm(runtime::LowerContext& ctx, const InstanceNormArgs& a) {
  const runtime::Layout& l = ctx.layout(a.input);
  if (l.rank() < 3) ctx.fail("instance_norm needs an input [N, C, ...] with spatial dims, got " + runtime::shape_str(l.shape));
  if (!a.use_input_stats) {
    if (!a.running_mean || !a.running_var) ctx.fail("use_input_stats=False needs running_mean and running_var");
    return onednn_detail::lower_batch_norm(ctx, {a.input, *a.running_mean, *a.running_var, a.weight, a.bias, a.eps});
  }
  // With input statistics the running ones would be updated in place (training mode).
  if (a.running_mean || a.running_var)
    ctx.fail("instance_norm with use_input_stats and running statistics (which it would update) is not supported (kiln runs inference)");
  if (l.numel() / std::max<std::int64_t>(l.shape[0] * l.shape[1], 1) <= 1)
    ctx.fail("instance_norm needs more than 1 spatial element, got input " + runtime::shape_str(l.shape));
  if (l.shape[1] == 0) ctx.fail("instance_norm of an input with no channels");
  return lower_norm(ctx, a.input, l.shape[1], a.weight, a.bias, a.eps).out;
}

// F.instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5).
struct FInstanceNorm {
  static void lower(runtime::LowerContext& ctx) {
    ctx.set_result(lower_instance_norm(
        ctx, {ctx.tensor(0, "input"), ctx.optional_tensor(3, "weight"), ctx.optional_tensor(4, "bias"),
              ctx.optional_tensor(1, "running_mean"), ctx.optional_tensor(2, "running_var"),
              ctx.bool_arg(5, "use_input_stats", true), ctx.scalar_arg(7, "eps", 1e-5)}));
  }
};
// aten.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled).
struct AtenInstanceNorm {
  static void lower(runtime::LowerContext& ctx) {
    ctx.set_result(lower_instance_norm(
        ctx, {ctx.tensor(0, "input"), ctx.optional_tensor(1, "weight"), ctx.optional_tensor(2, "bias"),
              ctx.optional_tensor(3, "running_mean"), ctx.optional_tensor(4, "running_var"),
              ctx.bool_arg(5, "use_input_stats"), ctx.scalar_arg(7, "eps")}));
  }
};

}  // namespace norm_detail

}  // namespace kiln::kernels
