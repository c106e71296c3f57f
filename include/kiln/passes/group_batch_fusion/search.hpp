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
// about once per round, and the sets come out the same. Where the fusion says
// which targets it matches, only nodes a few steps below such a node are
// searched from, and the final sort is skipped when no rewrite needs it.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/detail/graph_internals.hpp"
#include "kiln/core/detail/huge_page_allocator.hpp"
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
  static constexpr std::uint32_t kMaxNear = 0xFF;  // Record::near's limit
  // Record::reach holds counts for 0 .. kReachSlots - 1 steps, so roots are
  // filtered by them for a search depth of kReachSlots - 1 at most.
  static constexpr std::uint32_t kReachSlots = 7;
  struct Record {
    std::uint32_t key = kUnknown;
    std::uint32_t level = 0;  // more than the level of each of the node's inputs (see Search::run)
    std::uint32_t visited = 0, up = 0, down = 0;
    // 1 + how many more steps down it is still near a node the fusion may
    // match (0: not near one; see Search::mark_near).
    std::uint8_t near = 0;
    // At least the highest `near` of the node's inputs, so that a search
    // knows whether anything above the node can still be found without
    // reading its inputs (see Search::candidates).
    std::uint8_t inputs_near = 0;
    bool fused = false;
    bool searched = false;  // searched from already (Search::next_root)
    bool late = false;  // in Search::late_
    // reach[k]: at least the number of nodes the fusion may match at most k
    // steps above the node, itself included (a sum over its inputs, so a
    // node above by two paths counts twice), 255 standing for 255 or more.
    // A search from the node finds no set smaller than what reach allows
    // (see Search::may_find_set_from).
    std::array<std::uint8_t, kReachSlots> reach{};
  };
  using Reach = std::array<std::uint8_t, kReachSlots>;
  // a + b, 255 for anything above.
  static std::uint8_t saturated(std::uint8_t a, std::uint8_t b) {
    const auto s = static_cast<std::uint8_t>(a + b);
    return s < a ? std::uint8_t{255} : s;
  }
  // sum[k] += add[k - 1] for every slot but the first: what an input's reach
  // adds to its user's. (All slots, whatever the depth, so that it is a few
  // vector instructions.)
  static void add_one_step_down(Reach& sum, const Reach& add) {
    for (std::size_t k = 1; k < kReachSlots; ++k) sum[k] = saturated(sum[k], add[k - 1]);
  }
  // The node's reach from its inputs': reach[k] is `self` (1 for a node the
  // fusion may match) plus the inputs' reach[k - 1].
  void set_reach(const Node* n, std::uint8_t self) {
    Reach sum{};
    for (const Node* in : n->all_input_nodes()) add_one_step_down(sum, at(in).reach);
    Reach& reach = at(n).reach;
    for (std::size_t k = 0; k < kReachSlots; ++k) reach[k] = saturated(self, sum[k]);
  }

  struct Ignore {
    void operator()(Node*, const Record&) const {}
  };

  // Forgets what other algorithms left in the nodes' scratch, and numbers
  // every node the graph has now (a node with no number was made since),
  // giving each its level: one more than its inputs' highest, 0 for none.
  // The graph must be sorted. One walk, since past a few thousand towers
  // every walk of the graph misses the cache.
  template <class OnNode = Ignore>
  void reset(Graph& g, std::span<const std::uint64_t> near_targets = {}, std::uint32_t near_depth = 0,
             bool count_reach = false, OnNode&& on_node = {}) {
    if (!reset_if_sorted(g, near_targets, near_depth, count_reach, on_node))
      throw GraphError("group/batch fusion: the graph is not sorted");
  }
  // The same when the graph is sorted, in the same walk that finds out
  // (so a sorted graph, as each fusion leaves it, costs one walk, not two);
  // false, leaving the records half made, when a node comes before an input.
  // With `near_targets`, also marks how near each node is to a call of one
  // of those targets (Record::near; `near_depth` steps at most).
  // With `count_reach`, also counts them (Record::reach). Each node's record is shown to
  // `on_node(node, record)` once made.
  template <class OnNode = Ignore>
  bool reset_if_sorted(Graph& g, std::span<const std::uint64_t> near_targets = {}, std::uint32_t near_depth = 0,
                       bool count_reach = false, OnNode&& on_node = {}) {
    records_.clear();
    records_.reserve(g.size() + g.size() / 8);
    for (Node* n : g.nodes()) {
      // The walk misses the cache at every node of a large graph: ask for
      // the next node's inputs while this one is looked at.
      if (Node* next = n->next()) kiln::detail::prefetch(&next->all_input_nodes());
      std::uint32_t level = 0, near = 0;
      Reach reach{};
      for (const Node* in : n->all_input_nodes()) {
        if (!in->is_before(*n)) return false;
        const Record& r = records_[in->scratch() - 1];
        level = std::max(level, r.level + 1);
        near = std::max<std::uint32_t>(near, r.near);
        if (count_reach) add_one_step_down(reach, r.reach);
      }
      const std::uint32_t inputs_near = near;
      near = near > 0 ? near - 1 : 0;
      const bool target = n->op() == OpKind::call_function &&
                          std::find(near_targets.begin(), near_targets.end(), n->target().hash) != near_targets.end();
      if (target) near = near_depth + 1;
      Record& r = records_.emplace_back();
      r.level = level;
      r.near = static_cast<std::uint8_t>(near);
      r.inputs_near = static_cast<std::uint8_t>(inputs_near);
      if (count_reach)
        for (std::size_t k = 0; k < kReachSlots; ++k) r.reach[k] = saturated(target ? 1 : 0, reach[k]);
      n->scratch() = static_cast<std::uint32_t>(records_.size());
      on_node(n, r);
    }
    return true;
  }
  static bool is_new(const Node* n) { return n->scratch() == 0; }
  Record& at(const Node* n) {
    const std::uint32_t i = n->scratch();
    if (i == 0) [[unlikely]]
      return add(n);
    return records_[i - 1];
  }
  std::uint32_t& key(const Node* n) { return at(n).key; }
  std::uint32_t& level(const Node* n) { return at(n).level; }
  std::uint32_t& visited(const Node* n) { return at(n).visited; }
  std::uint32_t& up(const Node* n) { return at(n).up; }
  std::uint32_t& down(const Node* n) { return at(n).down; }
  bool& fused(const Node* n) { return at(n).fused; }
  bool& late(const Node* n) { return at(n).late; }
  std::uint8_t& near(const Node* n) { return at(n).near; }
  std::uint8_t& inputs_near(const Node* n) { return at(n).inputs_near; }

 private:
  [[gnu::noinline]] Record& add(const Node* n) {
    records_.emplace_back();
    n->scratch() = static_cast<std::uint32_t>(records_.size());
    return records_.back();
  }

  std::vector<Record, kiln::detail::HugePageAllocator<Record>> records_;
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

  // Inductor's get_fusion_candidates from `root`. Where nodes are marked
  // near (run), a node with no node the fusion may match close enough above
  // it to be reached within the search depth is not queued, and a node's
  // inputs are not looked at when none of them has one: what the search
  // would find there is nothing, and what it finds elsewhere, and in which
  // order, stays the same (the nodes left out are closed upwards, so none
  // lies on the way to a candidate). Searching from a node just below a
  // fused set's stack otherwise reads every one of the stack's inputs.
  void candidates(Node* root, CandidateGroups& out) {
    out.clear();
    if (root->op() == OpKind::call_function && root->target().hash == pyop::getitem.hash) return;
    const std::uint32_t stamp = ++bfs_stamp_;
    queue_.clear();
    for (Node* in : root->all_input_nodes()) {
      detail::Marks::Record& r = marks_.at(in);
      r.visited = stamp;
      if (may_find_from(r, 1)) queue_.emplace_back(1, in);
    }
    for (std::size_t head = 0; head < queue_.size(); ++head) {
      const auto [depth, n] = queue_[head];
      if (marks_.fused(n)) continue;
      if (const std::uint32_t key = key_of(n); key != detail::Marks::kNoKey) {
        out.add(key, n);
      } else if (depth < fusion_.options.max_fuse_search_depth && (!filter_roots_ || may_find_above(n, depth))) {
        for (Node* in : n->all_input_nodes()) {
          detail::Marks::Record& r = marks_.at(in);
          if (r.visited == stamp) continue;
          r.visited = stamp;
          if (may_find_from(r, depth + 1)) queue_.emplace_back(depth + 1, in);
        }
      }
    }
  }

  // Whether a node reached at `depth` may be or lead to a candidate: only
  // if a node the fusion may match lies at most max_fuse_search_depth - depth
  // steps above it (itself included), that is (max_fuse_search_depth <=
  // near_depth()) only if its `near` is at least depth + 1. A node that may
  // not is neither matched nor expanded by the search, and neither are the
  // nodes above it that only it leads to, so it is not queued (only marked
  // visited, as Inductor's search does).
  bool may_find_from(const detail::Marks::Record& r, std::int64_t depth) const { return !filter_roots_ || r.near >= depth + 1; }
  // Whether a search from `root` may find a set: its candidates lie 1 to
  // max_fuse_search_depth steps above it, so they are at most its reach at
  // that depth less itself, and a group smaller than min_fuse_set_size is
  // never fused. (What a search finds has no other effect, so skipping one
  // that can find no set changes nothing.)
  bool may_find_set_from(const Node* root) { return may_find_set_from(marks_.at(root)); }
  bool may_find_set_from(const detail::Marks::Record& r) const {
    const std::uint8_t all = r.reach[reach_depth_];
    return all == 255 || all - r.reach[0] >= fusion_.options.min_fuse_set_size;
  }
  // The node to search from after `root` (nullptr: the first), as Inductor
  // takes them: the graph's nodes from the last to the first, as the list
  // stands when each is reached. Where reach is counted, only nodes that may
  // find a set are searched from, and they are taken from a list the
  // numbering walk made (listed_roots_, in graph order) merged with the
  // nodes rewrites lifted over the line since (late_roots_, a heap, latest
  // on top), instead of walking every node: the nodes not taken are exactly
  // those the walk would skip. (Nodes never move during a search, so list
  // order and graph order agree.)
  Node* next_root(Node* root) {
    if (!reach_depth_) return root ? root->prev() : g_.back();
    while (true) {
      while (next_listed_ > 0 && !still_there(listed_roots_[next_listed_ - 1])) --next_listed_;
      Node* listed = next_listed_ > 0 ? listed_roots_[next_listed_ - 1].first : nullptr;
      Node* late = late_roots_.empty() ? nullptr : late_roots_.front().first;
      if (!listed && !late) return nullptr;
      Node* next = nullptr;
      if (listed && (!late || late->is_before(*listed))) {
        next = listed;
        --next_listed_;
      } else {
        std::pop_heap(late_roots_.begin(), late_roots_.end(), later_in_graph);
        late_roots_.pop_back();
        next = late;
      }
      if (!marks_.at(next).searched) return next;
    }
  }
  using RootEntry = std::pair<Node*, std::uint32_t>;  // a node and its scratch when listed
  // Whether the entry's node is live and still the node it was (an erased
  // node's place may be taken by a new node, which gets a new record).
  static bool still_there(const RootEntry& e) { return !e.first->erased() && e.first->scratch() == e.second; }
  static bool later_in_graph(const RootEntry& a, const RootEntry& b) { return a.first->is_before(*b.first); }
  // A node whose reach has just grown: if it may now find a set and the
  // walk has not passed it yet, it joins late_roots_.
  void consider_root(Node* n) {
    const detail::Marks::Record& r = marks_.at(n);
    if (r.searched || !may_find_set_from(r) || !current_root_ || !n->is_before(*current_root_)) return;
    late_roots_.emplace_back(n, n->scratch());
    std::push_heap(late_roots_.begin(), late_roots_.end(), later_in_graph);
  }
  // Drops from late_roots_ the nodes a rewrite erased, before their places
  // are taken (the heap compares places).
  void forget_erased_roots() {
    const auto gone = std::remove_if(late_roots_.begin(), late_roots_.end(), [](const RootEntry& e) { return !still_there(e); });
    if (gone == late_roots_.end()) return;
    late_roots_.erase(gone, late_roots_.end());
    std::make_heap(late_roots_.begin(), late_roots_.end(), later_in_graph);
  }

  // Whether the fusion may match `n` (a node a rewrite made may have a target
  // the graph had none of before).
  bool is_target(const Node* n) const { return n->op() == OpKind::call_function && fusion_.may_match_target(n->target()); }
  // Counts the new nodes' reach (Record::reach), inputs first, and passes on
  // what their old users gain through them to the nodes below, as far as the
  // counts go. (Edges the rewrite removed leave counts too high, which only
  // lets a node be searched from.) Counting stops for the rest of the
  // search once it has passed on gains a few times as often as the graph
  // has nodes, which keeps a search linear whatever the rewrites make.
  void update_reach() {
    // (reach_depth_ is under kReachSlots; the min says so to the compiler.)
    const std::uint32_t depth = std::min(reach_depth_, detail::Marks::kReachSlots - 1);
    kiln::detail::NodeSet fresh(new_nodes_.size());
    for (Node* n : new_nodes_) {
      fresh.insert(n);
      marks_.set_reach(n, is_target(n) ? 1 : 0);
      consider_root(n);
    }
    using Gain = detail::Marks::Reach;
    auto one_step_down = [&](const Gain& g) {
      Gain down{};
      detail::Marks::add_one_step_down(down, g);
      return down;
    };
    std::vector<std::pair<Node*, Gain>>& work = reach_work_;
    work.clear();
    for (Node* n : new_nodes_) {
      const Gain gain = one_step_down(marks_.at(n).reach);
      for (Node* u : n->users())
        if (!fresh.contains(u)) work.emplace_back(u, gain);
    }
    while (!work.empty()) {
      auto [u, gain] = work.back();
      work.pop_back();
      detail::Marks::Record& r = marks_.at(u);
      Gain grew{};
      bool any = false;
      for (std::uint32_t k = 0; k < detail::Marks::kReachSlots; ++k) {
        const std::uint8_t before = r.reach[k];
        r.reach[k] = detail::Marks::saturated(before, gain[k]);
        grew[k] = static_cast<std::uint8_t>(r.reach[k] - before);
        any |= k < depth && grew[k] != 0;
      }
      if (grew[depth] != 0) consider_root(u);
      if (!any) continue;
      const Gain down = one_step_down(grew);
      for (Node* w : u->users()) {
        if (reach_budget_-- == 0) {
          reach_depth_ = 0;
          return;
        }
        work.emplace_back(w, down);
      }
    }
  }

  // Whether an input of `n` (reached at `depth`) may: none may unless the
  // inputs' highest `near` is at least depth + 2.
  bool may_find_above(Node* n, std::int64_t depth) { return marks_.inputs_near(n) >= depth + 2; }

  // Inductor's find_independent_subset_greedy over `nodes`: rounds that take,
  // in order, each node that is neither an ancestor nor a descendant of the
  // set so far (and while the set is under max_fuse_set_size); the rest wait
  // for the next round. Each set of at least min_fuse_set_size goes to
  // `use` before the next round starts.
  //
  // A round costs what it looks at, not what waits: the nodes it never
  // reached (once the set is full) stay in place in `nodes`, and the ones it
  // skipped are put right before them, so the next round's list is a suffix.
  // (Copying and scanning the whole waiting list every round made a group of
  // n candidates cost n * n / max_fuse_set_size.)
  template <class Use>
  void independent_subsets(std::span<Node* const> candidates, Use&& use) {
    std::vector<Node*>& nodes = pending_;
    std::vector<Node*>& subset = subset_;
    std::vector<Node*>& skipped = next_;
    nodes.assign(candidates.begin(), candidates.end());
    const auto max_size = static_cast<std::size_t>(std::max<std::int64_t>(fusion_.options.max_fuse_set_size, 0));
    std::size_t start = 0;
    while (start < nodes.size()) {
      round_ = ++round_stamp_;
      subset.clear();
      skipped.clear();
      lo_ = ~std::uint32_t{0};  // an empty band: the first node sets it
      hi_ = 0;
      std::size_t i = start;
      for (; i < nodes.size() && subset.size() < max_size; ++i) {
        Node* n = nodes[i];
        const std::uint32_t level = marks_.level(n);
        if (level < lo_ || level > hi_) widen_band(level, subset);
        // Marked up: an ancestor of the set; marked down: a descendant of it.
        if (marks_.up(n) == round_ || marks_.down(n) == round_) {
          skipped.push_back(n);
          continue;
        }
        subset.push_back(n);
        mark(n, round_, /*up=*/true);
        mark(n, round_, /*up=*/false);
      }
      start = i - skipped.size();
      std::copy(skipped.begin(), skipped.end(), nodes.begin() + static_cast<std::ptrdiff_t>(start));
      if (static_cast<std::int64_t>(subset.size()) >= fusion_.options.min_fuse_set_size) use(subset);
    }
  }

  // Runs the whole search; returns the number of sets fused.
  std::size_t run(Counters* counters, std::ostream* log) {
    // A node's search finds something only if a node the fusion may match
    // lies at most max_fuse_search_depth steps above it: where the fusion
    // says which targets it matches, the search looks only from nodes near
    // one of those. Inductor sorts first (stable_topological_sort); the
    // graph is usually sorted already, and one walk finds that out, numbers
    // the nodes and marks those near.
    filter_roots_ = fusion_.matches_calls_only() && fusion_.options.max_fuse_search_depth < detail::Marks::kMaxNear;
    // Where the depth allows, nodes also count the matchable nodes above
    // them, and a node with too few is not searched from at all.
    reach_depth_ = filter_roots_ && fusion_.options.max_fuse_search_depth < detail::Marks::kReachSlots
                       ? static_cast<std::uint32_t>(std::max<std::int64_t>(fusion_.options.max_fuse_search_depth, 1))
                       : 0;
    reach_budget_ = 8 * g_.size() + 4096;
    std::vector<std::uint64_t> targets;
    if (filter_roots_)
      g_.for_each_target(OpKind::call_function, [&](OpRef target) {
        if (fusion_.may_match_target(target)) targets.push_back(target.hash);
      });
    listed_roots_.clear();
    late_roots_.clear();
    auto list_root = [&](Node* n, const detail::Marks::Record& r) {
      if (r.near > 0 && may_find_set_from(r)) listed_roots_.emplace_back(n, n->scratch());
    };
    if (!marks_.reset_if_sorted(g_, targets, near_depth(), reach_depth_ > 0, list_root)) {
      stable_topological_sort(g_);
      listed_roots_.clear();
      marks_.reset(g_, targets, near_depth(), reach_depth_ > 0, list_root);
    }
    next_listed_ = listed_roots_.size();
    sorted_ = true;
    std::size_t fused_sets = 0;
    CandidateGroups found;
    for (Node* root = next_root(nullptr); root; root = next_root(root)) {
      if (filter_roots_ && marks_.near(root) == 0) continue;
      if (reach_depth_ && !may_find_set_from(root)) continue;
      marks_.at(root).searched = true;
      current_root_ = root;
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
          const std::size_t erased_mark = kiln::detail::GraphInternals::erased_pending(g_);
          const std::size_t size_before = g_.size();
          bool fuses_late = false;  // fuses nodes in late_
          for (Node* n : subset) fuses_late |= marks_.late(n);
          const std::vector<Node*> replacements = fusion_.fuse(g_, subset);
          for (Node* n : subset) marks_.fused(n) = true;
          update_levels(replacements);
          // New edges all touch the new nodes: what is near a matchable node
          // through them is below one of those. (A rewrite that made a node
          // that is not above a replacement goes unseen: search from all.)
          const bool all_new_seen = g_.size() + subset.size() == size_before + new_nodes_.size();
          if (filter_roots_) {
            if (all_new_seen) {
              mark_near(new_nodes_);
              if (reach_depth_) update_reach();
            } else {
              filter_roots_ = false;
              reach_depth_ = 0;
            }
          }
          late_seen_ = late_seen_ && all_new_seen;
          if (late_seen_) {
            const std::size_t late_before = late_.size();
            add_late_nodes();
            sorted_ = sorted_ && late_.size() == late_before;
            // The nodes erased now are freed below and their places reused:
            // none may stay in late_. A rewrite erases the set it fuses.
            const std::size_t erased = kiln::detail::GraphInternals::erased_pending(g_) - erased_mark;
            if (fuses_late || erased != subset.size() ||
                !std::all_of(subset.begin(), subset.end(), [](const Node* n) { return n->erased(); }))
              late_.erase(std::remove_if(late_.begin(), late_.end(), [](const Node* n) { return n->erased(); }), late_.end());
          } else {
            sorted_ = sorted_ && all_new_seen && new_edges_sorted();
          }
          forget_erased_roots();
          ++fused_sets;
          if (counters) counters->increment(fusion_.name());
          if (log) *log << fusion_.name() << ": fused " << subset.size() << " nodes, first " << subset.front()->name() << "\n";
          // The fused nodes (all a rewrite erases) are in no list of the
          // search's any more: their places go to the next set's new nodes,
          // near the towers they replace, instead of fresh memory.
          kiln::detail::GraphInternals::recycle_erased_since(g_, erased_mark, [](const Node*) { return true; });
        });
      }
    }
    // Some rewrites leave a node before its input (batch_linear_post_grad's
    // bias adds, as in Inductor, whose next fusion sorts first): sort now, so
    // the graph a pass returns is always valid.
    // Where the search saw every node the fusions made, the nodes out of
    // place are in late_ (add_late_nodes): sort from those.
    if (fused_sets && !sorted_) {
      if (late_seen_) stable_topological_sort(g_, late_, SortMoveCount::relinked);
      else stable_topological_sort(g_);
    }
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
    // The new nodes, inputs before users (a depth-first walk up from the
    // replacements), also kept in new_nodes_.
    new_nodes_.clear();
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
      std::uint8_t inputs_near = 0;
      for (Node* in : n->all_input_nodes()) {
        level = std::max(level, marks_.level(in) + 1);
        inputs_near = std::max(inputs_near, marks_.near(in));
      }
      marks_.level(n) = level;  // (numbers the node: it is no longer new)
      marks_.inputs_near(n) = inputs_near;
      new_nodes_.push_back(n);
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

  // Levels grow along every edge, so a path between two nodes a round looks
  // at stays between their levels: marking from the set need not leave the
  // band of levels of the nodes looked at so far. A node outside the band
  // widens it (to at least twice its width, so a round widens it a few times
  // at most) and the set is marked again, under a new stamp, in the new band.
  void widen_band(std::uint32_t level, const std::vector<Node*>& subset) {
    if (lo_ > hi_) {  // the round's first node: nothing is marked yet
      lo_ = hi_ = level;
      return;
    }
    const std::uint32_t width = hi_ - lo_ + 1;
    const std::uint32_t lo = std::min(lo_, level), hi = std::max(hi_, level);
    lo_ = lo > width ? lo - width : 0;
    hi_ = hi < ~std::uint32_t{0} - width ? hi + width : ~std::uint32_t{0};
    round_ = ++round_stamp_;
    for (Node* s : subset) {
      mark(s, round_, /*up=*/true);
      mark(s, round_, /*up=*/false);
    }
  }

  // Keeps in late_ each node the last fusion left before an input: a
  // rewrite changes only the edges of its new nodes, so those of them that
  // come before an input and their users that come before them. (The graph
  // was sorted before the first fusion; later fusions that change these
  // nodes' edges add what they leave out of place.)
  void add_late_nodes() {
    for (Node* n : new_nodes_) {
      for (const Node* in : n->all_input_nodes())
        if (!in->is_before(*n)) {
          add_late(n);
          break;
        }
      for (Node* u : n->users())
        if (!n->is_before(*u)) add_late(u);
    }
  }
  void add_late(Node* n) {
    bool& late = marks_.late(n);
    if (late) return;
    late = true;
    late_.push_back(n);
  }

  // Whether the edges the last fusion made (those of its new nodes: a
  // rewrite changes no other) all run forward, so that a graph sorted
  // before it is still sorted.
  bool new_edges_sorted() const {
    for (const Node* n : new_nodes_) {
      for (const Node* in : n->all_input_nodes())
        if (!in->is_before(*n)) return false;
      for (const Node* u : n->users())
        if (!n->is_before(*u)) return false;
    }
    return true;
  }

  // How far above a node its search looks (its inputs, at least); run()
  // filters only where this is under Marks::kMaxNear.
  std::uint32_t near_depth() const {
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>(fusion_.options.max_fuse_search_depth, 1, detail::Marks::kMaxNear - 1));
  }
  // Marks as near each node at most max_fuse_search_depth steps below one of
  // `from` (and those nodes), keeping per node the most steps left, so each
  // is visited at most that many times whatever the number of sources.
  // Nodes that match none of the fusion's targets are harmless sources.
  // Each raised node's users get their inputs_near raised to match. (The
  // rewrite's other edits only remove edges, which leaves inputs_near an
  // upper bound, as the search needs.)
  void mark_near(const std::vector<Node*>& from) {
    const std::uint32_t depth = near_depth();
    near_stack_.clear();
    for (Node* n : from) {
      std::uint8_t& m = marks_.near(n);
      if (m >= depth + 1) continue;
      m = static_cast<std::uint8_t>(depth + 1);
      near_stack_.push_back(n);
    }
    while (!near_stack_.empty()) {
      Node* n = near_stack_.back();
      near_stack_.pop_back();
      const std::uint8_t near = marks_.near(n);
      const std::uint32_t left = near - 1u;
      for (Node* u : n->users()) {
        detail::Marks::Record& r = marks_.at(u);
        r.inputs_near = std::max(r.inputs_near, near);
        if (left == 0 || r.near >= left) continue;
        r.near = static_cast<std::uint8_t>(left);
        near_stack_.push_back(u);
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
  std::uint32_t bfs_stamp_ = 0, round_stamp_ = 0, round_ = 0;
  std::vector<std::pair<std::int64_t, Node*>, kiln::detail::HugePageAllocator<std::pair<std::int64_t, Node*>>> queue_;
  std::vector<Node*> stack_, near_stack_;
  std::vector<Node*> new_nodes_;  // the nodes the last fusion made (update_levels)
  std::vector<Node*> late_;       // live nodes the run's fusions may have left before an input, while late_seen_
  bool late_seen_ = true;         // every fusion of this run made only nodes in new_nodes_
  bool filter_roots_ = false;     // looking only from nodes marked near (run)
  std::uint32_t reach_depth_ = 0;  // > 0: counting reach up to this depth, and searching only where it allows a set
  std::size_t reach_budget_ = 0;    // how many more gains update_reach may pass on
  std::vector<RootEntry> listed_roots_, late_roots_;  // see next_root
  std::size_t next_listed_ = 0;                       // listed_roots_[next_listed_ - 1] is the next listed one
  Node* current_root_ = nullptr;                      // the node searched from now
  std::vector<std::pair<Node*, detail::Marks::Reach>> reach_work_;
  bool sorted_ = true;            // no fusion of this run has left a node before an input
  std::vector<Node*> pending_, subset_, next_;  // independent_subsets' lists (next_: the skipped), kept between calls
};

// Applies `fusion` to `g` as Inductor's apply_group_batch_fusion does; counts
// each fused set under the fusion's name and returns their number.
inline std::size_t apply_group_batch_fusion(Graph& g, const Fusion& fusion, Counters* counters = nullptr,
                                            std::ostream* log = nullptr) {
  Search search(g, fusion);
  return search.run(counters, log);
}

}  // namespace kiln::gbf
