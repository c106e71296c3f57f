#pragma once
// The split/cat family of Inductor's pre-grad passes (split_cat.py), each a
// pass of Inductor's name counting under Inductor's counter names:
//   kiln-opt g.json --passes normalization_pass,remove_split_with_size_one_pass --counters
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/split_cat/normalization.hpp"
#include "kiln/passes/split_cat/remove_split_with_size_one.hpp"

namespace kiln {

inline void register_split_cat_passes(PassRegistry& registry) {
  split_cat::register_counting_passes(registry, {
      {"normalization_pass",
       "split/unbind/cat/stack to canonical calls, squeeze/reshape/clamp/detach methods to torch functions "
       "(Inductor's split_cat normalization)",
       split_cat::make_normalization_pass},
      {"remove_split_with_size_one_pass",
       "a split into one piece becomes its input (Inductor's split_cat)",
       split_cat::make_remove_split_with_size_one_pass},
  });
}

}  // namespace kiln
