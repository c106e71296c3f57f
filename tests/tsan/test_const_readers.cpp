// The threading contract (docs/ARCHITECTURE.md): any number of threads may
// call const members of one graph at once. Several threads read one graph
// here -- find_node on every name, lint, find_nodes, printing, writing
// fx-graph-json -- under ThreadSanitizer, and each checks what it reads.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"

using namespace kiln;

namespace {

// A chain of blocks whose node names share a few bases (mm, add, relu, ...),
// so lookups hit the name table's memo from every thread.
Graph build(std::size_t blocks) {
  Graph g("readers");
  Node* h = g.placeholder("x");
  Node* w = g.placeholder("w");
  for (std::size_t i = 0; i < blocks; ++i) {
    Node* mm = g.call_function(aten::mm, {h, w});
    Node* add = g.call_function(aten::add_Tensor, {mm, w});
    h = g.call_function(aten::relu, {add});
  }
  g.output(ArgList{h});
  return g;
}

template <class Body>
void on_threads(int count, Body body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t) threads.emplace_back([&, t] { body(t); });
  for (auto& th : threads) th.join();
}

}  // namespace

TEST_CASE("const members of one graph read on several threads at once agree and do not race") {
  const Graph g = build(2000);
  std::vector<const Node*> nodes(g.nodes().begin(), g.nodes().end());
  std::vector<std::string> names;
  for (const Node* n : nodes) names.push_back(n->name());
  const std::string text = to_string(g);
  const std::string json = io::to_fx_json(g);
  std::atomic<int> wrong{0};
  on_threads(4, [&](int t) {
    // Each thread walks the names from its own starting point, so the
    // lookups' bases interleave differently on every thread.
    for (std::size_t k = 0; k < names.size(); ++k) {
      const std::size_t i = (k + static_cast<std::size_t>(t) * 997) % names.size();
      if (g.find_node(names[i]) != nodes[i]) ++wrong;
    }
    lint(g);
    if (g.find_nodes(OpKind::call_function, aten::mm).size() != 2000) ++wrong;
    if (to_string(g) != text) ++wrong;
    if (io::to_fx_json(g) != json) ++wrong;
    if (g.find_node("no_such_node") != nullptr) ++wrong;
  });
  CHECK(wrong == 0);
}

TEST_CASE("a graph read from a fixture is linted and searched by several threads at once") {
  const io::GraphFile f = io::read_fx_json(std::string(KILN_FIXTURES_DIR) + "/inductor/towers_n8_pregrad.json.gz");
  const Graph& g = f.graph;
  std::vector<const Node*> nodes(g.nodes().begin(), g.nodes().end());
  std::atomic<int> wrong{0};
  on_threads(4, [&](int t) {
    lint(g);
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const Node* n = nodes[(k * 7 + static_cast<std::size_t>(t)) % nodes.size()];
      if (g.find_node(n->name()) != n) ++wrong;
    }
  });
  CHECK(wrong == 0);
}
