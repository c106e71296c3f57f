#pragma once
// What a node produces, as recorded in `meta.val`: a tensor's shape, dtype and
// strides, an integer, a symbolic integer, or a list of these for multi-output nodes.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/sym_int.hpp"

namespace kiln {

// One dimension (or stride): a concrete size or a symbol.
using Dim = std::variant<std::int64_t, SymInt>;

inline bool is_static(const Dim& d) { return std::holds_alternative<std::int64_t>(d); }

struct TensorMeta {
  std::vector<Dim> shape;
  DType dtype = DType::float32;
  std::optional<std::vector<Dim>> stride;  // absent when the exporter did not record it

  std::size_t rank() const { return shape.size(); }
  // Number of elements, or nullopt when a dimension is symbolic.
  std::optional<std::int64_t> numel() const {
    std::int64_t n = 1;
    for (const auto& d : shape) {
      if (!is_static(d)) return std::nullopt;
      n *= std::get<std::int64_t>(d);
    }
    return n;
  }
  friend bool operator==(const TensorMeta&, const TensorMeta&) = default;
};

// The `meta.val` of a node. `none` stands for a missing value and for a `null`
// entry inside a list (a non-tensor output of a multi-output op).
//
// The value is shared between copies until one is changed (copy on write):
// passes copy meta from the node they replace to the node replacing it all the
// time, and a shared value makes that a reference count instead of copying
// shape and stride vectors.
class MetaVal {
 public:
  using List = std::vector<MetaVal>;
  using Value = std::variant<std::monostate, TensorMeta, std::int64_t, SymInt, List>;

  MetaVal() = default;
  MetaVal(TensorMeta t) : v_(std::make_shared<Value>(std::move(t))) {}
  MetaVal(std::int64_t i) : v_(std::make_shared<Value>(i)) {}
  MetaVal(SymInt s) : v_(std::make_shared<Value>(std::move(s))) {}
  MetaVal(List l) : v_(std::make_shared<Value>(std::move(l))) {}

  bool is_none() const { return !v_ || std::holds_alternative<std::monostate>(*v_); }
  bool is_tensor() const { return v_ && std::holds_alternative<TensorMeta>(*v_); }
  bool is_list() const { return v_ && std::holds_alternative<List>(*v_); }
  const TensorMeta* tensor() const { return v_ ? std::get_if<TensorMeta>(v_.get()) : nullptr; }
  const List* list() const { return v_ ? std::get_if<List>(v_.get()) : nullptr; }
  const Value& value() const { return v_ ? *v_ : none_value(); }
  // For changing the value in place; this copy stops sharing it first.
  Value& value() {
    if (!v_) v_ = std::make_shared<Value>();
    else if (v_.use_count() > 1) v_ = std::make_shared<Value>(*v_);
    return *v_;
  }

  // Whether both hold the very same value object (not just equal values): copies
  // share until one is changed, and the reader shares equal tensor metas.
  bool shares_value_with(const MetaVal& o) const { return v_ && v_ == o.v_; }

  friend bool operator==(const MetaVal& a, const MetaVal& b) {
    return a.v_ == b.v_ || a.value() == b.value();
  }

 private:
  static const Value& none_value() {
    static const Value none;
    return none;
  }
  std::shared_ptr<Value> v_;  // nullptr: none
};

// A node's metadata. `val` is the only field kiln interprets; any other key an
// exporter wrote is carried through unchanged as raw JSON text so a read-write
// round trip loses nothing.
struct NodeMeta {
  MetaVal val;
  std::vector<std::pair<std::string, std::string>> extra_json;
  // False for a node read from a document that had no "meta" key at all (as
  // opposed to "meta": {}): an empty meta is then left out again on writing.
  bool present = true;
  friend bool operator==(const NodeMeta&, const NodeMeta&) = default;
};

}  // namespace kiln
