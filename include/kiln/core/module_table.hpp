#pragma once
// The submodules a graph's call_module nodes call: module path -> class, plus
// whatever else the exporter recorded about each (fx-graph-json's "modules").
//
// Inductor matches a call_module node by the class of the module it calls
// (extract_target), so `CallModule(nn.Linear, ...)` finds every Linear
// whatever its path; a kiln pattern names the class with module_class():
//
//   CallModule(kiln::module_class("torch.nn.modules.linear.Linear"), kw<"x">)
//
// A Graph owns one ModuleTable (Graph::modules()); the matcher goes from a
// node's target hash (its module path's) to the class hash in one hash lookup.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/op_ref.hpp"

namespace kiln {

// A module class named by its fully qualified name, as
// f"{cls.__module__}.{cls.__qualname__}" prints it ("torch.nn.modules.linear.Linear").
struct ModuleClass {
  std::string_view name;
  std::uint64_t hash = 0;  // hash_op_name(name)
};
constexpr ModuleClass module_class(std::string_view qualified_name) {
  return ModuleClass{qualified_name, hash_op_name(qualified_name)};
}

struct ModuleInfo {
  std::string path;        // "encoder.fc", a call_module node's target
  std::string class_name;  // "torch.nn.modules.linear.Linear"
  // The entry's other members (constructor attributes, ...), each as compact
  // JSON text, in the order given; kiln keeps them for the writer.
  std::vector<std::pair<std::string, std::string>> fields;
  std::uint64_t class_hash() const { return hash_op_name(class_name); }
};

class ModuleTable {
 public:
  // Adds or replaces the entry of `info.path`.
  void set(ModuleInfo info) {
    const std::uint64_t h = hash_op_name(info.path);
    const std::uint64_t c = info.class_hash();
    if (auto it = by_path_.find(h); it != by_path_.end()) {
      ModuleInfo& old = entries_[it->second.index];
      if (old.path != info.path)
        throw Error("module table: paths '" + old.path + "' and '" + info.path + "' have the same 64-bit hash");
      old = std::move(info);
      it->second.class_hash = c;
      return;
    }
    by_path_.emplace(h, Slot{entries_.size(), c});
    entries_.push_back(std::move(info));
  }
  void set(std::string path, std::string class_name) { set(ModuleInfo{std::move(path), std::move(class_name), {}}); }

  const ModuleInfo* find(std::string_view path) const {
    auto it = by_path_.find(hash_op_name(path));
    if (it == by_path_.end() || entries_[it->second.index].path != path) return nullptr;
    return &entries_[it->second.index];
  }
  // The class hash of the module whose path hashes to `path_hash` (a
  // call_module node's target hash), or 0 when the table has no entry.
  std::uint64_t class_hash_of(std::uint64_t path_hash) const {
    auto it = by_path_.find(path_hash);
    return it == by_path_.end() ? 0 : it->second.class_hash;
  }

  // In the order the entries were first set (a file's order).
  const std::vector<ModuleInfo>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() {
    entries_.clear();
    by_path_.clear();
  }

 private:
  struct Slot {
    std::size_t index;
    std::uint64_t class_hash;  // kept here, so a lookup reads one map node
  };
  std::vector<ModuleInfo> entries_;
  std::unordered_map<std::uint64_t, Slot> by_path_;
};

}  // namespace kiln
