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

// Sorts [first, last) by `less` (a strict weak order), merging through
// `scratch` (which keeps its capacity, so a caller that sorts repeatedly, like
// PatternMatcherPass, allocates nothing once it has grown). The sort is stable
// while the input has at most 64 + n/32 runs; past that it falls back to
// std::sort, which is not, so use it where keys are distinct.
template <class RandomIt, class Less>
void natural_sort(RandomIt first, RandomIt last, Less less,
                  std::vector<typename std::iterator_traits<RandomIt>::value_type>& scratch) {
  const auto n = static_cast<std::size_t>(last - first);
  if (n < 2) return;
  // Past this many runs the input is not "nearly sorted"; a plain sort is better.
  const std::size_t max_runs = 64 + n / 32;
  std::vector<std::size_t> bounds{0};
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
      std::sort(first, last, less);
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
void natural_sort(RandomIt first, RandomIt last, Less less) {
  std::vector<typename std::iterator_traits<RandomIt>::value_type> scratch;
  natural_sort(first, last, less, scratch);
}

}  // namespace kiln
