#pragma once
// move_reshape_out_of_split_stack_pass (Inductor's split_cat.py): in a stack
// of pieces of one split, each reshaped alike, a run of consecutive pieces in
// order is one reshape of the split's input, or of a slice of it, when the
// stack's new dim falls where the split's dim does in the input's element
// order (what comes before the stack dim in the reshaped piece holds exactly
// what comes before the split dim in the input):
//   split(x[4, 64], 16, dim=1) -> a0..a3;  stack([reshape(ai, [4, 4, 4])], dim=1)
//   => reshape(x, [4, 4, 4, 4])
// A run of every piece always merges; a shorter one when it has at least
// `threshold_to_cat` pieces (option, Inductor's default 10), as
// reshape(x[.., first:last, ..]). The stack's other inputs (other tensors,
// pieces out of order, repeated or in short runs) are stacked as they were and
// the parts joined by a cat along the stack dim:
//   with threshold_to_cat 2: stack([r0, r1, y, r3], dim=1), ri = reshape(ai, [4, 4, 4])
//   => cat([reshape(x[:, 0:32], [4, 2, 4, 4]), stack([y, r3], dim=1)], dim=1)
// Where Inductor stacks a short run's bare getitems (not their reshapes) or
// permutes the input for a stack dim elsewhere (a different tensor), kiln keeps
// the reshapes and leaves a stack whose element order does not allow it.
// Counts `move_reshape_out_of_split_stack_pass`; a stack with no run to merge,
// or whose runs break the element-order rule, is left and counts
// `move_reshape_out_of_split_stack_pass_skipped`.
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

// One part of the rewritten stack: pieces first..first+length-1 of the split
// (stack inputs [begin, begin + length)) merged, or stack inputs kept as they are.
struct StackPart {
  std::size_t begin = 0, length = 0;
  bool merged = false;
  std::size_t first_piece = 0;
};

// The stack's inputs cut into parts: runs of consecutive pieces of `p`, in
// order, with at least `threshold` pieces (or every piece) merge; the inputs
// between them are kept. Empty when nothing merges or a merged run breaks the
// element-order rule.
inline std::vector<StackPart> plan_stack_parts(Node* stack, const std::vector<Node*>& inputs, const SplitPieces& p,
                                               std::int64_t threshold) {
  const TensorMeta* stacked = tensor_of(stack);
  const std::optional<std::int64_t> dim = list_op_dim(*stack);
  if (!stacked || !all_static(*stacked) || !dim) return {};
  const std::optional<std::int64_t> s = normalized_dim(*dim, stacked->rank());
  const TensorMeta* piece = tensor_of(inputs.front());
  if (!s || !piece || !all_static(*piece) || piece->rank() + 1 != stacked->rank()) return {};
  for (Node* n : inputs) {
    const TensorMeta* t = tensor_of(n);
    if (!t || t->shape != piece->shape) return {};
  }
  std::vector<std::optional<std::size_t>> index;
  for (Node* n : inputs) index.push_back(piece_index(piece_under_reshape(n), p));
  std::vector<StackPart> parts;
  bool any_merged = false;
  for (std::size_t k = 0; k < inputs.size();) {
    std::size_t end = k + 1;
    if (index[k])
      while (end < inputs.size() && index[end] && *index[end] == *index[end - 1] + 1) ++end;
    const std::size_t length = end - k;
    const bool merge = index[k] && (static_cast<std::int64_t>(length) >= threshold || length == p.size());
    if (!merge) {
      // Kept: joins the kept part before it, if any (a run too short to merge is kept whole).
      if (!parts.empty() && !parts.back().merged) parts.back().length += length;
      else parts.push_back(StackPart{k, length, false, 0});
    } else {
      // The run's pieces must be alike along the split dim, and the stack dim where the split dim is.
      for (std::size_t i = *index[k]; i < *index[k] + length; ++i)
        if (p.sections[i] != p.sections[*index[k]]) return {};
      if (product(piece->shape, 0, static_cast<std::size_t>(*s)) !=
          product(p.input_meta->shape, 0, static_cast<std::size_t>(p.dim)))
        return {};
      parts.push_back(StackPart{k, length, true, *index[k]});
      any_merged = true;
    }
    k = end;
  }
  if (!any_merged) return {};
  return parts;
}

inline Node* call_with_shape(Graph& g, OpRef op, ArgList args, ArgDict kwargs, const std::vector<Dim>& shape, DType dtype) {
  Node* n = g.call_function(op, std::move(args), std::move(kwargs));
  n->meta.val = MetaVal(TensorMeta{shape, dtype, std::nullopt});
  return n;
}

inline ArgList dims_arg(const std::vector<Dim>& shape) {
  ArgList l;
  for (const Dim& d : shape) l.push_back(Arg(std::get<std::int64_t>(d)));
  return l;
}

// Builds one part before `stack`: the merged run as reshape(x or a slice of
// x), or the kept inputs stacked as they were.
inline Node* build_stack_part(Graph& g, Node* stack, const std::vector<Node*>& inputs, const SplitPieces& p,
                              const StackPart& part) {
  const TensorMeta& piece = *tensor_of(inputs.front());
  const std::int64_t s = *normalized_dim(*list_op_dim(*stack), piece.rank() + 1);
  std::vector<Dim> shape = piece.shape;
  shape.insert(shape.begin() + s, Dim(static_cast<std::int64_t>(part.length)));
  const DType dtype = piece.dtype;
  if (!part.merged) {
    ArgList kept;
    for (std::size_t i = part.begin; i < part.begin + part.length; ++i) kept.push_back(Arg(inputs[i]));
    return call_with_shape(g, torch::stack, {Arg(std::move(kept))}, {{"dim", Arg(s)}}, shape, dtype);
  }
  Node* source = p.input;
  if (part.length != p.size()) {
    const std::int64_t begin = p.offset(part.first_piece), end = p.offset(part.first_piece + part.length);
    ArgList index;
    for (std::size_t k = 0; k < p.input_meta->rank(); ++k)
      index.push_back(static_cast<std::int64_t>(k) == p.dim ? Arg(Slice{{Arg(begin), Arg(end), Arg()}})
                                                            : Arg(Slice{{Arg(), Arg(), Arg()}}));
    std::vector<Dim> sliced = p.input_meta->shape;
    sliced[static_cast<std::size_t>(p.dim)] = Dim(end - begin);
    source = call_with_shape(g, pyop::getitem, {Arg(p.input), Arg(std::move(index))}, {}, sliced, dtype);
  }
  return call_with_shape(g, torch::reshape, {Arg(source), Arg(dims_arg(shape))}, {}, shape, dtype);
}

}  // namespace detail

// The pass; `threshold_to_cat` is read when it runs (register_move_reshape_out_of_split_stack_pass).
inline PatternMatcherPass make_move_reshape_out_of_split_stack_pass(
    std::shared_ptr<Counters*> counters, std::shared_ptr<const std::int64_t> threshold_to_cat = nullptr) {
  namespace d = detail;
  using pattern::CallFunction, pattern::Ignored, pattern::kwarg, pattern::MULTIPLE;
  PatternMatcherPass pass("move_reshape_out_of_split_stack_pass");
  auto handler = [counters, threshold_to_cat](auto&, Graph& g, Node* stack) {
    const std::int64_t threshold = threshold_to_cat ? *threshold_to_cat : 10;
    const std::optional<std::vector<Node*>> inputs = d::list_op_tensors(*stack);
    // The split: that of the first input that is a (reshaped) getitem of one.
    std::optional<d::SplitPieces> p;
    if (inputs && !inputs->empty())
      for (Node* n : *inputs) {
        Node* gi = d::piece_under_reshape(n);
        if (gi->is_call(pyop::getitem) && gi->args().size() == 2 && gi->args()[0].node()) {
          p = d::split_pieces(gi->args()[0].node());
          break;
        }
      }
    const std::vector<d::StackPart> parts =
        p ? d::plan_stack_parts(stack, *inputs, *p, threshold) : std::vector<d::StackPart>{};
    if (parts.empty()) {
      d::count(counters, "move_reshape_out_of_split_stack_pass_skipped");
      return;
    }
    Node* result;
    {
      auto at = g.inserting_before(stack);
      ArgList joined;
      for (const d::StackPart& part : parts) joined.push_back(Arg(d::build_stack_part(g, stack, *inputs, *p, part)));
      if (joined.size() == 1) {
        result = joined[0].node();
      } else {
        const std::int64_t s = *d::normalized_dim(*d::list_op_dim(*stack), d::tensor_of(stack)->rank());
        result = g.call_function(torch::cat, {Arg(std::move(joined))}, {{"dim", Arg(s)}});
      }
    }
    result->meta.val = stack->meta.val;
    stack->replace_all_uses_with(result);
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
