#pragma once
// `GraphFile`: what an fx-graph-json document holds besides the nodes: the
// graph's weights table (attribute -> .npy path) and where relative paths start.
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln::io {

// The document's "weights" object: (attribute name, .npy path relative to the
// JSON file), in file order. A vector keeps that order through a round trip.
using WeightsTable = std::vector<std::pair<std::string, std::string>>;

// The relative path recorded for `attr`, or nullptr when it has no entry.
inline const std::string* find_weight(const WeightsTable& table, std::string_view attr) {
  for (const auto& [a, file] : table)
    if (a == attr) return &file;
  return nullptr;
}

struct GraphFile {
  kiln::Graph graph;
  WeightsTable weights;
  // The directory of the JSON file (absolute); weight paths are relative to it.
  // Empty for a document parsed from a string: paths are then relative to the
  // current directory.
  std::filesystem::path base_dir;

  // Where the .npy file of `attr` lies, or an empty path when it has no entry.
  std::filesystem::path weight_path(std::string_view attr) const {
    const std::string* rel = find_weight(weights, attr);
    return rel ? base_dir / *rel : std::filesystem::path();
  }
};

}  // namespace kiln::io
