#pragma once
// `detail::NodeMap` and `detail::NodeSet`: hash tables keyed by node address
// for the graph algorithms that ask one about every input or user of a node.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

class Node;

namespace detail {
// Node addresses to values, open addressing, growing as needed: editing a
// node of thousands of inputs or users asks one about each of them, where
// std::unordered_map's lookups and its allocation per entry were most of
// the time. A reference from get() lasts until the next get() of a node
// not in the map.
template <class V>
class NodeMap {
 public:
  explicit NodeMap(std::size_t expected = 0) {
    std::size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    keys_.assign(cap, nullptr);
    values_.resize(cap);
    mask_ = cap - 1;
  }
  // The value of `n`, a V{} inserted first when absent (`*inserted` says).
  V& get(const Node* n, bool* inserted = nullptr) {
    std::size_t i = home(n);
    for (;; i = (i + 1) & mask_) {
      if (keys_[i] == n) {
        if (inserted) *inserted = false;
        return values_[i];
      }
      if (!keys_[i]) break;
    }
    if (2 * (size_ + 1) > keys_.size()) {
      grow();
      for (i = home(n); keys_[i]; i = (i + 1) & mask_) {
      }
    }
    keys_[i] = n;
    values_[i] = V{};
    ++size_;
    if (inserted) *inserted = true;
    return values_[i];
  }
  const V* find(const Node* n) const {
    for (std::size_t i = home(n);; i = (i + 1) & mask_) {
      if (keys_[i] == n) return &values_[i];
      if (!keys_[i]) return nullptr;
    }
  }
  V* find(const Node* n) { return const_cast<V*>(std::as_const(*this).find(n)); }
  bool contains(const Node* n) const { return find(n) != nullptr; }
  std::size_t size() const { return size_; }
  // Removes `n` if present. Linear probing without tombstones: the entries
  // after the hole that may move into it move back, so lookups stay short
  // however many entries come and go (a user's index of its inputs does).
  bool erase(const Node* n) {
    std::size_t hole = home(n);
    for (;; hole = (hole + 1) & mask_) {
      if (keys_[hole] == n) break;
      if (!keys_[hole]) return false;
    }
    for (std::size_t j = (hole + 1) & mask_; keys_[j]; j = (j + 1) & mask_) {
      // The entry at j stays where it is if its home lies cyclically in (hole, j].
      const std::size_t h = home(keys_[j]);
      const bool stays = hole < j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays) continue;
      keys_[hole] = keys_[j];
      values_[hole] = std::move(values_[j]);
      hole = j;
    }
    keys_[hole] = nullptr;
    values_[hole] = V{};
    --size_;
    return true;
  }

 private:
  std::size_t home(const Node* n) const {
    return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(n) >> 6) * 0x9E3779B97F4A7C15ull >> 20) & mask_;
  }
  void grow() {
    std::vector<const Node*> keys(2 * keys_.size(), nullptr);
    std::vector<V> values(2 * keys_.size());
    keys.swap(keys_);
    values.swap(values_);
    mask_ = keys_.size() - 1;
    for (std::size_t j = 0; j < keys.size(); ++j) {
      if (!keys[j]) continue;
      std::size_t i = home(keys[j]);
      while (keys_[i]) i = (i + 1) & mask_;
      keys_[i] = keys[j];
      values_[i] = std::move(values[j]);
    }
  }
  std::vector<const Node*> keys_;
  std::vector<V> values_;
  std::size_t size_ = 0, mask_ = 0;
};

// A set of node addresses, the same way.
class NodeSet {
 public:
  explicit NodeSet(std::size_t expected = 0) : map_(expected) {}
  bool insert(const Node* n) {
    bool inserted = false;
    map_.get(n, &inserted);
    return inserted;
  }
  bool contains(const Node* n) const { return map_.contains(n); }

 private:
  struct Nothing {};
  NodeMap<Nothing> map_;
};
}  // namespace detail

}  // namespace kiln
