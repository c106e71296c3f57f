#pragma once
// quant_lift_up, Inductor 2.11's quant_lift_up (run on the frozen graph before
// its quantization patterns): a per-tensor quantize whose only input node is a
// chain of view-like ops (transpose.int, permute, view, reshape) moves above
// the chain, so the views move int8 data and the quantize sits right after the
// op that made the tensor (a linear, say), where it can fuse. Conditions as
// Inductor's: every view of the chain, and the node feeding it, has one user.
// Per-tensor only: a permute would move a per-channel axis. Inductor counts
// nothing for it; kiln counts quant_lift_up_count (quantizes lifted).
#include <cstdint>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"

namespace kiln {

namespace quantization_detail {

inline bool is_view_like(const Node* n) {
  return n && n->op() == OpKind::call_function &&
         (n->target() == aten::transpose_int || n->target() == aten::permute || n->target() == aten::view ||
          n->target() == aten::reshape);
}

inline bool is_quantize_per_tensor(const Node* n) {
  return n->op() == OpKind::call_function &&
         (n->target() == quantized_decomposed::quantize_per_tensor || n->target() == quantized_decomposed::quantize_per_tensor_tensor);
}

// Moves `q` above the view chain feeding it; false (nothing changed) when a condition fails.
inline bool lift_quantize(Graph& g, Node* q) {
  if (q->all_input_nodes().size() != 1 || !is_view_like(q->arg(0).node())) return false;
  Node* first_view = q->arg(0).node();
  Node* input = first_view;
  while (is_view_like(input)) {
    if (input->num_users() != 1) return false;
    first_view = input;
    input = input->arg(0).node();
  }
  if (!input || input->num_users() != 1) return false;
  const TensorMeta* qm = q->meta.val.tensor();
  const TensorMeta* im = input->meta.val.tensor();
  if (!qm || !im) return false;
  const DType qdtype = qm->dtype;
  Node* lifted = nullptr;
  {
    auto guard = g.inserting_before(first_view);
    ArgList args;
    for (const Arg& a : q->args()) args.push_back(a);
    args[0] = Arg(input);
    lifted = g.call_function(q->target(), args, q->kwargs());
  }
  // A quantize keeps its input's strides, a view its own: the executor reads them as
  // PyTorch's layout (a view of a result it laid out channels-last copies by them).
  lifted->meta.val = TensorMeta{im->shape, qdtype, im->stride};
  first_view->replace_input_with(input, lifted);
  // The views now carry the quantized dtype.
  for (Node* v = q->arg(0).node(); is_view_like(v); v = v->arg(0).node())
    if (const TensorMeta* vm = v->meta.val.tensor()) v->meta.val = TensorMeta{vm->shape, qdtype, vm->stride};
  q->replace_all_uses_with(q->arg(0).node());
  g.erase_node(q);
  return true;
}

}  // namespace quantization_detail

// Lifts every such quantize in `g`; returns how many moved.
inline std::size_t quant_lift_up(Graph& g, Counters* counters = nullptr) {
  std::vector<Node*> quants;
  for (Node* n : g.nodes())
    if (quantization_detail::is_quantize_per_tensor(n)) quants.push_back(n);
  std::size_t lifted = 0;
  for (Node* q : quants) lifted += quantization_detail::lift_quantize(g, q) ? 1 : 0;
  if (counters && lifted) counters->increment("quant_lift_up_count", static_cast<std::int64_t>(lifted));
  return lifted;
}

}  // namespace kiln
