#pragma once
// The bucketing passes (Inductor's bucket_all_gather, bucket_reduce_scatter,
// bucket_all_reduce and fsdp.py's bucket_fsdp_all_gather,
// bucket_fsdp_reduce_scatter): plan the buckets, check every one, then merge
// them and sort the graph. Nothing changes when a bucket cannot be merged.
//
//   kiln-opt g.json --passes bucket_fsdp_all_gather --pass-options '{"bucket_fsdp_all_gather": {"bucket_cap_mb": 10}}'
//
// Counters: <pass>_buckets (merged collectives), <pass>_collectives (collectives merged into them).
#include <ostream>
#include <string>

#include "kiln/core/topological_sort.hpp"
#include "kiln/passes/bucketing/bucket_cap.hpp"
#include "kiln/passes/bucketing/fsdp_filters.hpp"
#include "kiln/passes/bucketing/greedy_buckets.hpp"
#include "kiln/passes/bucketing/merge.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pass_registry.hpp"

namespace kiln::bucketing {

struct BucketingPass {
  std::string name;
  Collective kind;
  WaitFilter filter;  // empty: every wait of the kind
};

inline std::vector<BucketingPass> bucketing_passes() {
  return {{"bucket_all_gather", Collective::all_gather, {}},
          {"bucket_reduce_scatter", Collective::reduce_scatter, {}},
          {"bucket_all_reduce", Collective::all_reduce, {}},
          {"bucket_fsdp_all_gather", Collective::all_gather, is_fsdp_all_gather_wait},
          {"bucket_fsdp_reduce_scatter", Collective::reduce_scatter, is_fsdp_reduce_scatter_wait}};
}

// Runs one bucketing pass; returns the number of buckets merged.
inline std::size_t bucket_collectives(Graph& g, const BucketingPass& pass, const BucketCap& cap = {},
                                      Counters* counters = nullptr, std::ostream* log = nullptr) {
  const std::vector<Bucket> buckets = plan_buckets(g, pass.kind, cap, pass.filter);
  if (buckets.empty()) return 0;
  std::size_t merged = 0;
  for (const Bucket& b : buckets) {
    read_bucket(b, pass.kind);  // throws before anything changes
    merged += b.size();
  }
  PendingMerge pending;
  for (const Bucket& b : buckets) merge_bucket(g, read_bucket(b, pass.kind), pass.kind, pending);
  pending.finish(g);
  stable_topological_sort(g);
  if (counters) {
    counters->increment(pass.name + "_buckets", static_cast<std::int64_t>(buckets.size()));
    counters->increment(pass.name + "_collectives", static_cast<std::int64_t>(merged));
  }
  if (log)
    *log << pass.name << ": " << merged << " " << collective_name(pass.kind) << " collectives into " << buckets.size()
         << " buckets\n";
  return buckets.size();
}

}  // namespace kiln::bucketing

namespace kiln {

inline void register_bucketing_passes(PassRegistry& registry) {
  for (const auto& p : bucketing::bucketing_passes()) {
    registry.add({p.name,
                  std::string("merge ") + bucketing::collective_name(p.kind) + " collectives into buckets (Inductor's " +
                      p.name + "); option bucket_cap_mb: a number or a list by bucket index, default 2000",
                  [p](Graph& g, PassContext& ctx) {
                    const auto cap = bucketing::BucketCap::from_options(ctx.options, p.name);
                    return bucketing::bucket_collectives(g, p, cap, &ctx.counters, ctx.log) > 0;
                  },
                  {"bucket_cap_mb"}});
  }
}

}  // namespace kiln
