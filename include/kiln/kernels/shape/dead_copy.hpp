#pragma once
// aten.copy_(self, src) as torch 1.13's instance norm writes its running
// statistics back at aten level, even in eval: `self` an alias of weight W,
// `src` the mean over dim 0 of W repeated (view(repeat(W))), that is W's own
// values (to rounding). Kiln's weights are constants, so that write is no
// step. A copy_ into a buffer of the run is copy_in_place.hpp's; any other
// copy_ into a weight is refused.
#include <string>

#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels::shape_detail {

struct DeadWeightCopy {
  static const Node* input_of(const Node* n, std::string_view target) {
    if (!n || n->op() != OpKind::call_function || n->target_name() != target || n->args().empty()) return nullptr;
    return n->arg(0).node();
  }

  static void lower(runtime::LowerContext& ctx) {
    const Node& self = ctx.node();
    const auto dst = ctx.tensor(0, "self");
    ctx.tensor(1, "src");
    const std::string unsupported = "copy_ is supported only as instance norm's write of a weight's own values back into it";
    if (self.num_users() != 0) ctx.fail(unsupported + " (its result is read)");
    const Node* w = input_of(self.arg(0).node(), "aten.alias.default");
    if (!w || w->op() != OpKind::get_attr) ctx.fail(unsupported + " (its destination is not an alias of a weight)");
    const Node* src = input_of(input_of(input_of(self.arg(1).node(), "aten.mean.dim"), "aten.view.default"), "aten.repeat.default");
    if (!src || src->op() != OpKind::get_attr || src->target_name() != w->target_name())
      ctx.fail(unsupported + " (its source is not mean(view(repeat(" + std::string(w->target_name()) + "))))");
    ctx.set_result(ctx.view(dst, ctx.layout(dst)));
  }
};

}  // namespace kiln::kernels::shape_detail
