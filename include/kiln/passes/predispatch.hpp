#pragma once
// The pre-dispatch passes that Inductor's pre_grad pipeline
// (_run_pre_dispatch_passes) names but whose public build leaves empty, built
// to the meaning of their names (kiln/passes/pre_grad/), and the aten-level
// split/cat passes of its post-grad list (kiln/passes/split_cat/aten.hpp,
// decompose_mm.hpp). Each is registered under Inductor's name and counts
// under it, with `<name>_skipped` where a match was declined because the
// rewrite would change an output:
//   kiln-opt g.json --passes stack_to_unsqueeze_pass,merge_concats_pass --counters
#include <memory>

#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pre_grad/fuse_parallel_linear.hpp"
#include "kiln/passes/pre_grad/fuse_split_linear_add.hpp"
#include "kiln/passes/pre_grad/merge_concats.hpp"
#include "kiln/passes/pre_grad/relu_nan_to_num.hpp"
#include "kiln/passes/pre_grad/remove_reshape.hpp"
#include "kiln/passes/pre_grad/remove_split_ops.hpp"
#include "kiln/passes/pre_grad/split_view_cat.hpp"
#include "kiln/passes/pre_grad/stack_to_unsqueeze.hpp"
#include "kiln/passes/split_cat/aten.hpp"
#include "kiln/passes/split_cat/decompose_mm.hpp"

namespace kiln {

inline void register_predispatch_passes(PassRegistry& registry) {
  split_cat::register_counting_passes(registry, {
      {"fuse_parallel_linear_pass",
       "linears sharing an input become one linear on concatenated weights and a split",
       predispatch::make_fuse_parallel_linear_pass},
      {"stack_to_unsqueeze_pass",
       "stack of one tensor becomes unsqueeze",
       predispatch::make_stack_to_unsqueeze_pass},
      {"merge_concats_pass",
       "a cat of a cat on the same dim is flattened",
       predispatch::make_merge_concats_pass},
      {"remove_split_ops_pass",
       "a split whose pieces all go back in order into a cat on its dim, or a split into one piece, becomes its input",
       predispatch::make_remove_split_ops_pass},
      {"remove_reshape_pass",
       "a reshape or view to its input's shape becomes its input",
       predispatch::make_remove_reshape_pass},
      {"relu_nan_to_num",
       "nan_to_num after relu is dropped where the values are known finite",
       predispatch::make_relu_nan_to_num_pass},
      {"fuse_chunk_squeeze_cat_pass",
       "chunk -> squeeze -> cat of every piece in order becomes one reshape",
       predispatch::make_fuse_chunk_squeeze_cat_pass},
      {"fuse_chunk_reshape_concat_pass",
       "chunk -> reshape -> cat of every piece in order becomes one reshape",
       predispatch::make_fuse_chunk_reshape_concat_pass},
      {"fuse_chunk_reshape_unsqueeze_concat_pass",
       "chunk -> reshape -> unsqueeze -> cat of every piece in order becomes one reshape",
       predispatch::make_fuse_chunk_reshape_unsqueeze_concat_pass},
      {"fuse_split_getitem_squeeze_cat",
       "split -> getitem -> squeeze -> cat of every piece in order becomes one reshape",
       predispatch::make_fuse_split_getitem_squeeze_cat_pass},
      {"fuse_split_linear_add_pass",
       "linears of a split's pieces summed become one linear on concatenated weights",
       predispatch::make_fuse_split_linear_add_pass},
      {"normalization_aten_pass",
       "aten split/split_with_sizes/cat to canonical calls (Inductor's post-grad split_cat)",
       split_cat::make_normalization_aten_pass},
      {"unbind_stack_aten_pass",
       "cat of unsqueezed selects of every slice in order becomes the input (Inductor's post-grad split_cat)",
       split_cat::make_unbind_stack_aten_pass},
  });
  // decompose_mm_pass reads its thresholds from the pass's options.
  auto slot = std::make_shared<Counters*>(nullptr);
  auto options = std::make_shared<split_cat::DecomposeMmOptions>();
  auto pass = std::make_shared<PatternMatcherPass>(split_cat::make_decompose_mm_pass(slot, options));
  registry.add({"decompose_mm_pass",
                "memory-bound mm/addmm/bmm become a broadcast multiply and a sum (Inductor's thresholds; option "
                "device: cpu or cuda)",
                split_cat::counting_pass_run(slot, pass,
                                             [options](PassContext* ctx) {
                                               if (!ctx) return;
                                               *options = split_cat::DecomposeMmOptions::from_json(ctx->options);
                                             }),
                split_cat::DecomposeMmOptions::keys()});
}

}  // namespace kiln
