#pragma once
// stable_topological_sort(): Inductor's stable sort. Nodes keep their relative
// order except where a node comes before one of its inputs, in which case it is
// moved to just after the last of them. An already sorted graph is left exactly
// as it is (no node moves, no order key changes).
//
// Both forms work out the whole new order before moving anything, so a
// dependency cycle throws with the graph untouched.
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
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

  // Nothing moves until the order is known: the moves (node, the node it goes
  // after) are recorded and made at the end. While recording, the list the
  // moves would have made is: the placed nodes in order, then the unplaced
  // ones in their old order; so the node after the cursor is the first
  // unplaced one (`tail`), except that with no cursor yet the first node
  // placed stays where it is, and unplaced nodes before it never follow a cursor.
  std::vector<std::pair<Node*, Node*>> moves;
  std::size_t tail = 0;
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
    if (!cursor) {  // (Inductor: the first node placed stays where it is)
      tail = i + 1;
    } else if (tail != i) {
      moves.emplace_back(node, cursor);
    }
    while (tail < order.size() && ready[tail]) ++tail;
    cursor = node;
    for (std::uint32_t w = std::exchange(first_waiting[i], kNone); w != kNone; w = next_waiting[w]) pending.push_back(w);
  }
  if (ready_count != order.size()) {
    for (std::size_t i = 0; i < order.size(); ++i)
      if (!ready[i]) throw GraphError("stable_topological_sort: dependency cycle through node " + order[i]->name());
  }
  for (const auto& [node, after] : moves) g.move_before(after->next(), node);
  return moves.size();
}

// What the incremental sort returns. The full sort counts as moved every
// node it places while a node that waits lies before it, so its count needs
// the length of those stretches of the list, which only a walk tells (order
// keys are not positions); the order comes out the same either way.
enum class SortMoveCount {
  like_full_sort,  // the full sort's count (walks those stretches, reading one link per node)
  relinked,        // how many nodes it relinked: those that waited, less any already in place
};

// The same sort, for a graph where only the nodes of `late` may come before
// one of their inputs (every other node comes after all of its inputs;
// `late` holds live nodes of `g`, duplicates allowed). It leaves exactly the
// order the full sort would, and throws the same GraphError on a cycle, but
// looks only at the late nodes, the nodes that wait, their users and the
// nodes they wait on, not the rest of the graph: O(k log k) for k of those
// (plus, with SortMoveCount::like_full_sort, a walk of each stretch of the
// list passed while a node waits). It does not use Node::scratch().
//
// Why the rest can be skipped: a node that is not late and has no input that
// waits is ready when the walk reaches it, and is placed where it stands; so
// the walk visits only the nodes that may not be, in list order (a min-heap on
// order keys, which stay put: nothing moves until the order is known). A
// node that waits is then placed, as in the full sort, right after the node
// placed before it, and those are the only nodes that move.
//
// Each node it looks at costs a few cache misses (hash table, heap, the node
// and its neighbours, all over memory), where the full sort's walk costs a
// fraction of one: it pays where the nodes that wait are a small share of
// the graph, or the graph is too large for the cache.
inline std::size_t stable_topological_sort(Graph& g, std::span<Node* const> late,
                                           SortMoveCount count = SortMoveCount::like_full_sort) {
  using Key = std::uint64_t;
  enum class State : std::uint8_t { queued, unplaced, placed };
  struct Info {
    Node* node = nullptr;
    State state = State::queued;
    bool waited = false;  // has waited: is moved to follow the node placed before it
    std::uint32_t first_waiting = 0, next_waiting = 0;  // 1 + an id; 0: none
    // While it waits: its inputs in order (args, then kwargs, duplicates
    // included) are flat[inputs_begin, ...), and it waits on flat[waits_at].
    std::uint32_t inputs_begin = 0, waits_at = 0;
  };
  constexpr std::uint32_t kNone = 0;
  detail::NodeMap<std::uint32_t> ids(late.size() * 4);  // 1 + the index into `info`
  std::vector<Info> info;
  info.reserve(late.size() * 2);
  using Entry = std::pair<Key, std::uint32_t>;  // (order key, id)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> turns;  // the nodes the walk must stop at
  auto id_of = [&](const Node* n) -> std::uint32_t {
    const std::uint32_t* id = ids.find(n);
    return id ? *id : kNone;
  };
  // Queues `n` to be stopped at (once).
  auto queue = [&](Node* n) {
    bool fresh = false;
    std::uint32_t& id = ids.get(n, &fresh);
    if (!fresh) return;
    info.push_back(Info{n});
    id = static_cast<std::uint32_t>(info.size());
    turns.emplace(n->order_key(), id);
    // It is looked at within a few hundred stops: ask for the rest of it now.
    n->prefetch_for_edit(1);
  };
  for (Node* n : late) queue(n);
  if (turns.empty()) return 0;

  // All nodes up to the node at `turn_key` have been reached; a reached node
  // is placed unless it is `unplaced` (waiting, or about to be looked at again).
  Key turn_key = 0;
  auto is_ready = [&](const Node* n) {
    if (n->order_key() > turn_key) return false;
    const std::uint32_t id = id_of(n);
    return id == kNone || info[id - 1].state == State::placed;
  };
  // The ids of the unplaced nodes after the first node placed, in list
  // order (nodes become unplaced when reached, so in that order), from
  // tail[tail_head] on; nodes placed since are skipped when met. The full
  // sort's list is the placed nodes then these in their old order, so a
  // node placed stays put only if it is the first of them.
  std::vector<std::uint32_t> tail;
  std::size_t tail_head = 0;
  auto tail_front = [&]() -> std::uint32_t {
    while (tail_head < tail.size() && info[tail[tail_head] - 1].state == State::placed) ++tail_head;
    return tail_head < tail.size() ? tail[tail_head] : kNone;
  };

  std::size_t moved = 0;
  Node* cursor = nullptr;  // the last node placed
  bool placed_any = false;
  std::vector<std::uint32_t> pending;  // as in the full sort: a stack of ids
  std::vector<std::pair<Node*, Node*>> relinks;  // (node, the node it goes after), in order
  Node* previous_turn = nullptr;
  std::size_t unplaced = 0;
  std::vector<Node*> flat;  // the inputs of the nodes that wait (Info::inputs_begin)
  // With nothing unplaced, every node reached is placed and only the queued
  // ones need a record: the tables start again from those, so that they stay
  // the size of what is out of place at once, not of all that was.
  auto start_afresh = [&] {
    std::vector<Entry> queued;
    queued.reserve(turns.size());
    while (!turns.empty()) {
      queued.push_back(turns.top());
      turns.pop();
    }
    std::vector<Info> kept;
    kept.reserve(queued.size() * 2);
    ids = detail::NodeMap<std::uint32_t>(queued.size() * 2);
    for (auto& [key, id] : queued) {
      kept.push_back(info[id - 1]);
      id = static_cast<std::uint32_t>(kept.size());
      ids.get(kept.back().node) = id;
    }
    info = std::move(kept);
    turns = decltype(turns)(std::greater<>(), std::move(queued));
    tail.clear();
    tail_head = 0;
    flat.clear();
  };
  while (!turns.empty()) {
    if (unplaced == 0 && info.size() >= 4096 && info.size() > 8 * turns.size()) start_afresh();
    const auto [key, id] = turns.top();
    turns.pop();
    Node* const at = info[id - 1].node;
    // The next stop's node is read soon: ask for it now (stops are all over memory).
    if (!turns.empty()) {
      const Node* next = info[turns.top().second - 1].node;
      detail::prefetch(next);
      detail::prefetch(&next->args());
    }
    // The nodes between the last stop and this one are placed where they
    // stand (the first of them stays, if the first placed, and so do the
    // rest). The cursor they leave is not needed: a node that moves follows
    // a node placed at the same stop, the first being the one stopped at.
    if (!placed_any || count == SortMoveCount::like_full_sort) {
      Node* const before = at->prev();
      if (before && before != previous_turn) {
        if (count == SortMoveCount::like_full_sort && placed_any && tail_front() != kNone)
          for (Node* n = previous_turn ? previous_turn->next() : g.front(); n != at; n = n->next()) ++moved;
        placed_any = true;
      }
    }
    previous_turn = at;
    turn_key = key;
    info[id - 1].state = State::unplaced;
    ++unplaced;
    if (placed_any && count == SortMoveCount::like_full_sort) tail.push_back(id);
    pending.push_back(id);
    while (!pending.empty()) {
      const std::uint32_t i = pending.back();
      pending.pop_back();
      Node* node = info[i - 1].node;
      Node* last_unready = nullptr;
      if (!info[i - 1].waited) {  // reached at its turn: all its inputs
        const std::size_t begin = flat.size();
        std::size_t waits_at = 0;
        auto visit = [&](Node* in) {
          if (!is_ready(in)) {
            last_unready = in;
            waits_at = flat.size();
          }
          flat.push_back(in);
        };
        for (const auto& a : node->args()) for_each_node(a, visit);
        for (const auto& [k, a] : node->kwargs()) for_each_node(a, visit);
        if (!last_unready) {
          flat.resize(begin);
        } else {
          info[i - 1].inputs_begin = static_cast<std::uint32_t>(begin);
          info[i - 1].waits_at = static_cast<std::uint32_t>(waits_at);
        }
      } else {
        // Woken: the inputs after the one it waited on were ready then and
        // still are, so the last one not ready now lies before it. (Looking
        // at all of them again made a stack of n inputs listed in reverse
        // order cost n * n.)
        for (std::uint32_t k = info[i - 1].waits_at; k-- > info[i - 1].inputs_begin;)
          if (!is_ready(flat[k])) {
            last_unready = flat[k];
            info[i - 1].waits_at = k;
            break;
          }
      }
      if (last_unready) {
        if (!info[i - 1].waited) {
          // Its users after the walk now may not be ready when reached.
          info[i - 1].waited = true;
          for (Node* u : node->users())
            if (u->order_key() > turn_key) queue(u);
        }
        if (last_unready->order_key() > turn_key) queue(last_unready);  // must be stopped at to wake the node
        const std::uint32_t w = id_of(last_unready);
        info[i - 1].next_waiting = info[w - 1].first_waiting;
        info[w - 1].first_waiting = i;
        continue;
      }
      if (!placed_any) {  // (Inductor: the first node placed stays where it is)
        placed_any = true;
      } else {
        // It stays only if it is the first unplaced node (one reached before
        // the first node placed never is: it lies before that node).
        if (count == SortMoveCount::like_full_sort && tail_front() != i) ++moved;
        if (info[i - 1].waited) relinks.emplace_back(node, cursor);
      }
      info[i - 1].state = State::placed;
      --unplaced;
      cursor = node;
      for (std::uint32_t w = std::exchange(info[i - 1].first_waiting, kNone); w != kNone; w = info[w - 1].next_waiting)
        pending.push_back(w);
    }
  }
  // What still waits lies on a cycle, or waits on one; the full sort names the first in list order.
  Node* first_stuck = nullptr;
  for (const Info& in : info)
    if (in.state != State::placed && (!first_stuck || in.node->is_before(*first_stuck))) first_stuck = in.node;
  if (first_stuck) throw GraphError("stable_topological_sort: dependency cycle through node " + first_stuck->name());
  std::size_t relinked = 0;
  for (const auto& [node, after] : relinks) {
    if (after->next() == node) continue;
    g.move_before(after->next(), node);
    ++relinked;
  }
  return count == SortMoveCount::like_full_sort ? moved : relinked;
}

}  // namespace kiln
