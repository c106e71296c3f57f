#pragma once
// The runtime dispatch table that lowering consults: op key -> the kernel's
// lower function, kept sorted and searched by halves (no allocation per
// lookup). Made from compile-time kernel groups (kernels/registry.hpp); a
// program may add kernels of its own to a copy of the default table.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/hana/for_each.hpp>

#include "kiln/kernels/kernel_group.hpp"

namespace kiln::kernels {

class KernelTable {
 public:
  // Adds `fn` under `key`; a key given twice is refused.
  void add(std::string_view key, LowerFn fn) {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), key, [](const Entry& e, std::string_view k) { return e.first < k; });
    if (it != entries_.end() && it->first == key) throw Error("kernel table: two kernels for '" + std::string(key) + "'");
    entries_.emplace(it, std::string(key), fn);
  }
  LowerFn find(std::string_view key) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), key, [](const Entry& e, std::string_view k) { return e.first < k; });
    return it != entries_.end() && it->first == key ? it->second : nullptr;
  }
  std::size_t size() const { return entries_.size(); }
  // Every key, in order.
  std::vector<std::string> targets() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.first);
    return out;
  }

 private:
  using Entry = std::pair<std::string, LowerFn>;
  std::vector<Entry> entries_;  // sorted by key
};

// Adds every kernel of `Group` (a KernelGroup) to `table`.
template <class Group>
void add_kernels(KernelTable& table) {
  boost::hana::for_each(Group::entries, [&](auto entry) {
    using E = typename decltype(entry)::type;
    table.add(E::key, &E::kernel::lower);
  });
}

}  // namespace kiln::kernels
