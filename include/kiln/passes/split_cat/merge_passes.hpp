#pragma once
// The split/cat passes that merge a split's pieces back together, under
// Inductor's names: merge_getitem_cat_pass, mutate_cat_pass,
// merge_stack_tahn_unbind_pass, move_reshape_out_of_split_stack_pass.
#include <memory>

#include "kiln/core/error.hpp"
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
  });
  auto slot = std::make_shared<Counters*>(nullptr);
  auto threshold = std::make_shared<std::int64_t>(10);
  auto pass = std::make_shared<PatternMatcherPass>(split_cat::make_move_reshape_out_of_split_stack_pass(slot, threshold));
  registry.add({"move_reshape_out_of_split_stack_pass",
                "in a stack of split pieces reshaped alike, each run of consecutive pieces becomes one reshape of "
                "the split's input or a slice of it (Inductor's split_cat); option threshold_to_cat (default 10)",
                split_cat::counting_pass_run(slot, pass,
                                             [threshold](PassContext* ctx) {
                                               *threshold = ctx ? positive_int_option(ctx->options,
                                                                                      "move_reshape_out_of_split_stack_pass",
                                                                                      "threshold_to_cat", 10)
                                                                : 10;
                                             }),
                {"threshold_to_cat"}});
}

}  // namespace kiln
