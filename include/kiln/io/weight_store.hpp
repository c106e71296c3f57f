#pragma once
// WeightStore: the weights a pass may read and add to, by attribute name.
//
//   kiln::io::GraphFile f = kiln::io::read_fx_json("graph.json");
//   kiln::io::WeightStore store(f);                        // reads nothing yet
//   const kiln::io::WeightTensor* w = store.find("conv.weight");   // read on first use
//   std::string name = store.create("conv_fused_weight", folded);  // a pass's new weight
//
// A pass that folds constants (fuse_conv_bn) reads the weights its nodes refer to
// and creates new ones; the caller (kiln-opt) then writes `created()` next to the
// graph it writes. Files are read lazily, so a pass that touches a few weights of
// a large model does not read them all; for the same reason a pass may take() a
// weight read from a file to reuse its storage, since the file can give it again.
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/io/graph_file.hpp"
#include "kiln/io/graph_weights.hpp"
#include "kiln/io/npy_slice.hpp"
#include "kiln/io/weight_shards.hpp"
#include "kiln/io/npy_weights.hpp"

namespace kiln::io {

class WeightStore {
 public:
  WeightStore() = default;
  // The weights `file`'s table names, each read from its .npy file when first asked for.
  explicit WeightStore(const GraphFile& file) : table_(file.weights), base_dir_(file.base_dir) {}

  // A weight known from the start, held in memory (a caller without files, a test).
  void add(std::string name, WeightTensor t) { values_.insert_or_assign(std::move(name), Held{std::move(t), false}); }

  // Whether a weight of that name exists (in the table, added or created).
  bool contains(std::string_view name) const {
    return values_.find(name) != values_.end() || find_weight(table_, name) != nullptr;
  }

  // The weight's value, read from its file on first use; nullptr when there is none.
  const WeightTensor* find(std::string_view name) {
    if (auto it = values_.find(name); it != values_.end()) return &it->second.value;
    const std::string* rel = find_weight(table_, name);
    if (!rel) return nullptr;
    return &values_.emplace(std::string(name), Held{load(name, *rel), true}).first->second.value;
  }

  // A weight's dtype and shape (no bytes): from its value when that is read or
  // held, else from its file's header alone. nullopt when there is no such weight.
  std::optional<WeightTensor> meta(std::string_view name) const {
    if (auto it = values_.find(name); it != values_.end()) return WeightTensor{it->second.value.dtype, it->second.value.shape, {}};
    const std::string* rel = find_weight(table_, name);
    if (!rel) return std::nullopt;
    return naming(name, [&] { return weight_file_meta(base_dir_ / *rel); });
  }

  // `count` elements of a weight flattened in C order, from element `from`, as
  // bytes: from its value when that is read or held, else only those bytes of
  // its file (a rank keeping a shard reads its shard). Throws for an unknown name.
  std::vector<std::byte> read_elements(std::string_view name, std::int64_t from, std::int64_t count) const {
    if (auto it = values_.find(name); it != values_.end()) {
      const WeightTensor& w = it->second.value;
      if (from < 0 || count < 0 || from + count > w.numel())
        throw Error("WeightStore: elements " + std::to_string(from) + " to " + std::to_string(from + count) + " of '" +
                    std::string(name) + "', which has " + std::to_string(w.numel()));
      const auto* p = w.bytes.data() + static_cast<std::size_t>(from) * w.itemsize();
      return {p, p + static_cast<std::size_t>(count) * w.itemsize()};
    }
    const std::string* rel = find_weight(table_, name);
    if (!rel) throw Error("WeightStore: no weight named '" + std::string(name) + "'");
    return naming(name, [&] { return read_weight_file_elements(base_dir_ / *rel, from, count); });
  }

  // Moves a weight whose value comes from its file out of the store, for a pass
  // that reuses its storage once the graph no longer refers to it (fuse_conv_bn
  // scales a convolution's weight in place). The weight still exists: a later
  // find() reads its file again. nullopt for a weight held only in memory
  // (added, created) or unknown: the caller copies find()'s value instead.
  // Pointers find() gave for this name dangle afterwards.
  std::optional<WeightTensor> take(std::string_view name) {
    auto it = values_.find(name);
    if (it != values_.end()) {
      if (!it->second.from_file) return std::nullopt;
      WeightTensor t = std::move(it->second.value);
      values_.erase(it);
      return t;
    }
    const std::string* rel = find_weight(table_, name);
    if (!rel) return std::nullopt;
    return load(name, *rel);
  }

  // Adds a weight a pass made, named `base`, or `base_1`, `base_2`, ... when
  // that is taken; returns the name it got.
  std::string create(std::string_view base, WeightTensor t) {
    std::string name(base);
    for (int i = 1; contains(name); ++i) name = std::string(base) + "_" + std::to_string(i);
    values_.emplace(name, Held{std::move(t), false});
    created_.push_back(name);
    return name;
  }

  // Forgets a weight altogether (its table entry, its value, its place in
  // created()), for a pass after which the graph no longer reads it
  // (shard_parameters keeps only a shard): names() no longer lists it, so a
  // runner does not load it. Returns whether there was one.
  bool remove(std::string_view name) {
    bool found = values_.erase(std::string(name)) > 0;
    const auto in_table = std::find_if(table_.begin(), table_.end(), [&](const auto& e) { return e.first == name; });
    if (in_table != table_.end()) table_.erase(in_table), found = true;
    std::erase(created_, name);
    return found;
  }

  // Every weight's name: the table's, then those added or created, each once.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, rel] : table_) out.push_back(name);
    for (const auto& [name, held] : values_)
      if (!find_weight(table_, name)) out.push_back(name);
    return out;
  }

  // The names of the weights create() added, in order; find() gives their values.
  const std::vector<std::string>& created() const { return created_; }
  const WeightTensor& created_value(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw Error("WeightStore: no weight named '" + std::string(name) + "'");
    return it->second.value;
  }

 private:
  struct Held {
    WeightTensor value;
    bool from_file;  // read from the table's file, so take() may hand it out
  };
  // Runs `read`, its file errors prefixed with the weight's name as load_weight's are.
  template <class Read>
  static auto naming(std::string_view name, Read read) -> decltype(read()) {
    try {
      return read();
    } catch (const IoError& e) {
      throw IoError("weights['" + std::string(name) + "']: " + e.what());
    } catch (const FormatError& e) {
      throw FormatError("weights['" + std::string(name) + "']: " + e.what());
    }
  }
  WeightTensor load(std::string_view name, const std::string& rel) const {
    GraphFile where;  // load_weight's errors name the attribute and the file
    where.weights = {{std::string(name), rel}};
    where.base_dir = base_dir_;
    return load_weight(where, name);
  }

  WeightsTable table_;
  std::filesystem::path base_dir_;
  std::map<std::string, Held, std::less<>> values_;  // added, created and read so far
  std::vector<std::string> created_;
};

}  // namespace kiln::io
