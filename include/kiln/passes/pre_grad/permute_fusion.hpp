#pragma once
// The permute fusions of Inductor's pre_grad.py (fuse_fx, under
// config.permute_fusion): a permute that swaps the last two dims, next to a
// linear or a matrix product, becomes a transpose the product takes.
//   linear_permute_fusion:  linear(x, w, b).permute(.., -1, -2)
//                           -> matmul(w, x.transpose(-1, -2)) + b.unsqueeze(-1)
//   permute_linear_fusion:  linear(x.permute(.., -1, -2), w, b)
//                           -> matmul(x.transpose(-1, -2), w.t()) + b
//   permute_matmul_fusion:  bmm/matmul(a.permute(.., -1, -2), b.permute(.., -1, -2))
//                           -> matmul(a.transpose(-1, -2), b.transpose(-1, -2)), either side
// Inductor calls its own Python helpers (linear_transpose, transpose_linear,
// transpose_matmul); kiln writes their bodies as torch calls. Any other
// permutation is left. Inductor counts nothing; kiln counts each rewrite
// under the pass's name. The permute's dims may be given as varargs, a list or
// `dims=`, negative or not; ranks 2 and up are taken (Inductor's check needs 3).
#include <cstddef>
#include <optional>

#include "kiln/ops/functional.hpp"
#include "kiln/passes/pre_grad/common.hpp"

namespace kiln::pre_grad {

namespace detail {

// `n` when it is a permute swapping the last two dims: its input.
inline Node* swapped_input(const Node* n) {
  if (!n) return nullptr;
  const std::optional<Permute> p = permute_of(*n);
  return p && swaps_last_two(p->dims) ? p->input : nullptr;
}
inline Node* transpose_last_two(Graph& g, Node* x) {
  return call_with_meta(g, torch::transpose, {Arg(x), Arg(std::int64_t{-2}), Arg(std::int64_t{-1})},
                        gbf::transposed(*tensor_of(x), -2, -1));
}
inline Node* matmul(Graph& g, Node* a, Node* b) {
  return call_with_meta(g, torch::matmul, {Arg(a), Arg(b)}, MetaVal(*matmul_meta(*tensor_of(a), *tensor_of(b))));
}
inline Node* add(Graph& g, Node* a, Node* b) {
  return call_with_meta(g, torch::add, {Arg(a), Arg(b)}, gbf::broadcast(*tensor_of(a), *tensor_of(b)));
}
// A linear's input, weight and bias (null when absent or None).
struct Linear {
  Node* input = nullptr;
  Node* weight = nullptr;
  Node* bias = nullptr;
  bool ok = false;
};
inline Linear linear_args(const Node& n) {
  Linear l;
  const Arg* x = arg_value(n, 0, "input");
  const Arg* w = arg_value(n, 1, "weight");
  const Arg* b = arg_value(n, 2, "bias");
  l.input = x ? x->node() : nullptr;
  l.weight = w ? w->node() : nullptr;
  l.bias = b ? b->node() : nullptr;
  const bool bias_ok = !b || b->is_none() || (l.bias && tensor_of(l.bias));
  const TensorMeta* wm = tensor_of(l.weight);
  l.ok = tensor_of(l.input) && wm && wm->rank() == 2 && bias_ok;
  return l;
}

}  // namespace detail

inline std::size_t linear_permute_fusion(Graph& g) {
  namespace d = detail;
  std::size_t rewritten = 0;
  for (Node* p : g.node_list()) {
    if (p->erased()) continue;
    Node* lin = d::swapped_input(p);
    if (!lin || !lin->is_call(F::linear)) continue;
    const d::Linear l = d::linear_args(*lin);
    if (!l.ok || d::tensor_of(l.input)->rank() < 2) continue;
    Node* out;
    {
      auto at = g.inserting_before(p);
      out = d::matmul(g, l.weight, d::transpose_last_two(g, l.input));
      if (l.bias) {
        Node* column = d::call_with_meta(g, torch::unsqueeze, {Arg(l.bias), Arg(std::int64_t{-1})},
                                         gbf::unsqueezed(*d::tensor_of(l.bias), -1));
        out = d::add(g, out, column);
      }
    }
    d::replace_and_erase(g, p, out, {lin});
    ++rewritten;
  }
  return rewritten;
}

inline std::size_t permute_linear_fusion(Graph& g) {
  namespace d = detail;
  std::size_t rewritten = 0;
  for (Node* lin : g.find_nodes(OpKind::call_function, F::linear)) {
    const d::Linear l = d::linear_args(*lin);
    if (!l.ok) continue;
    Node* x = d::swapped_input(l.input);
    if (!x) continue;
    Node* permute = l.input;
    Node* out;
    {
      auto at = g.inserting_before(lin);
      Node* wt = d::call_with_meta(g, op::t, {Arg(l.weight)}, gbf::transposed(*d::tensor_of(l.weight), 0, 1));
      out = d::matmul(g, d::transpose_last_two(g, x), wt);
      if (l.bias) out = d::add(g, out, l.bias);
    }
    d::replace_and_erase(g, lin, out, {permute});
    ++rewritten;
  }
  return rewritten;
}

inline std::size_t permute_matmul_fusion(Graph& g) {
  namespace d = detail;
  std::size_t rewritten = 0;
  for (Node* mm : g.node_list()) {
    if (mm->erased() || !(mm->is_call(torch::bmm) || mm->is_call(torch::matmul))) continue;
    const Arg* a = d::arg_value(*mm, 0, "input");
    const Arg* b = d::arg_value(*mm, 1, mm->is_call(torch::bmm) ? "mat2" : "other");
    Node* a_node = a ? a->node() : nullptr;
    Node* b_node = b ? b->node() : nullptr;
    if (!d::tensor_of(a_node) || !d::tensor_of(b_node)) continue;
    Node* a_in = d::swapped_input(a_node);
    Node* b_in = d::swapped_input(b_node);
    if (!a_in && !b_in) continue;
    // Both sides of rank >= 2 (the permute's side is), so matmul's rules are bmm's/mm's.
    if (d::tensor_of(a_node)->rank() < 2 || d::tensor_of(b_node)->rank() < 2) continue;
    Node* out;
    {
      auto at = g.inserting_before(mm);
      Node* lhs = a_in ? d::transpose_last_two(g, a_in) : a_node;
      Node* rhs = b_in ? d::transpose_last_two(g, b_in) : b_node;
      out = d::matmul(g, lhs, rhs);
    }
    d::replace_and_erase(g, mm, out, {a_in ? a_node : nullptr, b_in ? b_node : nullptr});
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln::pre_grad
