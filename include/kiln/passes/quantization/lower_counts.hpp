#pragma once
// What Inductor 2.11's one-node lowering patterns count for the fused int8 ops
// left after the fusions (qconv_lower.hpp, qlinear_lower.hpp): `<family>_unary_lower_*`
// for the unary forms, `<binary family>_lower_*` for the binary ones, each also a
// pattern match. kiln's executor lowers these nodes itself; counting changes nothing.
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kiln/core/graph.hpp"
#include "kiln/passes/counters.hpp"

namespace kiln {

struct LowerCounts {
  std::int64_t unary = 0, binary = 0;
};

namespace quantization_detail {

// Counts the nodes calling `unary_ops` and `binary_ops`, added to `counters` under
// `unary_name`_lower_{count,nodes} and `binary_name`_lower_{count,nodes}.
inline LowerCounts count_lowerings(const Graph& g, Counters* counters, std::initializer_list<OpRef> unary_ops,
                                   std::initializer_list<OpRef> binary_ops, const std::string& unary_name, const std::string& binary_name) {
  LowerCounts c;
  const auto calls = [](const Node* n, std::initializer_list<OpRef> ops) {
    for (const OpRef& op : ops)
      if (n->target() == op) return true;
    return false;
  };
  for (const Node* n : g.nodes()) {
    if (n->op() != OpKind::call_function) continue;
    if (calls(n, unary_ops)) ++c.unary;
    if (calls(n, binary_ops)) ++c.binary;
  }
  if (!counters) return c;
  const auto add = [counters](const std::string& key, std::int64_t v) {
    if (v) counters->increment(key, v);
  };
  add(unary_name + "_lower_count", c.unary);
  add(unary_name + "_lower_nodes", c.unary);
  add(binary_name + "_lower_count", c.binary);
  add(binary_name + "_lower_nodes", c.binary);
  add("pattern_matcher_count", c.unary + c.binary);
  add("pattern_matcher_nodes", c.unary + c.binary);
  return c;
}

}  // namespace quantization_detail
}  // namespace kiln
