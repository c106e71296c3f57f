#pragma once
// mutate_cat_pass (Inductor's split_cat.py): a cat, along the split's dim, of
// consecutive pieces of one split taken in order is a slice of the split's
// input (the input itself when every piece is taken); the split stays for its
// other users:
//   split(x, [8, 24, 32], dim=1) -> a, b, c;  cat([a, b], dim=1)  =>  narrow(x, 1, 0, 32)
// Counts `mutate_cat_pass` per cat replaced. A cat of the split's pieces
// reordered, repeated, not adjacent or along another dim is left and counts
// `mutate_cat_pass_skipped`. Unlike Inductor's, the slice is taken on the
// split's dim made non-negative (Inductor's slices nothing for a negative dim).
#include <memory>
#include <vector>

#include "kiln/passes/split_cat/getitem_split.hpp"
#include "kiln/passes/split_cat/split_pieces.hpp"

namespace kiln::split_cat {

inline PatternMatcherPass make_mutate_cat_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  using pattern::CallFunction, pattern::Ignored, pattern::kwarg, pattern::MULTIPLE;
  PatternMatcherPass pass("mutate_cat_pass");
  auto handler = [counters](auto& m, Graph& g, Node*) {
    Node* split = d::split_in(m.nodes());
    if (!split) return;
    const std::optional<d::SplitPieces> p = d::split_pieces(split);
    for (Node* cat : d::next_users(split)) {
      if (!cat->is_call(torch::cat)) continue;
      const std::optional<std::vector<Node*>> tensors = d::list_op_tensors(*cat);
      const std::optional<std::int64_t> dim = d::list_op_dim(*cat);
      std::optional<d::PieceRun> run;
      if (p && tensors && dim && d::normalized_dim(*dim, p->input_meta->rank()) == p->dim)
        run = d::consecutive_run(*tensors, *p);
      if (!run) {
        d::count(counters, "mutate_cat_pass_skipped");
        continue;
      }
      Node* replacement = p->input;
      if (run->length() != p->size()) {
        const std::int64_t start = p->offset(run->first);
        const std::int64_t length = p->offset(run->last + 1) - start;
        auto at = g.inserting_before(cat);
        replacement = g.call_function(torch::narrow, {Arg(p->input), Arg(p->dim), Arg(start), Arg(length)});
        replacement->meta.val = MetaVal(p->slice_meta(length));
      }
      cat->replace_all_uses_with(replacement);
      g.erase_node(cat);
      d::count(counters, "mutate_cat_pass");
    }
  };
  pass.register_pattern(CallFunction(torch::cat, d::getitem_split(), kwarg<"dim">(Ignored()), MULTIPLE), handler);
  return pass;
}

}  // namespace kiln::split_cat
