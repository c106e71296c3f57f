#pragma once
// Counting a quantization match as Inductor 2.11 does. Inductor matches on its
// own decomposition of the graph (aten.linear as reshapes around addmm, ...),
// so its matches hold more nodes than kiln's on the same model: each pass
// works out Inductor's number, and `pattern_matcher_nodes`, which kiln's
// matcher counts with kiln's own nodes, gets the difference as well, so the
// total agrees with the passes' `<name>_matcher_nodes` as it does in Inductor.
// Also which decomposition Inductor gives a linear over a given input.
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/core/tensor_meta.hpp"
#include "kiln/passes/counters.hpp"

namespace kiln::quantization_detail {

inline void count_inductor_match(Counters* counters, std::string_view pass_name, std::int64_t inductor_nodes,
                                 std::int64_t kiln_nodes) {
  if (!counters) return;
  const std::string name(pass_name);
  counters->increment(name + "_matcher_count", 1);
  counters->increment(name + "_matcher_nodes", inductor_nodes);
  if (inductor_nodes != kiln_nodes) counters->increment("pattern_matcher_nodes", inductor_nodes - kiln_nodes);
}

// Whether Inductor's decomposition of a linear over `x` folds x's batch dims
// into one by a view (reshape, addmm or mm, reshape): always but where x has
// rank > 2 and recorded strides that no view flattens (a permuted input), where
// it expands x and the weight into a bmm instead (its matmul's should_fold).
inline bool inductor_folds_linear_input(const TensorMeta* x) {
  if (!x || x->rank() <= 2 || !x->stride || x->stride->size() != x->rank()) return true;
  const auto value = [](const Dim& d) { return is_static(d) ? std::get<std::int64_t>(d) : std::int64_t{-1}; };
  for (std::size_t i = 0; i + 2 < x->rank(); ++i) {
    const std::int64_t st1 = value((*x->stride)[i]), st2 = value((*x->stride)[i + 1]), s2 = value(x->shape[i + 1]);
    if (st1 < 0 || st2 < 0 || s2 < 0) return true;  // symbolic: not known here
    if (st1 != st2 * s2) return false;
  }
  return true;
}

}  // namespace kiln::quantization_detail
