#pragma once
// PatternMatcherPass's root table: for a node's (kind, target) key, the list of
// patterns whose root may match it, looked up once for every node of a graph.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln::detail {

class EntryBase;  // passes/pattern_matcher_pass.hpp

// The patterns registered at one root (kind, target), in the order they are tried.
struct RootList {
  OpKind kind{};
  OpRef target;
  std::vector<EntryBase*> entries;
};

// The largest root list number a snapshot's Candidate can carry (in the
// alignment bits of a node's address); it also means "look the list up".
inline constexpr std::size_t kRootUnknown = alignof(Node) - 1;
static_assert(alignof(Node) >= 8, "a Candidate numbers a few root lists in the alignment bits");

// The root lists by a node's (kind, target) key: lists[i] belongs to keys[i].
// find() runs for every node of the graph, so it is a hash table at most a
// quarter full, probed linearly: a node that is no pattern's root mostly
// meets an empty entry at once, where a scan of the keys would compare them all.
struct RootEntry {
  std::uint64_t key = 0;    // bucket keys are never 0: 0 marks an empty entry
  std::uint32_t index = 0;
  std::uint32_t tag = 0;    // what a Candidate carries: index, or kRootUnknown from there on
};
struct RootIndex {
  std::vector<std::uint64_t> keys;     // in registration order
  std::vector<const RootList*> lists;
  // A power of two in size, with at least one empty entry.
  std::vector<RootEntry> table = std::vector<RootEntry>(16);
  std::size_t mask = 15;  // table.size() - 1
  unsigned shift = 60;    // 64 - log2(table.size())

  const RootEntry* entry(std::uint64_t key) const {
    for (std::size_t i = home(key);; i = (i + 1) & mask) {
      const RootEntry& e = table[i];
      if (e.key == key) return &e;
      if (e.key == 0) return nullptr;
    }
  }
  const RootList* find(std::uint64_t key) const {
    const RootEntry* e = entry(key);
    return e ? lists[e->index] : nullptr;
  }
  std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift);  // Fibonacci hashing
  }
  // Sets the list of `key` (the table is stale until build()).
  void add(std::uint64_t key, const RootList* list) {
    if (const RootEntry* e = entry(key); e && keys[e->index] == key) {
      lists[e->index] = list;
      return;
    }
    keys.push_back(key);
    lists.push_back(list);
  }
  void build() {
    unsigned bits = 4;
    while ((std::size_t{1} << bits) < 4 * keys.size()) ++bits;
    table.assign(std::size_t{1} << bits, RootEntry{});
    mask = table.size() - 1;
    shift = 64 - bits;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      std::size_t i = home(keys[k]);
      while (table[i].key != 0) i = (i + 1) & mask;
      table[i] = {keys[k], static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(std::min(k, kRootUnknown))};
    }
  }
};

}  // namespace kiln::detail
