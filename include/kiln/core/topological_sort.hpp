#pragma once
// stable_topological_sort(): Inductor's stable sort. Nodes keep their relative
// order except where a node comes before one of its inputs, in which case it is
// moved to just after the last of them. An already sorted graph is left exactly
// as it is (no node moves, no order key changes).
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln {

// Returns the number of nodes moved. Throws GraphError on a dependency cycle.
inline std::size_t stable_topological_sort(Graph& g) {
  // Fast path: when every input already comes before its user, Inductor's
  // algorithm would move nothing; order keys answer that in one walk.
  bool sorted = true;
  for (const Node* n : g.nodes()) {
    for (const Node* in : n->all_input_nodes())
      if (!in->is_before(*n)) {
        sorted = false;
        break;
      }
    if (!sorted) break;
  }
  if (sorted) return 0;

  // Per-node state lives in flat tables indexed by each node's position.
  std::vector<Node*> order = g.node_list();
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i]->scratch() = i;
  std::vector<char> ready(order.size(), 0);
  std::vector<std::vector<std::uint32_t>> waiting(order.size());

  std::vector<std::uint32_t> pending;  // a stack: the next node to look at is at the back
  pending.reserve(order.size());
  for (std::size_t i = order.size(); i-- > 0;) pending.push_back(static_cast<std::uint32_t>(i));

  std::size_t moved = 0;
  std::size_t ready_count = 0;
  Node* cursor = nullptr;
  while (!pending.empty()) {
    const std::uint32_t i = pending.back();
    pending.pop_back();
    Node* node = order[i];
    // Inductor waits on the *last* argument (args, then kwargs, duplicates
    // included) that is not ready yet, so a sorted graph re-checks nothing.
    std::int64_t last_unready = -1;
    auto visit = [&](Node* in) {
      if (!ready[in->scratch()]) last_unready = in->scratch();
    };
    for (const auto& a : node->args()) for_each_node(a, visit);
    for (const auto& [k, a] : node->kwargs()) for_each_node(a, visit);
    if (last_unready >= 0) {
      waiting[last_unready].push_back(i);
      continue;
    }
    ready[i] = 1;
    ++ready_count;
    if (cursor && cursor->next() != node) {
      g.move_before(cursor->next(), node);
      ++moved;
    }
    cursor = node;
    auto& w = waiting[i];
    for (auto it = w.rbegin(); it != w.rend(); ++it) pending.push_back(*it);
    w.clear();
    w.shrink_to_fit();
  }
  if (ready_count != order.size()) {
    for (std::size_t i = 0; i < order.size(); ++i)
      if (!ready[i]) throw GraphError("stable_topological_sort: dependency cycle through node " + order[i]->name());
  }
  return moved;
}

}  // namespace kiln
