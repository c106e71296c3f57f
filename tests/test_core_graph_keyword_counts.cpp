// The graph's index counts, per (kind, target), the live nodes with keyword
// arguments (Graph::count_nodes_with_kwargs), and Graph::for_each_node visits
// a target's nodes: the counts must follow every edit that gives a node
// keywords or takes them away, erasing, moving the graph and cloning it.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/torch.hpp"

using namespace kiln;

namespace {

// The count worked out from the nodes themselves.
std::size_t counted(const Graph& g, OpKind op, OpRef target) {
  std::size_t n = 0;
  for (const Node* node : g.nodes())
    if (node->op() == op && node->target().hash == target.hash && !node->kwargs().empty()) ++n;
  return n;
}

void check_counts(const Graph& g) {
  g.for_each_target([&](OpKind op, OpRef target, std::size_t live) {
    CHECK(g.count_nodes_with_kwargs(op, target) == counted(g, op, target));
    CHECK(g.count_nodes_with_kwargs(op, target) <= live);
    std::size_t visited = 0;
    g.for_each_node(op, target, [&](const Node* n) {
      CHECK(n->op() == op);
      CHECK(n->target().hash == target.hash);
      CHECK_FALSE(n->erased());
      ++visited;
    });
    CHECK(visited == live);
  });
}

}  // namespace

TEST_CASE("count_nodes_with_kwargs follows create, set_kwargs, set_kwarg, set_args_and_kwargs and erase") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(torch::cat, {Arg(ArgList{Arg(x), Arg(y)})}, ArgDict{{"dim", Arg(1)}});
  Node* b = g.call_function(torch::cat, {Arg(ArgList{Arg(x), Arg(y)})});
  Node* c = g.call_function(aten::add_Tensor, {x, y});
  g.output(ArgList{Arg(a), Arg(b), Arg(c)});
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, aten::add_Tensor) == 0);
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, aten::mm) == 0);  // never in the graph
  check_counts(g);

  b->set_kwarg("dim", Arg(0));  // gains keywords
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 2);
  b->set_kwarg("dim", Arg(1));  // keeps them
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 2);
  a->set_kwargs({});  // loses them
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  c->set_args_and_kwargs({Arg(x), Arg(y)}, ArgDict{{"alpha", Arg(2)}});
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, aten::add_Tensor) == 1);
  c->set_args(ArgList{Arg(y), Arg(x)});  // set_args keeps the keywords
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, aten::add_Tensor) == 1);
  check_counts(g);

  // Erasing a node with keywords takes it out of the count; without, leaves it.
  Node* d = g.call_function(torch::cat, {Arg(ArgList{Arg(x)})}, ArgDict{{"dim", Arg(0)}});
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 2);
  g.erase_node(d);
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  Node* e = g.call_function(torch::cat, {Arg(ArgList{Arg(x)})});
  g.erase_node(e);
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  g.purge_erased();
  // A node made in an erased node's recycled memory starts from its own keywords.
  Node* f = g.call_function(torch::cat, {Arg(ArgList{Arg(y)})});
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  f->set_kwarg("dim", Arg(0));
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 2);
  check_counts(g);
}

TEST_CASE("count_nodes_with_kwargs follows replace_all_uses_with, and survives a move and a clone") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(torch::cat, {Arg(ArgList{Arg(x), Arg(x)})}, ArgDict{{"dim", Arg(1)}});
  Node* b = g.call_function(torch::cat, {Arg(ArgList{Arg(a), Arg(x)})}, ArgDict{{"dim", Arg(0)}});
  Node* r = g.call_function(aten::relu, {b});
  g.output(ArgList{Arg(r)});
  // Replacing a node's uses and erasing it: the users keep their keywords.
  Node* c;
  {
    auto at = g.inserting_before(b);
    c = g.call_function(torch::cat, {Arg(ArgList{Arg(x), Arg(x)})});
  }
  a->replace_all_uses_with(c);
  g.erase_node(a);
  CHECK(g.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  check_counts(g);

  Graph moved = std::move(g);
  CHECK(moved.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  check_counts(moved);
  Graph copy = moved.clone();
  CHECK(copy.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  check_counts(copy);
  // The copy's counts are its own.
  copy.find_node(b->name())->set_kwargs({});
  CHECK(copy.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 0);
  CHECK(moved.count_nodes_with_kwargs(OpKind::call_function, torch::cat) == 1);
  check_counts(copy);
  check_counts(moved);
}

TEST_CASE("for_each_node visits a target's live nodes in creation order") {
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> relus;
  for (int i = 0; i < 5; ++i) relus.push_back(g.call_function(aten::relu, {x}));
  g.erase_node(relus[2]);
  std::vector<Node*> seen;
  g.for_each_node(OpKind::call_function, aten::relu, [&](Node* n) { seen.push_back(n); });
  CHECK(seen == std::vector<Node*>{relus[0], relus[1], relus[3], relus[4]});
  int none = 0;
  g.for_each_node(OpKind::call_function, aten::mm, [&](Node*) { ++none; });
  CHECK(none == 0);
}
