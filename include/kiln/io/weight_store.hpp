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
// a large model does not read them all.
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/io/graph_file.hpp"
#include "kiln/io/npy_weights.hpp"

namespace kiln::io {

class WeightStore {
 public:
  WeightStore() = default;
  // The weights `file`'s table names, each read from its .npy file when first asked for.
  explicit WeightStore(const GraphFile& file) : table_(file.weights), base_dir_(file.base_dir) {}

  // A weight known from the start, held in memory (a caller without files, a test).
  void add(std::string name, WeightTensor t) { values_.insert_or_assign(std::move(name), std::move(t)); }

  // Whether a weight of that name exists (in the table, added or created).
  bool contains(std::string_view name) const {
    return values_.find(name) != values_.end() || find_weight(table_, name) != nullptr;
  }

  // The weight's value, read from its file on first use; nullptr when there is none.
  const WeightTensor* find(std::string_view name) {
    if (auto it = values_.find(name); it != values_.end()) return &it->second;
    const std::string* rel = find_weight(table_, name);
    if (!rel) return nullptr;
    GraphFile where;  // load_weight's errors name the attribute and the file
    where.weights = {{std::string(name), *rel}};
    where.base_dir = base_dir_;
    return &values_.emplace(std::string(name), load_weight(where, name)).first->second;
  }

  // Adds a weight a pass made, named `base`, or `base_1`, `base_2`, ... when
  // that is taken; returns the name it got.
  std::string create(std::string_view base, WeightTensor t) {
    std::string name(base);
    for (int i = 1; contains(name); ++i) name = std::string(base) + "_" + std::to_string(i);
    values_.emplace(name, std::move(t));
    created_.push_back(name);
    return name;
  }

  // The names of the weights create() added, in order; find() gives their values.
  const std::vector<std::string>& created() const { return created_; }
  const WeightTensor& created_value(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw Error("WeightStore: no weight named '" + std::string(name) + "'");
    return it->second;
  }

 private:
  WeightsTable table_;
  std::filesystem::path base_dir_;
  std::map<std::string, WeightTensor, std::less<>> values_;  // added, created and read so far
  std::vector<std::string> created_;
};

}  // namespace kiln::io
