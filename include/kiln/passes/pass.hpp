#pragma once
// A graph pass: a named, described unit that rewrites a Graph, reading its
// options from JSON and reporting what it did through Counters.
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
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

// The integer option `key` of a pass's options object, `fallback` when absent;
// anything but an integer >= 1 is an error naming the pass, the option and the value.
inline std::int64_t positive_int_option(const nlohmann::json& options, std::string_view pass, std::string_view key,
                                        std::int64_t fallback) {
  const auto it = options.find(std::string(key));
  if (it == options.end()) return fallback;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1)
    throw Error("pass " + std::string(pass) + ": option " + std::string(key) + " must be an integer >= 1, got " + it->dump());
  return it->get<std::int64_t>();
}

struct Pass {
  std::string name;
  std::string description;
  // Returns whether the graph changed.
  std::function<bool(Graph&, PassContext&)> run;
  // The keys its options object may have; PassManager refuses any other.
  std::vector<std::string> option_keys{};
};

// One pass of a pipeline's expansion, with the options it runs with.
struct PipelineStep {
  std::string pass;
  nlohmann::json options = nlohmann::json::object();
};

// A named list of passes (Inductor's pre_grad_passes, say) that a PassManager
// expands before running anything: each step is then a pass of its own, so it
// is linted, counted, timed, checked and switched off by name like any other.
struct Pipeline {
  std::string name;
  std::string description;
  // The steps for this pipeline's options object ({} when none were given).
  std::function<std::vector<PipelineStep>(const nlohmann::json& options)> expand;
  std::vector<std::string> option_keys{};
};

}  // namespace kiln
