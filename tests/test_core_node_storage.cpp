// Node storage: nodes carved from doubling chunks (64 slots up to one 2 MiB
// page), erased nodes kept until purge_erased() and then their slots reused;
// Graph::for_each_node_in_storage; order keys; and PatternMatcherPass, whose
// snapshot comes from the storage scan or the (op, target) index and is sorted
// by order key, last node first.
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
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
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
  g.for_each_node_in_storage([&](Node* n, std::uint64_t key, std::uint64_t order) {
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
