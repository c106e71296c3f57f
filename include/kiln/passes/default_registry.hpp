#pragma once
// default_pass_registry(): every pass kiln ships, by name (what kiln-opt offers).
// Each pass family adds its register_* call here.
//
// Instantiating every pass's patterns is most of the compile time of a file
// that calls it. A program that calls it from several files may compile it once:
// define KILN_DEFAULT_REGISTRY_SEPARATE in every file and, in one of them,
// KILN_DEFAULT_REGISTRY_IMPLEMENTATION too (kiln's tools and tests do, through
// tools/default_registry_impl.cpp). With neither, the function is inline here.
#include "kiln/passes/pass_registry.hpp"

#if defined(KILN_DEFAULT_REGISTRY_SEPARATE) && !defined(KILN_DEFAULT_REGISTRY_IMPLEMENTATION)
namespace kiln {
PassRegistry default_pass_registry();  // defined where KILN_DEFAULT_REGISTRY_IMPLEMENTATION is
}  // namespace kiln
#else
#include "kiln/passes/bucketing/bucket_collectives.hpp"
#include "kiln/passes/builtin_passes.hpp"
#include "kiln/passes/fuse_addmm.hpp"
#include "kiln/passes/group_batch_fusion.hpp"
#include "kiln/passes/predispatch.hpp"
#include "kiln/passes/pre_grad/misc_passes.hpp"
#include "kiln/passes/pre_grad/conv_bn.hpp"
#include "kiln/passes/pre_grad_pipeline.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"
#include "kiln/passes/quantization/quantization_pipeline.hpp"
#include "kiln/passes/sharding/shard_parameters.hpp"
#include "kiln/passes/split_cat.hpp"
#include "kiln/passes/split_cat/simplify_passes.hpp"
#include "kiln/passes/split_cat/merge_passes.hpp"
#include "kiln/passes/split_cat_views.hpp"

namespace kiln {

#ifndef KILN_DEFAULT_REGISTRY_SEPARATE
inline
#endif
PassRegistry default_pass_registry() {
  PassRegistry r;
  register_builtin_passes(r);
  register_fuse_addmm_pass(r);
  register_group_batch_fusion_passes(r);
  register_split_cat_passes(r);
  register_sc_views_passes(r);
  register_sc_merge_passes(r);
  register_predispatch_passes(r);
  register_sc_simplify_passes(r);
  register_pregrad_misc_passes(r);
  register_conv_bn_passes(r);
  register_pre_grad_pipeline(r);
  register_quantization_passes(r);
  register_quantization_pipeline(r);
  register_bucketing_passes(r);
  register_sharding_passes(r);
  return r;
}

}  // namespace kiln
#endif
