#pragma once
// What the pre-dispatch passes share: the ops they recognise at both levels
// (aten overloads, as torch.export's pre-dispatch graphs hold them, and the
// torch functions of a Dynamo graph), reading a split's pieces and a cat's
// list from a node, static shapes from meta, new calls that carry meta, and
// the `<pass>` / `<pass>_skipped` counting of a rewrite that fired or that was
// declined because it would change an output.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ops/aten.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::predispatch {

// Ops kiln's aten.hpp does not name.
namespace ops {
KILN_DECLARE_OP(chunk, "aten.chunk.default");
KILN_DECLARE_OP(nan_to_num, "aten.nan_to_num.default");
KILN_DECLARE_OP(squeeze_default, "aten.squeeze.default");
KILN_DECLARE_OP(squeeze_dims, "aten.squeeze.dims");
KILN_DECLARE_OP(torch_concat, "torch.concat");
}  // namespace ops

namespace detail {
using namespace split_cat::node_helpers;

inline bool is_any(const Node& n, std::initializer_list<OpRef> ops) {
  for (OpRef op : ops)
    if (n.is_call(op)) return true;
  return false;
}
// Whether `n` is an aten overload (new nodes then stay at the aten level).
inline bool is_aten(const Node& n) { return n.target_name().starts_with("aten."); }

// A Tensor method call, x.<name>(...), as a traced module writes it (the
// passes read its arguments where the torch function has them: self first).
inline bool is_method(const Node& n, std::string_view name) {
  return n.op() == OpKind::call_method && n.target_name() == name;
}
// x.view(...) to a shape, not x.view(dtype): the result keeps the input's dtype.
inline bool is_shape_view_method(const Node& n) {
  if (!is_method(n, "view") || n.args().empty()) return false;
  const TensorMeta* in = tensor_of(n.args()[0].node());
  const TensorMeta* out = tensor_of(&n);
  return in && out && in->dtype == out->dtype;
}

inline bool is_cat(const Node& n) { return is_any(n, {aten::cat, torch::cat, ops::torch_concat}); }
inline bool is_chunk(const Node& n) { return is_any(n, {ops::chunk, torch::chunk}) || is_method(n, "chunk"); }
inline bool is_split(const Node& n) {
  return is_any(n, {aten::split_Tensor, aten::split_with_sizes, torch::split}) || is_method(n, "split");
}
inline bool is_linear(const Node& n) { return is_any(n, {aten::linear, F::linear}); }
inline bool is_reshape(const Node& n) {
  return is_any(n, {aten::reshape, aten::view, aten::unsafe_view, torch::reshape}) || is_method(n, "reshape") ||
         is_shape_view_method(n);
}
inline bool is_squeeze(const Node& n) {
  return is_any(n, {aten::squeeze_dim, ops::squeeze_dims, ops::squeeze_default, torch::squeeze}) ||
         is_method(n, "squeeze");
}
inline bool is_unsqueeze(const Node& n) { return is_any(n, {aten::unsqueeze, torch::unsqueeze}) || is_method(n, "unsqueeze"); }

inline std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}
// An optional int argument (None or absent: `fallback`).
inline std::optional<std::int64_t> int_arg(const Node& n, std::size_t i, std::string_view name, std::int64_t fallback) {
  const Arg* a = arg_value(n, i, name);
  if (!a || a->is_none()) return fallback;
  return int_of(a);
}

inline TensorMeta meta_like(const TensorMeta& like, const Shape& shape) {
  std::vector<Dim> dims(shape.begin(), shape.end());
  return TensorMeta{std::move(dims), like.dtype, std::nullopt};
}

// A split or chunk node read from its meta: the tensor it cuts, the dim
// (non-negative) and each piece's size along it.
struct Pieces {
  Node* input;
  std::int64_t dim;
  Shape input_shape;
  std::vector<std::int64_t> sizes;
};
inline std::optional<Pieces> pieces_of(const Node& s) {
  if (!is_split(s) && !is_chunk(s)) return std::nullopt;
  const Arg* in = arg_value(s, 0, s.is_call(torch::split) ? "tensor" : "input");
  if (!in) in = arg_value(s, 0, "self");
  if (!in || !in->node()) return std::nullopt;
  const auto shape = static_shape(in->node());
  const auto raw_dim = int_arg(s, 2, "dim", 0);
  const MetaVal::List* parts = s.meta.val.list();
  if (!shape || !raw_dim || !parts || parts->empty()) return std::nullopt;
  const auto dim = normalized_dim(*raw_dim, shape->size());
  if (!dim) return std::nullopt;
  Pieces p{in->node(), *dim, *shape, {}};
  for (const MetaVal& part : *parts) {
    const TensorMeta* t = part.tensor();
    if (!t || t->rank() != shape->size() || !is_static(t->shape[*dim])) return std::nullopt;
    p.sizes.push_back(std::get<std::int64_t>(t->shape[*dim]));
  }
  return p;
}
// The piece `getitem` takes from `source` (negative indices counted from the
// end); nullopt when `getitem` is not getitem(source, int).
inline std::optional<std::size_t> piece_index(const Node& getitem, const Node* source, std::size_t pieces) {
  if (!getitem.is_call(pyop::getitem) || getitem.args().size() != 2 || getitem.args()[0].node() != source)
    return std::nullopt;
  const auto i = int_of(&getitem.args()[1]);
  if (!i) return std::nullopt;
  const auto k = normalized_dim(*i, pieces);
  if (!k) return std::nullopt;
  return static_cast<std::size_t>(*k);
}
// The source of a getitem node (a split or chunk), or null.
inline Node* getitem_source(const Node* n) {
  if (!n || !n->is_call(pyop::getitem) || n->args().size() != 2) return nullptr;
  Node* s = n->args()[0].node();
  return s && (is_split(*s) || is_chunk(*s)) ? s : nullptr;
}

// A cat's tensors and its dim, non-negative against the result's rank.
struct CatCall {
  ArgList tensors;
  std::int64_t dim;
};
inline std::optional<CatCall> cat_of(const Node& cat) {
  if (!is_cat(cat)) return std::nullopt;
  const Arg* tensors = arg_value(cat, 0, "tensors");
  const Arg* dim_arg = arg_value(cat, 1, "dim");
  if (!dim_arg || dim_arg->is_none()) dim_arg = cat.kwargs().find("axis");
  const std::optional<std::int64_t> raw = dim_arg && !dim_arg->is_none() ? int_of(dim_arg) : std::optional<std::int64_t>(0);
  const TensorMeta* out = tensor_of(&cat);
  if (!tensors || !tensors->list() || !raw || !out) return std::nullopt;
  for (const Arg& t : *tensors->list())
    if (!t.node()) return std::nullopt;
  const auto dim = normalized_dim(*raw, out->rank());
  if (!dim) return std::nullopt;
  return CatCall{*tensors->list(), *dim};
}

// Counts through the slot the registered pass fills for each run.
struct Count {
  std::shared_ptr<Counters*> slot;
  void operator()(std::string_view name) const {
    if (*slot) (*slot)->increment(name);
  }
};

}  // namespace detail
}  // namespace kiln::predispatch
