#pragma once
// Inductor's FSDP filters (fx_passes/fsdp.py), applied to a collective's wait:
// an all-gather of a graph input, or of a dtype convert of one (a sharded
// parameter); a reduce-scatter whose wait feeds only graph outputs, possibly
// through one dtype convert (a gradient leaving the graph).
#include <algorithm>

#include "kiln/core/node.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/passes/bucketing/collectives.hpp"

namespace kiln::bucketing {

inline bool is_convert(const Node* n) { return n && n->is_call(prims::convert_element_type); }

inline bool is_fsdp_all_gather_wait(const Node* wait) {
  const Node* ag = waited(wait);
  const Node* in = ag && !ag->args().empty() ? ag->arg(0).node() : nullptr;
  if (!in) return false;
  if (in->op() == OpKind::placeholder) return true;
  const Node* src = is_convert(in) && !in->args().empty() ? in->arg(0).node() : nullptr;
  return src && src->op() == OpKind::placeholder;
}

// True also for a node without users, as Inductor's is_graph_output.
inline bool feeds_only_outputs(const Node* n) {
  return std::all_of(n->users().begin(), n->users().end(), [](const Node* u) { return u->op() == OpKind::output; });
}

inline bool is_fsdp_reduce_scatter_wait(const Node* wait) {
  if (feeds_only_outputs(wait)) return true;
  if (wait->num_users() != 1) return false;
  const Node* user = *wait->users().begin();
  return is_convert(user) && feeds_only_outputs(user);
}

}  // namespace kiln::bucketing
