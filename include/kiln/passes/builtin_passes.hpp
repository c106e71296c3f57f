#pragma once
// The passes every pipeline can use: lint, dce, stable_topological_sort.
#include "kiln/core/dead_code.hpp"
#include "kiln/core/lint.hpp"
#include "kiln/core/topological_sort.hpp"
#include "kiln/passes/pass_registry.hpp"

namespace kiln {

inline void register_builtin_passes(PassRegistry& registry) {
  registry.add({"lint", "check the graph's invariants; fails naming the first broken node", [](Graph& g, PassContext&) {
                  lint(g);
                  return false;
                }});
  registry.add({"dce", "erase nodes whose values are unused (impure nodes are kept)", [](Graph& g, PassContext& ctx) {
                  const std::size_t n = eliminate_dead_code(g);
                  if (n) ctx.counters.increment("dce_erased_nodes", static_cast<std::int64_t>(n));
                  return n > 0;
                }});
  registry.add({"stable_topological_sort", "move nodes after their inputs, keeping the order otherwise (Inductor's sort)",
                [](Graph& g, PassContext& ctx) {
                  const std::size_t n = stable_topological_sort(g);
                  if (n) ctx.counters.increment("stable_topological_sort_moved_nodes", static_cast<std::int64_t>(n));
                  return n > 0;
                }});
}

}  // namespace kiln
