#pragma once
// stable_topological_sort(): Inductor's stable sort. Nodes keep their relative
// order except where a node comes before one of its inputs, in which case it is
// moved to just after the last of them. An already sorted graph is left exactly
// as it is (no node moves, no order key changes).
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln {

// Returns the number of nodes moved. Throws GraphError on a dependency cycle.
inline std::size_t stable_topological_sort(Graph& g) {
  // Nodes before the first one that comes before an input are placed where
  // they are and wait on nothing: the algorithm starts at that node, and
  // this walk marks them ready (scratch kReady; a list walk of a large graph
  // misses the cache at every node, so it is not walked twice). An already
  // sorted graph is answered by this walk alone (order keys).
  constexpr std::uint32_t kReady = 0xFFFFFFFF, kNone = 0xFFFFFFFF;
  Node* first_unsorted = nullptr;
  std::size_t sorted_prefix = 0;
  for (Node* n : g.nodes()) {
    n->scratch() = kReady;
    if (Node* next = n->next()) detail::prefetch(&next->all_input_nodes());
    for (const Node* in : n->all_input_nodes())
      if (!in->is_before(*n)) {
        first_unsorted = n;
        break;
      }
    if (first_unsorted) break;
    ++sorted_prefix;
  }
  if (!first_unsorted) return 0;

  // Per-node state lives in flat tables indexed by each node's position past
  // the prefix; a prefix node is ready (its scratch is kReady).
  std::vector<Node*> order;
  order.reserve(g.size() - sorted_prefix);
  for (Node* n = first_unsorted; n; n = n->next()) {
    n->scratch() = static_cast<std::uint32_t>(order.size());
    order.push_back(n);
  }
  std::vector<char> ready(order.size(), 0);
  // The nodes waiting on each node, as singly linked lists through `next_waiting`
  // (newest first, so pushing a list in its order pops the oldest first).
  std::vector<std::uint32_t> first_waiting(order.size(), kNone), next_waiting(order.size(), kNone);

  std::vector<std::uint32_t> pending;  // a stack: the next node to look at is at the back
  pending.reserve(order.size());
  for (std::size_t i = order.size(); i-- > 0;) pending.push_back(static_cast<std::uint32_t>(i));

  std::size_t moved = 0;
  std::size_t ready_count = 0;
  Node* cursor = first_unsorted->prev();
  while (!pending.empty()) {
    const std::uint32_t i = pending.back();
    pending.pop_back();
    Node* node = order[i];
    // The nodes looked at next are mostly those further down the stack:
    // ask for their arguments ahead (the nodes are all over memory).
    if (pending.size() >= 8) detail::prefetch(&order[pending[pending.size() - 8]]->args());
    // Inductor waits on the *last* argument (args, then kwargs, duplicates
    // included) that is not ready yet, so a sorted graph re-checks nothing.
    std::int64_t last_unready = -1;
    auto visit = [&](Node* in) {
      const std::uint32_t k = in->scratch();
      if (k != kReady && !ready[k]) last_unready = k;
    };
    for (const auto& a : node->args()) for_each_node(a, visit);
    for (const auto& [k, a] : node->kwargs()) for_each_node(a, visit);
    if (last_unready >= 0) {
      next_waiting[i] = first_waiting[last_unready];
      first_waiting[last_unready] = i;
      continue;
    }
    ready[i] = 1;
    ++ready_count;
    if (cursor && cursor->next() != node) {  // (Inductor: the first node placed stays where it is)
      g.move_before(cursor->next(), node);
      ++moved;
    }
    cursor = node;
    for (std::uint32_t w = std::exchange(first_waiting[i], kNone); w != kNone; w = next_waiting[w]) pending.push_back(w);
  }
  if (ready_count != order.size()) {
    for (std::size_t i = 0; i < order.size(); ++i)
      if (!ready[i]) throw GraphError("stable_topological_sort: dependency cycle through node " + order[i]->name());
  }
  return moved;
}

}  // namespace kiln
