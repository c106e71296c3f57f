#pragma once
// In-place ops (relu_, add_, F.relu(inplace=True)) are computed functionally
// into a new buffer. That is only right when nothing reads the mutated input
// after the op, so lowering refuses graphs where something does.
#include <string>

#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels::pointwise_detail {

// Fails when a node after this one reads the tensor this node writes in place (args[pos]).
inline void check_no_later_reads(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw) {
  const Arg* a = ctx.find_arg(pos, kw);
  const Node* src = a ? a->node() : nullptr;
  if (!src) return;
  for (const Node* u : src->users())
    if (u && u != &ctx.node() && ctx.node().is_before(*u))
      ctx.fail("writes in place to " + src->name() + ", which " + u->name() +
               " reads later; an in-place write read later is not supported yet");
}

}  // namespace kiln::kernels::pointwise_detail
