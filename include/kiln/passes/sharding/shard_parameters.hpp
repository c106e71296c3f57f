#pragma once
// shard_parameters (beyond Inductor; inference over N ranks): every weight of
// the graph, a get_attr or a placeholder bound to the weights, becomes this
// rank's shard of it (sharding/weight_shard.hpp), a new placeholder bound to a
// new weight, gathered right before the weight's first use:
//
//   shard [P/N] -> _c10d_functional.all_gather_into_tensor(shard, N, group_name)
//     -> wait_tensor [P] -> aten.slice.Tensor(0, 0, numel) (when padded)
//     -> aten.reshape(shape) (when not 1-d)
//
// The full weight leaves the pass's WeightStore, and a weight not read yet is
// never read whole: its file's header, then this rank's run of elements
// (WeightStore::read_elements), so a rank reads and holds 1/N of the weights; and the executor's buffer plan frees each gathered weight after its
// last use. The all-gathers take graph inputs, which is FSDP's form:
// bucket_fsdp_all_gather then merges them.
//
//   mpirun -np 4 kiln-run DIR --passes shard_parameters,bucket_fsdp_all_gather --compare DIR/outputs
//   kiln-opt g.json --passes shard_parameters --pass-options '{"shard_parameters": {"world_size": 4, "rank": 1}}' -o r1/g.json
//
// Options: sharding/shard_options.hpp. world_size 1 leaves the graph alone.
// Weights left whole: those under min_numel elements, empty ones, and those a
// call_module reads by its path (its module would need rewriting first).
// Counters: shard_parameters_sharded, shard_parameters_whole (weights read by
// the graph and left whole), shard_parameters_bytes_sharded (the sharded
// weights' full bytes) and shard_parameters_bytes_per_rank (their shards' bytes
// on this rank).
#include <cctype>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/core/topological_sort.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_functional.hpp"
#include "kiln/ops/c10d_meta.hpp"
#include "kiln/passes/pass.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/sharding/shard_options.hpp"
#include "kiln/passes/sharding/weight_shard.hpp"

namespace kiln::sharding {

struct ShardReport {
  std::int64_t sharded = 0, whole = 0;
  std::int64_t bytes_sharded = 0, bytes_per_rank = 0;
};

namespace detail {

// A weight the graph reads, with every node that stands for it, in graph order.
struct WeightUse {
  std::string name;
  std::vector<Node*> nodes;
};

inline std::vector<WeightUse> weight_uses(Graph& g, const io::WeightStore& store) {
  std::vector<WeightUse> uses;
  std::map<std::string, std::size_t, std::less<>> index;
  for (Node* n : g.nodes()) {
    if (n->op() != OpKind::get_attr && n->op() != OpKind::placeholder) continue;
    if (n->num_users() == 0 || !store.contains(n->target_name())) continue;
    const auto [it, fresh] = index.try_emplace(std::string(n->target_name()), uses.size());
    if (fresh) uses.push_back({it->first, {}});
    uses[it->second].nodes.push_back(n);
  }
  return uses;
}

// Whether a call_module reads `weight` through its path ("layer1" reads "layer1.0.weight").
inline bool read_by_module(const Graph& g, std::string_view weight) {
  for (const Node* n : g.nodes()) {
    if (n->op() != OpKind::call_module) continue;
    const std::string_view path = n->target_name();
    if (weight.size() > path.size() && weight.starts_with(path) && weight[path.size()] == '.') return true;
  }
  return false;
}

inline Node* first_user(const std::vector<Node*>& nodes) {
  Node* first = nullptr;
  for (Node* n : nodes)
    for (Node* u : n->users())
      if (!first || u->is_before(*first)) first = u;
  return first;
}

inline Node* with_meta(Node* n, TensorMeta t) {
  n->meta.val = std::move(t);
  return n;
}

// The gathered weight, from the shard placeholder, emitted before `at`.
inline Node* gather(Graph& g, Node* shard, Node* at, const io::WeightTensor& full, const ShardOptions& o) {
  auto guard = g.inserting_before(at);
  const std::int64_t numel = full.numel(), padded = shard_numel(numel, o.world_size) * o.world_size;
  Node* x = with_meta(g.call_function(c10d_functional::all_gather_into_tensor,
                                      {shard, Arg(o.world_size), Arg(o.group_name)}),
                      c10d_meta::contiguous({padded}, full.dtype));
  x = with_meta(g.call_function(c10d_functional::wait_tensor, {x}), c10d_meta::contiguous({padded}, full.dtype));
  if (padded != numel)
    x = with_meta(g.call_function(aten::slice_Tensor, {x, Arg(std::int64_t{0}), Arg(std::int64_t{0}), Arg(numel)}),
                  c10d_meta::contiguous({numel}, full.dtype));
  if (full.shape.size() == 1) return x;
  ArgList shape;
  std::vector<Dim> dims;
  for (std::int64_t d : full.shape) shape.push_back(Arg(d)), dims.push_back(d);
  return with_meta(g.call_function(aten::reshape, {x, Arg(std::move(shape))}),
                   c10d_meta::contiguous(std::move(dims), full.dtype));
}

// Where the shards' placeholders go: after the graph's placeholders, in order.
inline Node* placeholder_anchor(Graph& g) {
  for (Node* n : g.nodes())
    if (n->op() != OpKind::placeholder) return n;
  return nullptr;  // unreachable: a graph ends in its output
}

// A weight name as a node name ("layer1.0.weight" -> "layer1_0_weight").
inline std::string node_safe(std::string_view name) {
  std::string s(name);
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  return s;
}

}  // namespace detail

// Shards the graph's weights for rank o.rank of o.world_size; returns what it did.
inline ShardReport shard_parameters(Graph& g, io::WeightStore& store, const ShardOptions& o) {
  ShardReport report;
  if (o.world_size == 1) return report;
  std::vector<detail::WeightUse> uses = detail::weight_uses(g, store);
  Node* anchor = detail::placeholder_anchor(g);
  // Every weight decided and its placeholder made before any node is erased (the anchor may be a get_attr).
  struct Planned {
    detail::WeightUse* use;
    Node* shard;
    io::WeightTensor full;  // shape and dtype only
  };
  std::vector<Planned> planned;
  for (detail::WeightUse& u : uses) {
    // The header says whether to shard; then only this rank's run of the file is read.
    std::optional<io::WeightTensor> info = store.meta(u.name);
    if (!info || info->numel() == 0 || info->numel() < o.min_numel || detail::read_by_module(g, u.name)) {
      ++report.whole;
      continue;
    }
    io::WeightTensor shard = weight_shard(info->dtype, info->numel(), o.world_size, o.rank,
                                          [&](std::int64_t from, std::int64_t count) { return store.read_elements(u.name, from, count); });
    report.bytes_sharded += info->numel() * static_cast<std::int64_t>(info->itemsize());
    report.bytes_per_rank += static_cast<std::int64_t>(shard.bytes.size());
    store.remove(u.name);
    const TensorMeta meta = c10d_meta::contiguous({shard.shape[0]}, shard.dtype);
    const std::string name = store.create(detail::node_safe(u.name) + "_shard", std::move(shard));
    auto guard = g.inserting_before(anchor);
    planned.push_back({&u, g.placeholder(name, meta), std::move(*info)});
    ++report.sharded;
  }
  for (Planned& p : planned) {
    Node* gathered = detail::gather(g, p.shard, detail::first_user(p.use->nodes), p.full, o);
    for (Node* n : p.use->nodes) {
      n->replace_all_uses_with(gathered);
      g.erase_node(n);
    }
  }
  stable_topological_sort(g);
  return report;
}

inline bool run_shard_parameters(Graph& g, PassContext& ctx) {
  const ShardOptions o = ShardOptions::from_json(ctx.options);
  if (o.world_size == 1) return false;
  if (!ctx.weights) throw Error("pass shard_parameters: needs the graph's weights, and the caller gave none");
  const ShardReport r = shard_parameters(g, *ctx.weights, o);
  ctx.counters.increment("shard_parameters_sharded", r.sharded);
  ctx.counters.increment("shard_parameters_whole", r.whole);
  ctx.counters.increment("shard_parameters_bytes_sharded", r.bytes_sharded);
  ctx.counters.increment("shard_parameters_bytes_per_rank", r.bytes_per_rank);
  if (ctx.log)
    *ctx.log << "shard_parameters: " << r.sharded << " weights sharded over " << o.world_size << " ranks (rank "
             << o.rank << " holds " << r.bytes_per_rank << " of their " << r.bytes_sharded << " bytes), " << r.whole
             << " left whole\n";
  return r.sharded > 0;
}

}  // namespace kiln::sharding

namespace kiln {

inline void register_sharding_passes(PassRegistry& registry) {
  registry.add({"shard_parameters",
                "every weight becomes this rank's 1/N shard, all-gathered right before its first use; options "
                "world_size (required; kiln-run fills it and rank under mpirun), rank, group_name (default \"0\"), "
                "min_numel (default 0: every weight)",
                sharding::run_shard_parameters,
                {"world_size", "rank", "group_name", "min_numel"}});
}

}  // namespace kiln
