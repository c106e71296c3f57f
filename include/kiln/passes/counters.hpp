#pragma once
// Counters: named integers that passes bump to say what they did, the
// counterpart of Inductor's `counters["inductor"]`. Names follow Inductor's
// (`pattern_matcher_count`, `batch_linear`, ...) so runs can be compared one for one.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

class Counters {
 public:
  void increment(std::string_view name, std::int64_t by = 1) {
    if (auto it = values_.find(name); it != values_.end()) it->second += by;
    else values_.emplace(std::string(name), by);
  }
  // Sets `name` to `value` and makes it an assigned counter: where Inductor
  // assigns a counter rather than adding to it (scmerge_split_sections_removed),
  // the last assignment wins, here and when merged into another Counters.
  void assign(std::string_view name, std::int64_t value) {
    if (auto it = values_.find(name); it != values_.end()) it->second = value;
    else values_.emplace(std::string(name), value);
    if (!assigned_.contains(name)) assigned_.emplace(name);
  }
  bool is_assigned(std::string_view name) const { return assigned_.contains(name); }
  std::int64_t get(std::string_view name) const {
    auto it = values_.find(name);
    return it == values_.end() ? 0 : it->second;
  }
  bool empty() const { return values_.empty(); }
  void clear() {
    values_.clear();
    assigned_.clear();
  }
  const std::map<std::string, std::int64_t, std::less<>>& values() const { return values_; }

  // Adds every counter of `other` into this one; an assigned counter of
  // `other` replaces this one's value instead.
  void merge(const Counters& other) {
    for (const auto& [k, v] : other.values_) {
      if (other.is_assigned(k)) assign(k, v);
      else values_[k] += v;
    }
  }

  // One JSON object, keys sorted: {"pattern_matcher_count": 3, ...}.
  nlohmann::json to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : values_) j[k] = v;
    return j;
  }

 private:
  std::map<std::string, std::int64_t, std::less<>> values_;  // less<>: look up by string_view
  std::set<std::string, std::less<>> assigned_;              // the names set by assign()
};

}  // namespace kiln
