#pragma once
// apply_gumbel_max_trick_pass (Inductor's apply_gumbel_max_trick.py): sampling
// by argmax(softmax(logits) / e, dim=-1, keepdim=True), with e an
// Exponential(1) sample made in place (torch.empty(...).exponential_(1.0)),
// becomes argmax(logits + -log(e)), which picks the same index without the
// softmax. As in Inductor the exponential sample and its empty tensor must
// have no other users, and so must the softmax (torch.nn.functional.softmax);
// each rewrite counts `apply_gumbel_max_trick`. Inductor also rewrites a
// softmax over another dim than the argmax's last one, which is not the same
// sampling (the normalizer then varies along the argmax's dim); kiln leaves
// those and counts `apply_gumbel_max_trick_skipped`.
#include <memory>

#include "kiln/ops/functional.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/passes/pre_grad/common.hpp"

namespace kiln::pre_grad {

namespace detail {
// The softmax's dim as a non-negative index, or nullopt when it is not given.
inline std::optional<std::int64_t> softmax_dim(const Node& softmax) {
  const TensorMeta* in = tensor_of(softmax.args().empty() ? nullptr : softmax.args()[0].node());
  const auto dim = int_of(arg_value(softmax, 1, "dim"));
  if (!in || !dim) return std::nullopt;
  const auto rank = static_cast<std::int64_t>(in->rank());
  if (*dim < -rank || *dim >= rank) return std::nullopt;
  return *dim < 0 ? *dim + rank : *dim;
}
}  // namespace detail

inline PatternMatcherPass make_apply_gumbel_max_trick_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  using pattern::CallFunction, pattern::kw, pattern::kwarg;
  PatternMatcherPass pass("apply_gumbel_max_trick_pass");
  auto handler = [counters](auto& m, Graph& g, Node* argmax) {
    Node* softmax = pattern::node<"softmax">(m);
    Node* rand_exp = pattern::node<"rand_exp">(m);
    Node* truediv = argmax->args()[0].node();
    if (!softmax || !rand_exp || rand_exp->op() != OpKind::call_method || rand_exp->target_name() != "exponential_" ||
        rand_exp->num_users() != 1)
      return;
    if (rand_exp->args().size() != 2 || !rand_exp->kwargs().empty()) return;
    Node* empty = rand_exp->args()[0].node();
    const Arg& rate = rand_exp->args()[1];
    const bool unit_rate = (rate.get_if<double>() && *rate.get_if<double>() == 1.0) ||
                           (rate.get_if<std::int64_t>() && *rate.get_if<std::int64_t>() == 1);
    if (!empty || !unit_rate || empty->num_users() != 1) return;
    if (!softmax->is_call(F::softmax) || softmax->num_users() != 1 || softmax->args().empty()) return;
    Node* logits = softmax->args()[0].node();
    const TensorMeta* logits_meta = d::tensor_of(logits);
    const TensorMeta* div_meta = d::tensor_of(truediv);
    const std::optional<std::int64_t> dim = d::softmax_dim(*softmax);
    // The argmax runs over the division's last dim; the softmax must normalize that same dim.
    if (!logits_meta || !div_meta || !dim || logits_meta->rank() != div_meta->rank() ||
        *dim != static_cast<std::int64_t>(logits_meta->rank()) - 1) {
      if (*counters) (*counters)->increment("apply_gumbel_max_trick_skipped");
      return;
    }
    const TensorMeta* exp_meta = d::tensor_of(rand_exp);
    Node* sum;
    {
      auto at = g.inserting_before(argmax);
      MetaVal noise = exp_meta ? MetaVal(*exp_meta) : MetaVal();
      Node* log = d::call_with_meta(g, torch::log, {Arg(rand_exp)}, noise);
      Node* neg = d::call_with_meta(g, pyop::neg, {Arg(log)}, noise);
      sum = d::call_with_meta(g, pyop::add, {Arg(logits), Arg(neg)}, truediv->meta.val);
    }
    truediv->replace_all_uses_with(sum);
    g.erase_node(truediv);
    g.erase_node(softmax);
    if (*counters) (*counters)->increment("apply_gumbel_max_trick");
  };
  pass.register_pattern(CallFunction(op::argmax, CallFunction(pyop::truediv, kw<"softmax">, kw<"rand_exp">),
                                     kwarg<"dim">(std::int64_t{-1}), kwarg<"keepdim">(true)),
                        handler);
  return pass;
}

}  // namespace kiln::pre_grad
