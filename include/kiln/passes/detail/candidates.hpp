#pragma once
// PatternMatcherPass's snapshot: the nodes some pattern's root may match, in
// graph order, each tagged with its root list; how they are prefetched ahead
// of the visit; and which erased nodes the rest of the visit cannot reach, so
// that their memory can be reused at once.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/core/detail/graph_internals.hpp"
#include "kiln/core/graph.hpp"
#include "kiln/core/natural_sort.hpp"
#include "kiln/passes/detail/root_index.hpp"

namespace kiln::detail {

// A node of the snapshot, and which root list it belongs to: its index in
// the index's lists rides in the low bits of the node's address (nodes are aligned),
// so that apply() need not look it up again and an entry stays 16 bytes for
// the sort. A pass with more root lists than those bits can number looks
// the rest up (kRootUnknown).
struct Candidate {
  std::uint64_t key;   // the node's order key when the snapshot was taken
  std::uintptr_t bits;
  Candidate(std::uint64_t order, Node* n, std::size_t root)
      : key(order), bits(reinterpret_cast<std::uintptr_t>(n) | root) {}
  Node* node() const { return reinterpret_cast<Node*>(bits & ~kRootUnknown); }
  std::size_t root() const { return bits & kRootUnknown; }
};

// Fills `out` with the nodes that some pattern's root could match, in graph
// order. `merge_buffer` and `run_bounds` are natural_sort's, kept by the pass
// so that a snapshot allocates nothing once they have grown.
inline void take_snapshot(const Graph& g, const RootIndex& index, std::vector<Candidate>& out,
                          std::vector<Candidate>& merge_buffer, std::vector<std::size_t>& run_bounds) {
  std::size_t total = 0;
  for (const RootList* r : index.lists) total += g.count_nodes(r->kind, r->target);
  out.clear();
  out.reserve(total);
  // Room for natural_sort's merges up front: an allocation this size later,
  // after a pass has freed many nodes, would make malloc tidy up all of them
  // right then.
  merge_buffer.reserve(total);
  run_bounds.reserve(natural_sort_max_runs(total) + 1);
  // Whether the candidates come in graph order already (storage order often
  // is, on a graph as read), so that sorting them can be skipped.
  bool in_order = true;
  std::uint64_t last = 0;
  auto add = [&](std::uint64_t order, Node* n, std::size_t root) {
    in_order &= order > last;
    last = order;
    out.emplace_back(order, n, root);
  };
  if (total * 16 > g.size() || index.keys.size() > 16) {
    // Many candidates: one pass over the node storage, which the hardware
    // streams, rather than following the graph's links (a cache miss per node
    // once passes have scattered the list) or the index's.
    GraphInternals::for_each_node_in_storage(g, [&](Node* n, std::uint64_t key, std::uint64_t order) {
      if (const RootEntry* e = index.entry(key)) add(order, n, e->tag);
    });
  } else {
    for (std::size_t k = 0; k < index.lists.size(); ++k)
      for (Node* n : g.find_nodes(index.lists[k]->kind, index.lists[k]->target, /*sorted=*/false))
        add(n->order_key(), n, std::min<std::size_t>(k, kRootUnknown));
  }
  // Storage order is nearly graph order (a few runs, or nodes a few places
  // off where a pass reused erased nodes' memory), so this is close to linear.
  if (!in_order)
    natural_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.key < b.key; },
                 merge_buffer, run_bounds);
}

// Matching at a node reads the node's first cache line and its positional
// arguments (which carry their nodes' kinds and targets, so a pattern that
// fails on an argument's op reads no further). On a graph larger than the
// cache each is a miss, so they are requested a few candidates ahead in two
// stages: the node, then, once its line has arrived, its arguments.
inline void prefetch_ahead(const std::vector<Candidate>& c, std::size_t i) {
  // Candidates are visited from the back. The distances are tuned on the
  // matcher benchmark (bench/README.md).
  constexpr std::size_t kNode = 20, kArgs = 10;
  if (i >= kNode) prefetch(c[i - kNode].node());
  if (i >= kArgs) {
    const auto& args = c[i - kArgs].node()->args();
    prefetch(args.data());
    if (args.size() > 1) prefetch(reinterpret_cast<const char*>(args.data()) + 64);
  }
}

// Whether the rest of the snapshot (from the candidate with order key `at`
// on) cannot hold `n`: its kind and target are no pattern's root, or it lies
// at or after that candidate (visited already; keys read as the snapshot's
// only while nothing was renumbered or moved since).
inline bool visited(const RootIndex& index, const Node* n, std::uint64_t at, const Graph& g,
                    std::uint64_t snapshot_epoch) {
  if (!index.find(Graph::bucket_key(n->op(), n->target().hash))) return true;
  return GraphInternals::reorder_epoch(g) == snapshot_epoch && n->order_key() >= at;
}

}  // namespace kiln::detail
