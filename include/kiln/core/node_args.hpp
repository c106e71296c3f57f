#pragma once
// `NodeArgs`: a node's positional arguments, the first three kept inside the node.
//
// Almost every node has one to three positional arguments (relu, add, addmm).
// Held in a std::vector they cost an allocation per node created and a free per
// node erased, and a matcher reading a node's arguments paid a cache miss on a
// heap block far from the node. Kept inline they share the node's cache lines,
// and creating or erasing a node allocates nothing for them. A node with more
// (convolution's nine, cat's list) moves them all to the heap.
//
// It reads like a const std::vector<Arg> (size, [], iteration, == with an
// ArgList) and converts to an ArgList, so code written against a node's args
// as a vector keeps working; it is edited only through its Node.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <utility>

#include "kiln/core/arg.hpp"

namespace kiln {

class NodeArgs {
 public:
  static constexpr std::size_t kInline = 3;
  using value_type = Arg;
  using const_iterator = const Arg*;
  using iterator = const Arg*;

  NodeArgs() noexcept {}
  NodeArgs(const NodeArgs&) = delete;
  NodeArgs& operator=(const NodeArgs&) = delete;
  ~NodeArgs() { release(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Arg* data() const { return on_heap() ? heap_ : inline_; }
  const Arg* begin() const { return data(); }
  const Arg* end() const { return data() + size_; }
  const Arg& operator[](std::size_t i) const { return data()[i]; }
  const Arg& front() const { return data()[0]; }
  const Arg& back() const { return data()[size_ - 1]; }

  // A copy as an ArgList (for editing it and setting it back).
  ArgList to_list() const { return ArgList(begin(), end()); }
  operator ArgList() const { return to_list(); }

  friend bool operator==(const NodeArgs& a, const NodeArgs& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const NodeArgs& a, const ArgList& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  friend class Node;

  Arg* data() { return on_heap() ? heap_ : inline_; }
  bool on_heap() const { return capacity_ > kInline; }

  // Replaces the arguments by `list`'s, moved in. Moving an Arg cannot throw, and
  // the only allocation (more than kInline arguments) comes before any change.
  void assign(ArgList&& list) {
    const std::size_t n = list.size();
    Arg* fresh = n > kInline ? static_cast<Arg*>(::operator new(n * sizeof(Arg), std::align_val_t{alignof(Arg)}))
                             : nullptr;
    release();
    Arg* out = fresh ? fresh : inline_;
    for (std::size_t i = 0; i < n; ++i) ::new (static_cast<void*>(out + i)) Arg(std::move(list[i]));
    if (fresh) {
      heap_ = fresh;
      capacity_ = static_cast<std::uint32_t>(n);
    }
    size_ = static_cast<std::uint32_t>(n);
  }
  // The same from a range of Args, copied.
  void assign(const Arg* first, const Arg* last) {
    const auto n = static_cast<std::size_t>(last - first);
    if (n > kInline || size_ != 0) {
      assign(ArgList(first, last));
      return;
    }
    // No arguments yet (a node being created) and few new ones: copy them
    // straight into the inline slots. A copy that throws (a boxed string's
    // allocation) leaves none behind.
    std::size_t done = 0;
    try {
      for (; done < n; ++done) ::new (static_cast<void*>(inline_ + done)) Arg(first[done]);
    } catch (...) {
      while (done > 0) inline_[--done].~Arg();
      throw;
    }
    size_ = static_cast<std::uint32_t>(n);
  }
  std::span<Arg> mut() { return {data(), size_}; }
  void clear() { release(); }
  // Destroys the arguments and returns to the inline state.
  void release() {
    Arg* d = data();
    // Node references and scalars own nothing: their storage is simply reused
    // (most arguments are those, and the variant's destructor dispatches).
    for (std::size_t i = 0; i < size_; ++i)
      if (!d[i].owns_nothing()) d[i].~Arg();
    if (on_heap()) ::operator delete(heap_, std::align_val_t{alignof(Arg)});
    size_ = 0;
    capacity_ = kInline;
  }

  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;
  union {
    Arg* heap_;
    Arg inline_[kInline];
  };
};

}  // namespace kiln
