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

// Sorts [first, last) by `less` (a strict weak order). Equal elements are only
// kept in order within ascending runs, so use it where keys are distinct.
template <class RandomIt, class Less>
void natural_sort(RandomIt first, RandomIt last, Less less) {
  const auto n = static_cast<std::size_t>(last - first);
  if (n < 2) return;
  // Past this many runs the input is not "nearly sorted"; a plain sort is better.
  const std::size_t max_runs = 64 + n / 32;
  std::vector<std::size_t> bounds{0};
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    if (j < n && less(first[j], first[j - 1])) {
      while (j < n && less(first[j], first[j - 1])) ++j;
      std::reverse(first + i, first + j);  // strictly descending: reversing keeps it stable
    } else {
      while (j < n && !less(first[j], first[j - 1])) ++j;
    }
    bounds.push_back(j);
    i = j;
    if (bounds.size() > max_runs) {
      std::sort(first, last, less);
      return;
    }
  }
  // Merge neighbouring runs, halving their number each round.
  while (bounds.size() > 2) {
    std::vector<std::size_t> merged{0};
    std::size_t k = 0;
    for (; k + 2 < bounds.size(); k += 2) {
      std::inplace_merge(first + bounds[k], first + bounds[k + 1], first + bounds[k + 2], less);
      merged.push_back(bounds[k + 2]);
    }
    if (k + 1 < bounds.size()) merged.push_back(bounds[k + 1]);  // an odd run out carries over
    bounds = std::move(merged);
  }
}

}  // namespace kiln
