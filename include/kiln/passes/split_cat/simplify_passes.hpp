#pragma once
// The split/cat simplifications of Inductor's split_cat.py, registered by
// Inductor's pass names: split_cat_pass, unbind_stack_pass, merge_splits_pass.
//   kiln-opt g.json --passes normalization_pass,split_cat_pass --counters
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/split_cat/merge_splits.hpp"
#include "kiln/passes/split_cat/split_cat_pass.hpp"
#include "kiln/passes/split_cat/unbind_stack.hpp"

namespace kiln {

inline void register_sc_simplify_passes(PassRegistry& registry) {
  split_cat::register_counting_passes(registry, {
      {"split_cat_pass",
       "getitems of a split feeding cat/stack merged into fewer pieces, squeezed size-1 pieces into an unbind "
       "(Inductor's split_cat SplitCatSimplifier)",
       split_cat::make_split_cat_pass},
      {"unbind_stack_pass",
       "an unbind taken whole by cat/stack becomes a movedim (and flatten) of its input (Inductor's split_cat "
       "UnbindCatRemover)",
       split_cat::make_unbind_stack_pass},
      {"merge_splits_pass",
       "a split of a piece of a split along the same dim merged into one split (Inductor's split_cat merge_splits)",
       split_cat::make_merge_splits_pass},
  });
}

}  // namespace kiln
