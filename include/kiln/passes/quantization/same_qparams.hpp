#pragma once
// What the int8 pass-through lowerings (qmaxpool2d, qcat, qreshape) check
// before dropping a dequantize ... quantize pair: Inductor's
// _is_input_output_same_scale_zp (every dequantize and the quantize share the
// zero point, and the scale within a relative 1e-5), plus what keeps kiln's
// result equal to the q/dq graph's: the same dtype and quant_min/quant_max on
// both sides, so the int8 values pass through unchanged.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/quantized_decomposed.hpp"

namespace kiln::quantization_detail {

inline const double* scale_arg(const Node* n) {
  if (n->args().size() < 2) return nullptr;
  return n->arg(1).get_if<double>();
}

// scale and zero point as constants, then quant_min, quant_max and dtype equal.
inline bool same_qparams(const Node* a, const Node* b) {
  const double *sa = scale_arg(a), *sb = scale_arg(b);
  if (!sa || !sb || a->args().size() < 6 || b->args().size() < 6) return false;
  if (std::abs(*sa - *sb) > 1e-5 * std::max(std::abs(*sa), std::abs(*sb))) return false;
  for (std::size_t i : {2, 3, 4, 5})
    if (!(a->arg(i) == b->arg(i))) return false;
  return true;
}

// Every per-tensor dequantize among `nodes` against the one quantize_per_tensor.
inline bool input_output_same_qparams(const std::vector<Node*>& nodes) {
  const Node* q = nullptr;
  std::vector<const Node*> dqs;
  for (const Node* n : nodes) {
    if (n->op() != OpKind::call_function) continue;
    if (n->target() == quantized_decomposed::quantize_per_tensor) q = n;
    if (n->target() == quantized_decomposed::dequantize_per_tensor) dqs.push_back(n);
  }
  if (!q || dqs.empty()) return false;
  for (const Node* dq : dqs)
    if (!same_qparams(dq, q) || !dq->kwargs().empty()) return false;
  return true;
}

}  // namespace kiln::quantization_detail
