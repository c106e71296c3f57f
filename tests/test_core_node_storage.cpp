// Node storage: nodes carved from doubling chunks (64 slots up to one 2 MiB
// page), erased nodes kept until purge_erased() and then their slots reused;
// GraphInternals::for_each_node_in_storage; order keys; and PatternMatcherPass,
// whose snapshot comes from the storage scan or the (op, target) index and is
// sorted by order key, last node first. Also: GraphInternals' erased_pending /
// recycle_erased_since (erased nodes freed before purge_erased) and
// reorder_epoch, and kwargs, which a node holds boxed (none at all when empty).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/detail/graph_internals.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
using Internals = kiln::detail::GraphInternals;  // the storage hooks a pass driver uses
namespace p = kiln::pattern;
using kiln::testing::check_links;
using kiln::testing::names;

namespace {

// Chunk sizes: 64, 128, ..., 4096 slots (8128 in all), then chunks of one
// 2 MiB page each (2 MiB / sizeof(Node) slots).
constexpr std::size_t kSlotsBeforeHugeChunks = 64 + 128 + 256 + 512 + 1024 + 2048 + 4096;
constexpr std::size_t kHugeChunkSlots = (std::size_t(2) << 20) / sizeof(Node);

struct Scanned {
  Node* node;
  std::uint64_t key;
  std::uint64_t order;
};

// The scan's order key must be the node's own, whatever edits came before.
std::vector<Scanned> scan(const Graph& g) {
  std::vector<Scanned> out;
  Internals::for_each_node_in_storage(g, [&](Node* n, std::uint64_t key, std::uint64_t order) {
    REQUIRE(order == n->order_key());
    out.push_back({n, key, order});
  });
  return out;
}

std::vector<Node*> scanned_nodes(const Graph& g) {
  std::vector<Node*> out;
  for (const Scanned& s : scan(g)) out.push_back(s.node);
  return out;
}

std::vector<Node*> by_order_key(std::vector<Node*> v) {
  std::sort(v.begin(), v.end(), [](Node* a, Node* b) { return a->order_key() < b->order_key(); });
  return v;
}

// The storage scan visits every live node of `g` exactly once, with its bucket
// key, and never an erased or vacant one; sorted by order key the nodes it
// visits are the graph's order.
void check_scan(const Graph& g) {
  const std::vector<Scanned> s = scan(g);
  const std::vector<Node*> live = g.node_list();
  REQUIRE(live.size() == g.size());
  REQUIRE(s.size() == live.size());
  const std::unordered_set<Node*> live_set(live.begin(), live.end());
  std::unordered_set<Node*> seen;
  for (const Scanned& e : s) {
    REQUIRE(live_set.count(e.node) == 1);
    REQUIRE(seen.insert(e.node).second);
    REQUIRE_FALSE(e.node->erased());
    REQUIRE(&e.node->graph() == &g);
    REQUIRE(e.key == Graph::bucket_key(e.node->op(), e.node->target().hash));
    REQUIRE(e.key != 0);
  }
  std::vector<Node*> nodes;
  for (const Scanned& e : s) nodes.push_back(e.node);
  REQUIRE(by_order_key(nodes) == live);
  // Order keys strictly grow along the graph.
  for (std::size_t i = 1; i < live.size(); ++i) REQUIRE(live[i - 1]->order_key() < live[i]->order_key());
}

// x, then `count - 2` unary ops cycling through four targets (each using the
// previous node), then the output.
std::vector<Node*> build_chain(Graph& g, std::size_t count) {
  std::vector<Node*> made;
  Node* prev = g.placeholder("x");
  made.push_back(prev);
  const OpRef ops[] = {aten::relu, aten::neg, aten::sigmoid, aten::abs};
  for (std::size_t i = 0; i + 2 < count; ++i) made.push_back(prev = g.call_function(ops[i % 4], {prev}));
  made.push_back(g.output(ArgList{prev}));
  return made;
}

// x, then `count` nodes op(x) (no users: any of them can be erased), then output(x).
std::vector<Node*> build_fan(Graph& g, std::size_t count, std::size_t relu_every = 3) {
  Node* x = g.placeholder("x");
  std::vector<Node*> made;
  for (std::size_t i = 0; i < count; ++i) made.push_back(g.call_function(i % relu_every == 0 ? aten::relu : aten::neg, {x}));
  g.output(ArgList{x});
  return made;
}

std::unordered_set<const void*> addresses(const std::vector<Node*>& v) {
  return std::unordered_set<const void*>(v.begin(), v.end());
}

std::vector<Node*> relus_in_graph_order(const Graph& g) {
  std::vector<Node*> out;
  for (Node* n : g.nodes())
    if (n->is_call(aten::relu)) out.push_back(n);
  return out;
}

std::vector<Node*> reversed(std::vector<Node*> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

// Edits `g` (built by build_fan) so that its storage order is far from its
// graph order: erases about a quarter of the op nodes and purges them, then
// creates as many new nodes plus `extra` (reusing the freed slots, then fresh
// ones) at random places among the op nodes, through inserting_before,
// inserting_after, and creation followed by move_before; finally moves some
// nodes around. The graph stays valid: every op node reads x only.
void scramble(Graph& g, std::mt19937& rng, std::size_t relu_every, std::size_t extra) {
  Node* x = g.front();
  std::vector<Node*> anchors;  // the live op nodes
  std::size_t erased = 0;
  for (Node* n : g.node_list()) {
    if (n->op() != OpKind::call_function) continue;
    if (rng() % 4 == 0) {
      g.erase_node(n);
      ++erased;
    } else {
      anchors.push_back(n);
    }
  }
  g.purge_erased();
  for (std::size_t i = 0; i < erased + extra; ++i) {
    const OpRef op = rng() % relu_every == 0 ? aten::relu : aten::neg;
    Node* anchor = anchors[rng() % anchors.size()];
    Node* n = nullptr;
    switch (rng() % 3) {
      case 0: {
        auto guard = g.inserting_before(anchor);
        n = g.call_function(op, {x});
        break;
      }
      case 1: {
        auto guard = g.inserting_after(anchor);
        n = g.call_function(op, {x});
        break;
      }
      default: {
        auto guard = g.inserting_before(g.back());  // before the output
        n = g.call_function(op, {x});
        g.move_before(anchor, n);
        break;
      }
    }
    anchors.push_back(n);
  }
  // Move some nodes around (their index and storage places stay).
  for (int k = 0; k < 200; ++k) {
    Node* n = anchors[rng() % anchors.size()];
    Node* anchor = anchors[rng() % anchors.size()];
    if (anchor != n) g.move_before(anchor, n);
  }
}

// Whether the relus, visited in storage order, are in graph order (then a test
// of the pass's sorting would prove little).
bool storage_order_is_graph_order(const Graph& g) {
  std::vector<Node*> in_storage;
  for (Node* n : scanned_nodes(g))
    if (n->is_call(aten::relu)) in_storage.push_back(n);
  return in_storage == relus_in_graph_order(g);
}

// The relus in the order PatternMatcherPass visits them with a relu pattern.
std::vector<Node*> visit_order(Graph& g) {
  std::vector<Node*> seen;
  PatternMatcherPass pass("record");
  pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">),
                        [&](auto&, Graph&, Node* root) { seen.push_back(root); });
  const std::size_t applied = pass.apply(g);
  REQUIRE(applied == seen.size());
  return seen;
}

}  // namespace

// ---------------------------------------------------------------- storage scan

TEST_CASE("storage: the chunk sizes these tests rely on") {
  CHECK(kHugeChunkSlots >= 4096);  // a Node is at most 512 bytes
  CHECK(kHugeChunkSlots < 8192);   // so the doubling stops at the huge page
}

TEST_CASE("storage scan: a fresh graph is scanned in creation order across every chunk size") {
  for (std::size_t count : {std::size_t(2), std::size_t(63), std::size_t(64), std::size_t(65), std::size_t(192),
                            std::size_t(193), kSlotsBeforeHugeChunks, kSlotsBeforeHugeChunks + 1,
                            kSlotsBeforeHugeChunks + kHugeChunkSlots, kSlotsBeforeHugeChunks + kHugeChunkSlots + 1,
                            kSlotsBeforeHugeChunks + 2 * kHugeChunkSlots + 100}) {
    CAPTURE(count);
    Graph g;
    const std::vector<Node*> made = build_chain(g, count);
    REQUIRE(g.size() == count);
    check_scan(g);
    // Nothing was erased: storage order is creation order (here also graph order).
    CHECK(scanned_nodes(g) == made);
  }
}

TEST_CASE("storage: nodes fill doubling chunks from 64 slots, then 2 MiB-aligned chunks of one huge page") {
  Graph g;
  const std::size_t count = kSlotsBeforeHugeChunks + 2 * kHugeChunkSlots + 10;
  const std::vector<Node*> made = build_chain(g, count);
  // Chunk boundaries: where consecutive nodes stop being adjacent slots.
  std::vector<std::size_t> starts{0};
  for (std::size_t i = 1; i < made.size(); ++i)
    if (reinterpret_cast<const char*>(made[i]) != reinterpret_cast<const char*>(made[i - 1]) + sizeof(Node))
      starts.push_back(i);
  std::vector<std::size_t> expected{0};
  for (std::size_t c = 64; c <= 4096; c *= 2) expected.push_back(expected.back() + c);
  expected.push_back(expected.back() + kHugeChunkSlots);
  expected.push_back(expected.back() + kHugeChunkSlots);
  // (Two chunks never touch: the allocator keeps a header before each block.)
  CHECK(starts == expected);
  // The huge-page chunks start on a 2 MiB boundary.
  const std::size_t huge = std::size_t(2) << 20;
  CHECK(reinterpret_cast<std::uintptr_t>(made[kSlotsBeforeHugeChunks]) % huge == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(made[kSlotsBeforeHugeChunks + kHugeChunkSlots]) % huge == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(made[kSlotsBeforeHugeChunks + 2 * kHugeChunkSlots]) % huge == 0);
  check_scan(g);
}

TEST_CASE("storage scan: an empty graph visits nothing") {
  Graph g;
  CHECK(scan(g).empty());
  Node* x = g.placeholder("x");
  g.erase_node(x);
  CHECK(scan(g).empty());
  g.purge_erased();
  CHECK(scan(g).empty());
}

TEST_CASE("storage scan: every node kind is visited with its own bucket key") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* f = g.call_function(aten::mm, {x, w});
  Node* m = g.call_method("view", {f, Arg(-1)});
  Node* mod = g.call_module("fc", {m});
  Node* out = g.output(ArgList{mod});
  const auto s = scan(g);
  REQUIRE(s.size() == 6);
  const std::vector<Node*> expected{x, w, f, m, mod, out};
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(s[i].node == expected[i]);
    CHECK(s[i].key == Graph::bucket_key(expected[i]->op(), expected[i]->target().hash));
  }
  // Same target text, different kinds: different keys.
  CHECK(s[0].key != Graph::bucket_key(OpKind::get_attr, x->target().hash));
  CHECK(s[2].key == Graph::bucket_key(OpKind::call_function, aten::mm.hash));
  check_scan(g);
}

TEST_CASE("storage scan: erased nodes are skipped before purge_erased") {
  Graph g;
  const std::vector<Node*> made = build_fan(g, 20000);
  std::vector<Node*> erased;
  for (std::size_t i = 0; i < made.size(); i += 3) {
    g.erase_node(made[i]);
    erased.push_back(made[i]);
  }
  // The first and last nodes of the op range too.
  g.erase_node(made.back());
  erased.push_back(made.back());
  if (!made[1]->erased()) {
    g.erase_node(made[1]);
    erased.push_back(made[1]);
  }
  check_scan(g);
  const auto seen = addresses(scanned_nodes(g));
  for (Node* n : erased) {
    REQUIRE(n->erased());
    REQUIRE(seen.count(n) == 0);
  }
  CHECK(g.size() == made.size() + 2 - erased.size());
}

TEST_CASE("storage scan: after purge_erased new nodes reuse the freed slots and the scan stays right") {
  Graph g;
  const std::vector<Node*> made = build_fan(g, 12000);
  Node* x = g.front();
  std::vector<Node*> erased;
  for (std::size_t i = 0; i < made.size(); i += 5) {
    g.erase_node(made[i]);
    erased.push_back(made[i]);
  }
  g.purge_erased();
  check_scan(g);
  const auto freed = addresses(erased);

  // As many new nodes as were freed take exactly the freed slots, whatever
  // their kind and target (each slot's key changes with its node).
  auto before_output = g.inserting_before(g.back());
  std::vector<Node*> fresh;
  for (std::size_t i = 0; i < erased.size(); ++i) {
    Node* n = nullptr;
    switch (i % 5) {
      case 0: n = g.call_function(aten::sigmoid, {x}); break;
      case 1: n = g.call_function(aten::relu, {x}); break;
      case 2: n = g.call_method("view", {x, Arg(-1)}); break;
      case 3: n = g.call_module("fc", {x}); break;
      default: n = g.get_attr("w" + std::to_string(i)); break;
    }
    fresh.push_back(n);
    REQUIRE(freed.count(n) == 1);
  }
  CHECK(addresses(fresh) == freed);
  check_scan(g);
  // The scan now differs from graph order: the new nodes sit at the end of the
  // graph but in the middle of the storage.
  CHECK(scanned_nodes(g) != g.node_list());
  CHECK(by_order_key(scanned_nodes(g)) == g.node_list());

  // Past the freed slots, new nodes take fresh ones.
  const auto before = addresses(scanned_nodes(g));
  for (int i = 0; i < 100; ++i) {
    Node* n = g.call_function(aten::tanh, {x});
    REQUIRE(freed.count(n) == 0);
    REQUIRE(before.count(n) == 0);
  }
  check_scan(g);

  // Reused slots can be freed and reused again.
  std::vector<Node*> second;
  for (std::size_t i = 0; i < fresh.size(); i += 2) {
    g.erase_node(fresh[i]);
    second.push_back(fresh[i]);
  }
  check_scan(g);
  g.purge_erased();
  check_scan(g);
  const auto freed2 = addresses(second);
  for (std::size_t i = 0; i < second.size(); ++i) REQUIRE(freed2.count(g.call_function(aten::exp, {x})) == 1);
  check_scan(g);
  kiln::lint(g);
}

TEST_CASE("storage scan: a graph whose every node was erased and purged, then rebuilt") {
  Graph g;
  std::vector<Node*> made = build_chain(g, 9000);
  for (auto it = made.rbegin(); it != made.rend(); ++it) g.erase_node(*it);
  CHECK(g.empty());
  CHECK(scan(g).empty());
  g.purge_erased();
  CHECK(scan(g).empty());
  const auto freed = addresses(made);
  const std::vector<Node*> rebuilt = build_chain(g, 9500);
  check_scan(g);
  std::size_t reused = 0;
  for (Node* n : rebuilt) reused += freed.count(n);
  CHECK(reused == 9000);
  CHECK(g.size() == 9500);
  kiln::lint(g);
}

TEST_CASE("storage scan: a failed create_node leaves no node in the storage") {
  Graph g;
  Node* x = g.placeholder("x");
  Graph other;
  Node* foreign = other.placeholder("y");
  CHECK_THROWS_AS(g.call_function(aten::neg, {foreign}), GraphError);
  check_scan(g);
  CHECK(scan(g).size() == 1);
  // The slot it took is free again.
  Node* n = g.call_function(aten::neg, {x});
  check_scan(g);
  CHECK(scan(g).size() == 2);
  CHECK(scanned_nodes(g) == std::vector<Node*>{x, n});
}

TEST_CASE("storage scan: a moved graph scans the same nodes, the moved-from graph none, and both stay usable") {
  std::mt19937 rng(5);
  Graph g;
  build_fan(g, 10000);
  scramble(g, rng, 3, 200);
  // Leave some erased nodes awaiting purge, and some vacant slots.
  std::vector<Node*> ops;
  for (Node* n : g.nodes())
    if (n->op() == OpKind::call_function) ops.push_back(n);
  std::vector<Node*> purged_before_move;
  for (std::size_t i = 0; i < ops.size(); i += 7) {
    g.erase_node(ops[i]);
    purged_before_move.push_back(ops[i]);
  }
  g.purge_erased();
  std::vector<Node*> pending;
  for (std::size_t i = 3; i < ops.size(); i += 7) {
    g.erase_node(ops[i]);
    pending.push_back(ops[i]);
  }
  check_scan(g);
  const std::vector<Node*> before = scanned_nodes(g);
  const std::vector<Node*> order = g.node_list();

  Graph h = std::move(g);
  check_scan(h);
  for (Node* n : pending) {  // erased nodes awaiting purge move along too
    REQUIRE(n->erased());
    REQUIRE(&n->graph() == &h);
  }
  CHECK(scanned_nodes(h) == before);
  CHECK(h.node_list() == order);
  CHECK(g.empty());
  CHECK(scan(g).empty());

  // The moved-from graph is an empty, working graph; its new nodes are its own.
  build_chain(g, 300);
  check_scan(g);
  check_scan(h);
  CHECK(scanned_nodes(h) == before);

  // The moved graph purges what was erased before the move and reuses the
  // vacant slots it took over (freed before or after the move); its new nodes
  // belong to it.
  h.purge_erased();
  auto freed = addresses(pending);
  for (Node* n : purged_before_move) freed.insert(n);
  REQUIRE(freed.size() > 1000);
  Node* hx = h.front();
  {
    auto guard = h.inserting_before(h.back());
    for (int i = 0; i < 1000; ++i) {
      Node* n = h.call_function(aten::relu, {hx});
      REQUIRE(&n->graph() == &h);
      REQUIRE(freed.count(n) == 1);
    }
  }
  check_scan(h);
  kiln::lint(h);

  // Move assignment over a graph that had nodes of its own.
  Graph k("k");
  build_chain(k, 5000);
  const std::vector<Node*> h_scan = scanned_nodes(h);
  k = std::move(h);
  check_scan(k);
  CHECK(scanned_nodes(k) == h_scan);
  CHECK(scan(h).empty());
  for (Node* n : k.nodes()) REQUIRE(&n->graph() == &k);
  Node* kn = nullptr;
  {
    auto guard = k.inserting_before(k.back());
    kn = k.call_function(aten::neg, {k.front()});
  }
  CHECK(&kn->graph() == &k);
  check_scan(k);
}

TEST_CASE("storage scan: clone() of an edited graph scans right, in its graph order") {
  std::mt19937 rng(11);
  Graph g;
  build_fan(g, 9000);
  scramble(g, rng, 3, 500);
  REQUIRE(scanned_nodes(g) != g.node_list());
  std::unordered_map<const Node*, Node*> map;
  Graph c = g.clone(&map);
  check_scan(c);
  // The clone creates its nodes in graph order, so its storage is in graph order.
  CHECK(scanned_nodes(c) == c.node_list());
  CHECK(names(c) == names(g));
  std::vector<Node*> mapped;
  for (Node* n : g.node_list()) mapped.push_back(map.at(n));
  CHECK(mapped == c.node_list());
  // The original is untouched.
  check_scan(g);
}

// ---------------------------------------------------------------- order keys

TEST_CASE("order keys: sorting the scanned nodes by order key gives the graph order after inserts and moves") {
  std::mt19937 rng(3);
  Graph g;
  const std::vector<Node*> made = build_fan(g, 6000);
  Node* x = g.front();
  check_scan(g);

  // Many inserts at one spot (adjacent keys force renumbering).
  Node* mid = made[3000];
  for (int i = 0; i < 200; ++i) {
    auto guard = g.inserting_before(mid);
    g.call_function(aten::sigmoid, {x});
  }
  check_scan(g);
  check_links(g);
  // The 200 sit right before mid, in creation order.
  {
    Node* n = mid;
    for (int i = 0; i < 200; ++i) {
      n = n->prev();
      REQUIRE(n->is_call(aten::sigmoid));
    }
    CHECK(n->prev() == made[2999]);
  }
  // Inserting after one node: each new one right after it.
  Node* after = made[10];
  std::vector<Node*> inserted_after;
  for (int i = 0; i < 100; ++i) {
    auto guard = g.inserting_after(after);
    inserted_after.push_back(g.call_function(aten::tanh, {x}));
  }
  check_scan(g);
  CHECK(after->next() == inserted_after.back());
  CHECK(inserted_after.front()->next() == made[11]);

  // Inserting at the very front (keys below the first node's).
  for (int i = 0; i < 70; ++i) {
    auto guard = g.inserting_before(g.front());
    g.placeholder("p" + std::to_string(i));
  }
  check_scan(g);

  // Random moves, including to the end (nullptr anchor) and to the front.
  std::vector<Node*> live = g.node_list();
  for (int k = 0; k < 3000; ++k) {
    Node* n = live[rng() % live.size()];
    const unsigned where = rng() % 10;
    Node* anchor = where == 0 ? nullptr : where == 1 ? g.front() : live[rng() % live.size()];
    g.move_before(anchor, n);
    if (k % 500 == 0) check_scan(g);
  }
  check_scan(g);
  check_links(g);

  // After purge and slot reuse, with the new nodes inserted mid-graph.
  std::vector<Node*> erasable;
  for (Node* n : g.nodes())
    if (n->op() == OpKind::call_function && n->num_users() == 0) erasable.push_back(n);
  for (std::size_t i = 0; i < erasable.size(); i += 2) g.erase_node(erasable[i]);
  g.purge_erased();
  live = g.node_list();
  for (int k = 0; k < 2000; ++k) {
    auto guard = g.inserting_before(live[rng() % live.size()]);
    g.call_function(aten::exp, {x});
  }
  check_scan(g);
  check_links(g);
}

// ---------------------------------------------------------------- PatternMatcherPass's visiting order

TEST_CASE("PatternMatcherPass: visits in reverse graph order when storage order differs, storage-scan regime") {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    Graph g;
    build_fan(g, 6000, /*relu_every=*/3);
    scramble(g, rng, 3, 700);
    const std::vector<Node*> relus = relus_in_graph_order(g);
    // Many candidates: the pass scans the storage.
    REQUIRE(relus.size() * 16 > g.size());
    REQUIRE_FALSE(storage_order_is_graph_order(g));
    const std::vector<Node*> seen = visit_order(g);
    CHECK(seen.size() == relus.size());
    CHECK(seen == reversed(relus));
  }
}

TEST_CASE("PatternMatcherPass: visits in reverse graph order when index order differs, index regime") {
  for (std::uint32_t seed : {4u, 5u, 6u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    Graph g;
    build_fan(g, 6000, /*relu_every=*/40);
    scramble(g, rng, 40, 700);
    const std::vector<Node*> relus = relus_in_graph_order(g);
    // Few candidates: the pass reads the (op, target) index, which holds
    // them in creation order, not graph order.
    REQUIRE(relus.size() * 16 <= g.size());
    REQUIRE(relus.size() > 50);
    REQUIRE(g.find_nodes(OpKind::call_function, aten::relu, /*sorted=*/false) != relus);
    const std::vector<Node*> seen = visit_order(g);
    CHECK(seen.size() == relus.size());
    CHECK(seen == reversed(relus));
  }
}

TEST_CASE("PatternMatcherPass: visits in reverse graph order with more than 16 root targets and few candidates") {
  std::mt19937 rng(8);
  Graph g;
  build_fan(g, 6000, /*relu_every=*/40);
  scramble(g, rng, 40, 700);
  const std::vector<Node*> relus = relus_in_graph_order(g);
  REQUIRE(relus.size() * 16 <= g.size());
  REQUIRE_FALSE(storage_order_is_graph_order(g));
  std::vector<Node*> seen;
  std::size_t others = 0;
  PatternMatcherPass pass("many_roots");
  pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">), [&](auto&, Graph&, Node* root) { seen.push_back(root); });
  // Sixteen more root targets, none of them in the graph.
  const std::array<OpRef, 16> absent{aten::sigmoid, aten::tanh, aten::gelu,     aten::silu,  aten::abs,
                                     aten::exp,     aten::log,  aten::sqrt,     aten::rsqrt, aten::reciprocal,
                                     aten::hardswish, aten::clamp, aten::amax, aten::softmax, aten::log_softmax,
                                     aten::clone};
  for (OpRef op : absent) {
    REQUIRE(g.count_nodes(OpKind::call_function, op) == 0);
    pass.register_pattern(p::CallFunctionVarArgs(op), [&](auto&, Graph&, Node*) { ++others; });
  }
  CHECK(pass.apply(g) == relus.size());
  CHECK(others == 0);
  CHECK(seen == reversed(relus));
}

TEST_CASE("PatternMatcherPass: nodes a handler creates are not visited, in either regime") {
  for (std::size_t relu_every : {std::size_t(3), std::size_t(40)}) {
    CAPTURE(relu_every);
    std::mt19937 rng(static_cast<std::uint32_t>(relu_every));
    Graph g;
    build_fan(g, 5000, relu_every);
    scramble(g, rng, relu_every, 300);
    // Vacant slots left for the handler's nodes to take, in the middle of the storage.
    std::vector<Node*> negs;
    for (Node* n : g.nodes())
      if (n->is_call(aten::neg)) negs.push_back(n);
    for (std::size_t i = 0; i < negs.size(); i += 4) g.erase_node(negs[i]);
    g.purge_erased();
    const std::vector<Node*> relus = relus_in_graph_order(g);
    REQUIRE((relus.size() * 16 > g.size()) == (relu_every == 3));

    std::vector<Node*> seen;
    std::vector<Node*> created;
    PatternMatcherPass pass("grow");
    pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">), [&](auto& m, Graph& gr, Node* root) {
      seen.push_back(root);
      // Inserting before the root (the pass's insertion point): a new relu the
      // scan would reach later if it were in the snapshot.
      created.push_back(gr.call_function(aten::relu, {m.template get<"x">()}));
    });
    CHECK(pass.apply(g) == relus.size());
    CHECK(seen == reversed(relus));
    REQUIRE(created.size() == relus.size());
    // Each new relu sits right before the node it was made at.
    for (std::size_t i = 0; i < created.size(); ++i) REQUIRE(created[i]->next() == seen[i]);
    CHECK(g.count_nodes(OpKind::call_function, aten::relu) == 2 * relus.size());
    check_scan(g);

    // A second apply visits old and new relus alike, in reverse graph order.
    const std::vector<Node*> all = relus_in_graph_order(g);
    CHECK(visit_order(g) == reversed(all));
  }
}

TEST_CASE("PatternMatcherPass: nodes a handler erases before they are visited are skipped, in either regime") {
  for (std::size_t relu_every : {std::size_t(3), std::size_t(40)}) {
    CAPTURE(relu_every);
    std::mt19937 rng(static_cast<std::uint32_t>(100 + relu_every));
    Graph g;
    build_fan(g, 5000, relu_every);
    scramble(g, rng, relu_every, 300);
    const std::vector<Node*> relus = relus_in_graph_order(g);
    REQUIRE(relus.size() > 10);
    REQUIRE((relus.size() * 16 > g.size()) == (relu_every == 3));
    std::unordered_map<Node*, std::size_t> position;
    for (std::size_t i = 0; i < relus.size(); ++i) position[relus[i]] = i;

    // At each relu, erase the relu before it in graph order (not yet visited).
    std::vector<Node*> seen;
    PatternMatcherPass pass("erase_previous");
    pass.register_pattern(p::CallFunction(aten::relu, p::kw<"x">), [&](auto&, Graph& gr, Node* root) {
      seen.push_back(root);
      const std::size_t i = position.at(root);
      if (i > 0) gr.erase_node(relus[i - 1]);
    });
    std::vector<Node*> expected;
    for (std::size_t i = relus.size(); i-- > 0;) {
      expected.push_back(relus[i]);
      if (i > 0) --i;  // relus[i - 1] was erased by the handler at relus[i]
    }
    CHECK(pass.apply(g) == expected.size());
    CHECK(seen == expected);
    CHECK(g.count_nodes(OpKind::call_function, aten::relu) == expected.size());
    for (Node* n : relus) CHECK(n->erased() == (std::find(seen.begin(), seen.end(), n) == seen.end()));
    check_scan(g);
  }
}

// ---------------------------------------------------------------- erased nodes awaiting purge, and recycling them

TEST_CASE("GraphInternals::erased_pending: counts the erased nodes awaiting purge_erased, and purge_erased resets it") {
  Graph g;
  const std::vector<Node*> made = build_fan(g, 50);
  CHECK(Internals::erased_pending(g) == 0);
  for (std::size_t i = 0; i < 20; ++i) {
    g.erase_node(made[i * 2]);
    REQUIRE(Internals::erased_pending(g) == i + 1);
  }
  CHECK(g.size() == 52 - 20);
  // Erased but not freed: still readable, still erased.
  for (std::size_t i = 0; i < 20; ++i) CHECK(made[i * 2]->erased());
  g.purge_erased();
  CHECK(Internals::erased_pending(g) == 0);
  g.purge_erased();  // nothing left: a no-op
  CHECK(Internals::erased_pending(g) == 0);
  // Failing to erase (a node with users) counts nothing.
  CHECK_THROWS_AS(g.erase_node(g.front()), GraphError);
  CHECK(Internals::erased_pending(g) == 0);
  g.erase_node(made[1]);
  CHECK(Internals::erased_pending(g) == 1);
  check_scan(g);
  kiln::lint(g);
}

TEST_CASE("GraphInternals::recycle_erased_since: frees the accepted nodes erased since the mark, and new nodes reuse them last freed first") {
  Graph g;
  const std::vector<Node*> made = build_fan(g, 40);
  const std::unordered_set<const void*> all_made = addresses(made);
  // Three erased before the mark.
  for (std::size_t i = 0; i < 3; ++i) g.erase_node(made[i]);
  const std::size_t mark = Internals::erased_pending(g);
  REQUIRE(mark == 3);
  // Ten since, made[10] .. made[19] in that order; the even ones are accepted.
  std::vector<Node*> since;
  for (std::size_t i = 10; i < 20; ++i) {
    g.erase_node(made[i]);
    since.push_back(made[i]);
  }
  std::unordered_set<const Node*> accept;
  for (std::size_t i = 10; i < 20; i += 2) accept.insert(made[i]);
  accept.insert(made[0]);  // accepted too, but erased before the mark: stays
  std::vector<const Node*> asked;
  Internals::recycle_erased_since(g, mark, [&](const Node* n) {
    asked.push_back(n);
    return accept.count(n) == 1;
  });
  // The predicate saw exactly the ten erased since the mark, once each.
  CHECK(asked.size() == 10);
  CHECK(std::unordered_set<const Node*>(asked.begin(), asked.end()) ==
        std::unordered_set<const Node*>(since.begin(), since.end()));
  CHECK(Internals::erased_pending(g) == 3 + 5);
  // The ones not accepted, and the ones erased before the mark, are still
  // erased nodes awaiting purge (their memory untouched).
  for (std::size_t i = 11; i < 20; i += 2) {
    CHECK(made[i]->erased());
    CHECK(&made[i]->graph() == &g);
  }
  for (std::size_t i = 0; i < 3; ++i) CHECK(made[i]->erased());
  check_scan(g);

  // The freed ones are taken by the next nodes, the last freed first. The list
  // of erased nodes runs newest first, so made[18] was freed first and made[10] last.
  Node* x = g.front();
  std::vector<Node*> reused;
  {
    auto guard = g.inserting_before(g.back());
    for (int i = 0; i < 5; ++i) reused.push_back(g.call_function(aten::sigmoid, {x}));
  }
  CHECK(reused == std::vector<Node*>{made[10], made[12], made[14], made[16], made[18]});
  for (Node* n : reused) {
    CHECK_FALSE(n->erased());
    CHECK(n->is_call(aten::sigmoid));
  }
  // Then fresh memory: not one of the pending nodes.
  Node* fresh = nullptr;
  {
    auto guard = g.inserting_before(g.back());
    fresh = g.call_function(aten::tanh, {x});
  }
  CHECK(all_made.count(fresh) == 0);
  CHECK(Internals::erased_pending(g) == 8);
  check_scan(g);
  kiln::lint(g);

  // purge_erased frees the rest, and the next nodes take exactly their places.
  std::unordered_set<const void*> pending;
  for (std::size_t i = 0; i < 3; ++i) pending.insert(made[i]);
  for (std::size_t i = 11; i < 20; i += 2) pending.insert(made[i]);
  g.purge_erased();
  CHECK(Internals::erased_pending(g) == 0);
  std::unordered_set<const void*> taken;
  {
    auto guard = g.inserting_before(g.back());
    for (int i = 0; i < 8; ++i) taken.insert(g.call_function(aten::exp, {x}));
  }
  CHECK(taken == pending);
  check_scan(g);
  kiln::lint(g);
}

TEST_CASE("GraphInternals::recycle_erased_since: a mark at or past erased_pending() frees nothing") {
  Graph g;
  const std::vector<Node*> made = build_fan(g, 30);
  for (std::size_t i = 0; i < 5; ++i) g.erase_node(made[i]);
  const std::size_t stale_mark = Internals::erased_pending(g);
  REQUIRE(stale_mark == 5);
  g.purge_erased();  // the mark now refers to nodes that are gone
  for (std::size_t i = 10; i < 13; ++i) g.erase_node(made[i]);
  REQUIRE(Internals::erased_pending(g) == 3);
  std::size_t asked = 0;
  auto accept_all = [&](const Node*) {
    ++asked;
    return true;
  };
  Internals::recycle_erased_since(g, stale_mark, accept_all);
  CHECK(asked == 0);
  CHECK(Internals::erased_pending(g) == 3);
  // A mark equal to the count: nothing erased since.
  Internals::recycle_erased_since(g, Internals::erased_pending(g), accept_all);
  CHECK(asked == 0);
  CHECK(Internals::erased_pending(g) == 3);
  for (std::size_t i = 10; i < 13; ++i) CHECK(made[i]->erased());
  // The next nodes take the places purged before, never the pending ones.
  const std::unordered_set<const void*> purged = addresses({made.begin(), made.begin() + 5});
  {
    auto guard = g.inserting_before(g.back());
    for (int i = 0; i < 5; ++i) CHECK(purged.count(g.call_function(aten::relu, {g.front()})) == 1);
  }
  for (std::size_t i = 10; i < 13; ++i) CHECK(made[i]->erased());
  // Mark 0 covers every pending node.
  Internals::recycle_erased_since(g, 0, accept_all);
  CHECK(asked == 3);
  CHECK(Internals::erased_pending(g) == 0);
  check_scan(g);
  kiln::lint(g);
}

TEST_CASE("GraphInternals::recycle_erased_since: lint and the storage scan stay right through random erases, recycles, creates and purges") {
  std::mt19937 rng(2024);
  Graph g;
  build_fan(g, 3000);
  Node* x = g.front();
  // What the graph should hold pending, oldest first (erased_pending() marks index it).
  std::vector<Node*> model;
  std::size_t recycled = 0, created = 0;
  for (int round = 0; round < 300; ++round) {
    CAPTURE(round);
    std::vector<Node*> ops;
    for (Node* n : g.nodes())
      if (n->op() == OpKind::call_function) ops.push_back(n);
    const std::size_t mark = Internals::erased_pending(g);
    REQUIRE(mark == model.size());
    // Erase a few op nodes (they have no users).
    const std::size_t erase = ops.empty() ? 0 : 1 + rng() % 6;
    for (std::size_t k = 0; k < erase && !ops.empty(); ++k) {
      const std::size_t i = rng() % ops.size();
      g.erase_node(ops[i]);
      model.push_back(ops[i]);
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const unsigned what = rng() % 4;
    if (what == 0) {
      // Recycle since the mark (or an earlier one) whatever a coin accepts.
      const std::size_t from = rng() % 2 ? mark : (model.empty() ? 0 : rng() % model.size());
      std::unordered_set<const Node*> accepted;
      std::vector<const Node*> asked;
      Internals::recycle_erased_since(g, from, [&](const Node* n) {
        asked.push_back(n);
        if (rng() % 2) return false;
        accepted.insert(n);
        return true;
      });
      REQUIRE(asked.size() == model.size() - std::min(from, model.size()));
      const std::unordered_set<const Node*> since(model.begin() + static_cast<std::ptrdiff_t>(std::min(from, model.size())), model.end());
      for (const Node* n : asked) REQUIRE(since.count(n) == 1);
      std::vector<Node*> kept;
      for (Node* n : model)
        if (!accepted.count(n)) kept.push_back(n);
      model = kept;
      recycled += accepted.size();
    } else if (what == 1 && round % 10 == 0) {
      g.purge_erased();
      model.clear();
    }
    REQUIRE(Internals::erased_pending(g) == model.size());
    // Create a few nodes at random places; none may take a pending node's place.
    const std::unordered_set<const void*> pending = addresses(model);
    const std::size_t create = rng() % 6;
    for (std::size_t k = 0; k < create; ++k) {
      Node* anchor = ops.empty() ? g.back() : ops[rng() % ops.size()];
      auto guard = rng() % 2 ? g.inserting_before(anchor) : g.inserting_before(g.back());
      Node* n = g.call_function(rng() % 2 ? aten::relu : aten::neg, {x});
      REQUIRE(pending.count(n) == 0);
      ++created;
    }
    for (Node* n : model) REQUIRE(n->erased());
    if (round % 25 == 0) {
      check_scan(g);
      kiln::lint(g);
    }
  }
  CHECK(recycled > 50);
  CHECK(created > 300);
  check_scan(g);
  check_links(g);
  kiln::lint(g);
  g.purge_erased();
  CHECK(Internals::erased_pending(g) == 0);
  check_scan(g);
}

TEST_CASE("GraphInternals::reorder_epoch: unchanged by creating and erasing nodes, changed by moves and by renumbering") {
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> made;
  for (int i = 0; i < 20; ++i) made.push_back(g.call_function(aten::relu, {x}));
  const std::uint64_t e0 = Internals::reorder_epoch(g);
  // Appending more (the output last), and erasing (at the end and in the
  // middle), keeps it.
  Node* last = nullptr;
  for (int i = 0; i < 50; ++i) last = g.call_function(aten::neg, {x});
  g.output(ArgList{x});
  CHECK(Internals::reorder_epoch(g) == e0);
  g.erase_node(g.back());
  CHECK(Internals::reorder_epoch(g) == e0);
  g.erase_node(last);
  g.erase_node(made[7]);
  CHECK(Internals::reorder_epoch(g) == e0);
  g.purge_erased();
  CHECK(Internals::reorder_epoch(g) == e0);
  // One node inserted mid-graph takes a key between its neighbours': no other key changes.
  {
    auto guard = g.inserting_before(made[3]);
    g.call_function(aten::exp, {x});
  }
  CHECK(Internals::reorder_epoch(g) == e0);

  // Moves change it.
  g.move_before(made[2], made[15]);
  const std::uint64_t e1 = Internals::reorder_epoch(g);
  CHECK(e1 != e0);
  CHECK(made[15]->next() == made[2]);
  made[5]->prepend(made[16]);
  const std::uint64_t e2 = Internals::reorder_epoch(g);
  CHECK(e2 != e1);
  CHECK(made[16]->next() == made[5]);
  made[5]->append(made[17]);
  const std::uint64_t e3 = Internals::reorder_epoch(g);
  CHECK(e3 != e2);
  CHECK(made[5]->next() == made[17]);
  check_links(g);

  // Inserts at one spot halve the gap there each time: a few leave the keys
  // alone, ~32 exhaust the gap and relabel the nodes around the spot.
  Node* anchor = made[12];
  Node* before_anchor = anchor->prev();
  std::vector<Node*> inserted;
  for (int i = 0; i < 10; ++i) {
    auto guard = g.inserting_before(anchor);
    inserted.push_back(g.call_function(aten::sigmoid, {x}));
  }
  CHECK(Internals::reorder_epoch(g) == e3);
  for (int i = 0; i < 90; ++i) {
    auto guard = g.inserting_before(anchor);
    inserted.push_back(g.call_function(aten::sigmoid, {x}));
  }
  CHECK(Internals::reorder_epoch(g) != e3);
  // The order is still right: the 100 in creation order right before the anchor.
  REQUIRE(inserted.size() == 100);
  CHECK(inserted.front()->prev() == before_anchor);
  for (std::size_t i = 1; i < inserted.size(); ++i) REQUIRE(inserted[i - 1]->next() == inserted[i]);
  CHECK(inserted.back()->next() == anchor);
  for (std::size_t i = 1; i < inserted.size(); ++i) REQUIRE(inserted[i - 1]->is_before(*inserted[i]));
  const std::uint64_t e4 = Internals::reorder_epoch(g);
  g.output(ArgList{x});
  CHECK(Internals::reorder_epoch(g) == e4);
  check_links(g);
  check_scan(g);
  kiln::lint(g);
}

TEST_CASE("a moved graph keeps its pending erased nodes, and purges or recycles them") {
  Graph g;
  const std::vector<Node*> made = build_fan(g, 1000);
  std::vector<Node*> erased;
  for (std::size_t i = 0; i < made.size(); i += 10) {
    g.erase_node(made[i]);
    erased.push_back(made[i]);
  }
  REQUIRE(Internals::erased_pending(g) == 100);
  Graph h = std::move(g);
  CHECK(Internals::erased_pending(h) == 100);
  CHECK(Internals::erased_pending(g) == 0);
  for (Node* n : erased) {
    REQUIRE(n->erased());
    REQUIRE(&n->graph() == &h);
  }
  // The moved-from graph has nothing to purge, and works.
  g.purge_erased();
  build_chain(g, 10);
  CHECK(Internals::erased_pending(g) == 0);
  kiln::lint(g);

  // Recycling in the new owner frees from the list it took over.
  std::unordered_set<const Node*> first_half(erased.begin(), erased.begin() + 50);
  Internals::recycle_erased_since(h, 0, [&](const Node* n) { return first_half.count(n) == 1; });
  CHECK(Internals::erased_pending(h) == 50);
  for (std::size_t i = 50; i < erased.size(); ++i) CHECK(erased[i]->erased());
  h.purge_erased();
  CHECK(Internals::erased_pending(h) == 0);
  // All 100 places are free for h's next nodes.
  std::unordered_set<const void*> taken;
  {
    auto guard = h.inserting_before(h.back());
    for (int i = 0; i < 100; ++i) {
      Node* n = h.call_function(aten::relu, {h.front()});
      REQUIRE(&n->graph() == &h);
      taken.insert(n);
    }
  }
  CHECK(taken == addresses(erased));
  check_scan(h);
  kiln::lint(h);

  // Move assignment too.
  for (std::size_t i = 1; i < 40; i += 2) h.erase_node(made[i]);
  REQUIRE(Internals::erased_pending(h) == 20);
  Graph k("k");
  build_chain(k, 100);
  k.erase_node(k.back());
  k = std::move(h);
  CHECK(Internals::erased_pending(k) == 20);
  CHECK(Internals::erased_pending(h) == 0);
  for (std::size_t i = 1; i < 40; i += 2) CHECK(&made[i]->graph() == &k);
  k.purge_erased();
  CHECK(Internals::erased_pending(k) == 0);
  check_scan(k);
  kiln::lint(k);
}

// ---------------------------------------------------------------- kwargs (held boxed, absent when empty)

TEST_CASE("kwargs: set_kwargs to a dict and back to empty keeps users and inputs right") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* n = g.call_function(aten::add_Tensor, {x});
  g.output(ArgList{n});
  CHECK(n->kwargs().empty());
  CHECK(n->kwargs().begin() == n->kwargs().end());
  n->set_kwargs({{"other", Arg(y)}, {"alpha", Arg(2)}});
  REQUIRE(n->kwargs().size() == 2);
  CHECK(n->kwargs().find("other")->node() == y);
  CHECK(*n->kwargs().find("alpha") == Arg(2));
  CHECK(y->num_users() == 1);
  CHECK(y->user_list() == std::vector<Node*>{n});
  CHECK(std::vector<Node*>(n->all_input_nodes().begin(), n->all_input_nodes().end()) == std::vector<Node*>{x, y});
  // set_args keeps the kwargs.
  n->set_args({x, Arg(1)});
  CHECK(n->kwargs().size() == 2);
  CHECK(y->num_users() == 1);
  // Back to empty.
  n->set_kwargs({});
  CHECK(n->kwargs().empty());
  CHECK(n->kwargs().find("other") == nullptr);
  CHECK(y->num_users() == 0);
  CHECK(y->user_list().empty());
  CHECK(x->num_users() == 1);
  CHECK(std::vector<Node*>(n->all_input_nodes().begin(), n->all_input_nodes().end()) == std::vector<Node*>{x});
  CHECK(n->args().size() == 2);
  // And non-empty again.
  n->set_kwargs({{"other", Arg(ArgList{y, x})}});
  CHECK(n->kwargs().size() == 1);
  CHECK(y->num_users() == 1);
  CHECK(x->num_users() == 1);  // one user, however many references
  kiln::lint(g);
  // Replacing one non-empty dict by another drops the old keys.
  n->set_kwargs({{"alpha", Arg(3)}});
  CHECK(n->kwargs().size() == 1);
  CHECK(n->kwargs().find("other") == nullptr);
  CHECK(y->num_users() == 0);
  kiln::lint(g);
}

TEST_CASE("kwargs: set_kwarg on a node without kwargs adds one, and links its node") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* n = g.call_function(aten::relu, {x});
  g.output(ArgList{n});
  REQUIRE(n->kwargs().empty());
  n->set_kwarg("src", Arg(y));
  REQUIRE(n->kwargs().size() == 1);
  CHECK(n->kwargs().find("src")->node() == y);
  CHECK(y->user_list() == std::vector<Node*>{n});
  // The same key again replaces; another key appends after it.
  n->set_kwarg("src", Arg(z));
  n->set_kwarg("dim", Arg(-1));
  REQUIRE(n->kwargs().size() == 2);
  std::vector<std::string> keys;
  for (const auto& [k, v] : n->kwargs()) keys.push_back(std::string(k));
  CHECK(keys == std::vector<std::string>{"src", "dim"});
  CHECK(n->kwargs().find("src")->node() == z);
  CHECK(y->num_users() == 0);
  CHECK(z->user_list() == std::vector<Node*>{n});
  kiln::lint(g);
}

TEST_CASE("kwargs: replace_input_with and replace_all_uses_with reach a node referenced only from a kwarg") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* w = g.placeholder("w");
  Node* n = g.call_function(aten::add_Tensor, {x}, {{"other", Arg(y)}, {"extra", Arg(ArgList{y, Arg(1)})}});
  Node* m = g.call_function(aten::add_Tensor, {x}, {{"other", Arg(z)}});
  g.output(ArgList{n, m});
  n->replace_input_with(y, z);
  CHECK(n->kwargs().find("other")->node() == z);
  CHECK(*n->kwargs().find("extra") == Arg(ArgList{z, Arg(1)}));
  CHECK(n->args()[0].node() == x);
  CHECK(y->num_users() == 0);
  CHECK(z->num_users() == 2);
  kiln::lint(g);
  // Every user of z reaches it through a kwarg only.
  const auto changed = z->replace_all_uses_with(w);
  CHECK(changed.size() == 2);
  CHECK(z->num_users() == 0);
  CHECK(n->kwargs().find("other")->node() == w);
  CHECK(m->kwargs().find("other")->node() == w);
  CHECK(w->num_users() == 2);
  g.erase_node(z);  // no users left
  g.erase_node(y);
  kiln::lint(g);
}

TEST_CASE("kwargs: erasing a node whose kwargs referenced another removes it from that node's users") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* keep = g.call_function(aten::add_Tensor, {x}, {{"other", Arg(y)}});
  Node* dead = g.call_function(aten::add_Tensor, {x}, {{"other", Arg(y)}});
  g.output(ArgList{keep});
  REQUIRE(y->num_users() == 2);
  g.erase_node(dead);
  CHECK(y->num_users() == 1);
  CHECK(y->user_list() == std::vector<Node*>{keep});
  CHECK(dead->kwargs().empty());
  CHECK(x->user_list() == std::vector<Node*>{keep});
  kiln::lint(g);
  // Its place, once purged, goes to a node without kwargs, which has none.
  g.purge_erased();
  Node* fresh = nullptr;
  {
    auto guard = g.inserting_before(g.back());
    fresh = g.call_function(aten::neg, {x});
  }
  CHECK(static_cast<void*>(fresh) == static_cast<void*>(dead));
  CHECK(fresh->kwargs().empty());
  CHECK(y->num_users() == 1);
  // With the last kwarg user gone (the output moved off it), y can go too.
  g.back()->set_args({ArgList{fresh}});
  g.erase_node(keep);
  CHECK(y->num_users() == 0);
  g.erase_node(y);
  kiln::lint(g);
}

TEST_CASE("names: an erased node's name stays used, and find_node misses it before and after its slot is reused") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  Node* s = g.call_function(aten::sigmoid, {r});
  g.output(Arg(s));
  REQUIRE(r->name() == "relu");
  s->replace_input_with(r, x);
  g.erase_node(r);
  // Erased, not yet freed: the table still points at it; find_node must not return it.
  CHECK(g.find_node("relu") == nullptr);
  g.purge_erased();
  // The freed slot goes to the next node, which has another name.
  auto here = g.inserting_before(s);
  Node* t = g.call_function(aten::tanh, {x});
  REQUIRE(t == r);  // same memory
  CHECK(g.find_node("relu") == nullptr);
  CHECK(g.find_node("tanh") == t);
  // Names are never reused: an explicit "relu" and a derived one both count on.
  CHECK(g.call_function(aten::relu, {x}, {}, "relu")->name() == "relu_1");
  CHECK(g.call_function(aten::relu, {x})->name() == "relu_2");
  CHECK(g.find_node("relu_1") != nullptr);
  kiln::lint(g);
}

TEST_CASE("names: derived names stay right when a pass alternates between more targets than the name memo holds") {
  // 40 methods and abs named round-robin, 5 rounds: each counts on from its own base.
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<std::string> methods;
  for (int i = 0; i < 40; ++i) methods.push_back("m" + std::to_string(i));
  for (int round = 0; round < 5; ++round) {
    for (const std::string& m : methods) {
      Node* n = g.call_method(m, {x});
      CHECK(n->name() == (round == 0 ? m : m + "_" + std::to_string(round)));
      CHECK(g.find_node(n->name()) == n);
    }
    Node* a = g.call_function(aten::abs, {x});  // a builtin: abs_1, abs_2, ...
    CHECK(a->name() == "abs_" + std::to_string(round + 1));
  }
  CHECK(g.size() == 1 + 5 * 41);
}

TEST_CASE("order keys: many inserts at one spot relabel only the nodes around it, and keys keep growing along the graph") {
  Graph g;
  const std::vector<Node*> made = build_fan(g, 20000);
  Node* x = g.front();
  std::vector<std::uint64_t> before;
  for (Node* n : made) before.push_back(n->order_key());
  // 3,000 inserts right before one node in the middle: each halves the gap
  // there, so the spot runs out of keys about every 32 inserts.
  Node* mid = made[10000];
  {
    auto guard = g.inserting_before(mid);
    for (int i = 0; i < 3000; ++i) g.call_function(aten::sigmoid, {x});
  }
  check_links(g);  // every node's key above its predecessor's
  CHECK(mid->prev()->is_call(aten::sigmoid));
  // Nodes far from the spot kept their keys: relabeling stayed local.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < 2000; ++i) kept += made[i]->order_key() == before[i];
  for (std::size_t i = made.size() - 2000; i < made.size(); ++i) kept += made[i]->order_key() == before[i];
  CHECK(kept == 4000);
  // Inserting after one node puts each new node right after it, with the same result.
  Node* early = made[100];
  {
    auto guard = g.inserting_after(early);
    for (int i = 0; i < 3000; ++i) g.call_function(aten::tanh, {x});
  }
  check_links(g);
  CHECK(early->next()->is_call(aten::tanh));
  CHECK(made.back()->order_key() == before.back());
  kiln::lint(g);
}

TEST_CASE("order keys: random inserts, before and after random nodes, keep is_before equal to graph order") {
  std::mt19937 rng(11);
  Graph g;
  std::vector<Node*> live = build_fan(g, 500);
  Node* x = g.front();
  for (int step = 0; step < 20000; ++step) {
    // Mostly at a few hot spots (crowding them), sometimes anywhere.
    const std::size_t at = rng() % 4 != 0 ? rng() % 3 : rng() % live.size();
    Node* anchor = live[at];
    Node* n;
    if (rng() % 2) {
      auto guard = g.inserting_before(anchor);
      n = g.call_function(aten::neg, {x});
    } else {
      auto guard = g.inserting_after(anchor);
      n = g.call_function(aten::neg, {x});
    }
    live.push_back(n);
    if (step % 2000 == 0) check_links(g);
  }
  check_links(g);
  const std::vector<Node*> order = g.node_list();
  for (std::size_t i = 1; i < order.size(); ++i) REQUIRE(order[i - 1]->is_before(*order[i]));
  check_scan(g);
}

TEST_CASE("recycling: a node created in a freed slot starts blank, whatever the slot held") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(aten::add_Tensor, {x, y}, ArgDict{{"alpha", 2}});
  a->meta.val = MetaVal(std::int64_t{3});
  a->meta.extra_json.emplace_back("note", "\"kept\"");
  a->meta.present = false;
  a->scratch() = 7;
  // Enough users that a's user list moved to the heap; then none.
  std::vector<Node*> users;
  for (int i = 0; i < 10; ++i) users.push_back(g.call_function(aten::relu, {a}));
  REQUIRE(a->num_users() == 10);
  for (Node* u : users) g.erase_node(u);
  g.purge_erased();
  g.erase_node(a);
  g.purge_erased();
  // The slot freed last is reused first.
  Node* b = g.call_function(aten::mul_Tensor, {y, 3});
  REQUIRE(b == a);
  CHECK_FALSE(b->erased());
  CHECK(b->op() == OpKind::call_function);
  CHECK(b->target() == aten::mul_Tensor);
  CHECK(b->name() == "mul");
  CHECK(b->args() == ArgList{Arg(y), Arg(3)});
  CHECK(b->kwargs().empty());
  CHECK(b->meta.val.is_none());
  CHECK(b->meta.extra_json.empty());
  CHECK(b->meta.present);
  CHECK(b->scratch() == 0);
  CHECK(b->num_users() == 0);
  CHECK(b->users().begin() == b->users().end());
  CHECK(names(std::vector<Node*>(b->all_input_nodes())) == std::vector<std::string>{"y"});
  CHECK(names(y->user_list()) == std::vector<std::string>{"mul"});
  CHECK(x->num_users() == 0);
  Node* r = g.call_function(aten::relu, {b});
  CHECK(b->user_list() == std::vector<Node*>{r});
  CHECK(g.find_nodes(OpKind::call_function, aten::add_Tensor).empty());
  CHECK(g.find_nodes(OpKind::call_function, aten::mul_Tensor) == std::vector<Node*>{b});
  g.output(Arg(r));
  kiln::lint(g);
}

namespace {

// The reference for replacing an input: the node's arguments rewritten by
// hand and set again, which collects the inputs from the arguments afresh.
Arg replaced(const Arg& a, const Node* from, Node* to) {
  return map_nodes(a, [&](Node* n) { return n == from ? to : n; });
}

// Every node's inputs and users, by name, in order.
std::vector<std::string> link_lists(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes()) {
    std::string s = n->name() + " in:";
    for (Node* i : n->all_input_nodes()) s += " " + i->name();
    s += " users:";
    for (Node* u : n->users()) s += " " + u->name();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

TEST_CASE("replace_input_with and replace_all_uses_with: inputs and user lists as setting the rewritten arguments gives them") {
  std::mt19937_64 rng(20261122);
  auto below = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int round = 0; round < 300; ++round) {
    Graph g;
    std::vector<Node*> ph;
    for (int i = 0; i < 6; ++i) ph.push_back(g.placeholder("p" + std::to_string(i)));
    auto random_arg = [&](auto& self, int depth) -> Arg {
      switch (below(depth > 0 ? 6 : 8)) {
        case 0: return Arg(static_cast<std::int64_t>(below(5)));
        case 1: return Arg(nullptr);
        case 6:
        case 7: {  // a list, sometimes nested
          ArgList l;
          for (std::size_t k = below(4); k > 0; --k) l.push_back(self(self, depth + 1));
          return Arg(std::move(l));
        }
        default: return Arg(ph[below(ph.size())]);
      }
    };
    // A few users of random arguments (long ones past the 16-input limit too),
    // some with kwargs, and each a user of some earlier ones.
    std::vector<Node*> made;
    for (int k = 0; k < 5; ++k) {
      ArgList args;
      const std::size_t n = below(8) == 0 ? 17 + below(6) : 1 + below(5);
      for (std::size_t i = 0; i < n; ++i) args.push_back(random_arg(random_arg, 0));
      if (!made.empty() && below(2) == 0) args.push_back(Arg(made[below(made.size())]));
      ArgDict kwargs;
      if (below(3) == 0) kwargs.set("other", random_arg(random_arg, 0));
      made.push_back(g.call_function(aten::cat, std::move(args), std::move(kwargs)));
    }
    if (below(2) == 0) {  // more placeholders, so that a long argument list has many distinct inputs
      for (int i = 6; i < 24; ++i) ph.push_back(g.placeholder("p" + std::to_string(i)));
      ArgList args;
      for (Node* p : ph) args.push_back(Arg(p));
      made.push_back(g.call_function(aten::cat, std::move(args)));
    }
    Graph ref = g.clone();
    Node* from = ph[below(ph.size())];
    Node* rf = ref.find_node(from->name());
    // The reference: a user's arguments rewritten by hand and set again.
    auto rewrite = [&](Node* u, Node* rt) {
      ArgList a;
      for (const Arg& x : u->args()) a.push_back(replaced(x, rf, rt));
      ArgDict kw;
      for (const auto& [k, v] : u->kwargs()) kw.set(k, replaced(v, rf, rt));
      u->set_args_and_kwargs(std::move(a), std::move(kw));
    };
    if (below(2) == 0) {
      // One user (or a node that does not use `from` at all), to a
      // placeholder or to another user.
      Node* user = made[below(made.size())];
      Node* to = below(4) == 0 ? made[below(made.size())] : ph[below(ph.size())];
      if (to == user) continue;
      user->replace_input_with(from, to);
      rewrite(ref.find_node(user->name()), ref.find_node(to->name()));
    } else {
      // Every user, in their order in from's list.
      Node* to = ph[below(ph.size())];
      if (to == from) continue;
      from->replace_all_uses_with(to);
      for (Node* u : rf->user_list()) rewrite(u, ref.find_node(to->name()));
    }
    REQUIRE(link_lists(g) == link_lists(ref));
    std::vector<std::string> args_g, args_ref;
    for (Node* n : g.nodes()) args_g.push_back(format_arg(Arg(n->args().to_list())));
    for (Node* n : ref.nodes()) args_ref.push_back(format_arg(Arg(n->args().to_list())));
    REQUIRE(args_g == args_ref);
  }
}

TEST_CASE("the (kind, target) index stays right while creates and erases cycle through more targets than its memo holds") {
  const std::vector<OpRef> ops = {aten::add_Tensor, aten::mul_Tensor, aten::relu,    aten::sigmoid, aten::tanh,
                                  aten::mm,         aten::addmm,      aten::sub_Tensor, aten::div_Tensor, aten::neg,
                                  aten::exp,        aten::log,        aten::abs,     aten::sqrt,    aten::rsqrt,
                                  aten::gelu,       aten::silu,       aten::clone,   aten::view,    aten::permute};
  std::mt19937_64 rng(7);
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> live;
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      live.push_back(g.call_function(ops[rng() % ops.size()], {x}));
    } else {
      const std::size_t i = rng() % live.size();
      g.erase_node(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      if (rng() % 8 == 0) g.purge_erased();
    }
    if (step % 97 == 0 || step == 3999) {
      for (OpRef op : ops) {
        std::vector<Node*> want;
        for (Node* n : g.nodes())
          if (n->is_call(op)) want.push_back(n);
        REQUIRE(g.find_nodes(OpKind::call_function, op) == want);
      }
    }
  }
}
