// Node::replace_all_uses_of on users of many inputs (a cat of every tower):
// the index of their inputs it keeps (core/fan_in_index.hpp) gives the same
// graph as replacing the nodes one by one, however the users are edited
// between calls, and is freed with its user.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/detail/graph_internals.hpp"
#include "kiln/ops/aten.hpp"
#include "test_support.hpp"

using namespace kiln;

namespace {

constexpr std::size_t kMany = detail::FanInIndex::kMinInputs;

std::vector<std::string> input_names(const Node* n) {
  std::vector<std::string> out;
  for (const Node* in : n->all_input_nodes()) out.push_back(in->name());
  return out;
}

// Same nodes in the same order with the same arguments, inputs and user lists.
void require_same(const Graph& a, const Graph& b) {
  REQUIRE(a.size() == b.size());
  const std::vector<Node*> na = a.node_list(), nb = b.node_list();
  for (std::size_t i = 0; i < na.size(); ++i) {
    REQUIRE(format_node(*na[i]) == format_node(*nb[i]));
    REQUIRE(input_names(na[i]) == input_names(nb[i]));
    REQUIRE(testing::names(na[i]->user_list()) == testing::names(nb[i]->user_list()));
  }
}

// `count` distinct nodes of `pool`, in random order.
std::vector<Node*> sample(std::vector<Node*> pool, std::size_t count, std::mt19937& rng) {
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(std::min(count, pool.size()));
  return pool;
}
ArgList refs(const std::vector<Node*>& nodes) { return ArgList(nodes.begin(), nodes.end()); }

std::vector<Node*> nodes_of(const Graph& g, OpRef op) {
  std::vector<Node*> out;
  for (Node* n : g.nodes())
    if (n->is_call(op)) out.push_back(n);
  return out;
}
// The leaves (neg of x, the nodes replaced) and the users of many (cat, stack).
std::vector<Node*> leaves(const Graph& g) { return nodes_of(g, aten::neg); }
std::vector<Node*> wide_users(const Graph& g) {
  std::vector<Node*> out;
  for (Node* n : g.nodes())
    if (n->is_call(aten::cat) || n->is_call(aten::stack)) out.push_back(n);
  return out;
}

// With `shared`, every leaf; otherwise those no wide user uses (which leave
// the wide users' inputs their own when they join one).
std::vector<Node*> spare_leaves(const Graph& g, bool shared) {
  std::vector<Node*> out;
  for (Node* n : leaves(g)) {
    const std::vector<Node*> users = n->user_list();
    if (shared || std::none_of(users.begin(), users.end(), [](const Node* u) { return u->is_call(aten::cat) || u->is_call(aten::stack); }))
      out.push_back(n);
  }
  return out;
}

// A fresh leaf, made at the front (after the placeholders) so that it comes before every user.
Node* fresh_leaf(Graph& g) {
  auto guard = g.inserting_after(g.find_node("y"));
  return g.call_function(aten::neg, {Arg(g.find_node("x"))});
}

// A user of many nodes of `pool`, of one of the kinds the index takes or refuses, chosen by `kind`.
Node* make_wide_user(Graph& g, unsigned kind, std::mt19937& rng, const std::vector<Node*>& pool) {
  Node* some_leaf = pool[rng() % pool.size()];
  const std::size_t fan = kMany + rng() % 80;
  switch (kind % 7) {
    case 0:  // a cat: one list, then the dim (indexed)
      return g.call_function(aten::cat, {Arg(refs(sample(pool, fan, rng))), Arg(1)});
    case 1: {  // node arguments, scalars inside a list, a second list, a scalar kwarg (indexed)
      std::vector<Node*> picked = sample(pool, fan + 40, rng);
      ArgList mixed;
      for (std::size_t i = 2; i < fan; ++i) {
        mixed.push_back(Arg(picked[i]));
        if (i % 7 == 0) mixed.push_back(i % 2 ? Arg(std::int64_t(i)) : Arg(None{}));
      }
      ArgList second(picked.begin() + static_cast<std::ptrdiff_t>(fan), picked.end());
      return g.call_function(aten::stack, {Arg(picked[0]), Arg(std::move(mixed)), Arg(3), Arg(std::move(second)), Arg(picked[1])},
                             ArgDict{{"alpha", Arg(2)}});
    }
    case 2:  // a node in a kwarg (not indexed)
      return g.call_function(aten::cat, {Arg(refs(sample(pool, fan, rng)))}, ArgDict{{"out", Arg(some_leaf)}});
    case 3: {  // a node referenced twice (not indexed)
      ArgList list = refs(sample(pool, fan, rng));
      list.push_back(list[rng() % list.size()]);
      return g.call_function(aten::cat, {Arg(std::move(list))});
    }
    case 4: {  // a node inside a list inside the list (not indexed)
      ArgList list = refs(sample(pool, fan, rng));
      list[rng() % list.size()] = Arg(ArgList{Arg(some_leaf), Arg(5)});
      return g.call_function(aten::cat, {Arg(std::move(list))});
    }
    case 5:  // exactly the fewest inputs that get an index
      return g.call_function(aten::cat, {Arg(refs(sample(pool, kMany, rng))), Arg(0)});
    default:  // one fewer: no index
      return g.call_function(aten::cat, {Arg(refs(sample(pool, kMany - 1, rng))), Arg(0)});
  }
}

// Wide users sharing leaves (so one call edits several), or each with leaves
// of its own (so each stays its leaves' last user, as the cat of every tower).
Graph build(unsigned seed, bool shared) {
  std::mt19937 rng(seed);
  Graph g;
  Node* x = g.placeholder("x");
  g.placeholder("y");
  // Every leaf before every user, so that any leaf may replace any.
  constexpr std::size_t kOwn = kMany + 120;
  std::vector<Node*> all_leaves;
  for (std::size_t i = 0; i < 700 + (shared ? 0 : 9 * kOwn); ++i) all_leaves.push_back(g.call_function(aten::neg, {Arg(x)}));
  const std::vector<Node*> pool(all_leaves.begin(), all_leaves.begin() + 700);
  ArgList outs;
  for (unsigned kind = 0; kind < 9; ++kind) {
    const auto own = all_leaves.begin() + static_cast<std::ptrdiff_t>(700 + kind * kOwn);
    outs.push_back(Arg(make_wide_user(g, kind, rng, shared ? pool : std::vector<Node*>(own, own + kOwn))));
  }
  // Small users of some leaves, edited in the same calls.
  for (int i = 0; i < 40; ++i)
    outs.push_back(Arg(g.call_function(aten::add_Tensor, {Arg(pool[rng() % pool.size()]), Arg(pool[rng() % pool.size()])})));
  g.output(Arg(std::move(outs)));
  return g;
}

// A random set of leaves (now and then a wide user) replaced: batched, or one
// by one. Most replacements are fresh leaves; some are leaves already there
// (inputs merge), some repeat (two nodes to one), some are replaced too (a chain).
void replace_round(Graph& g, std::mt19937 rng, bool batched, bool shared) {
  std::vector<Node*> from;
  const std::vector<Node*> wide = wide_users(g);
  if (rng() % 3 == 0) {  // inputs of one wide user only (often the one user edited, as in a batch fusion)
    for (Node* n : wide[rng() % wide.size()]->all_input_nodes())
      if (rng() % 3 == 0) from.push_back(n);
  } else {
    for (Node* n : leaves(g))
      if (n->num_users() > 0 && rng() % 3 == 0) from.push_back(n);
    for (Node* n : wide)
      if (rng() % 20 == 0) from.push_back(n);
  }
  std::shuffle(from.begin(), from.end(), rng);
  const std::vector<Node*> pool = spare_leaves(g, shared);
  std::vector<Node*> to;
  // Mostly fresh leaves only (where the index serves); the other kinds in a
  // few rounds, as each leaves a node referenced twice (and so no index) or
  // one shared by two wide users (and so no last-user hint) behind.
  const unsigned mode = rng() % 16;
  for (std::size_t i = 0; i < from.size(); ++i) {
    const bool wide = !from[i]->is_call(aten::neg);
    const bool odd = !wide && shared && rng() % 30 == 0;
    Node* other = from[rng() % from.size()];
    if (odd && mode == 0 && i > 0) to.push_back(to[i - 1]);                       // two replaced by one
    else if (odd && mode == 1) to.push_back(pool[rng() % pool.size()]);           // maybe an input already
    else if (odd && mode == 2 && other->is_call(aten::neg)) to.push_back(other);  // a chain
    else to.push_back(fresh_leaf(g));
  }
  if (batched) {
    Node::replace_all_uses_of(from, to);
  } else {
    for (std::size_t i = 0; i < from.size(); ++i) from[i]->replace_all_uses_with(to[i]);
  }
}

// One of the other edits of a node's arguments, users or life.
void other_edit(Graph& g, std::mt19937 rng, bool shared) {
  const std::vector<Node*> wide = wide_users(g);
  const std::vector<Node*> pool = leaves(g);
  const std::vector<Node*> spares = spare_leaves(g, shared);
  Node* u = wide[rng() % wide.size()];
  Node* leaf = pool[rng() % pool.size()];
  Node* spare = spares[rng() % spares.size()];
  Node* own_input = u->all_input_nodes().empty() ? spare : u->all_input_nodes()[rng() % u->all_input_nodes().size()];
  switch (rng() % 10) {
    case 0: {  // set_args: two elements of its first list swapped, or one appended
      ArgList args = u->args();
      for (Arg& a : args)
        if (const ArgList* l = a.list(); l && l->size() > 2) {
          ArgList list = *l;
          if (rng() % 2) std::swap(list[rng() % list.size()], list[rng() % list.size()]);
          else list.push_back(Arg(shared ? leaf : rng() % 2 ? own_input : spare));
          a = Arg(std::move(list));
          break;
        }
      u->set_args(std::move(args));
      break;
    }
    case 1: {  // set_arg: a top-level argument other than a list becomes a leaf or a number
      const std::size_t i = rng() % u->args().size();
      if (!u->args()[i].list()) u->set_arg(i, rng() % 2 ? Arg(spare) : Arg(7));
      break;
    }
    case 2:  // set_kwarg: a node (no index then) or a number
      u->set_kwarg(rng() % 2 ? "out" : "alpha", rng() % 3 == 0 ? Arg(spare) : Arg(4));
      break;
    case 3: {  // replace_input_with: a fresh leaf, or a leaf that may be an input already
      if (u->all_input_nodes().empty()) break;
      Node* old_input = u->all_input_nodes()[rng() % u->all_input_nodes().size()];
      u->replace_input_with(old_input, rng() % 2 ? fresh_leaf(g) : shared ? leaf : own_input);
      break;
    }
    case 4:  // replace_all_uses_with on a leaf
      if (leaf->num_users() > 0) leaf->replace_all_uses_with(rng() % 2 ? fresh_leaf(g) : spare);
      break;
    case 5: {  // a wide user erased and freed; a new one takes its slot
      Node* out = g.output_node();  // (the one user a wide user may have)
      ArgList outs = *out->args()[0].list();
      std::erase_if(outs, [&](const Arg& a) { return a.node() == u; });
      out->set_args({Arg(outs)});
      g.erase_node(u);
      g.purge_erased();
      std::vector<Node*> own;  // leaves of its own, or shared with the others
      if (!shared || rng() % 2)
        for (std::size_t k = 0; k < kMany + 120; ++k) own.push_back(fresh_leaf(g));
      auto guard = g.inserting_before(out);
      outs.push_back(Arg(make_wide_user(g, rng(), rng, own.empty() ? pool : own)));
      out->set_args({Arg(std::move(outs))});
      break;
    }
    case 6: {  // new users of leaves join after the wide users there (their last-user hints go)
      auto guard = g.inserting_before(g.output_node());
      for (int k = 0; k < 3; ++k) g.call_function(aten::mul_Tensor, {Arg(spares[rng() % spares.size()]), Arg(leaf)});
      break;
    }
    case 8: {  // each node referenced once again (a node in a kwarg dropped, repeats made fresh leaves)
      std::vector<Node*> seen;
      auto once = [&](Arg& a) {
        if (Node* n = a.node()) {
          if (std::find(seen.begin(), seen.end(), n) != seen.end()) a = Arg(fresh_leaf(g));
          else seen.push_back(n);
        }
      };
      ArgList args = u->args();
      for (Arg& a : args) {
        once(a);
        if (const ArgList* l = a.list()) {
          ArgList list = *l;
          for (Arg& x : list) once(x);
          a = Arg(std::move(list));
        }
      }
      u->set_args_and_kwargs(std::move(args), ArgDict{{"alpha", Arg(1)}});
      break;
    }
    case 7: {  // leaves no longer used are erased (their slots freed for the next ones)
      for (Node* n : pool)
        if (n->num_users() == 0 && rng() % 2) g.erase_node(n);
      g.purge_erased();
      break;
    }
    default:  // set_args with the arguments as they are (the inputs rejoin their lists)
      u->set_args(u->args());
      break;
  }
}

}  // namespace

TEST_CASE("Node::replace_all_uses_of on users of many inputs matches the calls one by one, between other edits") {
  std::size_t rounds_with_indexes = 0, indexed_wide_users = 0;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    const bool shared = seed % 2 == 1;
    Graph g = build(seed, shared);
    Graph one_by_one = build(seed, shared);
    require_same(g, one_by_one);
    for (unsigned r = 0; r < 14; ++r) {
      INFO("seed " << seed << ", round " << r);
      std::mt19937 rng(seed * 1009 + r);
      const std::mt19937 replace_rng(rng());
      replace_round(g, replace_rng, true, shared);
      replace_round(one_by_one, replace_rng, false, shared);
      require_same(g, one_by_one);
      lint(g);  // (which checks each index against its node's arguments)
      lint(one_by_one);
      const std::size_t indexes = detail::GraphInternals::fan_in_index_count(g);
      rounds_with_indexes += indexes > 0;
      for (const Node* u : wide_users(g)) indexed_wide_users += u->fan_in_index() != nullptr;
      CHECK(detail::GraphInternals::fan_in_index_count(one_by_one) == 0);
      // Other edits between the rounds, the same in both graphs.
      for (unsigned e = 0, edits = rng() % 4; e < edits; ++e) {
        const std::mt19937 edit_rng(rng());
        other_edit(g, edit_rng, shared);
        other_edit(one_by_one, edit_rng, shared);
        require_same(g, one_by_one);
        lint(g);
      }
    }
  }
  // The indexed path ran, not only the reading of whole fan-ins.
  CHECK(rounds_with_indexes > 100);
  CHECK(indexed_wide_users > 300);
}

TEST_CASE("a fan-in index exists for a node of many inputs each referenced once, and goes with its node's edits") {
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> pool;
  for (std::size_t i = 0; i < kMany + 10; ++i) pool.push_back(g.call_function(aten::neg, {Arg(x)}));
  Node* cat = g.call_function(aten::cat, {Arg(refs(pool)), Arg(1)});
  Node* few = g.call_function(aten::cat, {Arg(refs(std::vector<Node*>(pool.begin(), pool.begin() + kMany - 1)))});
  Node* twice = g.call_function(aten::cat, {Arg(refs(pool)), Arg(pool[0])});
  g.output(Arg(ArgList{Arg(cat), Arg(few), Arg(twice)}));
  auto count = [&] { return detail::GraphInternals::fan_in_index_count(g); };
  CHECK(count() == 0);  // none until replace_all_uses_of edits a user

  auto replace_some = [&](std::size_t first, std::size_t n) {
    std::vector<Node*> from, to;
    for (std::size_t i = first; i < first + n; ++i) {
      from.push_back(cat->all_input_nodes()[i]);
      to.push_back(g.call_function(aten::neg, {Arg(x)}));
      g.move_before(from.back(), to.back());
    }
    Node::replace_all_uses_of(from, to);
    for (Node* n : from)
      if (n->num_users() == 0) g.erase_node(n);
  };
  replace_some(0, 5);
  CHECK(cat->fan_in_index() != nullptr);
  CHECK(few->fan_in_index() == nullptr);    // fewer than kMany inputs
  CHECK(twice->fan_in_index() == nullptr);  // pool[0]'s replacement is referenced twice
  CHECK(count() == 1);
  lint(g);
  replace_some(100, 20);  // by the index now
  CHECK(cat->fan_in_index() != nullptr);
  CHECK(cat->fan_in_index()->size() == cat->all_input_nodes().size());
  lint(g);
  // Each edit it would not follow drops it, freeing it; the next replace builds it again.
  cat->set_arg(1, Arg(0));
  CHECK(cat->fan_in_index() == nullptr);
  CHECK(count() == 0);
  replace_some(7, 3);
  CHECK(count() == 1);
  cat->replace_input_with(cat->all_input_nodes()[3], cat->all_input_nodes()[4]);  // two inputs merge
  CHECK(count() == 0);
  replace_some(7, 3);
  CHECK(count() == 0);  // a node referenced twice: no index while the arguments stay so
  lint(g);
  ArgList list = *cat->args()[0].list();
  list[3] = Arg(g.call_function(aten::neg, {Arg(x)}));
  g.move_before(cat, list[3].node());
  cat->set_arg(0, Arg(std::move(list)));
  replace_some(7, 3);
  CHECK(count() == 1);
  // It follows a replacement one by one.
  Node* fresh = g.call_function(aten::neg, {Arg(x)});
  g.move_before(cat, fresh);
  cat->replace_input_with(cat->all_input_nodes()[9], fresh);
  CHECK(cat->fan_in_index() != nullptr);
  CHECK(cat->fan_in_index()->find(fresh) != nullptr);
  lint(g);
  // A clone has none; a moved graph keeps its own, and leaves none behind.
  Graph copy = g.clone();
  CHECK(detail::GraphInternals::fan_in_index_count(copy) == 0);
  Graph moved = std::move(g);
  CHECK(detail::GraphInternals::fan_in_index_count(moved) == 1);
  CHECK(detail::GraphInternals::fan_in_index_count(g) == 0);
  CHECK(cat->fan_in_index() != nullptr);
  lint(moved);
  // Erasing the user frees it.
  Node* out = moved.output_node();
  out->set_args({Arg(ArgList{Arg(few), Arg(twice)})});
  moved.erase_node(cat);
  CHECK(detail::GraphInternals::fan_in_index_count(moved) == 0);
  lint(moved);
}
