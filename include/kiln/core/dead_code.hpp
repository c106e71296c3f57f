#pragma once
// eliminate_dead_code(): erases nodes whose value nobody uses, last to first, so
// a chain of dead nodes goes in one sweep. Impure nodes (placeholders, output,
// mutating ops, collectives and other side-effecting ops) are always kept.
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln {

// Returns the number of nodes erased.
inline std::size_t eliminate_dead_code(Graph& g) {
  std::size_t erased = 0;
  for (Node* n = g.back(); n;) {
    Node* prev = n->prev();
    if (n->num_users() == 0 && !n->is_impure()) {
      g.erase_node(n);
      ++erased;
    }
    n = prev;
  }
  return erased;
}

}  // namespace kiln
