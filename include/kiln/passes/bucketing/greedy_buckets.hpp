#pragma once
// Inductor's greedy_bucket_collective_by_mb, decision for decision:
//  1. Walk the waits in graph order; each wait of a candidate collective (that
//     passes the wait filter) extends the current run if its collective's group
//     key equals the run's, else closes the run (kept if it has two or more) and
//     starts a new one. Other nodes do not break a run.
//  2. Within a run, add collectives to the current bucket in order while the
//     bucket's bytes plus the collective's stay within the cap; a collective
//     that would overflow a non-empty bucket closes it (kept if it has two or
//     more) and starts the next. A collective that depends on a member of the
//     current bucket is skipped: it stays unbucketed.
//  3. The cap is read at bucket index 0 once per run: Inductor computes it
//     before the run's loop and does not read it again as the index grows.
//
// Inductor collects every node's descendants (quadratic); here each node gets
// the largest candidate index among its ancestors in one walk. That suffices
// because the candidates already seen in the current bucket's range are all
// members or (skipped) descendants of members, and every candidate ancestor of
// a collective comes earlier in wait order (its wait is its only user, so it
// lies on the path): "depends on the bucket" is "that index >= the bucket's first".
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/passes/bucketing/bucket_cap.hpp"
#include "kiln/passes/bucketing/collectives.hpp"

namespace kiln::bucketing {

using WaitFilter = std::function<bool(const Node* wait)>;
using Bucket = std::vector<Node*>;

namespace detail {

// The candidate collectives in wait order, split into runs of equal keys (runs
// of one dropped later). A candidate must have its wait as its only user.
inline std::vector<std::vector<Node*>> candidate_runs(const Graph& g, Collective kind, const WaitFilter& filter) {
  std::vector<std::vector<Node*>> runs;
  GroupKey run_key;
  for (Node* n : g.nodes()) {
    Node* coll = waited(n);
    if (!is_collective(coll, kind) || (filter && !filter(n))) continue;
    if (coll->num_users() != 1)
      throw Error("node " + coll->name() + ": bucketing needs its wait as the only user of a collective, it has " +
                  std::to_string(coll->num_users()));
    GroupKey key = group_key(coll, kind);
    if (runs.empty() || !(key == run_key)) {
      runs.emplace_back();
      run_key = std::move(key);
    }
    runs.back().push_back(coll);
  }
  return runs;
}

// For each candidate (by its index in wait order), the largest index of a
// candidate among its ancestors, -1 when none. One walk in graph order; each
// node's scratch holds 1 + the largest candidate index at or above it (0: none),
// which is all its users need.
inline std::vector<std::int64_t> latest_candidate_ancestor(const Graph& g, Collective kind,
                                                           const std::vector<std::vector<Node*>>& runs) {
  std::unordered_map<const Node*, std::uint32_t> index;  // candidate -> wait-order index
  for (const auto& run : runs)
    for (const Node* c : run) index.emplace(c, static_cast<std::uint32_t>(index.size()));
  std::vector<std::int64_t> result(index.size(), -1);
  for (const Node* n : g.nodes()) {
    std::uint32_t m = 0;
    for (const Node* in : n->all_input_nodes()) m = std::max(m, in->scratch());
    if (is_collective(n, kind))
      if (auto it = index.find(n); it != index.end()) {
        result[it->second] = static_cast<std::int64_t>(m) - 1;
        m = std::max(m, it->second + 1);
      }
    n->scratch() = m;
  }
  return result;
}

}  // namespace detail

// The buckets (each two or more collectives, in wait order) Inductor would merge.
// Uses the nodes' scratch space.
inline std::vector<Bucket> plan_buckets(const Graph& g, Collective kind, const BucketCap& cap,
                                        const WaitFilter& filter = {}) {
  const auto runs = detail::candidate_runs(g, kind, filter);
  const auto ancestor = detail::latest_candidate_ancestor(g, kind, runs);
  std::vector<Bucket> buckets;
  std::int64_t index = 0;
  for (const auto& run : runs) {
    const std::int64_t first_of_run = index;
    index += static_cast<std::int64_t>(run.size());
    if (run.size() < 2) continue;
    const std::int64_t cap_bytes = cap.bytes(0);
    Bucket bucket;
    std::int64_t bucket_bytes_sum = 0, bucket_first = 0;
    for (std::size_t j = 0; j < run.size(); ++j) {
      const std::int64_t i = first_of_run + static_cast<std::int64_t>(j);
      if (!bucket.empty() && ancestor[static_cast<std::size_t>(i)] >= bucket_first) continue;
      const std::int64_t bytes = bucket_bytes(run[j]);
      if (!bucket.empty() && bucket_bytes_sum + bytes > cap_bytes) {
        if (bucket.size() > 1) buckets.push_back(std::move(bucket));
        bucket.clear();
        bucket_bytes_sum = 0;
      }
      if (bucket.empty()) bucket_first = i;
      bucket_bytes_sum += bytes;
      bucket.push_back(run[j]);
    }
    if (bucket.size() > 1) buckets.push_back(std::move(bucket));
  }
  return buckets;
}

}  // namespace kiln::bucketing
