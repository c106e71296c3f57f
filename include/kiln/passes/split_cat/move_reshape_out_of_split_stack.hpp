#pragma once
// move_reshape_out_of_split_stack_pass (Inductor's split_cat.py): a stack of
// every piece of one split, in order, each reshaped alike, is one reshape of
// the split's input, when the stack's new dim falls where the split's dim
// does in the input's element order (what comes before the stack dim in the
// reshaped piece holds exactly what comes before the split dim in the input):
//   split(x[4, 64], 16, dim=1) -> a0..a3;  stack([reshape(ai, [4, 4, 4])], dim=1)
//   => reshape(x, [4, 4, 4, 4])
// Counts `move_reshape_out_of_split_stack_pass`. Any other stack of reshaped
// pieces (some pieces, reordered or repeated, mixed with other tensors, or a
// stack dim elsewhere, where Inductor's view of a permuted input is wrong) is
// left and counts `move_reshape_out_of_split_stack_pass_skipped`.
#include <memory>
#include <vector>

#include "kiln/passes/split_cat/getitem_split.hpp"
#include "kiln/passes/split_cat/split_pieces.hpp"

namespace kiln::split_cat {

namespace detail {

// The getitem under a stack input: reshape(getitem) or the getitem itself.
inline Node* piece_under_reshape(Node* n) {
  if (n->is_call(torch::reshape) && n->args().size() >= 1 && n->args()[0].node()) return n->args()[0].node();
  return n;
}

// Whether stack(inputs, dim) is reshape(x): every piece of the split in
// order, the same static shape for each input, and the boundary rule above.
inline std::optional<SplitPieces> stack_is_reshape_of_input(Node* stack, const std::vector<Node*>& inputs) {
  const TensorMeta* stacked = tensor_of(stack);
  const std::optional<std::int64_t> dim = list_op_dim(*stack);
  if (!stacked || !all_static(*stacked) || !dim) return std::nullopt;
  const std::optional<std::int64_t> s = normalized_dim(*dim, stacked->rank());
  std::vector<Node*> getitems;
  for (Node* n : inputs) getitems.push_back(piece_under_reshape(n));
  if (!s || !getitems.front()->is_call(pyop::getitem)) return std::nullopt;
  std::optional<SplitPieces> p = split_pieces(getitems.front()->args()[0].node());
  if (!p) return std::nullopt;
  const std::optional<PieceRun> run = consecutive_run(getitems, *p);
  if (!run || run->first != 0 || run->length() != p->size()) return std::nullopt;
  const TensorMeta* piece = tensor_of(inputs.front());
  if (!piece || !all_static(*piece) || piece->rank() + 1 != stacked->rank()) return std::nullopt;
  for (Node* n : inputs) {
    const TensorMeta* t = tensor_of(n);
    if (!t || t->shape != piece->shape) return std::nullopt;
  }
  if (product(piece->shape, 0, static_cast<std::size_t>(*s)) !=
      product(p->input_meta->shape, 0, static_cast<std::size_t>(p->dim)))
    return std::nullopt;
  return p;
}

}  // namespace detail

inline PatternMatcherPass make_move_reshape_out_of_split_stack_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  using pattern::CallFunction, pattern::Ignored, pattern::kwarg, pattern::MULTIPLE;
  PatternMatcherPass pass("move_reshape_out_of_split_stack_pass");
  auto handler = [counters](auto&, Graph& g, Node* stack) {
    const std::optional<std::vector<Node*>> inputs = d::list_op_tensors(*stack);
    const std::optional<d::SplitPieces> p = inputs ? d::stack_is_reshape_of_input(stack, *inputs) : std::nullopt;
    if (!p) {
      d::count(counters, "move_reshape_out_of_split_stack_pass_skipped");
      return;
    }
    ArgList shape;
    for (const Dim& x : d::tensor_of(stack)->shape) shape.push_back(Arg(std::get<std::int64_t>(x)));
    Node* reshaped;
    {
      auto at = g.inserting_before(stack);
      reshaped = g.call_function(torch::reshape, {Arg(p->input), Arg(std::move(shape))});
    }
    reshaped->meta.val = stack->meta.val;
    stack->replace_all_uses_with(reshaped);
    g.erase_node(stack);
    // What only the stack used goes with it.
    for (Node* n : *inputs) {
      if (n->erased() || n->num_users() != 0) continue;
      Node* getitem = d::piece_under_reshape(n);
      g.erase_node(n);
      if (getitem != n && !getitem->erased() && getitem->num_users() == 0) g.erase_node(getitem);
    }
    if (p->split->num_users() == 0) g.erase_node(p->split);
    d::count(counters, "move_reshape_out_of_split_stack_pass");
  };
  pass.register_pattern(CallFunction(torch::stack, d::reshape_getitem_split(), kwarg<"dim">(Ignored()), MULTIPLE),
                        handler);
  return pass;
}

}  // namespace kiln::split_cat
