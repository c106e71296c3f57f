#pragma once
// default_pass_registry(): every pass kiln ships, by name (what kiln-opt offers).
// Each pass family adds its register_* call here.
#include "kiln/passes/builtin_passes.hpp"
#include "kiln/passes/fuse_addmm.hpp"
#include "kiln/passes/group_batch_fusion.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/split_cat.hpp"
#include "kiln/passes/split_cat_views.hpp"

namespace kiln {

inline PassRegistry default_pass_registry() {
  PassRegistry r;
  register_builtin_passes(r);
  register_fuse_addmm_pass(r);
  register_group_batch_fusion_passes(r);
  register_split_cat_passes(r);
  register_sc_views_passes(r);
  return r;
}

}  // namespace kiln
