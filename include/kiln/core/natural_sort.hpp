#pragma once
// natural_sort: a merge sort that first splits the input into its monotone runs.
//
// Lists of nodes gathered in storage order are nearly in graph order: a graph
// read from a file is one ascending run, and a pass that rewrote it backwards
// adds one descending run of new nodes. Reversing descending runs and merging
// neighbours costs O(n log r) for r runs, which for those lists is a few linear
// passes instead of a full O(n log n) sort.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

namespace kiln {

// How many monotone runs natural_sort merges in a list of n (more: it sorts otherwise).
inline std::size_t natural_sort_max_runs(std::size_t n) { return 64 + n / 32; }

namespace detail {
// Insertion sort that gives up (returning false, the range then permuted but
// not sorted) once it has moved `budget` elements: linear for a list whose
// elements are each a few places from where they belong.
template <class RandomIt, class Less>
bool bounded_insertion_sort(RandomIt first, RandomIt last, Less less, std::size_t budget) {
  for (RandomIt i = first + 1; i < last; ++i) {
    if (!less(*i, *(i - 1))) continue;
    auto v = std::move(*i);
    RandomIt j = i;
    do {
      *j = std::move(*(j - 1));
      --j;
      if (budget-- == 0) {
        *j = std::move(v);
        return false;
      }
    } while (j != first && less(v, *(j - 1)));
    *j = std::move(v);
  }
  return true;
}
}  // namespace detail

// Sorts [first, last) by `less` (a strict weak order), merging through
// `scratch` (which keeps its capacity, so a caller that sorts repeatedly, like
// PatternMatcherPass, allocates nothing once it has grown).
// - At most 64 + n/32 monotone runs: they are merged, stably.
// - More runs, but every element close to its place (a list whose elements were
//   each displaced by a few places, as when a pass reuses the memory of nodes
//   it erased next to where it creates new ones): an insertion sort, stable too,
//   while it moves fewer than 8n elements.
// - Otherwise std::sort, which is not stable: use this where keys are distinct.
// `bounds` holds the runs' boundaries (at most natural_sort_max_runs(n) + 1).
template <class RandomIt, class Less>
void natural_sort(RandomIt first, RandomIt last, Less less,
                  std::vector<typename std::iterator_traits<RandomIt>::value_type>& scratch,
                  std::vector<std::size_t>& bounds) {
  const auto n = static_cast<std::size_t>(last - first);
  if (n < 2) return;
  // Past this many runs the input is not "a few runs".
  const std::size_t max_runs = natural_sort_max_runs(n);
  bounds.assign(1, 0);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    if (j < n) {
      if (less(first[j], first[j - 1])) {
        do ++j;
        while (j < n && less(first[j], first[j - 1]));
        std::reverse(first + i, first + j);  // strictly descending: reversing keeps it stable
      } else {
        do ++j;
        while (j < n && !less(first[j], first[j - 1]));
      }
    }
    bounds.push_back(j);
    i = j;
    if (bounds.size() > max_runs) {
      if (!detail::bounded_insertion_sort(first, last, less, 8 * n)) std::sort(first, last, less);
      return;
    }
  }
  // Merge neighbouring runs, halving their number each round: the left run is
  // moved out to `scratch` and merged back with the right one in place.
  while (bounds.size() > 2) {
    std::size_t out = 1;
    std::size_t k = 0;
    for (; k + 2 < bounds.size(); k += 2) {
      const auto a = first + static_cast<std::ptrdiff_t>(bounds[k]);
      const auto b = first + static_cast<std::ptrdiff_t>(bounds[k + 1]);
      const auto c = first + static_cast<std::ptrdiff_t>(bounds[k + 2]);
      scratch.assign(std::make_move_iterator(a), std::make_move_iterator(b));
      auto l = scratch.begin();
      auto r = b;
      auto out_it = a;
      // Left first on ties (stable); once the left run is used up, what is
      // left of the right run is already where it belongs.
      while (l != scratch.end()) {
        if (r != c && less(*r, *l)) *out_it++ = std::move(*r++);
        else *out_it++ = std::move(*l++);
      }
      bounds[out++] = bounds[k + 2];
    }
    if (k + 1 < bounds.size()) bounds[out++] = bounds[k + 1];  // an odd run out carries over
    bounds.resize(out);
  }
}

template <class RandomIt, class Less>
void natural_sort(RandomIt first, RandomIt last, Less less,
                  std::vector<typename std::iterator_traits<RandomIt>::value_type>& scratch) {
  std::vector<std::size_t> bounds;
  natural_sort(first, last, less, scratch, bounds);
}

template <class RandomIt, class Less>
void natural_sort(RandomIt first, RandomIt last, Less less) {
  std::vector<typename std::iterator_traits<RandomIt>::value_type> scratch;
  natural_sort(first, last, less, scratch);
}

}  // namespace kiln
