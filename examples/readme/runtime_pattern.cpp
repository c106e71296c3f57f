#include <iostream>
#include <kiln/core.hpp>
#include <kiln/ops/aten.hpp>
#include <kiln/passes/register_replacement.hpp>

int main() {
  kiln::Graph graph;  // y = relu(relu(x @ w + b))
  kiln::Node* x = graph.placeholder("x");
  kiln::Node* w = graph.placeholder("w");
  kiln::Node* b = graph.placeholder("b");
  kiln::Node* add = graph.call_function(kiln::aten::add_Tensor, {graph.call_function(kiln::aten::mm, {x, w}), b});
  kiln::Node* relu = graph.call_function(kiln::aten::relu, {add});
  graph.output(kiln::ArgList{graph.call_function(kiln::aten::relu, {relu})});

  // The addmm pattern built at run time.
  kiln::PatternMatcherPass pass("my_fusions");
  kiln::pattern::RuntimePattern r;
  auto a = r.keyword_arg("a"), b2 = r.keyword_arg("b"), c = r.keyword_arg("c");
  r.set_output(r.call_function(kiln::aten::add_Tensor, {r.call_function(kiln::aten::mm, {a, b2}), c}));
  pass.register_runtime_pattern(r, [](kiln::pattern::RuntimeMatch& m, kiln::Graph& g, kiln::Node* root) {
    kiln::Node* fused = g.call_function(kiln::aten::addmm, {m.get("c"), m.get("a"), m.get("b")});
    root->replace_all_uses_with(fused);
    m.erase_nodes();
  });

  // Or a search/replace pair as graphs, as Inductor's register_replacement
  // traces them (built here; kiln::io::read_fx_json reads exported ones).
  kiln::Graph search, replace;
  {
    kiln::Node* s = search.placeholder("s");
    search.output(kiln::ArgList{search.call_function(kiln::aten::relu, {search.call_function(kiln::aten::relu, {s})})});
    kiln::Node* t = replace.placeholder("s");
    replace.output(kiln::ArgList{replace.call_function(kiln::aten::relu, {t})});
  }
  kiln::register_replacement(search, replace, pass);

  kiln::Counters counters;
  pass.apply(graph, &counters);
  kiln::lint(graph);
  std::cout << graph << counters.to_json().dump() << "\n";
}
