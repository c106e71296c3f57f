#pragma once
// The weights of an fx-graph-json file, by attribute name, read through its
// weights table: a .npy file, or the manifest of a weight kept as shards
// (weight_shards.hpp).
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "kiln/io/errors.hpp"
#include "kiln/io/graph_file.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/io/weight_shards.hpp"

namespace kiln::io {

// The weight of attribute `attr`, read from the file its weights entry names
// (a .npy, or a shards manifest whose shards are read and joined).
// Errors name the attribute and the file.
inline WeightTensor load_weight(const GraphFile& f, std::string_view attr) {
  const std::string* rel = find_weight(f.weights, attr);
  if (!rel) throw Error("weights['" + std::string(attr) + "']: the graph file has no weights entry for it");
  const std::filesystem::path path = f.base_dir / *rel;
  try {
    return read_weight_file(path);
  } catch (const IoError& e) {
    throw IoError("weights['" + std::string(attr) + "']: " + e.what());
  } catch (const FormatError& e) {
    throw FormatError("weights['" + std::string(attr) + "']: " + e.what());
  }
}

// Every weight of the weights table, by attribute name.
inline std::map<std::string, WeightTensor> load_weights(const GraphFile& f) {
  std::map<std::string, WeightTensor> out;
  for (const auto& [attr, rel] : f.weights) out.emplace(attr, load_weight(f, attr));
  return out;
}

}  // namespace kiln::io
