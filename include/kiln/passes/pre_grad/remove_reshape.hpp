#pragma once
// remove_reshape_pass (a pre-dispatch pass Inductor's pipeline names).
#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

// reshape / view / _unsafe_view of x (or x.reshape, x.view) to x's own shape becomes x: a row-major
// reinterpretation into the same sizes maps every element to itself (and a
// view of x aliases x, so aliasing is unchanged). Needs static shapes and the
// same dtype on both sides. Counts `remove_reshape_pass`.
inline PatternMatcherPass make_remove_reshape_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("remove_reshape_pass");
  auto handler = [count = d::Count{counters}](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    Node* x = node->args().size() ? node->args()[0].node() : nullptr;
    if (!x) return;
    const auto in = d::static_shape(x), out = d::static_shape(node);
    if (!in || !out || *in != *out || d::tensor_of(x)->dtype != d::tensor_of(node)->dtype) return;
    node->replace_all_uses_with(x);
    g.erase_node(node);
    count("remove_reshape_pass");
  };
  pass.register_pattern(
      pattern::CallFunctionVarArgs({aten::reshape, aten::view, aten::unsafe_view, torch::reshape}, pattern::MULTIPLE),
      handler);
  // The method forms a traced module writes: x.reshape(...), x.view(...) (to the same dtype, checked above).
  pass.register_pattern(pattern::CallMethodVarArgs("reshape", pattern::MULTIPLE), handler);
  pass.register_pattern(pattern::CallMethodVarArgs("view", pattern::MULTIPLE), handler);
  return pass;
}

}  // namespace kiln::predispatch
