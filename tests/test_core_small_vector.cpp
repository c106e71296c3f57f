// SmallVector<T, N>: inline storage up to N elements, heap beyond; copies,
// moves, truncate, reserve, equality, and a randomized comparison with std::vector.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "kiln/core/small_vector.hpp"

using namespace kiln;

namespace {

// Whether v's elements live inside the object itself (not on the heap).
template <class T, std::size_t N>
bool is_inline(const SmallVector<T, N>& v) {
  const auto* obj = reinterpret_cast<const unsigned char*>(&v);
  const auto* d = reinterpret_cast<const unsigned char*>(v.data());
  return d >= obj && d < obj + sizeof(v);
}

template <class T, std::size_t N>
std::vector<T> to_vector(const SmallVector<T, N>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <std::size_t N>
SmallVector<int, N> iota_vec(int count, int start = 0) {
  SmallVector<int, N> v;
  for (int i = 0; i < count; ++i) v.push_back(start + i);
  return v;
}

std::vector<int> iota_std(int count, int start = 0) {
  std::vector<int> v;
  for (int i = 0; i < count; ++i) v.push_back(start + i);
  return v;
}

}  // namespace

TEST_CASE("SmallVector: a SmallVector<void*, 2> is as big as a std::vector<void*>") {
  static_assert(sizeof(SmallVector<void*, 2>) == sizeof(std::vector<void*>));
  CHECK(sizeof(SmallVector<void*, 2>) == sizeof(std::vector<void*>));
  // One element inline: the union is one pointer wide.
  CHECK(sizeof(SmallVector<void*, 1>) == 2 * sizeof(std::uint32_t) + sizeof(void*));
}

TEST_CASE("SmallVector: starts empty with capacity N, inline") {
  SmallVector<int, 3> v;
  CHECK(v.empty());
  CHECK(v.size() == 0);
  CHECK(v.capacity() == 3);
  CHECK(is_inline(v));
  CHECK(v.begin() == v.end());
  CHECK(v == std::vector<int>{});
}

TEST_CASE("SmallVector: stays inline up to N elements and moves to the heap at N + 1") {
  SmallVector<int, 4> v;
  for (int i = 0; i < 4; ++i) {
    v.push_back(10 * i);
    CHECK(is_inline(v));
    CHECK(v.capacity() == 4);
    CHECK(v.size() == std::size_t(i + 1));
    CHECK(v.back() == 10 * i);
  }
  v.push_back(40);
  CHECK_FALSE(is_inline(v));
  CHECK(v.capacity() == 8);
  CHECK(v.size() == 5);
  CHECK(v == std::vector<int>{0, 10, 20, 30, 40});
  // Further growth doubles and keeps everything.
  for (int i = 5; i < 100; ++i) v.push_back(10 * i);
  CHECK(v.size() == 100);
  CHECK(v.capacity() == 128);
  for (int i = 0; i < 100; ++i) CHECK(v[i] == 10 * i);
  CHECK(v.back() == 990);
  CHECK(v.end() - v.begin() == 100);
  CHECK(v.data() == v.begin());
}

TEST_CASE("SmallVector: N = 1 grows through 2, 4, 8 keeping contents") {
  SmallVector<std::uint64_t, 1> v;
  std::vector<std::size_t> capacities;
  for (std::uint64_t i = 0; i < 9; ++i) {
    v.push_back(i * 0x100000001ull);
    capacities.push_back(v.capacity());
    for (std::uint64_t j = 0; j <= i; ++j) REQUIRE(v[j] == j * 0x100000001ull);
  }
  CHECK(capacities == std::vector<std::size_t>{1, 2, 4, 4, 8, 8, 8, 8, 16});
}

TEST_CASE("SmallVector: push_back of one of its own elements while growing") {
  SmallVector<int, 2> v;
  v.push_back(7);
  v.push_back(8);
  v.push_back(v[0]);  // grows: the argument must be read before the old storage goes
  v.push_back(v[2]);
  v.push_back(v.back());  // grows again (4 -> 8)
  CHECK(v == std::vector<int>{7, 8, 7, 7, 7});
}

TEST_CASE("SmallVector: reserve grows capacity only, keeps contents, and never shrinks") {
  SmallVector<int, 2> v;
  v.reserve(2);
  CHECK(is_inline(v));
  CHECK(v.capacity() == 2);
  v.push_back(1);
  v.push_back(2);
  v.reserve(10);
  CHECK_FALSE(is_inline(v));
  CHECK(v.capacity() == 10);
  CHECK(v == std::vector<int>{1, 2});
  v.reserve(3);
  CHECK(v.capacity() == 10);
  const int* before = v.data();
  for (int i = 3; i <= 10; ++i) v.push_back(i);
  CHECK(v.data() == before);  // no reallocation within the reserved capacity
  CHECK(v == iota_std(10, 1));
}

TEST_CASE("SmallVector: clear and truncate shrink the size, keep the storage, and the vector stays usable") {
  for (int count : {3, 20}) {  // inline and on the heap
    CAPTURE(count);
    auto v = iota_vec<3>(count);
    const std::size_t cap = v.capacity();
    const int* data = v.data();
    v.truncate(100);  // larger: no change
    CHECK(v == iota_std(count));
    v.truncate(std::size_t(count));
    CHECK(v == iota_std(count));
    v.truncate(2);
    CHECK(v.size() == 2);
    CHECK(v == std::vector<int>{0, 1});
    CHECK(v.back() == 1);
    CHECK(v.capacity() == cap);
    CHECK(v.data() == data);
    v.push_back(42);
    CHECK(v == std::vector<int>{0, 1, 42});
    v.truncate(0);
    CHECK(v.empty());
    v.push_back(5);
    CHECK(v == std::vector<int>{5});
    v.clear();
    CHECK(v.empty());
    CHECK(v.capacity() == cap);
    for (int i = 0; i < count; ++i) v.push_back(-i);
    CHECK(v.size() == std::size_t(count));
    CHECK(v[std::size_t(count - 1)] == -(count - 1));
  }
}

TEST_CASE("SmallVector: copies are independent, inline and on the heap") {
  for (int count : {0, 2, 3, 17}) {
    CAPTURE(count);
    auto a = iota_vec<3>(count);
    SmallVector<int, 3> b(a);
    CHECK(b == a);
    CHECK(b == iota_std(count));
    CHECK(b.data() != a.data());
    CHECK(is_inline(b) == (count <= 3));
    b.push_back(-1);
    if (count > 0) b[0] = 1000;
    CHECK(a == iota_std(count));  // the source is untouched
    a.push_back(-2);
    CHECK(b.size() == std::size_t(count + 1));
    CHECK(b.back() == -1);

    // Copy assignment over vectors of every shape.
    for (int target_count : {0, 1, 3, 4, 40}) {
      CAPTURE(target_count);
      auto src = iota_vec<3>(count, 100);
      auto dst = iota_vec<3>(target_count, -100);
      dst = src;
      CHECK(dst == iota_std(count, 100));
      CHECK(src == iota_std(count, 100));
      CHECK(dst.data() != src.data());
      dst.push_back(1);
      if (count > 0) dst[0] = 0;
      CHECK(src == iota_std(count, 100));
    }
  }
}

TEST_CASE("SmallVector: self copy-assignment and self move-assignment keep the contents") {
  for (int count : {0, 2, 9}) {
    CAPTURE(count);
    auto v = iota_vec<2>(count);
    auto& alias = v;
    v = alias;
    CHECK(v == iota_std(count));
    v = std::move(alias);
    CHECK(v == iota_std(count));
    v.push_back(99);
    CHECK(v.size() == std::size_t(count + 1));
    CHECK(v.back() == 99);
  }
}

TEST_CASE("SmallVector: moving leaves the source empty, inline and usable") {
  for (int count : {0, 2, 3, 50}) {
    CAPTURE(count);
    auto a = iota_vec<3>(count);
    const int* heap = a.data();
    SmallVector<int, 3> b(std::move(a));
    CHECK(b == iota_std(count));
    if (count > 3) CHECK(b.data() == heap);  // the heap buffer is handed over, not copied
    CHECK(a.empty());
    CHECK(a.capacity() == 3);
    CHECK(is_inline(a));
    for (int i = 0; i < 10; ++i) a.push_back(i * i);
    CHECK(a.size() == 10);
    CHECK(a[9] == 81);
    CHECK(b == iota_std(count));  // the source's reuse does not reach b

    // Move assignment onto inline and heap targets.
    for (int target_count : {0, 3, 30}) {
      CAPTURE(target_count);
      auto src = iota_vec<3>(count, 7);
      auto dst = iota_vec<3>(target_count, -7);
      dst = std::move(src);
      CHECK(dst == iota_std(count, 7));
      CHECK(src.empty());
      CHECK(is_inline(src));
      src.push_back(1);
      src.push_back(2);
      src.push_back(3);
      src.push_back(4);
      CHECK(src == std::vector<int>{1, 2, 3, 4});
      CHECK(dst == iota_std(count, 7));
    }
  }
}

TEST_CASE("SmallVector: equality compares sizes and elements, with itself and with std::vector") {
  SmallVector<int, 2> a, b;
  CHECK(a == b);
  a.push_back(1);
  CHECK_FALSE(a == b);
  CHECK_FALSE(b == a);
  b.push_back(1);
  CHECK(a == b);
  b.push_back(2);
  CHECK_FALSE(a == b);  // a prefix is not equal
  a.push_back(3);
  CHECK_FALSE(a == b);  // same size, different element
  a[1] = 2;
  CHECK(a == b);
  // An inline and a heap vector with the same elements are equal.
  SmallVector<int, 2> heap;
  heap.reserve(16);
  heap.push_back(1);
  heap.push_back(2);
  CHECK_FALSE(is_inline(heap));
  CHECK(is_inline(a));
  CHECK(heap == a);
  CHECK(a == heap);

  CHECK(a == std::vector<int>{1, 2});
  CHECK_FALSE(a == std::vector<int>{1});
  CHECK_FALSE(a == std::vector<int>{1, 2, 3});
  CHECK_FALSE(a == std::vector<int>{2, 1});
  CHECK_FALSE(a == std::vector<int>{});
}

TEST_CASE("SmallVector: holds pointers and small structs") {
  int xs[5] = {};
  SmallVector<int*, 2> ptrs;
  for (int& x : xs) ptrs.push_back(&x);
  CHECK(ptrs.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) CHECK(ptrs[i] == &xs[i]);
  *ptrs.back() = 9;
  CHECK(xs[4] == 9);

  struct Pair {
    std::uint16_t a;
    std::uint64_t b;
    bool operator==(const Pair&) const = default;
  };
  SmallVector<Pair, 3> pairs;
  std::vector<Pair> ref;
  for (std::uint16_t i = 0; i < 7; ++i) {
    pairs.push_back({i, std::uint64_t(i) << 40});
    ref.push_back({i, std::uint64_t(i) << 40});
  }
  CHECK(pairs == ref);
  const auto& cp = pairs;
  CHECK(cp[6].b == std::uint64_t(6) << 40);
  CHECK(cp.back().a == 6);
  CHECK(cp.end() - cp.begin() == 7);
}

TEST_CASE("SmallVector: randomized operations agree with std::vector") {
  std::mt19937 rng(20240611);
  for (int round = 0; round < 40; ++round) {
    CAPTURE(round);
    SmallVector<std::uint32_t, 3> v;
    std::vector<std::uint32_t> ref;
    SmallVector<std::uint32_t, 3> other;  // a second vector for copies and moves
    std::vector<std::uint32_t> other_ref;
    for (int step = 0; step < 600; ++step) {
      const unsigned op = rng() % 100;
      if (op < 55) {
        const std::uint32_t x = rng();
        v.push_back(x);
        ref.push_back(x);
      } else if (op < 62) {
        const std::size_t n = ref.empty() ? 0 : rng() % (ref.size() + 2);
        v.truncate(n);
        if (n < ref.size()) ref.resize(n);
      } else if (op < 64) {
        v.clear();
        ref.clear();
      } else if (op < 68) {
        const std::size_t n = rng() % 64;
        const std::size_t cap = v.capacity();
        v.reserve(n);
        CHECK(v.capacity() >= n);
        CHECK(v.capacity() >= cap);
      } else if (op < 74) {
        if (!ref.empty()) {
          const std::size_t i = rng() % ref.size();
          const std::uint32_t x = rng();
          v[i] = x;
          ref[i] = x;
        }
      } else if (op < 80) {
        other = v;  // copy assign
        other_ref = ref;
      } else if (op < 84) {
        std::swap(v, other);  // two moves and a move construction
        std::swap(ref, other_ref);
      } else if (op < 88) {
        v = std::move(other);
        ref = std::move(other_ref);
        other_ref.clear();
        CHECK(other.empty());
      } else if (op < 92) {
        SmallVector<std::uint32_t, 3> tmp(v);
        v = std::move(tmp);
      } else if (op < 96) {
        for (std::uint32_t& x : v) x ^= 0x5a5a5a5au;
        for (std::uint32_t& x : ref) x ^= 0x5a5a5a5au;
      } else {
        SmallVector<std::uint32_t, 3> tmp(std::move(other));
        other = tmp;
        CHECK(tmp == other);
      }
      REQUIRE(v.size() == ref.size());
      REQUIRE(v.empty() == ref.empty());
      REQUIRE(v.capacity() >= v.size());
      REQUIRE(v == ref);
      REQUIRE(other == other_ref);
      REQUIRE(is_inline(v) == (v.capacity() == 3));
      if (!ref.empty()) REQUIRE(v.back() == ref.back());
    }
  }
}
