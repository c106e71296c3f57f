// bfloat16 graphs in kiln's executor, as PyTorch runs them: matrix products of
// two bfloat16 operands on oneDNN (float32 sums, one rounding), element-wise
// ops computed in float32 and rounded once, float32 weights (the exporter's
// .npy form) bound to bfloat16 nodes rounded to them, convolutions of bfloat16
// operands (float32 sums, one rounding), and torch.export's
// _assert_tensor_metadata checked while compiling. Each against a naive loop.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/bfloat16.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/remove_assert_ops.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {

float bf(const Tensor& t, std::int64_t i) { return bf16_to_float(t.data<std::uint16_t>()[i]); }

Node* typed(Node* n, std::vector<Dim> shape, DType d = DType::bfloat16) {
  n->meta.val = meta(std::move(shape), d);
  return n;
}

// Elements of `got` (bfloat16) more than one bfloat16 step from `want`.
int off_by_more_than_a_step(const Tensor& got, const std::vector<double>& want) {
  REQUIRE(got.dtype() == DType::bfloat16);
  REQUIRE(got.numel() == static_cast<std::int64_t>(want.size()));
  int off = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i)
    if (std::abs(bf(got, i) - want[i]) > std::abs(want[i]) / 128 + 1e-6) ++off;
  return off;
}

}  // namespace

TEST_CASE("mm and bmm of two bfloat16 operands give the float32 product rounded once to bfloat16") {
  constexpr std::int64_t B = 3, M = 5, K = 37, N = 7;
  for (const bool batched : {false, true}) {
    CAPTURE(batched);
    const std::vector<Dim> a_shape = batched ? std::vector<Dim>{B, M, K} : std::vector<Dim>{M, K};
    const std::vector<Dim> b_shape = batched ? std::vector<Dim>{B, K, N} : std::vector<Dim>{K, N};
    const std::vector<Dim> c_shape = batched ? std::vector<Dim>{B, M, N} : std::vector<Dim>{M, N};
    for (const bool constant_b : {false, true}) {
      CAPTURE(constant_b);
      Graph g;
      Node* a = typed(g.placeholder("a"), a_shape);
      Node* b = constant_b ? typed(g.get_attr("b"), b_shape) : typed(g.placeholder("b"), b_shape);
      g.output(ArgList{typed(g.call_function(batched ? aten::bmm : aten::mm, {a, b}), c_shape)});
      const std::int64_t nb = batched ? B : 1;
      const Tensor a_in = runtime::as_bfloat16(random_tensor(batched ? runtime::Shape{B, M, K} : runtime::Shape{M, K}, 1));
      const Tensor b_in = runtime::as_bfloat16(random_tensor(batched ? runtime::Shape{B, K, N} : runtime::Shape{K, N}, 2));
      std::vector<double> want;
      for (std::int64_t z = 0; z < nb; ++z)
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (std::int64_t k = 0; k < K; ++k) acc += double(bf(a_in, (z * M + i) * K + k)) * bf(b_in, (z * K + k) * N + j);
            want.push_back(round_to_bf16(float(acc)));
          }
      runtime::Weights w;
      if (constant_b) w.emplace("b", b_in);
      const auto cg = CompiledGraph::compile(g, w);
      const auto out = constant_b ? cg.run({a_in}) : cg.run({a_in, b_in});
      CHECK(off_by_more_than_a_step(out[0], want) == 0);
    }
  }
}

TEST_CASE("element-wise ops on bfloat16 compute in float32 and round once, as PyTorch's") {
  constexpr std::int64_t N = 64;
  Graph g;
  Node* x = typed(g.placeholder("x"), {N});
  Node* s = typed(g.get_attr("s"), {N});  // bound to a float32 weight, as the exporter saves one
  Node* mul = typed(g.call_function(aten::mul_Tensor, {x, s}), {N});
  Node* gelu = typed(g.call_function(aten::gelu, {mul}), {N});
  g.output(ArgList{mul, gelu});
  const Tensor xin = runtime::as_bfloat16(random_tensor({N}, 3));
  const Tensor sf = random_tensor({N}, 4);  // float32, rounded to bfloat16 where it is bound
  const auto out = CompiledGraph::compile(g, {{"s", sf}}).run({xin});
  REQUIRE(out[0].dtype() == DType::bfloat16);
  REQUIRE(out[1].dtype() == DType::bfloat16);
  int off_mul = 0, off_gelu = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const float m = round_to_bf16(bf(xin, i) * round_to_bf16(sf.data<float>()[i]));
    if (bf(out[0], i) != m) ++off_mul;  // one float32 product, one rounding: exact
    const double ge = 0.5 * m * (1.0 + std::erf(m / std::sqrt(2.0)));
    if (std::abs(bf(out[1], i) - ge) > std::abs(ge) / 128 + 1e-6) ++off_gelu;
  }
  CHECK(off_mul == 0);
  CHECK(off_gelu == 0);
}

TEST_CASE("a product of a float32 and a bfloat16 operand is refused, naming both dtypes") {
  Graph g;
  Node* a = typed(g.placeholder("a"), {4, 8}, DType::float32);
  Node* b = typed(g.placeholder("b"), {8, 2});
  g.output(ArgList{typed(g.call_function(aten::mm, {a, b}, {}, "prod"), {4, 2}, DType::float32)});
  CHECK(contains(compile_error(g), "node prod (aten.mm.default): matrix products take two float32 or two bfloat16 operands, got float32 and bfloat16"));
}

// autocast's convolutions: bfloat16 input, weight and bias; PyTorch sums in float32
// and rounds the result once. The relu after it reads the rounded result (nothing fused).
TEST_CASE("a convolution of bfloat16 operands gives the float32 convolution rounded once to bfloat16") {
  constexpr std::int64_t N = 2, C = 3, H = 7, W = 6, OC = 4, K = 3;
  for (const std::int64_t stride : {1, 2}) {
    CAPTURE(stride);
    const std::int64_t OH = (H + 2 - K) / stride + 1, OW = (W + 2 - K) / stride + 1;
    Graph g;
    Node* x = typed(g.placeholder("x"), {N, C, H, W});
    Node* w = typed(g.get_attr("w"), {OC, C, K, K});  // float32 weights, rounded to bfloat16 where bound
    Node* b = typed(g.get_attr("b"), {OC});
    Node* conv = typed(g.call_function(aten::convolution, {x, w, b, ArgList{stride, stride}, ArgList{1, 1}, ArgList{1, 1}, false,
                                                           ArgList{0, 0}, 1}),
                       {N, OC, OH, OW});
    g.output(ArgList{conv, typed(g.call_function(aten::relu, {conv}), {N, OC, OH, OW})});
    const Tensor xin = runtime::as_bfloat16(random_tensor({N, C, H, W}, 5));
    const Tensor wf = random_tensor({OC, C, K, K}, 6), bfl = random_tensor({OC}, 7);
    const auto out = CompiledGraph::compile(g, {{"w", wf}, {"b", bfl}}).run({xin});
    REQUIRE(out[0].dtype() == DType::bfloat16);
    REQUIRE(out[1].dtype() == DType::bfloat16);
    std::vector<double> want;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < OC; ++o)
        for (std::int64_t oh = 0; oh < OH; ++oh)
          for (std::int64_t ow = 0; ow < OW; ++ow) {
            double acc = round_to_bf16(bfl.data<float>()[o]);
            for (std::int64_t c = 0; c < C; ++c)
              for (std::int64_t kh = 0; kh < K; ++kh)
                for (std::int64_t kw = 0; kw < K; ++kw) {
                  const std::int64_t ih = oh * stride - 1 + kh, iw = ow * stride - 1 + kw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  acc += double(bf(xin, ((n * C + c) * H + ih) * W + iw)) * round_to_bf16(wf.data<float>()[((o * C + c) * K + kh) * K + kw]);
                }
            want.push_back(round_to_bf16(float(acc)));
          }
    CHECK(off_by_more_than_a_step(out[0], want) == 0);
    int off_relu = 0;
    for (std::int64_t i = 0; i < out[0].numel(); ++i) off_relu += bf(out[1], i) != std::max(bf(out[0], i), 0.0f);
    CHECK(off_relu == 0);
  }
}

TEST_CASE("a convolution of a float32 input and a bfloat16 weight is refused, naming both dtypes") {
  Graph g;
  Node* x = typed(g.placeholder("x"), {1, 2, 5, 5}, DType::float32);
  Node* w = typed(g.placeholder("w"), {3, 2, 3, 3});
  g.output(ArgList{typed(g.call_function(aten::convolution, {x, w, Arg(), ArgList{1, 1}, ArgList{0, 0}, ArgList{1, 1}, false, ArgList{0, 0}, 1},
                                         {}, "conv"),
                         {1, 3, 3, 3}, DType::float32)});
  CHECK(contains(compile_error(g), "node conv (aten.convolution.default): convolution takes a float32 or a bfloat16 input and weight, got float32 and bfloat16"));
}

TEST_CASE("_assert_tensor_metadata is checked while compiling, and remove_assert_ops erases it") {
  const auto graph = [](DType asserted, std::int64_t asserted_rows) {
    Graph g;
    Node* x = typed(g.placeholder("x"), {4, 8});
    Node* c = typed(g.call_function(aten::to_copy, {x}, {{"dtype", Arg(DType::float32)}}), {4, 8}, DType::float32);
    g.call_function(OpRef("aten._assert_tensor_metadata.default"), {x, ArgList{asserted_rows, 8}, Arg(), Arg(asserted)},
                    {}, "check");
    g.output(ArgList{c});
    return g;
  };
  const Tensor xin = runtime::as_bfloat16(random_tensor({4, 8}, 5));
  const auto out = CompiledGraph::compile(graph(DType::bfloat16, 4), {}).run({xin});
  CHECK(out[0].dtype() == DType::float32);
  CHECK(out[0].data<float>()[3] == bf(xin, 3));
  CHECK(contains(compile_error(graph(DType::float32, 4)), "node check (aten._assert_tensor_metadata.default): the tensor is bfloat16, the assertion says float32"));
  CHECK(contains(compile_error(graph(DType::bfloat16, 5)), "the tensor is [4, 8], the assertion says another size"));
  Graph g = graph(DType::float32, 5);
  Counters c;
  CHECK(remove_assert_ops(g, &c) == 1);
  CHECK(c.get("assert_ops_removed") == 1);
  CHECK(g.find_nodes(OpKind::call_function, OpRef("aten._assert_tensor_metadata.default")).empty());
  CHECK(CompiledGraph::compile(g, {}).run({xin})[0].data<float>()[3] == bf(xin, 3));
}
