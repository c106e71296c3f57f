#pragma once
// What the int8 pass-through lowerings (qmaxpool2d, qcat, qreshape) share:
// their check (the dequantize and quantize they match are qdq_patterns.hpp's) and one match handler, which builds the int8
// node, drops the matched q/dq nodes and counts the match as Inductor does
// (its nodes are kiln's, so pattern_matcher_nodes needs no correction).
#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/quantization/inductor_match_count.hpp"
#include "kiln/passes/quantization/qdq_patterns.hpp"
#include "kiln/passes/quantization/same_qparams.hpp"
#include "kiln/pattern/call.hpp"
#include "kiln/pattern/leaf.hpp"

namespace kiln::quantization_detail {

// The check of a lowering with no further condition: one scale and zero point
// on every dequantize and the quantize (same_qparams.hpp).
inline constexpr auto same_qparams_check = [](const auto& m) { return input_output_same_qparams(m.nodes()); };

// `lower(g, nodes)` builds the int8 node that takes the place of the match's
// output `out`; `pass_name` names the counters (a literal: the handler keeps the view).
template <class Lower>
auto pass_through_handler(Counters* counters, std::string_view pass_name, Lower lower) {
  return [counters, pass_name, lower](auto& m, Graph& g, Node* out) {
    Node* lowered = lower(g, m.nodes());
    lowered->meta = out->meta;
    out->replace_all_uses_with(lowered);
    const auto nodes = static_cast<std::int64_t>(m.nodes().size());
    m.erase_nodes();
    count_inductor_match(counters, pass_name, nodes, nodes);
  };
}

}  // namespace kiln::quantization_detail
