#pragma once
// merge_getitem_cat_pass (Inductor's split_cat.py): a cat, along the split's
// dim, of consecutive pieces of one split taken in order becomes one piece of
// that split, whose sections are merged:
//   split(x, [8, 24, 32], dim=1) -> a, b, c;  cat([a, b], dim=1)
//   => split(x, [32, 32], dim=1) -> ab, c
// Counts `merge_getitem_cat_pass` per cat rewritten. A cat of the split's
// pieces that cannot be merged correctly (pieces reordered, repeated or not
// adjacent, a piece used elsewhere or taken by a second getitem, another dim,
// a split used other than through getitems) is left and counts
// `merge_getitem_cat_pass_skipped`; Inductor merges some of these wrongly
// (zero-sized sections, negative getitem indices, duplicate getitems).
#include <memory>
#include <vector>

#include "kiln/passes/split_cat/getitem_split.hpp"
#include "kiln/passes/split_cat/split_pieces.hpp"

namespace kiln::split_cat {

inline PatternMatcherPass make_merge_getitem_cat_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  using pattern::CallFunction, pattern::Ignored, pattern::kwarg, pattern::MULTIPLE;
  PatternMatcherPass pass("merge_getitem_cat_pass");
  auto handler = [counters](auto& m, Graph& g, Node*) {
    Node* split = d::split_in(m.nodes());
    if (!split) return;
    // As in Inductor, every cat the split's pieces feed is tried at once.
    for (Node* cat : d::next_users(split)) {
      if (!cat->is_call(torch::cat)) continue;
      const std::optional<d::SplitPieces> p = d::split_pieces(split);
      const std::optional<std::vector<Node*>> tensors = d::list_op_tensors(*cat);
      const std::optional<std::int64_t> dim = d::list_op_dim(*cat);
      std::optional<d::PieceRun> run;
      if (p && tensors && dim && d::only_getitem_users(*p) &&
          d::normalized_dim(*dim, p->input_meta->rank()) == p->dim)
        run = d::consecutive_run(*tensors, *p);
      if (!run || !d::run_is_private(*tensors, *run, *p, cat)) {
        d::count(counters, "merge_getitem_cat_pass_skipped");
        continue;
      }
      cat->replace_all_uses_with(tensors->front());
      g.erase_node(cat);
      d::merge_run(g, *p, *tensors, *run);
      d::count(counters, "merge_getitem_cat_pass");
    }
  };
  pass.register_pattern(CallFunction(torch::cat, d::getitem_split(), kwarg<"dim">(Ignored()), MULTIPLE), handler);
  return pass;
}

}  // namespace kiln::split_cat
