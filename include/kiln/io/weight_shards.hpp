#pragma once
// A weight kept as one .npy file per rank (tools/export_fx.py --shards N), so
// that each machine of a sharded run needs only its rank's files. The weights
// table names the shards' manifest, NAME.shards.json, where it would name a .npy:
//
//   {"format": "kiln-weight-shards", "version": 1, "dtype": "float32",
//    "shape": [64, 3, 7, 7], "world_size": 2, "files": ["w.rank0.npy", "w.rank1.npy"]}
//
// Shard r (a 1-d array; files relative to the manifest) holds the elements
// [r * L, min(numel, (r + 1) * L)) of the weight flattened in C order, with
// L = ceil(numel / world_size): shard_parameters's cut, so a run of N ranks
// reads each rank's own file and nothing else. Any other run (another rank
// count, the whole weight) reads the pieces it covers.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/io/npy_slice.hpp"
#include "kiln/io/npy_weights.hpp"

namespace kiln::io {

struct WeightShards {
  std::filesystem::path manifest;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  std::int64_t world_size = 1;
  std::vector<std::filesystem::path> files;  // absolute, or relative to the working directory

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
  std::int64_t per_shard() const { return (numel() + world_size - 1) / world_size; }
  // Shard r's first element and its number of elements.
  std::int64_t first(std::int64_t r) const { return std::min(numel(), r * per_shard()); }
  std::int64_t count(std::int64_t r) const { return std::min(numel(), (r + 1) * per_shard()) - first(r); }
};

inline bool is_shards_manifest(const std::filesystem::path& p) { return p.filename().string().ends_with(".shards.json"); }

inline WeightShards read_shards_manifest(const std::filesystem::path& path) {
  const auto bad = [&](const std::string& what) { return FormatError(path.string() + ": " + what); };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "kiln-weight-shards") throw bad("\"format\" is not \"kiln-weight-shards\"");
  if (j.value("version", 0) != 1) throw bad("unsupported version (this reader reads version 1)");
  WeightShards s;
  s.manifest = path;
  const auto dtype = j.contains("dtype") && j["dtype"].is_string() ? dtype_from_name(j["dtype"].get<std::string>()) : std::nullopt;
  if (!dtype) throw bad("\"dtype\" is missing or not a dtype name");
  s.dtype = *dtype;
  if (!j.contains("shape") || !j["shape"].is_array()) throw bad("\"shape\" must be a list of sizes");
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0) throw bad("\"shape\" holds something that is not a size");
    s.shape.push_back(d.get<std::int64_t>());
  }
  if (!j.contains("world_size") || !j["world_size"].is_number_integer() || j["world_size"].get<std::int64_t>() < 1)
    throw bad("\"world_size\" must be an integer >= 1");
  s.world_size = j["world_size"].get<std::int64_t>();
  if (!j.contains("files") || !j["files"].is_array() || static_cast<std::int64_t>(j["files"].size()) != s.world_size)
    throw bad("\"files\" must list one file per rank (" + std::to_string(s.world_size) + ")");
  for (const auto& f : j["files"]) {
    if (!f.is_string()) throw bad("\"files\" holds something that is not a path");
    s.files.push_back(path.parent_path() / f.get<std::string>());
  }
  return s;
}

// `count` elements of the weight from element `from`, read from the shards they lie in.
inline std::vector<std::byte> read_shard_elements(const WeightShards& s, std::int64_t from, std::int64_t count) {
  if (from < 0 || count < 0 || from + count > s.numel())
    throw Error(s.manifest.string() + ": elements " + std::to_string(from) + " to " + std::to_string(from + count) +
                " asked of a weight of " + std::to_string(s.numel()));
  std::vector<std::byte> out;
  out.reserve(static_cast<std::size_t>(count) * dtype_itemsize(s.dtype));
  for (std::int64_t r = 0; r < s.world_size && count > 0; ++r) {
    const std::int64_t lo = std::max(from, s.first(r)), hi = std::min(from + count, s.first(r) + s.count(r));
    if (lo >= hi) continue;
    const NpyLayout l = read_npy_layout(s.files[r]);
    if (l.meta.dtype != s.dtype || l.meta.shape != std::vector<std::int64_t>{s.count(r)})
      throw FormatError(s.files[r].string() + ": rank " + std::to_string(r) + "'s shard must be a 1-d " + std::string(dtype_name(s.dtype)) +
                        " array of " + std::to_string(s.count(r)) + " elements (the manifest " + s.manifest.filename().string() + ")");
    const std::vector<std::byte> piece = read_npy_elements(s.files[r], lo - s.first(r), hi - lo);
    out.insert(out.end(), piece.begin(), piece.end());
  }
  return out;
}

// The weight a .npy file or a shards manifest holds: whole, its dtype and shape alone, or a run of it.
inline WeightTensor read_weight_file(const std::filesystem::path& path) {
  if (!is_shards_manifest(path)) return read_npy(path);
  const WeightShards s = read_shards_manifest(path);
  return WeightTensor{s.dtype, s.shape, read_shard_elements(s, 0, s.numel())};
}
inline WeightTensor weight_file_meta(const std::filesystem::path& path) {
  if (!is_shards_manifest(path)) return read_npy_layout(path).meta;
  const WeightShards s = read_shards_manifest(path);
  return WeightTensor{s.dtype, s.shape, {}};
}
inline std::vector<std::byte> read_weight_file_elements(const std::filesystem::path& path, std::int64_t from, std::int64_t count) {
  return is_shards_manifest(path) ? read_shard_elements(read_shards_manifest(path), from, count) : read_npy_elements(path, from, count);
}

}  // namespace kiln::io
