#pragma once
// `Arg`: the value of one node argument, covering every ARG form of fx-graph-json
// (None, bool, int, float, str, list/tuple, node reference, dtype, device, named
// constant, slice, symbolic int, dict, and opaque repr text).
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/core/box.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/sym_int.hpp"

namespace kiln {

class Node;
class Arg;

struct None {
  friend bool operator==(None, None) { return true; }
};
struct Device {
  std::string name;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};
// A named constant such as `torch.contiguous_format`, `torch.strided` or `Ellipsis`.
struct EnumConst {
  std::string name;
  friend bool operator==(const EnumConst&, const EnumConst&) = default;
};
// Anything the exporter could not encode, carried as text; passes must not rely on it.
struct Repr {
  std::string text;
  friend bool operator==(const Repr&, const Repr&) = default;
};

using ArgList = std::vector<Arg>;

// One entry of an ArgDict seen through its iterator, read like std::pair:
// `for (const auto& [key, value] : kwargs)`.
template <class A>
struct ArgDictEntry {
  const std::string& first;
  A& second;
};

// An ordered string-keyed map of Args: a node's kwargs and the `{"dict": ...}` form.
// Small and ordered like a Python dict; lookups are linear because kwargs are few.
// Keys and values sit in two vectors because an Arg (which may hold an ArgDict)
// is incomplete here, and vector<Arg> is the one container that allows that.
class ArgDict {
 public:
  template <class A>
  class Iter {
   public:
    using value_type = ArgDictEntry<A>;
    using reference = ArgDictEntry<A>;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    Iter() = default;
    Iter(const std::string* k, A* v) : k_(k), v_(v) {}
    ArgDictEntry<A> operator*() const { return {*k_, *v_}; }
    struct Arrow {
      ArgDictEntry<A> entry;
      const ArgDictEntry<A>* operator->() const { return &entry; }
    };
    Arrow operator->() const { return Arrow{**this}; }
    Iter& operator++() {
      ++k_;
      ++v_;
      return *this;
    }
    Iter operator++(int) {
      Iter t = *this;
      ++*this;
      return t;
    }
    bool operator==(const Iter& o) const { return k_ == o.k_; }

   private:
    const std::string* k_ = nullptr;
    A* v_ = nullptr;
  };
  using Item = ArgDictEntry<const Arg>;
  using const_iterator = Iter<const Arg>;
  using iterator = Iter<Arg>;

  ArgDict() = default;
  ArgDict(std::initializer_list<std::pair<std::string, Arg>> items);

  const Arg* find(std::string_view key) const;
  Arg* find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Sets `key` (appending it when new, keeping its position when present).
  void set(std::string key, Arg value);
  bool erase(std::string_view key);

  std::size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }
  const_iterator begin() const;
  const_iterator end() const;
  iterator begin();
  iterator end();

  friend bool operator==(const ArgDict& a, const ArgDict& b);

 private:
  std::vector<std::string> keys_;
  std::vector<Arg> values_;
};

// A Python slice; each part is an Arg (None, int, sym or node).
struct Slice {
  ArgList parts;  // always three: start, stop, step
  friend bool operator==(const Slice&, const Slice&) = default;
};

// A reference to a node, with the node's kind and target copied in. A node's
// kind and target never change, so the copy stays true; a pattern checking
// whether an argument is "a call of aten.mm" then reads the argument it already
// has instead of the referenced node, which on a large graph is a cache miss
// saved for every pattern that fails there.
struct NodeRef {
  Node* node = nullptr;
  std::uint64_t target_hash = 0;
  std::uint8_t op = 0xff;  // OpKind, or 0xff for a null reference
  friend bool operator==(const NodeRef& a, const NodeRef& b) { return a.node == b.node; }
};

class Arg {
 public:
  Arg() = default;
  Arg(None) {}
  Arg(std::nullptr_t) {}
  Arg(bool b) : v_(b) {}
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
  Arg(I i) : v_(static_cast<std::int64_t>(i)) {}
  Arg(double d) : v_(d) {}
  Arg(float f) : v_(static_cast<double>(f)) {}
  Arg(std::string s) : v_(Box<std::string>(std::move(s))) {}
  Arg(const char* s) : v_(Box<std::string>(std::string(s))) {}
  Arg(std::string_view s) : v_(Box<std::string>(std::string(s))) {}
  Arg(ArgList l) : v_(std::move(l)) {}
  Arg(std::initializer_list<Arg> l) : v_(ArgList(l)) {}
  Arg(Node* n);  // node.hpp: reads the node's kind and target
  Arg(DType d) : v_(d) {}
  Arg(Device d) : v_(Box<Device>(std::move(d))) {}
  Arg(EnumConst e) : v_(Box<EnumConst>(std::move(e))) {}
  Arg(Slice s) : v_(std::move(s)) {}
  Arg(SymInt s) : v_(Box<SymInt>(std::move(s))) {}
  Arg(ArgDict d) : v_(Box<ArgDict>(std::move(d))) {}
  Arg(Repr r) : v_(Box<Repr>(std::move(r))) {}

  // Copies as the variant does, but a node reference (most arguments) without
  // its dispatch: a node's arguments and a match's captures are copied a lot.
  Arg(const Arg& o) : v_(o.is_node() ? Value(std::in_place_type<NodeRef>, *o.node_ref()) : o.v_) {}
  Arg(Arg&&) noexcept = default;
  Arg& operator=(const Arg& o) {
    if (is_node() && o.is_node()) *std::get_if<NodeRef>(&v_) = *o.node_ref();
    else v_ = o.v_;
    return *this;
  }
  Arg& operator=(Arg&&) noexcept = default;
  ~Arg() = default;

  // T is the form itself (std::string, ArgDict), boxed or not.
  template <class T>
  bool is() const { return std::holds_alternative<Stored<T>>(v_); }
  template <class T>
  const T* get_if() const { return unbox_if(std::get_if<Stored<T>>(&v_)); }
  template <class T>
  T* get_if() { return unbox_if(std::get_if<Stored<T>>(&v_)); }

  bool is_none() const { return is<None>(); }
  bool is_node() const { return is<NodeRef>(); }
  bool is_list() const { return is<ArgList>(); }
  // Whether this is a plain value that holds no node and owns nothing (none, a
  // bool, an int, a float, a dtype): what linking a node's inputs may skip.
  bool is_scalar() const {
    const std::size_t i = v_.index();
    return i < kFirstOwning || i == kDTypeIndex;
  }
  // A scalar or a node reference: destroying it would do nothing.
  bool owns_nothing() const { return is_scalar() || is_node(); }
  // The referenced node, or nullptr when this Arg is not a node reference.
  Node* node() const { return is_node() ? std::get<NodeRef>(v_).node : nullptr; }
  // The node reference with its cached kind and target, or nullptr.
  const NodeRef* node_ref() const { return std::get_if<NodeRef>(&v_); }
  const ArgList* list() const { return get_if<ArgList>(); }

  // std::visit over the held form, unboxed: f is called with a const std::string&, never a Box.
  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit([&](const auto& x) -> decltype(auto) { return std::forward<F>(f)(unbox(x)); }, v_);
  }
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit([&](auto& x) -> decltype(auto) { return std::forward<F>(f)(unbox(x)); }, v_);
  }

  // Structural equality; node references compare by identity, floats by value, boxed forms by value.
  friend bool operator==(const Arg& a, const Arg& b) { return a.v_ == b.v_; }

 private:
  // The big, rare forms sit in a Box so that the variant stays at 24 bytes of storage.
  template <class T>
  static constexpr bool kBoxed = std::is_same_v<T, std::string> || std::is_same_v<T, Device> ||
                                 std::is_same_v<T, EnumConst> || std::is_same_v<T, SymInt> ||
                                 std::is_same_v<T, ArgDict> || std::is_same_v<T, Repr>;
  // The variant alternative that holds a T.
  template <class T>
  using Stored = std::conditional_t<kBoxed<T>, Box<T>, T>;
  using Value = std::variant<None, bool, std::int64_t, double, Stored<std::string>, ArgList, NodeRef, DType,
                             Stored<Device>, Stored<EnumConst>, Slice, Stored<SymInt>, Stored<ArgDict>, Stored<Repr>>;

  template <class T>
  static T& unbox(T& x) { return x; }
  template <class T>
  static T& unbox(Box<T>& b) { return *b; }
  template <class T>
  static const T& unbox(const Box<T>& b) { return *b; }
  template <class T>
  static T* unbox_if(T* x) { return x; }
  template <class T>
  static T* unbox_if(Box<T>* b) { return b ? b->get() : nullptr; }
  template <class T>
  static const T* unbox_if(const Box<T>* b) { return b ? b->get() : nullptr; }

  Value v_;
  // is_scalar's alternatives: the first four, and DType.
  static constexpr std::size_t kFirstOwning = 4;
  static constexpr std::size_t kDTypeIndex = 7;
  static_assert(std::is_same_v<std::variant_alternative_t<kFirstOwning - 1, Value>, double> &&
                std::is_same_v<std::variant_alternative_t<kFirstOwning, Value>, Stored<std::string>> &&
                std::is_same_v<std::variant_alternative_t<kDTypeIndex, Value>, DType>);
};

// A node keeps its first arguments inline (see the Node header), so every byte of Arg
// counts there: 24 bytes of the largest inline form (a vector, a NodeRef) and the index.
static_assert(sizeof(Arg) == 32);
// vector<Arg> moves its elements on growth only when moving cannot throw.
static_assert(std::is_nothrow_move_constructible_v<Arg>);

inline ArgDict::ArgDict(std::initializer_list<std::pair<std::string, Arg>> items) {
  for (const auto& [k, v] : items) set(k, v);
}
inline ArgDict::const_iterator ArgDict::begin() const { return {keys_.data(), values_.data()}; }
inline ArgDict::const_iterator ArgDict::end() const {
  return {keys_.data() + keys_.size(), values_.data() + values_.size()};
}
inline ArgDict::iterator ArgDict::begin() { return {keys_.data(), values_.data()}; }
inline ArgDict::iterator ArgDict::end() { return {keys_.data() + keys_.size(), values_.data() + values_.size()}; }

inline const Arg* ArgDict::find(std::string_view key) const {
  for (std::size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return &values_[i];
  return nullptr;
}
inline Arg* ArgDict::find(std::string_view key) {
  for (std::size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return &values_[i];
  return nullptr;
}
inline void ArgDict::set(std::string key, Arg value) {
  if (Arg* existing = find(key)) {
    *existing = std::move(value);
    return;
  }
  keys_.push_back(std::move(key));
  values_.push_back(std::move(value));
}
inline bool ArgDict::erase(std::string_view key) {
  for (std::size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) {
      keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(i));
      values_.erase(values_.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  return false;
}
inline bool operator==(const ArgDict& a, const ArgDict& b) { return a.keys_ == b.keys_ && a.values_ == b.values_; }

// Calls fn(Node*) for every node reference inside `arg`, depth first, in order,
// duplicates included (the counterpart of torch.fx's map_arg traversal).
template <class Fn>
void for_each_node(const Arg& arg, Fn&& fn) {
  if (Node* n = arg.node()) {
    fn(n);
    return;
  }
  if (const auto* l = arg.get_if<ArgList>()) {
    for (const auto& a : *l) for_each_node(a, fn);
  } else if (const auto* d = arg.get_if<ArgDict>()) {
    for (const auto& [k, a] : *d) for_each_node(a, fn);
  } else if (const auto* s = arg.get_if<Slice>()) {
    for (const auto& a : s->parts) for_each_node(a, fn);
  }
}

// Whether `arg` is, or holds somewhere inside, a node reference.
inline bool holds_node(const Arg& arg) {
  bool found = false;
  for_each_node(arg, [&](Node*) { found = true; });
  return found;
}

// Returns `arg` with every node reference passed through fn(Node*) -> Node*.
template <class Fn>
Arg map_nodes(const Arg& arg, Fn&& fn) {
  if (Node* n = arg.node()) return Arg(fn(n));
  if (const auto* l = arg.get_if<ArgList>()) {
    ArgList out;
    out.reserve(l->size());
    for (const auto& a : *l) out.push_back(map_nodes(a, fn));
    return Arg(std::move(out));
  }
  if (const auto* d = arg.get_if<ArgDict>()) {
    ArgDict out;
    for (const auto& [k, a] : *d) out.set(k, map_nodes(a, fn));
    return Arg(std::move(out));
  }
  if (const auto* s = arg.get_if<Slice>()) {
    Slice out;
    for (const auto& a : s->parts) out.parts.push_back(map_nodes(a, fn));
    return Arg(std::move(out));
  }
  return arg;
}

}  // namespace kiln
