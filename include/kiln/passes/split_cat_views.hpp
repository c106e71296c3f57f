#pragma once
// The split/cat passes that turn pieces gathered back together into slices and
// views of what they were cut from (kiln/passes/split_cat/pieces_to_views.hpp),
// and einsum_to_pointwise_pass, each under Inductor's pass name:
//   kiln-opt g.json --passes normalization_pass,split_cat_to_slices_pass
//       --pass-options '{"split_cat_to_slices_pass": {"threshold_to_cat": 2}}' --counters
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/split_cat/einsum_to_pointwise.hpp"
#include "kiln/passes/split_cat/pieces_to_views.hpp"

namespace kiln {

inline void register_sc_views_passes(PassRegistry& registry) {
  using namespace split_cat;
  register_views_pass(registry, "split_cat_to_slices_pass",
                      "runs of a split's pieces in a cat become slices of its input (Inductor's split_cat); "
                      "option threshold_to_cat",
                      make_split_cat_to_slices_pass);
  register_views_pass(registry, "unbind_cat_to_view_pass",
                      "runs of an unbind's pieces in a cat become a slice, permute and reshape of its input "
                      "(Inductor's split_cat); option threshold_to_cat",
                      make_unbind_cat_to_view_pass);
  register_views_pass(registry, "split_stack_to_cats_pass",
                      "runs of a split's pieces in a stack become a slice, reshape and permute of its input "
                      "(Inductor's split_cat); option threshold_to_cat",
                      make_split_stack_to_cats_pass);
  register_views_pass(registry, "unbind_stack_to_slices_pass",
                      "runs of an unbind's pieces in a stack become a slice and permute of its input "
                      "(Inductor's split_cat); option threshold_to_cat",
                      make_unbind_stack_to_slices_pass);
  register_counting_pass(registry, "einsum_to_pointwise_pass",
                         "einsum 'abc,abcd->abd' read by an add becomes (x.unsqueeze(-1) * w).sum(-2) "
                         "(Inductor's split_cat)",
                         make_einsum_to_pointwise_pass);
}

}  // namespace kiln
