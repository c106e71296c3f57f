#pragma once
// remove_identity (Inductor's pre_grad.py, run by fuse_fx under freezing):
// every call of an nn.Identity module, found by class in Graph::modules(),
// becomes its input. Inductor counts nothing here; kiln counts each removed
// call as `remove_identity`.
#include <cstddef>

#include "kiln/core/graph.hpp"
#include "kiln/core/module_table.hpp"

namespace kiln::pre_grad {

inline constexpr ModuleClass identity_module = module_class("torch.nn.modules.linear.Identity");

// Returns how many calls were removed. A call that does not take exactly one
// positional node argument (Identity's forward(input)) is left.
inline std::size_t remove_identity(Graph& g) {
  std::size_t removed = 0;
  for (Node* n : g.find_nodes(OpKind::call_module)) {
    const ModuleInfo* m = g.modules().find(n->target_name());
    if (!m || m->class_hash() != identity_module.hash) continue;
    Node* input = nullptr;
    if (n->args().size() == 1 && n->kwargs().empty()) input = n->args()[0].node();
    else if (n->args().empty() && n->kwargs().size() == 1 && n->kwargs().find("input"))
      input = n->kwargs().find("input")->node();
    if (!input) continue;
    n->replace_all_uses_with(input);
    g.erase_node(n);
    ++removed;
  }
  return removed;
}

}  // namespace kiln::pre_grad
