#pragma once
// Pass infrastructure and every pass family kiln ships.
#include "kiln/passes/bucketing/bucket_collectives.hpp"
#include "kiln/passes/builtin_passes.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/fuse_addmm.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pass.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/pass_registry.hpp"
