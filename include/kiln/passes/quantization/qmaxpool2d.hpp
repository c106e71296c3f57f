#pragma once
// qmaxpool2d, Inductor 2.11's _register_quantization_maxpool2d (a lowering of
// its post-grad pass): dequantize_per_tensor -> max_pool2d_with_indices ->
// getitem 0 -> quantize_per_tensor becomes quantized.max_pool2d on the int8
// tensor itself. Inductor registers the forms with stride, padding, dilation
// and ceil_mode given or not; kiln also takes kernel_size alone (torch.export
// leaves the defaults out). Inductor keeps the input's scale without checking
// the quantize's; kiln matches only when they agree (same_qparams.hpp), as a
// different output scale would need a requantize. Counters
// qmaxpool2d_matcher_count and qmaxpool2d_matcher_nodes.
#include <cstdint>

#include "kiln/core/dead_code.hpp"
#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/quantized.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"
#include "kiln/passes/quantization/pass_through_lowering.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"
#include "kiln/passes/quantization/same_qparams.hpp"

namespace kiln {

namespace quantization_detail {

// max_pool2d_with_indices's optional argument `i` (1: kernel_size ... 5:
// ceil_mode), or its default: stride is the kernel's, padding 0, dilation 1.
inline Arg max_pool_arg(const Node* pool, std::size_t i) {
  if (i < pool->args().size()) return pool->arg(i);
  switch (i) {
    case 2: return pool->arg(1);
    case 3: return Arg(ArgList{std::int64_t{0}, std::int64_t{0}});
    case 4: return Arg(ArgList{std::int64_t{1}, std::int64_t{1}});
    default: return Arg(false);
  }
}

inline bool valid_qmaxpool2d(const std::vector<Node*>& nodes) {
  const Node* item = find_target(nodes, {pyop::getitem});
  return item && arg_is_int(item, 1, 0) && input_output_same_qparams(nodes);
}

inline Node* lower_qmaxpool2d(Graph& g, const std::vector<Node*>& nodes) {
  const Node* dq = find_target(nodes, {quantized_decomposed::dequantize_per_tensor});
  const Node* pool = find_target(nodes, {aten::max_pool2d_with_indices});
  ArgList args{dq->arg(0)};
  for (std::size_t i = 1; i <= 5; ++i) args.push_back(max_pool_arg(pool, i));
  return g.call_function(quantized::max_pool2d, args);
}

}  // namespace quantization_detail

inline void register_qmaxpool2d_patterns(PatternMatcherPass& pass, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto handler = qd::pass_through_handler(counters, "qmaxpool2d", qd::lower_qmaxpool2d);
  const auto check = [](const auto& m) { return qd::valid_qmaxpool2d(m.nodes()); };
  const auto dq = qd::dequantize_x_pattern();
  const auto quant = [](auto inner) { return qd::quantize_o_pattern(CallFunction(pyop::getitem, inner, pattern::Arg())); };
  const auto pool = [](auto... rest) { return CallFunction(aten::max_pool2d_with_indices, rest...); };
  const auto opts = [](const char* name) { return PatternOptions{.name = name}; };
  pass.register_pattern(quant(pool(dq, kw<"kernel_size">)), handler, check, opts("qmaxpool2d: kernel_size"));
  pass.register_pattern(quant(pool(dq, kw<"kernel_size">, kw<"stride">)), handler, check, opts("qmaxpool2d: stride"));
  pass.register_pattern(quant(pool(dq, kw<"kernel_size">, kw<"stride">, kw<"padding">)), handler, check, opts("qmaxpool2d: padding"));
  pass.register_pattern(quant(pool(dq, kw<"kernel_size">, kw<"stride">, kw<"padding">, kw<"dilation">)), handler, check,
                        opts("qmaxpool2d: dilation"));
  pass.register_pattern(quant(pool(dq, kw<"kernel_size">, kw<"stride">, kw<"padding">, kw<"dilation">, kw<"ceil_mode">)),
                        handler, check, opts("qmaxpool2d: ceil_mode"));
}

// Lowers each match over `g` (after dropping dead nodes, such as the unread
// indices getitem, as Inductor's graph has none); returns the number lowered.
inline std::size_t qmaxpool2d(Graph& g, Counters* counters = nullptr) {
  eliminate_dead_code(g);
  PatternMatcherPass pass("qmaxpool2d");
  register_qmaxpool2d_patterns(pass, counters);
  return pass.apply(g, counters);
}

}  // namespace kiln
