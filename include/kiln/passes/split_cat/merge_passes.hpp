#pragma once
// The split/cat passes that merge a split's pieces back together, under
// Inductor's names: merge_getitem_cat_pass, mutate_cat_pass,
// merge_stack_tahn_unbind_pass, move_reshape_out_of_split_stack_pass.
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/split_cat/merge_getitem_cat.hpp"
#include "kiln/passes/split_cat/merge_stack_tahn_unbind.hpp"
#include "kiln/passes/split_cat/move_reshape_out_of_split_stack.hpp"
#include "kiln/passes/split_cat/mutate_cat.hpp"

namespace kiln {

inline void register_sc_merge_passes(PassRegistry& registry) {
  split_cat::register_counting_passes(registry, {
      {"merge_getitem_cat_pass",
       "a cat of consecutive pieces of a split, in order, becomes one merged piece (Inductor's split_cat)",
       split_cat::make_merge_getitem_cat_pass},
      {"mutate_cat_pass",
       "a cat of consecutive pieces of a split, in order, becomes a slice of its input (Inductor's split_cat)",
       split_cat::make_mutate_cat_pass},
      {"merge_stack_tahn_unbind_pass",
       "unbind(tanh(stack(consecutive split pieces))) becomes a split of tanh of one merged piece (Inductor's "
       "split_cat)",
       split_cat::make_merge_stack_tahn_unbind_pass},
      {"move_reshape_out_of_split_stack_pass",
       "a stack of every piece of a split, reshaped alike, becomes one reshape of its input (Inductor's split_cat)",
       split_cat::make_move_reshape_out_of_split_stack_pass},
  });
}

}  // namespace kiln
