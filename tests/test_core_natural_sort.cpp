// natural_sort: a merge sort over the input's monotone runs (descending runs
// reversed), past 64 + n/32 runs a bounded insertion sort, then std::sort.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/natural_sort.hpp"

using kiln::natural_sort;

namespace {

// A comparator that counts its calls.
struct CountingLess {
  std::size_t* calls;
  bool operator()(int a, int b) const {
    ++*calls;
    return a < b;
  }
};

// natural_sort(v) with `<`; returns the number of comparisons made.
std::size_t sort_counting(std::vector<int>& v) {
  std::size_t calls = 0;
  natural_sort(v.begin(), v.end(), CountingLess{&calls});
  return calls;
}

// Checks that natural_sort gives std::sort's result (ints: equal ones are indistinguishable).
void check_sorts_like_std(std::vector<int> v) {
  std::vector<int> expected = v;
  std::sort(expected.begin(), expected.end());
  natural_sort(v.begin(), v.end(), std::less<>{});
  REQUIRE(v == expected);
}

// `runs` ascending runs of `len` elements each, every run starting below where
// the previous one ended, so the input has exactly `runs` monotone runs.
std::vector<int> ascending_blocks(std::size_t runs, std::size_t len) {
  std::vector<int> v;
  for (std::size_t r = 0; r < runs; ++r)
    for (std::size_t i = 0; i < len; ++i) v.push_back(static_cast<int>((runs - r) * 3 + i * 7 * runs));
  return v;
}

std::size_t log2_ceil(std::size_t x) {
  std::size_t k = 0;
  while ((std::size_t(1) << k) < x) ++k;
  return k;
}

struct Item {
  int key;
  int id;
};
bool by_key(const Item& a, const Item& b) { return a.key < b.key; }

}  // namespace

TEST_CASE("natural_sort: empty and one-element ranges are left alone without comparing") {
  std::vector<int> empty;
  CHECK(sort_counting(empty) == 0);
  CHECK(empty.empty());
  std::vector<int> one{42};
  CHECK(sort_counting(one) == 0);
  CHECK(one == std::vector<int>{42});
  // A sub-range: only [first, last) is touched.
  std::vector<int> v{9, 3, 2, 1, 0};
  natural_sort(v.begin() + 1, v.begin() + 4, std::less<>{});
  CHECK(v == std::vector<int>{9, 1, 2, 3, 0});
}

TEST_CASE("natural_sort: two elements in either order") {
  std::vector<int> a{1, 2}, b{2, 1}, c{5, 5};
  natural_sort(a.begin(), a.end(), std::less<>{});
  natural_sort(b.begin(), b.end(), std::less<>{});
  natural_sort(c.begin(), c.end(), std::less<>{});
  CHECK(a == std::vector<int>{1, 2});
  CHECK(b == std::vector<int>{1, 2});
  CHECK(c == std::vector<int>{5, 5});
}

TEST_CASE("natural_sort: sorted input costs one linear scan (at most n comparisons) and is unchanged") {
  for (std::size_t n : {2u, 3u, 100u, 10000u}) {
    CAPTURE(n);
    std::vector<int> v(n);
    std::iota(v.begin(), v.end(), -5);
    const std::vector<int> expected = v;
    CHECK(sort_counting(v) <= n);
    CHECK(v == expected);
  }
  // Non-decreasing with repeats is one run too.
  std::vector<int> dup{1, 1, 2, 2, 2, 3, 7, 7};
  const auto expected = dup;
  CHECK(sort_counting(dup) <= dup.size());
  CHECK(dup == expected);
}

TEST_CASE("natural_sort: strictly reverse-sorted input is reversed in one linear scan") {
  for (std::size_t n : {2u, 3u, 100u, 10000u}) {
    CAPTURE(n);
    std::vector<int> v(n);
    std::iota(v.rbegin(), v.rend(), 0);
    CHECK(sort_counting(v) <= n);
    std::vector<int> expected(n);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(v == expected);
  }
}

TEST_CASE("natural_sort: non-increasing input with repeats (descending runs split at the repeats)") {
  std::vector<int> v{9, 9, 8, 7, 7, 7, 3, 1, 1, 0};
  check_sorts_like_std(v);
  std::vector<int> w{5, 5, 5, 5};
  check_sorts_like_std(w);
}

TEST_CASE("natural_sort: an ascending run then a descending run (what a pattern pass leaves) merges in linear time") {
  // Storage order after a pass that rewrote a graph backwards: the original
  // nodes in order, then the new ones, each placed before the previous one.
  for (std::size_t n : {2u, 5u, 64u, 4096u, 20000u}) {
    CAPTURE(n);
    std::vector<int> v;
    for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<int>(2 * i));
    for (std::size_t i = n; i-- > 0;) v.push_back(static_cast<int>(2 * i + 1));
    const std::size_t calls = sort_counting(v);
    std::vector<int> expected(2 * n);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(v == expected);
    // Two scans and one merge; std::sort would need ~2n log2(2n).
    CHECK(calls <= 3 * 2 * n);
  }
  // The descending run first, then the ascending one.
  std::vector<int> v{9, 7, 5, 3, 1, 0, 2, 4, 6, 8};
  const std::size_t calls = sort_counting(v);
  CHECK(v == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(calls <= 30);
}

TEST_CASE("natural_sort: a few runs cost O(n log r) comparisons") {
  const std::size_t n = 1 << 14;
  for (std::size_t runs : {3u, 7u, 16u, 63u}) {
    CAPTURE(runs);
    std::vector<int> v = ascending_blocks(runs, n / runs);
    // Make every other run strictly descending.
    const std::size_t len = n / runs;
    for (std::size_t r = 1; r < runs; r += 2) std::reverse(v.begin() + r * len, v.begin() + (r + 1) * len);
    std::vector<int> expected = v;
    std::sort(expected.begin(), expected.end());
    const std::size_t calls = sort_counting(v);
    CHECK(v == expected);
    // One scan (one extra compare per run) plus ceil(log2 runs) rounds of
    // merging, each at most n comparisons.
    CHECK(calls <= v.size() * (1 + log2_ceil(runs)) + runs + 1);
  }
}

TEST_CASE("natural_sort: many runs (past 64 + n/32) still sort correctly, through the fallback") {
  for (std::size_t n : {100u, 640u, 3200u, 50000u}) {
    CAPTURE(n);
    const std::size_t max_runs = 64 + n / 32;
    // Around the threshold, then far beyond it (runs of two).
    for (std::size_t runs : {max_runs - 1, max_runs, max_runs + 1, n / 2}) {
      CAPTURE(runs);
      if (runs < 1 || runs > n / 2) continue;
      const std::size_t len = n / runs;
      std::vector<int> v = ascending_blocks(runs, len);
      check_sorts_like_std(v);
    }
    // Alternating up/down pairs: n/2 runs.
    std::vector<int> zig;
    for (std::size_t i = 0; i < n; ++i) zig.push_back(static_cast<int>(i % 2 ? n - i : i));
    check_sorts_like_std(zig);
  }
}

TEST_CASE("natural_sort: random inputs agree with std::sort") {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    CAPTURE(round);
    const std::size_t n = rng() % 3000;
    const int range = 1 + static_cast<int>(rng() % 5000);  // small ranges: many repeats
    std::vector<int> v(n);
    for (int& x : v) x = static_cast<int>(rng() % static_cast<unsigned>(range));
    const int shape = round % 4;
    if (shape == 1) {
      // Nearly sorted: sorted with a few swaps.
      std::sort(v.begin(), v.end());
      for (int k = 0; k < 5 && n > 1; ++k) std::swap(v[rng() % n], v[rng() % n]);
    } else if (shape == 2) {
      // A handful of sorted segments, each ascending or descending.
      std::size_t pos = 0;
      while (pos < n) {
        const std::size_t len = std::min<std::size_t>(n - pos, 1 + rng() % 700);
        if (rng() % 2) std::sort(v.begin() + pos, v.begin() + pos + len);
        else std::sort(v.begin() + pos, v.begin() + pos + len, std::greater<>{});
        pos += len;
      }
    } else if (shape == 3) {
      // Runs of length 1 to 3 around the fallback threshold.
      std::size_t pos = 0;
      while (pos < n) {
        const std::size_t len = std::min<std::size_t>(n - pos, 1 + rng() % 3);
        std::sort(v.begin() + pos, v.begin() + pos + len);
        pos += len;
      }
    }
    check_sorts_like_std(v);
  }
}

TEST_CASE("natural_sort: equal keys inside ascending runs keep their order") {
  // Three ascending runs and a descending one between them; few runs, so no fallback.
  std::vector<Item> v{{1, 0}, {1, 1}, {2, 2}, {2, 3}, {2, 4}, {6, 5},  // ascending
                      {5, 6}, {4, 7}, {3, 8}, {0, 9},                  // strictly descending
                      {1, 10}, {3, 11}, {3, 12}, {7, 13},              // ascending
                      {2, 14}, {2, 15}, {8, 16}};                      // ascending
  natural_sort(v.begin(), v.end(), by_key);
  REQUIRE(std::is_sorted(v.begin(), v.end(), by_key));
  auto pos = [&](int id) {
    return std::find_if(v.begin(), v.end(), [id](const Item& it) { return it.id == id; }) - v.begin();
  };
  for (int id = 0; id < 17; ++id) REQUIRE(pos(id) < static_cast<std::ptrdiff_t>(v.size()));
  // Within each ascending run, equal keys keep their relative order.
  CHECK(pos(0) < pos(1));
  CHECK(pos(2) < pos(3));
  CHECK(pos(3) < pos(4));
  CHECK(pos(11) < pos(12));
  CHECK(pos(14) < pos(15));

  // A long ascending run of equal keys (many equal elements per key) merged with others.
  std::vector<Item> w;
  for (int i = 0; i < 1000; ++i) w.push_back({i / 100, i});        // one ascending run, keys 0..9
  for (int i = 0; i < 500; ++i) w.push_back({20 - i / 50, 1000 + i});  // non-increasing: many short runs
  for (int i = 0; i < 1000; ++i) w.push_back({i / 250, 2000 + i});  // ascending, keys 0..3
  natural_sort(w.begin(), w.end(), by_key);
  REQUIRE(std::is_sorted(w.begin(), w.end(), by_key));
  std::vector<int> last_id_of_key_run1(32, -1), last_id_of_key_run3(32, -1);
  for (const Item& it : w) {
    if (it.id < 1000) {
      CHECK(it.id > last_id_of_key_run1[it.key]);
      last_id_of_key_run1[it.key] = it.id;
    } else if (it.id >= 2000) {
      CHECK(it.id > last_id_of_key_run3[it.key]);
      last_id_of_key_run3[it.key] = it.id;
    }
  }
}

TEST_CASE("natural_sort: a custom comparator (descending) sorts by that order") {
  std::vector<int> v{1, 2, 3, 10, 9, 8, 4, 5, 6, -1, 0, 0, 7};
  std::vector<int> expected = v;
  std::sort(expected.begin(), expected.end(), std::greater<>{});
  natural_sort(v.begin(), v.end(), std::greater<>{});
  CHECK(v == expected);
  CHECK(v.front() == 10);
  CHECK(v.back() == -1);

  // Ascending input is one strictly descending run for `greater`: reversed in one scan.
  std::vector<int> asc(1000);
  std::iota(asc.begin(), asc.end(), 0);
  std::size_t calls = 0;
  natural_sort(asc.begin(), asc.end(), [&](int a, int b) {
    ++calls;
    return a > b;
  });
  CHECK(calls <= 1000);
  CHECK(std::is_sorted(asc.begin(), asc.end(), std::greater<>{}));

  // Sorting by a key (what PatternMatcherPass does: order keys, last first).
  std::mt19937 rng(99);
  std::vector<std::pair<std::uint64_t, int>> items;
  for (int i = 0; i < 2000; ++i) items.push_back({(std::uint64_t(rng()) << 20) | std::uint64_t(i), i});
  auto expected_items = items;
  auto later_first = [](const auto& a, const auto& b) { return a.first > b.first; };
  std::sort(expected_items.begin(), expected_items.end(), later_first);
  natural_sort(items.begin(), items.end(), later_first);
  CHECK(items == expected_items);
}

TEST_CASE("natural_sort: a caller's scratch buffer gives the same result and is reused without growing") {
  std::vector<std::pair<int, int>> scratch;
  auto by_key = [](const std::pair<int, int>& a, const std::pair<int, int>& b) { return a.first < b.first; };
  std::size_t capacity_after_first = 0;
  for (int round = 0; round < 5; ++round) {
    // Three runs, as a pass leaves them: ascending (keys repeating), strictly
    // descending, ascending again; `second` records the input position.
    std::vector<std::pair<int, int>> v;
    int seq = 0;
    for (int i = 0; i < 300; ++i) v.push_back({i / 3, seq++});
    for (int i = 500; i > 300; --i) v.push_back({i, seq++});
    for (int i = 0; i < 200; ++i) v.push_back({i * 2, seq++});
    std::vector<std::pair<int, int>> expected = v;
    std::stable_sort(expected.begin(), expected.end(), by_key);
    std::vector<std::pair<int, int>> plain = v;
    natural_sort(plain.begin(), plain.end(), by_key);
    natural_sort(v.begin(), v.end(), by_key, scratch);
    // Three runs is far below the fallback, so the merge is stable: equal keys
    // keep their input order, exactly as std::stable_sort leaves them.
    CHECK(v == expected);
    CHECK(plain == expected);
    if (round == 0) capacity_after_first = scratch.capacity();
    CHECK(capacity_after_first > 0);
    CHECK(scratch.capacity() == capacity_after_first);
  }
}

// ---------------------------------------------------------------- many runs, each element near its place

namespace {

// The number of monotone runs natural_sort splits `v` into (non-decreasing, or
// strictly decreasing), by `less`.
template <class T, class Less>
std::size_t count_runs(const std::vector<T>& v, Less less) {
  std::size_t runs = 0;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i + 1;
    if (j < v.size()) {
      if (less(v[j], v[j - 1])) {
        while (j < v.size() && less(v[j], v[j - 1])) ++j;
      } else {
        while (j < v.size() && !less(v[j], v[j - 1])) ++j;
      }
    }
    ++runs;
    i = j;
  }
  return runs;
}

// (key, position in the input); compared on the key only.
using Keyed = std::pair<int, int>;

struct CountingKeyLess {
  std::size_t* calls;
  bool operator()(const Keyed& a, const Keyed& b) const {
    ++*calls;
    return a.first < b.first;
  }
};

// Keys 0, 0, 1, 1, 2, 2, ... (each twice), shuffled inside consecutive blocks
// of `block`, so that no element is more than block - 1 places from where it
// belongs; `second` is the input position.
std::vector<Keyed> shuffled_in_blocks(std::size_t n, std::size_t block, std::uint32_t seed) {
  std::vector<int> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = static_cast<int>(i / 2);
  std::mt19937 rng(seed);
  for (std::size_t b = 0; b < n; b += block) std::shuffle(keys.begin() + b, keys.begin() + std::min(n, b + block), rng);
  std::vector<Keyed> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = {keys[i], static_cast<int>(i)};
  return v;
}

}  // namespace

TEST_CASE("natural_sort: more runs than 64 + n/32 but every element a few places off sorts stably in linear time") {
  const std::size_t n = 10000;
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    std::vector<Keyed> v = shuffled_in_blocks(n, 6, seed);
    std::size_t unused = 0;
    // Far past the merge threshold: the runs are not what makes this input easy.
    REQUIRE(count_runs(v, CountingKeyLess{&unused}) > kiln::natural_sort_max_runs(n));
    std::vector<Keyed> expected = v;
    std::stable_sort(expected.begin(), expected.end(), [](const Keyed& a, const Keyed& b) { return a.first < b.first; });
    std::size_t calls = 0;
    std::vector<Keyed> scratch;
    natural_sort(v.begin(), v.end(), CountingKeyLess{&calls}, scratch);
    // Sorted, and equal keys (two of each) in their input order.
    CHECK(v == expected);
    for (std::size_t i = 1; i < n; ++i) {
      REQUIRE(v[i - 1].first <= v[i].first);
      if (v[i - 1].first == v[i].first) REQUIRE(v[i - 1].second < v[i].second);
    }
    // A block of 6 holds at most 15 inversions (2.5 per element): the run scan,
    // one compare per element and one per move stay below 6n, where a full
    // sort would need about n log2 n (13n here).
    CHECK(calls < 6 * n);
  }
}

TEST_CASE("natural_sort: a random permutation (many runs, elements far off) still sorts, the insertion sort giving up") {
  const std::size_t n = 10000;
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  std::mt19937 rng(12345);
  std::shuffle(v.begin(), v.end(), rng);
  REQUIRE(count_runs(v, std::less<>{}) > kiln::natural_sort_max_runs(n));
  const std::size_t calls = sort_counting(v);
  std::vector<int> expected(n);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(v == expected);
  // An insertion sort run to the end would compare about n^2/4 times (25
  // million); bounded by 8n moves, then std::sort, it stays near n log2 n.
  CHECK(calls < 40 * n);
}

TEST_CASE("bounded_insertion_sort: sorts a nearly sorted input within its budget, stably") {
  // Adjacent pairs swapped: [1, 0, 3, 2, ...]: one move per pair.
  std::vector<int> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i % 2 ? i - 1 : i + 1);
  std::vector<int> w = v;
  CHECK(kiln::detail::bounded_insertion_sort(v.begin(), v.end(), std::less<>{}, 8 * v.size()));
  CHECK(std::is_sorted(v.begin(), v.end()));
  CHECK(v.front() == 0);
  CHECK(v.back() == 999);
  // Exactly 500 moves are needed: a budget of 500 suffices, 499 does not.
  std::vector<int> exact = w;
  CHECK(kiln::detail::bounded_insertion_sort(exact.begin(), exact.end(), std::less<>{}, 500));
  CHECK(exact == v);
  std::vector<int> short_by_one = w;
  CHECK_FALSE(kiln::detail::bounded_insertion_sort(short_by_one.begin(), short_by_one.end(), std::less<>{}, 499));

  // Equal keys keep their input order.
  std::vector<Keyed> items{{1, 0}, {0, 1}, {1, 2}, {0, 3}, {2, 4}, {1, 5}, {2, 6}, {0, 7}};
  std::vector<Keyed> expected = items;
  auto by_first = [](const Keyed& a, const Keyed& b) { return a.first < b.first; };
  std::stable_sort(expected.begin(), expected.end(), by_first);
  CHECK(kiln::detail::bounded_insertion_sort(items.begin(), items.end(), by_first, 100));
  CHECK(items == expected);

  // Already sorted: no move at all, so even a zero budget is enough.
  std::vector<int> sorted{1, 2, 2, 3, 9};
  CHECK(kiln::detail::bounded_insertion_sort(sorted.begin(), sorted.end(), std::less<>{}, 0));
  CHECK(sorted == std::vector<int>{1, 2, 2, 3, 9});
}

TEST_CASE("bounded_insertion_sort: gives up past its budget, leaving a permutation of the input") {
  for (std::size_t budget : {0u, 1u, 5u, 100u}) {
    CAPTURE(budget);
    std::vector<int> v(200);
    std::iota(v.rbegin(), v.rend(), 0);  // reversed: 200 * 199 / 2 moves needed
    CHECK_FALSE(kiln::detail::bounded_insertion_sort(v.begin(), v.end(), std::less<>{}, budget));
    CHECK_FALSE(std::is_sorted(v.begin(), v.end()));
    std::vector<int> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> expected(200);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(sorted == expected);  // nothing lost or duplicated
  }
  // Moves of non-trivial values stay a permutation too.
  std::vector<std::string> s{"e", "d", "c", "b", "a"};
  CHECK_FALSE(kiln::detail::bounded_insertion_sort(s.begin(), s.end(), std::less<>{}, 2));
  std::vector<std::string> t = s;
  std::sort(t.begin(), t.end());
  CHECK(t == std::vector<std::string>{"a", "b", "c", "d", "e"});
  for (const std::string& x : s) CHECK(x.size() == 1);
}

TEST_CASE("natural_sort: a caller's bounds vector sorts alike and is reused across calls without growing") {
  const std::size_t n = 4096;
  std::vector<std::size_t> bounds;
  bounds.reserve(kiln::natural_sort_max_runs(n) + 1);  // the most it ever holds
  const std::size_t* data = bounds.data();
  const std::size_t capacity = bounds.capacity();
  std::vector<Keyed> scratch;
  auto by_first = [](const Keyed& a, const Keyed& b) { return a.first < b.first; };
  std::mt19937 rng(21);
  for (int round = 0; round < 6; ++round) {
    CAPTURE(round);
    std::vector<Keyed> v;
    if (round % 3 == 0) {
      // Three runs: merged.
      for (std::size_t i = 0; i < n / 2; ++i) v.push_back({static_cast<int>(i / 4), 0});
      for (std::size_t i = 0; i < n / 4; ++i) v.push_back({static_cast<int>(5000 - i), 0});
      for (std::size_t i = 0; i < n / 4; ++i) v.push_back({static_cast<int>(i), 0});
    } else if (round % 3 == 1) {
      v = shuffled_in_blocks(n, 5, static_cast<std::uint32_t>(round));  // many runs, insertion sort
    } else {
      for (std::size_t i = 0; i < n; ++i) v.push_back({static_cast<int>(rng() % 100000), 0});  // std::sort
    }
    for (std::size_t i = 0; i < v.size(); ++i) v[i].second = static_cast<int>(i);
    std::vector<Keyed> expected = v;
    std::stable_sort(expected.begin(), expected.end(), by_first);
    natural_sort(v.begin(), v.end(), by_first, scratch, bounds);
    REQUIRE(std::is_sorted(v.begin(), v.end(), by_first));
    std::vector<Keyed> sorted_copy = v;
    std::sort(sorted_copy.begin(), sorted_copy.end());
    std::vector<Keyed> expected_copy = expected;
    std::sort(expected_copy.begin(), expected_copy.end());
    CHECK(sorted_copy == expected_copy);  // the same elements
    if (round % 3 != 2) CHECK(v == expected);  // merge and insertion sort are stable
    // The same buffer throughout: never reallocated.
    CHECK(bounds.data() == data);
    CHECK(bounds.capacity() == capacity);
  }
  // The three-argument-plus-scratch overload gives the same result.
  std::vector<Keyed> a = shuffled_in_blocks(n, 6, 77), b = a;
  natural_sort(a.begin(), a.end(), by_first, scratch, bounds);
  natural_sort(b.begin(), b.end(), by_first, scratch);
  CHECK(a == b);
  CHECK(bounds.data() == data);
}
