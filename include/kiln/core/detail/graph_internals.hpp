#pragma once
// `detail::GraphInternals`: the hooks into a Graph's node storage that a pass
// driver uses (PatternMatcherPass), kept out of Graph's public API. They
// assume what only such a driver knows: which erased nodes nobody holds any
// more, and that a scan in storage order is what it wants.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kiln/core/graph.hpp"

namespace kiln::detail {

struct GraphInternals {
  // How many erased nodes await purge_erased(): a mark for recycle_erased_since.
  static std::size_t erased_pending(const Graph& g) { return g.node_storage_.erased_pending(); }

  // Frees the nodes erased since `mark` (an erased_pending() read before) that
  // `may_free(const Node*)` accepts, so the next nodes created take their places,
  // which are still in the cache, instead of fresh memory. For a driver that
  // knows nobody holds those nodes any more: PatternMatcherPass, after each handler.
  template <class Pred>
  static void recycle_erased_since(Graph& g, std::size_t mark, Pred&& may_free) {
    g.node_storage_.recycle_erased_since(mark, std::forward<Pred>(may_free));
  }

  // Calls fn(Node*, bucket key, order key) for every live node in storage order
  // (creation order, except that nodes created after a purge_erased reuse freed
  // places), with the node's Graph::bucket_key and Node::order_key. Not graph
  // order (sort by the order key for that), but a pass over one dense table per
  // storage chunk, which the hardware streams, where following the links of a
  // large edited graph misses the cache at nearly every node; the nodes
  // themselves are not read.
  template <class Fn>
  static void for_each_node_in_storage(const Graph& g, Fn&& fn) {
    g.node_storage_.for_each_live(std::forward<Fn>(fn));
  }

  // Changes whenever a live node's order key may have changed (a relabeling or
  // a move), so a holder of order keys can tell whether they are still current.
  static std::uint64_t reorder_epoch(const Graph& g) { return g.reorder_epoch_; }

  // How many fan-in indexes (core/fan_in_index.hpp) the graph holds: tests
  // check that a dropped one is freed.
  static std::size_t fan_in_index_count(const Graph& g) { return g.fan_in_indexes_.size(); }
};

}  // namespace kiln::detail
