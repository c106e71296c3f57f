// The search of group/batch fusion against plain reference computations:
// its independent sets against Inductor's greedy written naively (every
// candidate's whole ancestor and descendant sets), on random graphs whose
// candidates lie at many levels; and the shortcuts of the search (looking
// only from nodes near a matchable one, skipping the final sort when no
// rewrite left a node before an input) against the search without them.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/group_batch_fusion.hpp"
#include "towers_graph.hpp"

using namespace kiln;
using kiln::testing::f32;

namespace {

// batch_tanh's match, with a rewrite that changes nothing and records each
// set it is given, so that every set is chosen on the graph as built.
class RecordingTanh final : public gbf::Fusion {
 public:
  RecordingTanh() : Fusion("batch_tanh", true) {}
  bool matches_calls_only() const override { return inner_.matches_calls_only(); }
  bool may_match_target(OpRef t) const override { return inner_.may_match_target(t); }
  std::optional<std::string> match(const Node& n) const override { return inner_.match(n); }
  std::vector<Node*> fuse(Graph&, std::span<Node* const> subset) const override {
    std::vector<std::string> names;
    for (const Node* n : subset) names.push_back(n->name());
    sets.push_back(names);
    return {subset.begin(), subset.end()};
  }
  mutable std::vector<std::vector<std::string>> sets;

 private:
  gbf::BatchPointwise inner_{"batch_tanh", torch::tanh};
};

// A fusion as `inner` but that does not say which targets it matches, so
// the search looks from every node.
class Unfiltered final : public gbf::Fusion {
 public:
  explicit Unfiltered(std::unique_ptr<gbf::Fusion> inner) : Fusion(inner->name(), inner->pre_grad()), inner_(std::move(inner)) {}
  std::optional<std::string> match(const Node& n) const override { return inner_->match(n); }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override { return inner_->fuse(g, subset); }

 private:
  std::unique_ptr<gbf::Fusion> inner_;
};

// The fusion, plus one unused neg of the graph's first node made before the
// output at each fuse: a node the search does not see, so that the run
// sorts the whole graph at the end instead of only around the nodes it made.
class WithStrayNode final : public gbf::Fusion {
 public:
  explicit WithStrayNode(std::unique_ptr<gbf::Fusion> inner) : Fusion(inner->name(), inner->pre_grad()), inner_(std::move(inner)) {
    options = inner_->options;
  }
  std::optional<std::string> match(const Node& n) const override { return inner_->match(n); }
  bool matches_calls_only() const override { return inner_->matches_calls_only(); }
  bool may_match_target(OpRef t) const override { return inner_->may_match_target(t); }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    std::vector<Node*> r = inner_->fuse(g, subset);
    auto guard = g.inserting_before(g.output_node());
    g.call_function(aten::neg, {Arg(g.front())});
    return r;
  }

 private:
  std::unique_ptr<gbf::Fusion> inner_;
};

// Applies each named fusion with `options` to `fast` as it is and to
// `plain` through Unfiltered (searched from every node), checking after
// each that both graphs are the same; counts go to the two Counters.
void expect_same_as_unfiltered(Graph& fast, Graph& plain, std::initializer_list<const char*> fusions,
                               const gbf::SearchOptions& options, Counters& fast_counts, Counters& plain_counts) {
  for (const char* name : fusions) {
    CAPTURE(name);
    auto f = make_group_batch_fusion(name);
    REQUIRE(f->matches_calls_only());
    f->options = options;
    gbf::apply_group_batch_fusion(fast, *f, &fast_counts);
    Unfiltered u(make_group_batch_fusion(name));
    REQUIRE(!u.matches_calls_only());
    u.options = options;
    gbf::apply_group_batch_fusion(plain, u, &plain_counts);
    lint(fast);
    CHECK(to_string(fast) == to_string(plain));
  }
  CHECK(fast_counts.values() == plain_counts.values());
}

// Tanh nodes at random depths, each fed by one or two earlier values
// (through an add and a chain of relus of random length), all read by one
// cat in a shuffled order: the search finds them all from the output, as
// one group, in the cat's order.
struct RandomTanhs {
  Graph g;
  std::vector<Node*> tanhs;  // in the cat's order
};
RandomTanhs random_tanhs(std::mt19937& rng, int count) {
  RandomTanhs r;
  Graph& g = r.g;
  std::vector<Node*> values{g.placeholder("x", f32({4, 5}))};
  auto pick = [&] { return values[std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(rng)]; };
  auto value = [&](Node* n) {
    n->meta.val = f32({4, 5});
    values.push_back(n);
    return n;
  };
  for (int k = 0; k < count; ++k) {
    Node* in = pick();
    if (rng() % 2) in = value(g.call_function(torch::add, {Arg(in), Arg(pick())}));
    for (int relus = static_cast<int>(rng() % 4); relus > 0; --relus) in = value(g.call_function(torch::relu, {Arg(in)}));
    r.tanhs.push_back(value(g.call_function(torch::tanh, {Arg(in)})));
  }
  std::shuffle(r.tanhs.begin(), r.tanhs.end(), rng);
  ArgList outs;
  for (Node* t : r.tanhs) outs.push_back(Arg(t));
  Node* cat = g.call_function(torch::cat, {Arg(std::move(outs))}, ArgDict{{"dim", Arg(0)}});
  g.output(ArgList{Arg(cat)});
  return r;
}

std::set<const Node*> reach(const Node* from, bool up) {
  std::set<const Node*> seen;
  std::vector<const Node*> stack{from};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    auto visit = [&](const Node* m) {
      if (seen.insert(m).second) stack.push_back(m);
    };
    if (up) {
      for (const Node* in : n->all_input_nodes()) visit(in);
    } else {
      for (const Node* u : n->users()) visit(u);
    }
  }
  return seen;
}

// Inductor's find_independent_subset_greedy, with each node's dependencies
// computed whole.
std::vector<std::vector<std::string>> greedy_sets(const std::vector<Node*>& candidates, std::size_t max_size,
                                                  std::size_t min_size) {
  std::map<const Node*, std::set<const Node*>> related;
  for (const Node* n : candidates) {
    related[n] = reach(n, true);
    for (const Node* d : reach(n, false)) related[n].insert(d);
  }
  std::vector<std::vector<std::string>> sets;
  std::vector<Node*> nodes = candidates;
  while (!nodes.empty()) {
    std::vector<Node*> subset, next;
    for (Node* n : nodes) {
      const bool dependent =
          std::any_of(subset.begin(), subset.end(), [&](const Node* s) { return related[s].count(n) != 0; });
      if (subset.size() >= max_size || dependent) next.push_back(n);
      else subset.push_back(n);
    }
    if (subset.size() >= min_size) {
      std::vector<std::string> names;
      for (const Node* n : subset) names.push_back(n->name());
      sets.push_back(names);
    }
    nodes.swap(next);
  }
  return sets;
}

}  // namespace

TEST_CASE("the search's independent sets are Inductor's greedy ones on random graphs with candidates at many levels") {
  std::mt19937 rng(20261124);
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    const int count = 5 + static_cast<int>(rng() % 60);
    RandomTanhs r = random_tanhs(rng, count);
    const std::size_t max_size = 2 + rng() % 9;
    const std::size_t min_size = 1 + rng() % 3;
    const auto expected = greedy_sets(r.tanhs, max_size, min_size);

    RecordingTanh fusion;
    fusion.options.max_fuse_set_size = static_cast<std::int64_t>(max_size);
    fusion.options.min_fuse_set_size = static_cast<std::int64_t>(min_size);
    gbf::apply_group_batch_fusion(r.g, fusion);
    // The output's search finds every tanh first; later searches may add sets
    // of what was left over.
    REQUIRE(fusion.sets.size() >= expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      CHECK(fusion.sets[i] == expected[i]);
    }
    CHECK(!expected.empty());
  }
}

TEST_CASE("looking only from nodes near a matchable one, and sorting only when needed, change nothing of the result") {
  // 2,000 towers: past 1,800 the batched pointwise ops are batched again and
  // the rewrites leave nodes before their inputs, so the final sort moves nodes.
  for (const std::int64_t towers : {std::int64_t{37}, std::int64_t{2000}}) {
    CAPTURE(towers);
    Graph fast = kiln::testing::towers_graph(towers);
    Graph plain = kiln::testing::towers_graph(towers);
    Counters fast_counts, plain_counts;
    expect_same_as_unfiltered(fast, plain, {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"},
                              gbf::SearchOptions{}, fast_counts, plain_counts);
    CHECK(fast.size() == plain.size());
    CHECK(fast_counts.values().at("batch_tanh") > 0);
  }
}

TEST_CASE("the final sort from the nodes the fusions made leaves the full sort's order") {
  // 2,000 towers: the batched pointwise ops are batched again, and the
  // rewrites leave many nodes before their inputs (see above).
  const std::int64_t towers = 2000;
  Graph made = kiln::testing::towers_graph(towers);
  Graph full = kiln::testing::towers_graph(towers);
  Counters made_counts, full_counts;
  for (const char* name : {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"}) {
    CAPTURE(name);
    auto f = make_group_batch_fusion(name);
    gbf::apply_group_batch_fusion(made, *f, &made_counts);
    WithStrayNode stray(make_group_batch_fusion(name));
    gbf::apply_group_batch_fusion(full, stray, &full_counts);
    // The stray nodes have no users and took names no other node has.
    for (Node* n : full.find_nodes(OpKind::call_function, aten::neg)) full.erase_node(n);
    lint(made);
    CHECK(to_string(made) == to_string(full));
  }
  CHECK(made_counts.values() == full_counts.values());
  CHECK(made_counts.values().at("batch_tanh") > 0);
}

TEST_CASE("the search leaves a graph sorted when a rewrite put a node before its input") {
  // post-grad batch_linear puts each bias add before its select, as Inductor
  // does; the search must still return a sorted graph.
  Graph g;
  Node* x = g.placeholder("x", f32({3, 4}));
  ArgList outs;
  for (int i = 0; i < 6; ++i) {
    Node* w = g.placeholder("w" + std::to_string(i), f32({4, 5}));
    Node* b = g.placeholder("b" + std::to_string(i), f32({5}));
    Node* mm = g.call_function(aten::addmm, {Arg(b), Arg(x), Arg(w)});
    mm->meta.val = f32({3, 5});
    outs.push_back(Arg(mm));
  }
  g.output(Arg(outs));
  auto f = make_group_batch_fusion("batch_linear_post_grad");
  REQUIRE(f != nullptr);
  CHECK(gbf::apply_group_batch_fusion(g, *f) == 1);
  lint(g);
  for (const Node* n : g.nodes())
    for (const Node* in : n->all_input_nodes()) CHECK(in->is_before(*n));
}

TEST_CASE("searching only above inputs that can still reach a matchable node changes nothing on random graphs") {
  // Small sets and every search depth: each fused set's stack has many
  // inputs, and later searches from below it pass over them or not.
  std::mt19937 rng(20261125);
  std::int64_t fused_tanh_sets = 0;
  for (int trial = 0; trial < 30; ++trial) {
    CAPTURE(trial);
    const int count = 8 + static_cast<int>(rng() % 50);
    const std::uint32_t seed = static_cast<std::uint32_t>(rng());
    std::mt19937 fast_rng(seed), plain_rng(seed);
    Graph fast = random_tanhs(fast_rng, count).g;
    Graph plain = random_tanhs(plain_rng, count).g;
    REQUIRE(to_string(fast) == to_string(plain));
    gbf::SearchOptions options;
    options.max_fuse_search_depth = 1 + static_cast<std::int64_t>(rng() % 7);
    options.min_fuse_set_size = 2;
    options.max_fuse_set_size = 2 + static_cast<std::int64_t>(rng() % 6);
    CAPTURE(options.max_fuse_search_depth);
    CAPTURE(options.max_fuse_set_size);
    Counters fast_counts, plain_counts;
    expect_same_as_unfiltered(fast, plain, {"batch_tanh", "batch_relu", "batch_tanh"}, options, fast_counts, plain_counts);
    if (fast_counts.values().count("batch_tanh")) fused_tanh_sets += fast_counts.values().at("batch_tanh");
  }
  CHECK(fused_tanh_sets > 30);
}

// Groups of chains (a tanh, then up to depth - 1 relus, some ends a diamond
// add(h, relu(h)) that reaches the tanh twice), each group read by a cat
// with about min_size chains, so whether a search from a cat finds a set
// turns on the exact count; every cat goes through `depth` sigmoids to the
// output, out of the output's reach.
Graph small_groups(std::mt19937& rng, int groups, int min_size, int depth) {
  Graph g("small_groups");
  ArgList outs;
  auto value = [](Node* n, std::int64_t rows) {
    n->meta.val = f32({rows, 8});
    return n;
  };
  for (int i = 0; i < groups; ++i) {
    const int chains = std::max(1, min_size - 1 + static_cast<int>(rng() % 3));
    ArgList ends;
    for (int j = 0; j < chains; ++j) {
      Node* h = g.placeholder("x" + std::to_string(i) + "_" + std::to_string(j), f32({4, 8}));
      h = value(g.call_function(torch::tanh, {Arg(h)}), 4);
      const int relus = static_cast<int>(rng() % static_cast<std::uint32_t>(depth));
      for (int r = 0; r < relus; ++r) h = value(g.call_function(F::relu, {Arg(h)}), 4);
      if (relus + 2 <= depth && rng() % 3 == 0)
        h = value(g.call_function(torch::add, {Arg(h), Arg(value(g.call_function(F::relu, {Arg(h)}), 4))}), 4);
      ends.push_back(Arg(h));
    }
    Node* out = value(g.call_function(torch::cat, {Arg(ends)}, ArgDict{{"dim", Arg(0)}}), 4 * chains);
    for (int r = 0; r < depth; ++r) out = value(g.call_function(torch::sigmoid, {Arg(out)}), 4 * chains);
    outs.push_back(Arg(out));
  }
  g.output(Arg(outs));
  return g;
}

TEST_CASE("searching only from nodes with enough matchable nodes above them changes nothing") {
  // The search skips a node whose count of matchable nodes within the search
  // depth is under min_fuse_set_size; counts are kept up to date across
  // rewrites. Against the search from every node, on random graphs (adds
  // make diamonds, so counts run over) and towers, for several minimum sizes.
  std::mt19937 rng(20261127);
  std::int64_t fused_sets = 0;
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    const int count = 8 + static_cast<int>(rng() % 60);
    const std::uint32_t seed = static_cast<std::uint32_t>(rng());
    std::mt19937 fast_rng(seed), plain_rng(seed);
    Graph fast = random_tanhs(fast_rng, count).g;
    Graph plain = random_tanhs(plain_rng, count).g;
    gbf::SearchOptions options;
    options.max_fuse_search_depth = 1 + static_cast<std::int64_t>(rng() % 8);  // 8: past what counts cover
    options.min_fuse_set_size = 2 + static_cast<std::int64_t>(rng() % 5);
    options.max_fuse_set_size = options.min_fuse_set_size + static_cast<std::int64_t>(rng() % 6);
    CAPTURE(options.max_fuse_search_depth);
    CAPTURE(options.min_fuse_set_size);
    Counters fast_counts, plain_counts;
    expect_same_as_unfiltered(fast, plain, {"batch_tanh", "batch_relu", "batch_tanh", "batch_relu"}, options, fast_counts,
                              plain_counts);
    for (const auto& [name, sets] : fast_counts.values()) fused_sets += sets;
  }
  CHECK(fused_sets > 40);
  std::int64_t small_sets = 0;
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    gbf::SearchOptions options;
    options.max_fuse_search_depth = 1 + static_cast<std::int64_t>(rng() % 7);
    options.min_fuse_set_size = 2 + static_cast<std::int64_t>(rng() % 5);
    options.max_fuse_set_size = 300;
    CAPTURE(options.max_fuse_search_depth);
    CAPTURE(options.min_fuse_set_size);
    const std::uint32_t seed = static_cast<std::uint32_t>(rng());
    std::mt19937 fast_rng(seed), plain_rng(seed);
    const int depth = static_cast<int>(options.max_fuse_search_depth), min_size = static_cast<int>(options.min_fuse_set_size);
    Graph fast = small_groups(fast_rng, 12, min_size, depth);
    Graph plain = small_groups(plain_rng, 12, min_size, depth);
    Counters fast_counts, plain_counts;
    expect_same_as_unfiltered(fast, plain, {"batch_tanh", "batch_relu"}, options, fast_counts, plain_counts);
    if (fast_counts.values().count("batch_tanh")) small_sets += fast_counts.values().at("batch_tanh");
  }
  CHECK(small_sets > 40);
  for (const std::int64_t min_size : {std::int64_t{3}, std::int64_t{7}, std::int64_t{300}}) {
    CAPTURE(min_size);
    Graph fast = kiln::testing::towers_graph(1900);
    Graph plain = kiln::testing::towers_graph(1900);
    gbf::SearchOptions options;
    options.min_fuse_set_size = min_size;
    Counters fast_counts, plain_counts;
    expect_same_as_unfiltered(fast, plain, {"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"},
                              options, fast_counts, plain_counts);
  }
}
