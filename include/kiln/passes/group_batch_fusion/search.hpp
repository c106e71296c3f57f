#pragma once
// The search of group and batch fusion, as Inductor's apply_group_batch_fusion
// does it: sort the graph (stable_topological_sort), then for each node from
// the last to the first, look up through its inputs (breadth first, at most
// max_fuse_search_depth steps, not through nodes that match, not from a
// getitem) for nodes the fusion matches, grouped by key in the order found;
// each group of at least min_fuse_set_size is split into independent sets
// (find_independent_subsets) and each set of at least that size is fused
// before the next set is chosen, so that later sets see the graph as it is.
//
// Inductor recomputes each candidate's ancestors among the group (a walk of
// the whole graph above it, for every candidate); here a round marks the
// ancestors and descendants of the set as it grows, so each node is visited
// about once per round, and the sets come out the same.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/topological_sort.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/group_batch_fusion/fusion.hpp"

namespace kiln::gbf {

namespace detail {

// Per-node marks for one apply, one record per node indexed through
// Node::scratch() (1 + the record's index; 0: not seen yet, as new nodes
// start). A record holds every mark so that a node costs one cache line, not
// one per mark: past a few thousand towers the search is bound by memory.
class Marks {
 public:
  // The node's group key, as an index into the search's key table; kUnknown
  // until match() was asked, kNoKey when it found none.
  static constexpr std::uint32_t kUnknown = 0xFFFFFFFF, kNoKey = 0xFFFFFFFE;
  struct Record {
    std::uint32_t key = kUnknown;
    std::uint32_t level = 0;  // more than the level of each of the node's inputs (see Search::run)
    std::uint32_t visited = 0, up = 0, down = 0;
    bool fused = false;
  };

  // Forgets what other algorithms left in the nodes' scratch, and numbers
  // every node the graph has now (a node with no number was made since),
  // giving each its level: one more than its inputs' highest, 0 for none.
  // The graph must be sorted. One walk, since past a few thousand towers
  // every walk of the graph misses the cache.
  void reset(Graph& g) {
    records_.clear();
    records_.reserve(g.size() + g.size() / 8);
    for (Node* n : g.nodes()) {
      std::uint32_t level = 0;
      for (const Node* in : n->all_input_nodes()) level = std::max(level, records_[in->scratch() - 1].level + 1);
      records_.emplace_back().level = level;
      n->scratch() = static_cast<std::uint32_t>(records_.size());
    }
  }
  static bool is_new(const Node* n) { return n->scratch() == 0; }
  Record& at(const Node* n) {
    if (n->scratch() == 0) {
      records_.emplace_back();
      n->scratch() = static_cast<std::uint32_t>(records_.size());
    }
    return records_[n->scratch() - 1];
  }
  std::uint32_t& key(const Node* n) { return at(n).key; }
  std::uint32_t& level(const Node* n) { return at(n).level; }
  std::uint32_t& visited(const Node* n) { return at(n).visited; }
  std::uint32_t& up(const Node* n) { return at(n).up; }
  std::uint32_t& down(const Node* n) { return at(n).down; }
  bool& fused(const Node* n) { return at(n).fused; }

 private:
  std::vector<Record> records_;
};

}  // namespace detail

// Candidates found from one node, by key (an index into the search's key
// table) in the order the keys were first found. The lists are kept between
// nodes, so that looking from each of a graph's nodes allocates nothing.
class CandidateGroups {
 public:
  using Group = std::pair<std::uint32_t, std::vector<Node*>>;
  void clear() {
    for (std::size_t i = 0; i < used_; ++i) groups_[i].second.clear();
    used_ = 0;
  }
  void add(std::uint32_t key, Node* n) {
    for (std::size_t i = 0; i < used_; ++i)  // a node reaches few distinct keys
      if (groups_[i].first == key) return groups_[i].second.push_back(n);
    if (used_ == groups_.size()) groups_.emplace_back();
    groups_[used_].first = key;
    groups_[used_++].second.push_back(n);
  }
  std::span<Group> groups() { return {groups_.data(), used_}; }

 private:
  std::vector<Group> groups_;
  std::size_t used_ = 0;
};

class Search {
 public:
  Search(Graph& g, const Fusion& fusion) : g_(g), fusion_(fusion) {}

  // Inductor's get_fusion_candidates from `root`.
  void candidates(Node* root, CandidateGroups& out) {
    out.clear();
    if (root->op() == OpKind::call_function && root->target().hash == pyop::getitem.hash) return;
    const std::uint32_t stamp = ++bfs_stamp_;
    queue_.clear();
    for (Node* in : root->all_input_nodes()) {
      queue_.emplace_back(1, in);
      marks_.visited(in) = stamp;
    }
    for (std::size_t head = 0; head < queue_.size(); ++head) {
      const auto [depth, n] = queue_[head];
      if (marks_.fused(n)) continue;
      if (const std::uint32_t key = key_of(n); key != detail::Marks::kNoKey) {
        out.add(key, n);
      } else if (depth < fusion_.options.max_fuse_search_depth) {
        for (Node* in : n->all_input_nodes()) {
          if (marks_.visited(in) == stamp) continue;
          marks_.visited(in) = stamp;
          queue_.emplace_back(depth + 1, in);
        }
      }
    }
  }

  // Inductor's find_independent_subset_greedy over `nodes`: rounds that take,
  // in order, each node that is neither an ancestor nor a descendant of the
  // set so far (and while the set is under max_fuse_set_size); the rest wait
  // for the next round. Each set of at least min_fuse_set_size goes to
  // `use` before the next round starts.
  template <class Use>
  void independent_subsets(std::span<Node* const> candidates, Use&& use) {
    std::vector<Node*>& nodes = pending_;
    std::vector<Node*>& subset = subset_;
    std::vector<Node*>& next = next_;
    nodes.assign(candidates.begin(), candidates.end());
    while (!nodes.empty()) {
      const std::uint32_t round = ++round_stamp_;
      subset.clear();
      next.clear();
      // Levels grow along every edge, so a path between two of the round's
      // nodes stays between their levels: marking need not leave that band.
      lo_ = ~std::uint32_t{0};
      hi_ = 0;
      for (const Node* n : nodes) {
        lo_ = std::min(lo_, marks_.level(n));
        hi_ = std::max(hi_, marks_.level(n));
      }
      for (Node* n : nodes) {
        const bool full = static_cast<std::int64_t>(subset.size()) >= fusion_.options.max_fuse_set_size;
        // Marked up: an ancestor of the set; marked down: a descendant of it.
        if (full || marks_.up(n) == round || marks_.down(n) == round) {
          next.push_back(n);
          continue;
        }
        subset.push_back(n);
        mark(n, round, /*up=*/true);
        mark(n, round, /*up=*/false);
      }
      if (static_cast<std::int64_t>(subset.size()) >= fusion_.options.min_fuse_set_size) use(subset);
      nodes.swap(next);
    }
  }

  // Runs the whole search; returns the number of sets fused.
  std::size_t run(Counters* counters, std::ostream* log) {
    stable_topological_sort(g_);
    marks_.reset(g_);
    std::size_t fused_sets = 0;
    CandidateGroups found;
    for (Node* root = g_.back(); root; root = root->prev()) {
      candidates(root, found);
      for (auto& [key, nodes] : found.groups()) {
        if (static_cast<std::int64_t>(nodes.size()) < fusion_.options.min_fuse_set_size) continue;
        independent_subsets(nodes, [&](const std::vector<Node*>& subset) {
          if (fusion_.options.cost_model && !pays(subset, counters, log)) return;
          // Keys read a node's inputs and users: those of the fused nodes
          // change (new arguments, new users), so their keys are asked again.
          for (Node* n : subset) {
            for (Node* in : n->all_input_nodes()) marks_.key(in) = detail::Marks::kUnknown;
            for (Node* u : n->users()) marks_.key(u) = detail::Marks::kUnknown;
          }
          const std::vector<Node*> replacements = fusion_.fuse(g_, subset);
          for (Node* n : subset) marks_.fused(n) = true;
          update_levels(replacements);
          ++fused_sets;
          if (counters) counters->increment(fusion_.name());
          if (log) *log << fusion_.name() << ": fused " << subset.size() << " nodes, first " << subset.front()->name() << "\n";
        });
      }
    }
    // Some rewrites leave a node before its input (batch_linear_post_grad's
    // bias adds, as in Inductor, whose next fusion sorts first): sort now, so
    // the graph a pass returns is always valid.
    if (fused_sets) stable_topological_sort(g_);
    return fused_sets;
  }

 private:
  // Whether kiln's cost model says fusing `subset` pays; a set that does not
  // is counted, and its nodes are no longer candidates.
  bool pays(const std::vector<Node*>& subset, Counters* counters, std::ostream* log) {
    const CostEstimate e = estimate_fusion(subset, fusion_.extra_steps(subset), fusion_.options.costs);
    if (e.pays()) return true;
    for (Node* n : subset) marks_.fused(n) = true;
    if (counters) counters->increment(fusion_.name() + "_skipped_by_cost_model");
    if (log)
      *log << fusion_.name() << ": skipped " << subset.size() << " nodes, first " << subset.front()->name()
           << " (cost model: fused " << e.fused_us << " us, " << e.stacked_bytes << " bytes stacked, against "
           << e.unfused_us << " us unfused)\n";
    return false;
  }

  // The node's key in the key table (kNoKey: no match), asked of the fusion
  // once per node until the node's neighbourhood changes.
  std::uint32_t key_of(Node* n) {
    std::uint32_t& k = marks_.key(n);
    if (k != detail::Marks::kUnknown) return k;
    const std::uint32_t found = [&] {
      std::optional<std::string> key = fusion_.match(*n);
      if (!key) return detail::Marks::kNoKey;
      auto [it, fresh] = key_ids_.try_emplace(std::move(*key), static_cast<std::uint32_t>(key_ids_.size()));
      return it->second;
    }();
    marks_.key(n) = found;  // (match() made no new nodes, but `k` is not kept across it)
    return found;
  }

  // Keeps levels growing along every edge after a fusion: the nodes it made
  // get theirs from their inputs, and a user of a replacement that is now
  // not above it is raised, and its users after it, as far as needed.
  void update_levels(const std::vector<Node*>& replacements) {
    // The new nodes, inputs before users (a depth-first walk up from the replacements).
    std::vector<std::pair<Node*, bool>> walk;
    for (Node* r : replacements) walk.emplace_back(r, false);
    while (!walk.empty()) {
      auto [n, inputs_done] = walk.back();
      walk.pop_back();
      if (!detail::Marks::is_new(n)) continue;
      if (!inputs_done) {
        walk.emplace_back(n, true);
        for (Node* in : n->all_input_nodes())
          if (detail::Marks::is_new(in)) walk.emplace_back(in, false);
        continue;
      }
      std::uint32_t level = 0;
      for (Node* in : n->all_input_nodes()) level = std::max(level, marks_.level(in) + 1);
      marks_.level(n) = level;  // (numbers the node: it is no longer new)
    }
    stack_.assign(replacements.begin(), replacements.end());
    while (!stack_.empty()) {
      Node* n = stack_.back();
      stack_.pop_back();
      const std::uint32_t above = marks_.level(n) + 1;
      for (Node* u : n->users()) {
        if (marks_.level(u) >= above) continue;
        marks_.level(u) = above;
        stack_.push_back(u);
      }
    }
  }

  // Marks the ancestors (up) or descendants (down) of `from` with `round`,
  // stopping at nodes marked already (what lies beyond them is marked too)
  // and at the edges of the round's band of levels.
  void mark(Node* from, std::uint32_t round, bool up) {
    stack_.clear();
    stack_.push_back(from);
    while (!stack_.empty()) {
      Node* n = stack_.back();
      stack_.pop_back();
      auto visit = [&](Node* next) {
        if (up ? marks_.level(next) < lo_ : marks_.level(next) > hi_) return;
        std::uint32_t& m = up ? marks_.up(next) : marks_.down(next);
        if (m == round) return;
        m = round;
        stack_.push_back(next);
      };
      if (up) {
        for (Node* in : n->all_input_nodes()) visit(in);
      } else {
        for (Node* u : n->users()) visit(u);
      }
    }
  }

  Graph& g_;
  const Fusion& fusion_;
  detail::Marks marks_;
  std::unordered_map<std::string, std::uint32_t> key_ids_;
  std::uint32_t lo_ = 0, hi_ = ~std::uint32_t{0};  // the round's band of levels
  std::uint32_t bfs_stamp_ = 0, round_stamp_ = 0;
  std::vector<std::pair<std::int64_t, Node*>> queue_;
  std::vector<Node*> stack_;
  std::vector<Node*> pending_, subset_, next_;  // independent_subsets' lists, kept between calls
};

// Applies `fusion` to `g` as Inductor's apply_group_batch_fusion does; counts
// each fused set under the fusion's name and returns their number.
inline std::size_t apply_group_batch_fusion(Graph& g, const Fusion& fusion, Counters* counters = nullptr,
                                            std::ostream* log = nullptr) {
  Search search(g, fusion);
  return search.run(counters, log);
}

}  // namespace kiln::gbf
