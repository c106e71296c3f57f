#pragma once
// A graph pass: a named, described unit that rewrites a Graph, reading its
// options from JSON and reporting what it did through Counters.
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/graph.hpp"
#include "kiln/passes/counters.hpp"

namespace kiln {

namespace io {
class WeightStore;  // kiln/io/weight_store.hpp
}

// What a pass gets besides the graph.
struct PassContext {
  Counters& counters;
  const nlohmann::json& options;  // this pass's options object ({} when none were given)
  std::ostream* log = nullptr;    // where a pass may explain what it did; null: silent
  // The graph's weights, for a pass that reads constants or makes new ones
  // (fuse_conv_bn); null when the caller has none, and such a pass then leaves
  // the graph as it is.
  io::WeightStore* weights = nullptr;
};

struct Pass {
  std::string name;
  std::string description;
  // Returns whether the graph changed.
  std::function<bool(Graph&, PassContext&)> run;
  // The keys its options object may have; PassManager refuses any other.
  std::vector<std::string> option_keys{};
};

}  // namespace kiln
