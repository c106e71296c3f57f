#pragma once
// NodeIterator: the forward iterator of kiln's node ranges (a node's users,
// a graph's nodes in either direction). A range supplies a Cursor with
// `Node* get() const`, `void advance()` and `bool operator==`; the iterator
// adds the rest of what a range-for and <algorithm> expect.
#include <cstddef>

namespace kiln {
class Node;
}

namespace kiln::detail {

template <class Cursor>
class NodeIterator {
 public:
  using value_type = Node*;
  using difference_type = std::ptrdiff_t;
  NodeIterator() = default;
  explicit NodeIterator(Cursor c) : c_(c) {}
  Node* operator*() const { return c_.get(); }
  NodeIterator& operator++() {
    c_.advance();
    return *this;
  }
  NodeIterator operator++(int) {
    auto t = *this;
    ++*this;
    return t;
  }
  bool operator==(const NodeIterator& o) const { return c_ == o.c_; }

 private:
  Cursor c_{};
};

}  // namespace kiln::detail
