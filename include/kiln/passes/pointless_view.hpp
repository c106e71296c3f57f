#pragma once
// pointless_view, Inductor 2.11's joint-graph pattern of that name: an
// aten.view.default to the shape its input already has is the input, so its
// users read the input and the view goes. aten._unsafe_view and aten.reshape
// count as views here: Inductor's decomposition has made them views by then. torch 2.x traces a linear over a
// non-contiguous input into bmm between such views, which Inductor never sees
// (its joint graph drops them first) and its woq and qlinear bmm forms assume
// gone. Counted as the matcher counts a match (pattern_matcher_count/_nodes),
// as in Inductor.
#include <cstddef>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln {

inline void register_pointless_view_pattern(PatternMatcherPass& pass) {
  using namespace pattern;
  using namespace split_cat::node_helpers;
  // Inductor compares the sizes only: a view never changes strides it can keep.
  const auto same_shape = [](const auto& m) {
    const Node* view = m.nodes().back();
    const auto in = static_shape(view->arg(0).node()), out = static_shape(view);
    return in && out && *in == *out;
  };
  pass.register_pattern(
      CallFunction({aten::view, aten::unsafe_view, aten::reshape}, kw<"arg">, kw<"size">),
      [](auto& m, Graph&, Node* view) {
        view->replace_all_uses_with(view->arg(0).node());
        m.erase_nodes();
      },
      same_shape, PatternOptions{.name = "pointless_view: view(arg, arg.shape)"});
}

inline std::size_t pointless_view(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPass pass("pointless_view");
  register_pointless_view_pattern(pass);
  return pass.apply(g, counters);
}

inline void register_pointless_view_pass(PassRegistry& registry) {
  registry.add(Pass{"pointless_view", "drop an aten.view to the shape its input already has (Inductor's joint-graph pattern)",
                    [](Graph& g, PassContext& ctx) { return pointless_view(g, &ctx.counters) > 0; }});
}

}  // namespace kiln
