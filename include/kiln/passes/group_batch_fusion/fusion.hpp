#pragma once
// One group or batch fusion (Inductor's GroupBatchFusionBase): match() gives
// a node's group key, or none; nodes of equal keys that the search finds
// independent of each other are handed to fuse() together. The key is text,
// built as Inductor builds its tuple, so that two nodes share a key exactly
// when Inductor's tuples compare equal.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/core/print.hpp"
#include "kiln/passes/group_batch_fusion/search_options.hpp"

namespace kiln::gbf {

class Fusion {
 public:
  Fusion(std::string name, bool pre_grad) : name_(std::move(name)), pre_grad_(pre_grad) {}
  virtual ~Fusion() = default;

  // The registered name, which is also the counter each fused set bumps.
  const std::string& name() const { return name_; }
  // Whether it runs on torch-level (pre-grad) graphs or aten-level (post-grad) ones.
  bool pre_grad() const { return pre_grad_; }

  virtual std::optional<std::string> match(const Node& n) const = 0;
  // Whether match() accepts only call_function nodes, and of those only
  // targets that may_match_target() lets through; the search then looks
  // only from nodes near such nodes (Search::run). A fusion that does not
  // say so is looked for from every node.
  virtual bool matches_calls_only() const { return false; }
  virtual bool may_match_target(OpRef /*target*/) const { return true; }
  // Replaces the nodes of `subset` (in the search's order) by one batched op;
  // returns the nodes that took their places, in the same order.
  virtual std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const = 0;
  // Executor steps the fused form of `subset` runs besides the batched op and
  // the stacks of its inputs (for the cost model, cost_model.hpp).
  virtual std::int64_t extra_steps(std::span<Node* const> /*subset*/) const { return 0; }

  SearchOptions options;

 private:
  std::string name_;
  bool pre_grad_;
};

// ---- what the fusions share ----

// Inductor's get_arg_value: positional argument i, else the keyword `name`; null if neither.
inline const Arg* arg_value(const Node& n, std::size_t i, std::string_view name) {
  if (n.args().size() > i) return &n.args()[i];
  return n.kwargs().find(name);
}
inline Node* node_arg(const Node& n, std::size_t i, std::string_view name) {
  const Arg* a = arg_value(n, i, name);
  return a ? a->node() : nullptr;
}

// The tensor a node produces, if its meta says so.
inline const TensorMeta* tensor_of(const Node* n) { return n ? n->meta.val.tensor() : nullptr; }
// Inductor's is_node_meta_valid: no node, or one with a value in its meta.
inline bool meta_valid(const Node* n) { return !n || !n->meta.val.is_none(); }

// A shape as Inductor's keys print it: "[16, 64]", symbols by name.
inline void append_shape_text(std::string& out, const TensorMeta& t) {
  out += '[';
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (i) out += ", ";
    out += format_dim(t.shape[i]);
  }
  out += ']';
}
inline std::string shape_text(const TensorMeta& t) {
  std::string s;
  append_shape_text(s, t);
  return s;
}

// Group keys: parts joined by a separator no part contains. Built in place
// (a search asks for the key of every candidate it meets).
class Key {
 public:
  explicit Key(std::string_view fusion) {
    s_.reserve(96);
    s_ = fusion;
  }
  Key& add(std::string_view part) {
    s_ += '\x1f';
    s_ += part;
    return *this;
  }
  Key& add(const char* part) { return add(std::string_view(part)); }  // (not the bool overload)
  Key& add(const Node* n) {
    if (!n) return add(std::string_view("None"));
    s_ += "\x1f%";
    s_ += n->name();
    return *this;
  }
  Key& add(bool b) { return add(std::string_view(b ? "True" : "False")); }
  Key& add_shape(const TensorMeta& shape) {
    s_ += '\x1f';
    append_shape_text(s_, shape);
    return *this;
  }
  std::string str() { return std::move(s_); }

 private:
  std::string s_;
};
inline std::string users_text(const Node& n, bool include) {
  if (!include) return {};
  std::string s;
  for (const Node* u : n.users()) s += std::string(u->target_name()) + ",";
  return s;
}

// ---- meta of the nodes a fusion creates ----

inline std::vector<Dim> contiguous_strides(const std::vector<Dim>& shape) {
  std::vector<Dim> st(shape.size(), std::int64_t{1});
  std::int64_t run = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    st[i] = run;
    if (is_static(shape[i])) run *= std::max<std::int64_t>(1, std::get<std::int64_t>(shape[i]));
  }
  return st;
}
inline TensorMeta contiguous(std::vector<Dim> shape, DType dtype) {
  TensorMeta t{std::move(shape), dtype, std::nullopt};
  t.stride = contiguous_strides(t.shape);
  return t;
}
inline std::vector<Dim> strides_of(const TensorMeta& t) { return t.stride ? *t.stride : contiguous_strides(t.shape); }
// A dimension index as Python takes it (negative from the end) for a rank.
inline std::size_t wrap_dim(std::int64_t d, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (d < -r || d >= r) throw Error("dimension " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
  return static_cast<std::size_t>(d < 0 ? d + r : d);
}

// torch.stack(metas, dim): a new contiguous tensor.
inline MetaVal stacked(std::span<const TensorMeta* const> parts, std::int64_t dim) {
  const TensorMeta& first = *parts.front();
  std::vector<Dim> shape = first.shape;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(wrap_dim(dim, shape.size() + 1)),
               static_cast<std::int64_t>(parts.size()));
  return contiguous(std::move(shape), first.dtype);
}
// torch.unbind(t, dim): views without that dimension.
inline MetaVal unbound(const TensorMeta& t, std::int64_t dim) {
  const std::size_t d = wrap_dim(dim, t.rank());
  TensorMeta part{t.shape, t.dtype, strides_of(t)};
  part.shape.erase(part.shape.begin() + static_cast<std::ptrdiff_t>(d));
  part.stride->erase(part.stride->begin() + static_cast<std::ptrdiff_t>(d));
  const std::int64_t n = is_static(t.shape[d]) ? std::get<std::int64_t>(t.shape[d]) : 0;
  return MetaVal(MetaVal::List(static_cast<std::size_t>(n), MetaVal(part)));
}
// select(t, dim, i): one view without that dimension.
inline MetaVal selected(const TensorMeta& t, std::int64_t dim) {
  const std::size_t d = wrap_dim(dim, t.rank());
  TensorMeta part{t.shape, t.dtype, strides_of(t)};
  part.shape.erase(part.shape.begin() + static_cast<std::ptrdiff_t>(d));
  part.stride->erase(part.stride->begin() + static_cast<std::ptrdiff_t>(d));
  return part;
}
inline MetaVal transposed(const TensorMeta& t, std::int64_t a, std::int64_t b) {
  TensorMeta out{t.shape, t.dtype, strides_of(t)};
  const std::size_t i = wrap_dim(a, t.rank()), j = wrap_dim(b, t.rank());
  std::swap(out.shape[i], out.shape[j]);
  std::swap((*out.stride)[i], (*out.stride)[j]);
  return out;
}
inline MetaVal unsqueezed(const TensorMeta& t, std::int64_t dim) {
  const std::size_t d = wrap_dim(dim, t.rank() + 1);
  TensorMeta out{t.shape, t.dtype, strides_of(t)};
  Dim stride = std::int64_t{1};
  if (d < t.rank() && is_static((*out.stride)[d]) && is_static(out.shape[d]))
    stride = std::get<std::int64_t>((*out.stride)[d]) * std::get<std::int64_t>(out.shape[d]);
  out.shape.insert(out.shape.begin() + static_cast<std::ptrdiff_t>(d), std::int64_t{1});
  out.stride->insert(out.stride->begin() + static_cast<std::ptrdiff_t>(d), stride);
  return out;
}
// The broadcast shape of two tensors (for element-wise results), contiguous.
inline MetaVal broadcast(const TensorMeta& a, const TensorMeta& b) {
  const std::size_t r = std::max(a.rank(), b.rank());
  std::vector<Dim> shape(r, std::int64_t{1});
  for (std::size_t i = 0; i < r; ++i) {
    const Dim* da = i < a.rank() ? &a.shape[a.rank() - 1 - i] : nullptr;
    const Dim* db = i < b.rank() ? &b.shape[b.rank() - 1 - i] : nullptr;
    const bool a_one = !da || (is_static(*da) && std::get<std::int64_t>(*da) == 1);
    shape[r - 1 - i] = a_one ? (db ? *db : Dim{std::int64_t{1}}) : *da;
  }
  return contiguous(std::move(shape), a.dtype);
}

}  // namespace kiln::gbf
