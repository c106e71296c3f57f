#pragma once
// stack_to_unsqueeze_pass (a pre-dispatch pass Inductor's pipeline names).
#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

// stack([x], dim=d) becomes unsqueeze(x, d): stacking one tensor inserts a
// dimension of size 1 at d and copies x's elements in order, which is what
// unsqueeze gives (as a view). d is read against the result's rank
// (rank(x) + 1), as stack reads it. Counts `stack_to_unsqueeze_pass`.
inline PatternMatcherPass make_stack_to_unsqueeze_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("stack_to_unsqueeze_pass");
  pass.register_pattern(pattern::CallFunctionVarArgs({aten::stack, torch::stack}, pattern::MULTIPLE),
                        [count = d::Count{counters}](auto& m, Graph& g, Node*) {
                          Node* node = m.nodes()[0];
                          const Arg* tensors = d::arg_value(*node, 0, "tensors");
                          if (!tensors || !tensors->list() || tensors->list()->size() != 1) return;
                          Node* x = tensors->list()->front().node();
                          const TensorMeta* xt = d::tensor_of(x);
                          const auto raw = d::int_arg(*node, 1, "dim", 0);
                          if (!x || !xt || !raw || !d::tensor_of(node)) return;
                          const auto dim = d::normalized_dim(*raw, xt->rank() + 1);
                          if (!dim) return;
                          const OpRef op = d::is_aten(*node) ? aten::unsqueeze : torch::unsqueeze;
                          split_cat::detail::replace_by_call(g, node, op, {Arg(x), Arg(*dim)}, {});
                          count("stack_to_unsqueeze_pass");
                        });
  return pass;
}

}  // namespace kiln::predispatch
