#pragma once
// What a node produces, as recorded in `meta.val`: a tensor's shape, dtype and
// strides, an integer, a symbolic integer, or a list of these for multi-output nodes.
#include <cstdint>
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
class MetaVal {
 public:
  using List = std::vector<MetaVal>;
  using Value = std::variant<std::monostate, TensorMeta, std::int64_t, SymInt, List>;

  MetaVal() = default;
  MetaVal(TensorMeta t) : v_(std::move(t)) {}
  MetaVal(std::int64_t i) : v_(i) {}
  MetaVal(SymInt s) : v_(std::move(s)) {}
  MetaVal(List l) : v_(std::move(l)) {}

  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_tensor() const { return std::holds_alternative<TensorMeta>(v_); }
  bool is_list() const { return std::holds_alternative<List>(v_); }
  const TensorMeta* tensor() const { return std::get_if<TensorMeta>(&v_); }
  const List* list() const { return std::get_if<List>(&v_); }
  const Value& value() const { return v_; }
  Value& value() { return v_; }

  friend bool operator==(const MetaVal&, const MetaVal&) = default;

 private:
  Value v_;
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
