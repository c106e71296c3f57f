#pragma once
// What the pre-grad rewrites of pre_grad/ share: the torch callables they
// create that kiln/ops/torch.hpp does not name, meta comparisons, reading a
// permute's permutation, and making a node together with its meta.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/group_batch_fusion/fusion.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::pre_grad {

namespace op {
KILN_DECLARE_OP(argmax, "torch.argmax");
KILN_DECLARE_OP(t, "torch.t");
}  // namespace op

namespace detail {

using namespace split_cat::node_helpers;

inline bool all_static(const std::vector<Dim>& dims) {
  for (const Dim& d : dims)
    if (!is_static(d)) return false;
  return true;
}
// Inductor's same_meta for the meta kiln records: equal static shapes and
// dtypes, and equal strides where both were recorded.
inline bool same_meta(const TensorMeta& a, const TensorMeta& b) {
  if (!all_static(a.shape) || a.shape != b.shape || a.dtype != b.dtype) return false;
  return !a.stride || !b.stride || *a.stride == *b.stride;
}
// The tensor value of an argument that is a node with tensor meta.
inline const TensorMeta* tensor_arg(const Arg* a) { return a ? tensor_of(a->node()) : nullptr; }

// A permute (Tensor.permute(x, *dims), Tensor.permute(x, dims), torch.permute(x, dims),
// dims as keyword "dims") of a tensor of known rank: its input and its
// permutation with every entry made non-negative; nullopt when it is not one.
struct Permute {
  Node* input;
  std::vector<std::int64_t> dims;
};
inline std::optional<Permute> permute_of(const Node& n) {
  const bool method = n.op() == OpKind::call_method && n.target_name() == "permute";
  if (!method && !n.is_call(torch::permute)) return std::nullopt;
  const Arg* in = arg_value(n, 0, method ? "self" : "input");
  const TensorMeta* t = tensor_arg(in);
  if (!t) return std::nullopt;
  const auto rank = static_cast<std::int64_t>(t->rank());
  std::vector<Arg> raw;
  if (n.args().size() == 2 && n.args()[1].is_list()) raw = *n.args()[1].list();
  else if (n.args().size() > 2) {
    const ArgList all = n.args().to_list();
    raw.assign(all.begin() + 1, all.end());
  } else if (const Arg* k = n.kwargs().find("dims"); k && k->is_list() && n.args().size() == 1) raw = *k->list();
  if (static_cast<std::int64_t>(raw.size()) != rank || rank == 0) return std::nullopt;
  Permute p{in->node(), {}};
  for (const Arg& a : raw) {
    const auto d = int_of(&a);
    if (!d || *d < -rank || *d >= rank) return std::nullopt;
    p.dims.push_back(*d < 0 ? *d + rank : *d);
  }
  return p;
}
// Whether the permutation keeps every dim but swaps the last two.
inline bool swaps_last_two(const std::vector<std::int64_t>& dims) {
  const std::size_t r = dims.size();
  if (r < 2) return false;
  for (std::size_t i = 0; i + 2 < r; ++i)
    if (dims[i] != static_cast<std::int64_t>(i)) return false;
  return dims[r - 2] == static_cast<std::int64_t>(r - 1) && dims[r - 1] == static_cast<std::int64_t>(r - 2);
}

// torch.matmul of two tensors of rank >= 2: broadcast batch dims, then (m, k) @ (k, n).
inline std::optional<TensorMeta> matmul_meta(const TensorMeta& a, const TensorMeta& b) {
  if (a.rank() < 2 || b.rank() < 2) return std::nullopt;
  TensorMeta ab{{a.shape.begin(), a.shape.end() - 2}, a.dtype, std::nullopt};
  TensorMeta bb{{b.shape.begin(), b.shape.end() - 2}, b.dtype, std::nullopt};
  std::vector<Dim> shape = gbf::broadcast(ab, bb).tensor()->shape;
  shape.push_back(a.shape[a.rank() - 2]);
  shape.push_back(b.shape[b.rank() - 1]);
  return gbf::contiguous(std::move(shape), a.dtype);
}

// Moves `old`'s users to `fresh` and erases `old`, then each of `bypassed`
// (the permute or linear the rewrite reads around) that nothing reads any more.
inline void replace_and_erase(Graph& g, Node* old, Node* fresh, std::initializer_list<Node*> bypassed) {
  old->replace_all_uses_with(fresh);
  g.erase_node(old);
  erase_if_unused(g, bypassed);
}

}  // namespace detail
}  // namespace kiln::pre_grad
