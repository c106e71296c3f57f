// Pieces of the q/dq graphs that the quantization pass tests build by hand.
#pragma once

#include <vector>

#include <doctest/doctest.h>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"

namespace kiln::test {

inline int count(const Graph& g, OpRef target) { return static_cast<int>(g.find_nodes(OpKind::call_function, target).size()); }

// The one call of `target` in `g` (the test fails unless there is exactly one).
inline Node* only(const Graph& g, OpRef target) {
  const auto v = g.find_nodes(OpKind::call_function, target);
  REQUIRE(v.size() == 1);
  return v[0];
}

// `n`, given a tensor meta of `shape` and `d`.
inline Node* with_meta(Node* n, std::vector<Dim> shape, DType d = DType::float32) {
  n->meta.val = TensorMeta{std::move(shape), d, std::nullopt};
  return n;
}

// dequantize_per_tensor of a uint8 tensor `q` of `shape` (scale 0.05, zero point
// 128), or its .tensor overload, whose scale and zero point are placeholders.
inline Node* dequantize_uint8(Graph& g, Node* q, const std::vector<Dim>& shape, bool tensor_overload) {
  ArgList args{q, 0.05, 128, 0, 255, Arg(DType::uint8)};
  if (tensor_overload) {
    args[1] = g.placeholder("s", TensorMeta{{}, DType::float32, std::nullopt});
    args[2] = g.placeholder("z", TensorMeta{{}, DType::int64, std::nullopt});
  }
  Node* dq = g.call_function(tensor_overload ? quantized_decomposed::dequantize_per_tensor_tensor : quantized_decomposed::dequantize_per_tensor,
                             args);
  dq->meta.val = TensorMeta{shape, DType::float32, std::nullopt};
  return dq;
}

}  // namespace kiln::test
