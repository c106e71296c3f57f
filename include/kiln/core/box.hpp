#pragma once
// Box<T>: a T on the heap with value semantics: copying a Box copies the T, == compares
// the T's, and a const Box gives only const access.
//
// It exists so that a std::variant can hold large, rarely used alternatives at the size
// of a pointer: Arg keeps its strings, names and dicts in Boxes, which keeps every Arg
// at 32 bytes instead of the 56 its largest alternative would cost.
//
// Like std::unique_ptr, Box<T> may be named while T is incomplete (an Arg holds a
// Box<ArgDict>, whose entries are Args): every member that needs T is defined in the
// class template, so it is instantiated only where used, and there T is complete.
//
// A Box always holds a T, except after it is moved from: the move steals the pointer
// (so it allocates nothing and is noexcept, which keeps vector<Arg> moving on growth)
// and leaves the source empty. An empty Box may be destroyed, assigned to, copied (the
// copy is empty too) and compared (empty equals only empty); dereferencing it is an
// error, asserted in debug builds.
#include <cassert>
#include <utility>

namespace kiln {

template <class T>
class Box {
 public:
  Box() : p_(new T()) {}
  explicit Box(const T& v) : p_(new T(v)) {}
  explicit Box(T&& v) : p_(new T(std::move(v))) {}
  Box(const Box& o) : p_(o.p_ ? new T(*o.p_) : nullptr) {}
  Box(Box&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  // Copies before releasing the old T, so `o` may live inside it (a dict assigned one of its own entries).
  Box& operator=(const Box& o) {
    T* fresh = o.p_ ? new T(*o.p_) : nullptr;
    delete std::exchange(p_, fresh);
    return *this;
  }
  // Steals before deleting, for the same reason; a self-move keeps the value.
  Box& operator=(Box&& o) noexcept {
    T* stolen = std::exchange(o.p_, nullptr);
    delete std::exchange(p_, stolen);
    return *this;
  }
  ~Box() { delete p_; }

  T& operator*() {
    assert(p_ && "dereferencing a moved-from Box");
    return *p_;
  }
  const T& operator*() const {
    assert(p_ && "dereferencing a moved-from Box");
    return *p_;
  }
  T* operator->() { return &**this; }
  const T* operator->() const { return &**this; }
  // The held T, or nullptr for a moved-from Box.
  T* get() { return p_; }
  const T* get() const { return p_; }

  // By value, never by identity: a T whose == is not reflexive (a NaN inside) stays so.
  friend bool operator==(const Box& a, const Box& b) {
    if (!a.p_ || !b.p_) return !a.p_ && !b.p_;
    return *a.p_ == *b.p_;
  }

 private:
  T* p_;
};

}  // namespace kiln
