#include <iostream>
#include <kiln/core.hpp>
#include <kiln/ops/aten.hpp>
#include <kiln/passes/pattern_matcher_pass.hpp>
using namespace kiln::pattern;

int main() {
  // y = x @ w + b, with shapes in meta.val (as a graph read from PyTorch has them).
  kiln::Graph graph;
  auto f32 = [](std::vector<kiln::Dim> shape) { return kiln::TensorMeta{shape, kiln::DType::float32, std::nullopt}; };
  kiln::Node* x = graph.placeholder("x", f32({4, 8}));
  kiln::Node* w = graph.placeholder("w", f32({8, 16}));
  kiln::Node* b = graph.placeholder("b", f32({16}));
  kiln::Node* mm = graph.call_function(kiln::aten::mm, {x, w});
  mm->meta.val = f32({4, 16});
  kiln::Node* y = graph.call_function(kiln::aten::add_Tensor, {mm, b});
  y->meta.val = f32({4, 16});
  graph.output(kiln::ArgList{y});

  kiln::PatternMatcherPass pass("my_fusions");
  pass.register_pattern(
      CallFunction(kiln::aten::add_Tensor, CallFunction(kiln::aten::mm, kw<"a">, kw<"b">), kw<"c">),
      [](auto& m, kiln::Graph& g, kiln::Node* root) {  // the graph inserts before `root`
        kiln::Node* fused = g.call_function(kiln::aten::addmm, {get<"c">(m), get<"a">(m), get<"b">(m)});
        fused->meta = root->meta;
        root->replace_all_uses_with(fused);
        m.erase_nodes();
      },
      [](const auto& m) -> kiln::CheckResult {  // extra_check: what the structure cannot say
        const kiln::Node* add = m.output_node();
        // addmm computes c + a @ b: an add(..., alpha=2) is another computation.
        if (const kiln::Arg* alpha = add->kwargs().find("alpha"); alpha && !python_equal(*alpha, kiln::Arg(1)))
          return kiln::reject("alpha is not 1");  // the reason KILN_PATTERN_DEBUG prints
        // c must broadcast to the product's [n, p] from rank 1 or 2.
        const kiln::Node* c = get<"c">(m).node();
        const kiln::TensorMeta* bias = c ? c->meta.val.tensor() : nullptr;
        const kiln::TensorMeta* out = add->meta.val.tensor();
        if (!(bias && out && bias->rank() <= 2 && out->rank() == 2 && bias->shape.back() == out->shape.back()))
          return kiln::reject("c does not broadcast to the product's shape");
        return true;
      });
  kiln::Counters counters;
  pass.apply(graph, &counters);  // counters: pattern_matcher_count, pattern_matcher_nodes
  kiln::lint(graph);
  std::cout << graph << counters.to_json().dump() << "\n";
}
