#pragma once
// Graphs in the exact shape of ../shared/fixtures/inductor/towers_n8_pregrad
// (a Dynamo capture: parameters are placeholders), for any number of towers:
//   x[batch, towers*width] -> torch.split(x, width, dim=1) -> per tower:
//   F.linear -> F.layer_norm([width]) -> torch.tanh -> F.relu -> torch.sigmoid
//   -> torch.cat(dim=1)
// Used by the group/batch fusion tests and bench/bench_group_batch_fusion.
#include <string>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"

namespace kiln::testing {

inline TensorMeta f32(std::vector<Dim> shape) {
  TensorMeta t{std::move(shape), DType::float32, std::nullopt};
  return t;
}

inline Graph towers_graph(std::int64_t towers, std::int64_t batch = 16, std::int64_t width = 64) {
  Graph g("towers");
  Node* x = g.placeholder("l_x_", f32({batch, towers * width}));
  struct Params {
    Node *lin_w, *lin_b, *ln_w, *ln_b;
  };
  std::vector<Params> params;
  for (std::int64_t i = 0; i < towers; ++i) {
    const std::string lin = "l_self_modules_lin_modules_" + std::to_string(i) + "_parameters_";
    const std::string ln = "l_self_modules_ln_modules_" + std::to_string(i) + "_parameters_";
    params.push_back({g.placeholder(lin + "weight_", f32({width, width})), g.placeholder(lin + "bias_", f32({width})),
                      g.placeholder(ln + "weight_", f32({width})), g.placeholder(ln + "bias_", f32({width}))});
  }
  Node* split = g.call_function(torch::split, {Arg(x), Arg(width)}, ArgDict{{"dim", Arg(1)}}, "split");
  MetaVal::List parts(static_cast<std::size_t>(towers), MetaVal(f32({batch, width})));
  split->meta.val = MetaVal(std::move(parts));
  std::vector<Node*> items;
  for (std::int64_t i = 0; i < towers; ++i) {
    items.push_back(g.call_function(pyop::getitem, {Arg(split), Arg(i)}));
    items.back()->meta.val = f32({batch, width});
  }
  ArgList outs;
  for (std::int64_t i = 0; i < towers; ++i) {
    const Params& p = params[static_cast<std::size_t>(i)];
    auto value = [&](Node* n) {
      n->meta.val = f32({batch, width});
      return n;
    };
    Node* h = value(g.call_function(F::linear, {Arg(items[static_cast<std::size_t>(i)]), Arg(p.lin_w), Arg(p.lin_b)}, {}, "h"));
    h = value(g.call_function(F::layer_norm, {Arg(h), Arg(ArgList{Arg(width)}), Arg(p.ln_w), Arg(p.ln_b), Arg(1e-05)}, {}, "h"));
    h = value(g.call_function(torch::tanh, {Arg(h)}, {}, "h"));
    h = value(g.call_function(F::relu, {Arg(h)}, {}, "h"));
    h = value(g.call_function(torch::sigmoid, {Arg(h)}, {}, "h"));
    outs.push_back(Arg(h));
  }
  Node* cat = g.call_function(torch::cat, {Arg(std::move(outs))}, ArgDict{{"dim", Arg(1)}}, "cat");
  cat->meta.val = f32({batch, towers * width});
  g.output(ArgList{Arg(cat)});
  return g;
}

}  // namespace kiln::testing
