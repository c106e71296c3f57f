// stable_topological_sort() starts at the first node that comes before one of
// its inputs (the nodes before it stay and wait on nothing) and keeps its
// waiting lists flat: the order must be Inductor's all the same. Checked
// against a plain transcription of Inductor's algorithm on random graphs
// disordered at random places, the front included.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "inductor_sort_reference.hpp"
#include "test_support.hpp"

using namespace kiln;

TEST_CASE("a graph disordered from any node sorts as Inductor sorts it") {
  std::mt19937 rng(7);
  int disordered = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Graph g;
    std::vector<Node*> nodes{g.placeholder("x"), g.placeholder("y")};
    const int count = 5 + static_cast<int>(rng() % 40);
    for (int i = 0; i < count; ++i) {
      Node* a = nodes[rng() % nodes.size()];
      Node* b = nodes[rng() % nodes.size()];
      nodes.push_back(rng() % 3 == 0 ? g.call_function(aten::neg, {a})
                                     : g.call_function(aten::add_Tensor, {a, b}));
    }
    g.output(ArgList{nodes.back()});
    // A few moves to random places (sometimes the front), each of a random node.
    const int moves = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < moves; ++m) {
      std::vector<Node*> list = g.node_list();
      Node* n = list[rng() % (list.size() - 1)];
      Node* anchor = list[rng() % list.size()];
      if (trial % 5 == 0) anchor = g.front();
      g.move_before(anchor, n);
    }
    const std::vector<Node*> expect = testing::inductor_sort_order(g);
    disordered += stable_topological_sort(g) > 0;
    CHECK(g.node_list() == expect);
    CHECK_NOTHROW(lint(g));
  }
  CHECK(disordered > 100);  // most trials moved something
}
