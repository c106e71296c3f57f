#pragma once
// merge_stack_tahn_unbind_pass (Inductor's split_cat.py; "tahn" is
// Inductor's spelling): consecutive pieces of one split, stacked, put through
// tanh and unbound again along the stack's dim, are one merged piece put
// through tanh and split again:
//   split(x, [8, 8, 32], dim=1) -> a, b, c;  unbind(tanh(stack([a, b], dim=0)), dim=0)
//   => split(x, [16, 32], dim=1) -> ab, c;   split(tanh(ab), [8, 8], dim=1)
// Counts `merge_stack_tahn_unbind_pass`. Inductor 2.11 registers no pattern
// under this pass, so kiln counts a match (`pattern_matcher_count`) only where
// it rewrites: a candidate it cannot rewrite correctly (pieces reordered,
// repeated or not adjacent, a piece used elsewhere, unbind along another dim,
// tanh used other than by the unbind) fails the pattern's check and counts
// `merge_stack_tahn_unbind_pass_skipped`.
#include <memory>
#include <vector>

#include "kiln/passes/split_cat/getitem_split.hpp"
#include "kiln/passes/split_cat/split_pieces.hpp"

namespace kiln::split_cat {

namespace detail {

// Everything the rewrite at `tanh` needs, decided before the graph is edited.
struct StackTanhUnbind {
  Node* tanh;
  Node* stack;
  Node* unbind;
  SplitPieces pieces;
  std::vector<Node*> tensors;
  PieceRun run;
};

inline std::optional<StackTanhUnbind> plan_stack_tanh_unbind(Node* tanh) {
  if (tanh->args().size() != 1 || !tanh->kwargs().empty() || tanh->num_users() != 1) return std::nullopt;
  Node* stack = tanh->args()[0].node();
  Node* unbind = *tanh->users().begin();
  if (!stack || !stack->is_call(torch::stack) || !unbind->is_call(torch::unbind)) return std::nullopt;
  const Arg* unbind_input = arg_value(*unbind, 0, "input");
  if (!unbind_input || unbind_input->node() != tanh) return std::nullopt;
  const TensorMeta* stacked = tensor_of(stack);
  std::optional<std::vector<Node*>> tensors = list_op_tensors(*stack);
  const std::optional<std::int64_t> stack_dim = list_op_dim(*stack);
  const Arg* unbind_dim_arg = arg_value(*unbind, 1, "dim");
  const std::optional<std::int64_t> unbind_dim =
      unbind_dim_arg && !unbind_dim_arg->is_none() ? int_of(unbind_dim_arg) : std::optional<std::int64_t>(0);
  if (!stacked || !tensors || !stack_dim || !unbind_dim) return std::nullopt;
  const auto s = normalized_dim(*stack_dim, stacked->rank());
  if (!s || s != normalized_dim(*unbind_dim, stacked->rank())) return std::nullopt;
  if (!tensors->front()->is_call(pyop::getitem)) return std::nullopt;
  std::optional<SplitPieces> p = split_pieces(tensors->front()->args()[0].node());
  if (!p || !only_getitem_users(*p)) return std::nullopt;
  const std::optional<PieceRun> run = consecutive_run(*tensors, *p);
  if (!run || !run_is_private(*tensors, *run, *p, stack)) return std::nullopt;
  for (std::size_t i = run->first; i <= run->last; ++i)
    if (p->sections[i] != p->sections[run->first]) return std::nullopt;
  return StackTanhUnbind{tanh, stack, unbind, std::move(*p), std::move(*tensors), *run};
}

}  // namespace detail

inline PatternMatcherPass make_merge_stack_tahn_unbind_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  using pattern::CallFunction, pattern::Ignored, pattern::kwarg, pattern::MULTIPLE;
  PatternMatcherPass pass("merge_stack_tahn_unbind_pass");
  auto check = [counters](auto& m) {
    if (d::plan_stack_tanh_unbind(m.output_node())) return true;
    d::count(counters, "merge_stack_tahn_unbind_pass_skipped");
    return false;
  };
  auto handler = [counters](auto& m, Graph& g, Node*) {
    const std::optional<d::StackTanhUnbind> plan = d::plan_stack_tanh_unbind(m.output_node());
    if (!plan) return;
    const d::SplitPieces& p = plan->pieces;
    const std::int64_t piece = p.sections[plan->run.first];
    std::int64_t merged_length = 0;
    ArgList again;
    MetaVal::List again_meta;
    for (std::size_t i = plan->run.first; i <= plan->run.last; ++i) {
      merged_length += p.sections[i];
      again.push_back(Arg(piece));
    }
    // tanh of the merged piece is a fresh tensor; its pieces are views of it.
    TensorMeta tanh_meta = p.slice_meta(merged_length);
    tanh_meta.stride = d::contiguous_strides(tanh_meta.shape);
    for (std::size_t i = plan->run.first; i <= plan->run.last; ++i) {
      TensorMeta t = tanh_meta;
      t.shape[static_cast<std::size_t>(p.dim)] = Dim(piece);
      again_meta.push_back(MetaVal(std::move(t)));
    }
    Node* merged = plan->tensors.front();
    plan->tanh->set_args({Arg(merged)});
    g.erase_node(plan->stack);
    d::merge_run(g, p, plan->tensors, plan->run);
    plan->tanh->meta.val = MetaVal(tanh_meta);
    Node* split_again;
    {
      auto at = g.inserting_after(plan->tanh);
      split_again = g.call_function(torch::split, {Arg(plan->tanh), Arg(std::move(again))}, {{"dim", Arg(p.dim)}});
    }
    split_again->meta.val = MetaVal(std::move(again_meta));
    plan->unbind->replace_all_uses_with(split_again);
    g.erase_node(plan->unbind);
    d::count(counters, "merge_stack_tahn_unbind_pass");
  };
  auto stack_of_pieces = CallFunction(torch::stack, d::getitem_split(), kwarg<"dim">(Ignored()));
  pass.register_pattern(CallFunction(torch::tanh, stack_of_pieces), handler, check);
  auto stack_of_pieces_positional = CallFunction(torch::stack, d::getitem_split(), Ignored());
  pass.register_pattern(CallFunction(torch::tanh, stack_of_pieces_positional), handler, check);
  return pass;
}

}  // namespace kiln::split_cat
