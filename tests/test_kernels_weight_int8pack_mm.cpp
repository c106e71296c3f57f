// aten._weight_int8pack_mm (weight-only int8) against a naive loop: the
// float32 product of self and the int8 weight, times the per-channel scale,
// in float32 or rounded once to bfloat16.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/bfloat16.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "quant_kernel_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {

constexpr std::int64_t M = 7, K = 45, N = 6;

// self [M, K] and scales [N] in `d` (float32 or bfloat16 bits), the int8 weight [N, K] over its full range.
struct Operands {
  DType d;
  Tensor x, w = random_ints({N, K}, DType::int8, -128, 127, 12), s;
  explicit Operands(DType dtype) : d(dtype), x(Tensor::empty({M, K}, dtype)), s(Tensor::empty({N}, dtype)) {
    const Tensor xf = random_tensor({M, K}, 11), sf = random_tensor({N}, 13);
    for (std::int64_t i = 0; i < M * K; ++i) set(x, i, xf.data<float>()[i]);
    for (std::int64_t j = 0; j < N; ++j) set(s, j, 0.01f + 0.002f * std::abs(sf.data<float>()[j]));
  }
  void set(Tensor& t, std::int64_t i, float v) const {
    if (d == DType::float32) t.data<float>()[i] = v;
    else t.data<std::uint16_t>()[i] = float_to_bf16(v);
  }
  float get(const Tensor& t, std::int64_t i) const {
    return t.dtype() == DType::float32 ? t.data<float>()[i] : bf16_to_float(t.data<std::uint16_t>()[i]);
  }
  double expected(std::int64_t m, std::int64_t n) const {
    double acc = 0;
    for (std::int64_t k = 0; k < K; ++k) acc += double(get(x, m * K + k)) * double(w.data<std::int8_t>()[n * K + k]);
    const float y = float(acc) * get(s, n);
    return d == DType::float32 ? y : round_to_bf16(y);
  }
};

// self @ mat2^T * scales as one node; mat2 and scales constants (get_attr) or graph inputs.
Graph graph(DType d, bool constant_weight, runtime::Shape w_shape = {N, K}, DType w_dtype = DType::int8, runtime::Shape s_shape = {N},
            std::optional<DType> s_dtype = std::nullopt) {
  Graph g;
  Node* x = g.placeholder("x", meta({M, K}, d));
  Node* w = constant_weight ? g.get_attr("w", meta({w_shape.begin(), w_shape.end()}, w_dtype))
                            : g.placeholder("w", meta({w_shape.begin(), w_shape.end()}, w_dtype));
  Node* s = g.get_attr("s", meta({s_shape.begin(), s_shape.end()}, s_dtype.value_or(d)));
  g.output(ArgList{g.call_function(OpRef("aten._weight_int8pack_mm.default"), {x, w, s}, {}, "wmm")});
  return g;
}

}  // namespace

TEST_CASE("_weight_int8pack_mm in float32 and bfloat16, with a constant weight and a weight given as input") {
  for (const DType d : {DType::float32, DType::bfloat16})
    for (const bool constant_weight : {true, false}) {
      CAPTURE(dtype_name(d));
      CAPTURE(constant_weight);
      const Operands o(d);
      runtime::Weights weights{{"s", o.s}};
      if (constant_weight) weights.emplace("w", o.w);
      auto cg = CompiledGraph::compile(graph(d, constant_weight), weights);
      auto out = constant_weight ? cg.run({o.x}) : cg.run({o.x, o.w});
      REQUIRE(out[0].shape() == runtime::Shape{M, N});
      REQUIRE(out[0].dtype() == d);
      // float32: sums in another order; bfloat16: at most one step of its 8-bit mantissa apart.
      const double rel = d == DType::float32 ? 1e-5 : 1.0 / 128;
      int off = 0;
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          const double e = o.expected(m, n), got = o.get(out[0], m * N + n);
          if (std::abs(got - e) > rel * std::abs(e) + 1e-6) ++off;
        }
      CHECK(off == 0);
    }
}

TEST_CASE("_weight_int8pack_mm refuses, naming the node and the field, operands it does not take") {
  const auto refused = [](const Graph& g, const runtime::Weights& w, const std::string& message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, w), doctest::Contains(message.c_str()), runtime::CompileError);
  };
  const Operands o(DType::float32);
  const runtime::Weights ok{{"w", o.w}, {"s", o.s}};
  refused(graph(DType::float32, false, {N, K}, DType::uint8), {{"s", o.s}},
          "node wmm (aten._weight_int8pack_mm.default): mat2 must be an int8 [N, 45] matrix, got uint8 [6, 45]");
  refused(graph(DType::float32, false, {N, K + 1}), {{"s", o.s}}, "mat2 must be an int8 [N, 45] matrix, got int8 [6, 46]");
  refused(graph(DType::float32, true, {N, K}, DType::int8, {N + 1}), {{"w", o.w}, {"s", Tensor::empty({N + 1})}},
          "scales must be float32 [6], got float32 [7]");
  refused(graph(DType::float32, true, {N, K}, DType::int8, {N}, DType::bfloat16), {{"w", o.w}, {"s", Tensor::empty({N}, DType::bfloat16)}},
          "scales must be float32 [6], got bfloat16 [6]");
  Graph g;
  Node* x = g.placeholder("x", meta({M, K}, DType::float16));
  g.output(ArgList{g.call_function(OpRef("aten._weight_int8pack_mm.default"),
                                   {x, g.get_attr("w", meta({N, K}, DType::int8)), g.get_attr("s", meta({N}))}, {}, "wmm")});
  refused(g, ok, "self must be a 2-d float32 or bfloat16 matrix, got float16 [7, 45]");
}
