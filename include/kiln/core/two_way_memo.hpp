#pragma once
// TwoWayMemo<T, Sets>: a tiny cache from (kind, target) keys to pointers.
//
// Creating and erasing nodes asks for the same few targets' data over and over
// (a rewrite erases mm and add, creates addmm; erases mul and sigmoid, creates
// pow and sigmoid). A hash map lookup each time costs more than the rest of the
// step, so Graph keeps a memo in front of its maps. Two ways per set, most
// recent first, so that two targets a pass alternates between cannot evict
// each other; a hit costs a compare, or a compare and a swap of two entries.
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace kiln::detail {

// Keys are Graph::bucket_key values: never 0 (0 marks an empty entry), with the
// node kind in the low three bits, which the set index skips.
template <class T, std::size_t Sets>
class TwoWayMemo {
 public:
  // The value remembered for `key`, or nullptr.
  T* find(std::uint64_t key) {
    Way* way = set_of(key);
    if (way[0].key == key) return way[0].value;
    if (way[1].key == key) {
      std::swap(way[0], way[1]);
      return way[0].value;
    }
    return nullptr;
  }
  // Remembers `value` (not null) for `key`, evicting the set's older entry.
  void put(std::uint64_t key, T* value) {
    Way* way = set_of(key);
    way[1] = way[0];
    way[0] = Way{key, value};
  }

 private:
  struct Way {
    std::uint64_t key = 0;
    T* value = nullptr;
  };
  Way* set_of(std::uint64_t key) { return &ways_[2 * ((key >> 3) % Sets)]; }
  std::array<Way, 2 * Sets> ways_{};
};

}  // namespace kiln::detail
