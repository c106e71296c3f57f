#pragma once
// Counting a quantization match as Inductor 2.11 does. Inductor matches on its
// own decomposition of the graph (aten.linear as reshapes around addmm, ...),
// so its matches hold more nodes than kiln's on the same model: each pass
// works out Inductor's number, and `pattern_matcher_nodes`, which kiln's
// matcher counts with kiln's own nodes, gets the difference as well, so the
// total agrees with the passes' `<name>_matcher_nodes` as it does in Inductor.
#include <cstdint>
#include <string>
#include <string_view>

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

}  // namespace kiln::quantization_detail
