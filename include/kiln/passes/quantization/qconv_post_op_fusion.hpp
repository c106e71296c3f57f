#pragma once
// qconv post-op fusion: the unary (qconv_unary_fusion.hpp) and binary
// (qconv_binary_fusion.hpp) fusions of Inductor 2.11's passes 3, 4 and 5 for
// convolutions, run as Inductor runs them: every pattern of pass 3 (int8
// outputs) over the graph, then pass 4 (float unary, and relu after a sum),
// then pass 5 (float sum).
#include <cstddef>

#include "kiln/core/graph.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/qconv_binary_fusion.hpp"
#include "kiln/passes/quantization/qconv_unary_fusion.hpp"

namespace kiln {

inline void register_qconv_post_op_fusion_patterns(PatternMatcherPasses& passes, Counters* counters = nullptr) {
  register_qconv_unary_fusion_patterns(passes, counters);
  register_qconv_binary_fusion_patterns(passes, counters);
}

// Applies the three fusion passes over `g`; returns the number of fusions.
inline std::size_t qconv_post_op_fusion(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPasses passes(3, "qconv_post_op_fusion");
  register_qconv_post_op_fusion_patterns(passes, counters);
  return passes.apply(g, counters);
}

}  // namespace kiln
