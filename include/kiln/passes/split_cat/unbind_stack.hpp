#pragma once
// unbind_stack_pass (Inductor's split_cat.py, UnbindCatRemover): an unbind
// whose every output goes, whole and in order, into cat/stack nodes is
// removed; each stack becomes a movedim of the unbind's input (a permute in
// kiln) and each cat that movedim flattened into the cat dim. Counts as
// SplitCatSimplifier does (unbind_stack_pass, scmerge_*); an unbind Inductor
// would wrongly replace (a piece read by a non-cat user) is left and counts
// unbind_stack_pass_skipped.
#include <memory>

#include "kiln/passes/split_cat/split_cat_simplifier.hpp"

namespace kiln::split_cat {

inline PatternMatcherPass make_unbind_stack_pass(std::shared_ptr<Counters*> counters) {
  namespace sd = simplify_detail;
  using namespace pattern;
  PatternMatcherPass pass("unbind_stack_pass");
  auto unbind = CallFunction(torch::unbind, kw<"unbind_input">, kwarg<"dim">(kw<"dim">), MULTIPLE);
  auto getitems = ListOf(CallFunction(pyop::getitem, unbind, Ignored(), MULTIPLE), true);
  auto remove = [counters](auto& m, Graph& g, Node*) {
    Node* unbind_node = sd::matched(m, torch::unbind);
    if (SplitCatSimplifier(unbind_node, true, *counters).run(g) == SimplifyOutcome::unsafe && *counters)
      (*counters)->increment("unbind_stack_pass_skipped");
  };
  const OpSet joins{torch::stack, torch::cat};
  pass.register_pattern(CallFunction(joins, getitems, Ignored(), MULTIPLE), remove);
  pass.register_pattern(CallFunction(joins, getitems, kwarg<"dim">(Ignored()), MULTIPLE), remove);
  pass.register_pattern(CallFunction(joins, kwarg<"tensors">(getitems), kwarg<"dim">(Ignored()), MULTIPLE), remove);
  return pass;
}

}  // namespace kiln::split_cat
