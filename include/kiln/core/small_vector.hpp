#pragma once
// SmallVector<T, N>: a vector of trivially copyable T that keeps up to N
// elements inside itself and moves to the heap beyond that.
//
// A node's inputs and users are almost always one to three nodes. Giving each
// node three std::vectors for them cost three allocations (and later three
// frees) per node a pass creates; with the elements kept inline, creating and
// erasing a node allocates nothing for them. The inline elements share their
// bytes with the heap pointer, so a SmallVector<Node*, 2> is as big as a
// std::vector<Node*>.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

namespace kiln {

template <class T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable elements only");
  static_assert(N >= 1);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) {
      clear();
      assign(o.begin(), o.end());
    }
    return *this;
  }
  SmallVector(SmallVector&& o) noexcept { steal(o); }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  ~SmallVector() { release(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return capacity_; }
  T* data() { return on_heap() ? heap_ : inline_; }
  const T* data() const { return on_heap() ? heap_ : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void push_back(T v) {
    if (size_ == capacity_) grow(2 * std::size_t(capacity_));
    data()[size_++] = v;
  }
  void clear() { size_ = 0; }
  // Shrinking only (what the users' compaction needs).
  void truncate(std::size_t n) {
    if (n < size_) size_ = static_cast<std::uint32_t>(n);
  }
  void reserve(std::size_t n) {
    if (n > capacity_) grow(n);
  }

  // A copy as a std::vector, for code that wants one (returned lists of nodes).
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const { return capacity_ > N; }
  template <class It>
  void assign(It first, It last) {
    reserve(static_cast<std::size_t>(last - first));
    std::copy(first, last, data());
    size_ = static_cast<std::uint32_t>(last - first);
  }
  [[gnu::noinline]] void grow(std::size_t n) {  // out of push_back's inlined fast path
    T* fresh = static_cast<T*>(::operator new(n * sizeof(T)));
    if (size_) std::memcpy(static_cast<void*>(fresh), data(), size_ * sizeof(T));
    release();
    heap_ = fresh;
    capacity_ = static_cast<std::uint32_t>(n);
  }
  void release() {
    if (on_heap()) ::operator delete(heap_);
    capacity_ = N;
  }
  void steal(SmallVector& o) {
    size_ = o.size_;
    capacity_ = o.capacity_;
    if (o.on_heap()) heap_ = o.heap_;
    else std::memcpy(static_cast<void*>(inline_), o.inline_, o.size_ * sizeof(T));
    o.size_ = 0;
    o.capacity_ = N;
  }

  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = N;
  union {
    T* heap_;
    T inline_[N];
  };
};

}  // namespace kiln
