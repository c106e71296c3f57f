#pragma once
// remove_assert_ops, Inductor 2.11's post-grad step of that name: erases every
// aten._assert_tensor_metadata.default. torch.export writes one for each
// `.to(dtype)` it functionalizes; it checks what kiln's lowering checks anyway
// (kiln's kernel for it does so while compiling), and as a second user of the
// tensor it reads it would stop patterns that want that tensor read once (the
// woq forms' permuted weight). Counter: assert_ops_removed.
#include <cstddef>

#include "kiln/core/graph.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pass_registry.hpp"

namespace kiln {

inline std::size_t remove_assert_ops(Graph& g, Counters* counters = nullptr) {
  std::size_t removed = 0;
  for (Node* n : g.find_nodes(OpKind::call_function, OpRef("aten._assert_tensor_metadata.default"))) {
    if (n->num_users() != 0) continue;  // returns None; a reader of that None keeps it
    g.erase_node(n);
    ++removed;
  }
  if (counters && removed) counters->increment("assert_ops_removed", static_cast<std::int64_t>(removed));
  return removed;
}

inline void register_remove_assert_ops_pass(PassRegistry& registry) {
  registry.add(Pass{"remove_assert_ops", "erase torch.export's aten._assert_tensor_metadata checks (Inductor's post-grad step)",
                    [](Graph& g, PassContext& ctx) { return remove_assert_ops(g, &ctx.counters) > 0; }});
}

}  // namespace kiln
