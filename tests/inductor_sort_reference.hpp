#pragma once
// Inductor's stable_topological_sort as written in pattern_matcher.py, run on
// a copy of a graph's order (the graph is not changed): the order it leaves.
// A plain transcription, quadratic and map-based, for the sort tests to
// compare kiln's sorts with.
#include <algorithm>
#include <map>
#include <vector>

#include "kiln/core.hpp"

namespace kiln::testing {

inline std::vector<Node*> inductor_sort_order(const Graph& g) {
  std::vector<Node*> placed = g.node_list();  // the list as it is rearranged
  std::vector<Node*> pending(placed.rbegin(), placed.rend());
  std::map<Node*, bool> ready;
  std::map<Node*, std::vector<Node*>> waiting;
  Node* cursor = nullptr;
  auto index_of = [&](Node* n) { return std::find(placed.begin(), placed.end(), n) - placed.begin(); };
  while (!pending.empty()) {
    Node* node = pending.back();
    pending.pop_back();
    // It waits on the last argument (args, then kwargs) not placed yet.
    Node* last_unready = nullptr;
    auto visit = [&](Node* in) {
      if (!ready[in]) last_unready = in;
    };
    for (const auto& a : node->args()) for_each_node(a, visit);
    for (const auto& [k, a] : node->kwargs()) for_each_node(a, visit);
    if (last_unready) {
      waiting[last_unready].push_back(node);
      continue;
    }
    ready[node] = true;
    if (cursor) {
      const auto c = index_of(cursor);
      if (c + 1 >= static_cast<std::ptrdiff_t>(placed.size()) || placed[c + 1] != node) {
        placed.erase(placed.begin() + index_of(node));
        placed.insert(placed.begin() + index_of(cursor) + 1, node);
      }
    }
    cursor = node;
    auto w = std::move(waiting[node]);
    for (auto it = w.rbegin(); it != w.rend(); ++it) pending.push_back(*it);
  }
  return placed;
}

}  // namespace kiln::testing
