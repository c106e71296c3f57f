#include <iostream>
#include <kiln/core.hpp>
#include <kiln/io.hpp>
#include <kiln/ops/aten.hpp>

int main() {
  kiln::io::GraphFile file = kiln::io::read_fx_json("graph.json");
  kiln::Graph& g = file.graph;
  // Replace every relu(relu(x)) by relu(x).
  for (kiln::Node* outer : g.find_nodes(kiln::OpKind::call_function, kiln::aten::relu)) {
    kiln::Node* inner = outer->arg(0).node();
    if (inner && inner->is_call(kiln::aten::relu)) {
      outer->replace_all_uses_with(inner);
      g.erase_node(outer);
    }
  }
  kiln::eliminate_dead_code(g);
  kiln::lint(g);
  kiln::io::write_fx_json(g, "graph.opt.json", file.weights);
  std::cout << g;  // torch.fx-style text
}
