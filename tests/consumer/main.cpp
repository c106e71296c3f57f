// Builds a graph with an installed kiln, writes it as fx-graph-json, reads it
// back and checks that it survived: exit status 0 only if everything worked.
#include <iostream>

#include <kiln/core.hpp>
#include <kiln/io.hpp>
#include <kiln/ops/aten.hpp>
#include <kiln/passes.hpp>

int main() {
  kiln::Graph g("consumer");
  auto* x = g.placeholder("x", kiln::TensorMeta{{4, 8}, kiln::DType::float32, std::nullopt});
  auto* r = g.call_function(kiln::aten::relu, {x});
  g.call_function(kiln::aten::sigmoid, {x});  // dead: dce must remove it
  g.output(kiln::ArgList{r});
  kiln::PassRegistry registry = kiln::default_pass_registry();
  kiln::PassManager pm(registry);
  pm.run(g, {"dce", "lint"});
  auto back = kiln::io::parse_fx_json(kiln::io::to_fx_json(g));
  kiln::lint(back.graph);
  const bool ok = back.graph.size() == 3 && kiln::to_string(back.graph) == kiln::to_string(g) &&
                  pm.counters().get("dce_erased_nodes") == 1;
  std::cout << (ok ? "consumer ok" : "consumer FAILED") << "\n" << back.graph;
  return ok ? 0 : 1;
}
