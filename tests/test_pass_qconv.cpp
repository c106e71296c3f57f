// The qconv weight prepack on graphs built here: the forms it takes (bias or
// None, both dequantize overloads), the near misses it leaves alone, its counters.
#include <doctest/doctest.h>

#include <string>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/quantization/qconv_weight_prepack.hpp"
#include "quant_graph_support.hpp"

using namespace kiln;
using test::count;

namespace {

TensorMeta meta(std::vector<Dim> shape, DType dtype = DType::float32) { return TensorMeta{std::move(shape), dtype, std::nullopt}; }

// qx (uint8 [1, 4, 8, 8]) -> dequantize -> convolution(., dequantize_per_channel(w [6, 4, 3, 3]), b);
// `spatial` 1 or 3 makes it a 1-d or 3-d convolution ([1, 4, 8] and w [6, 4, 3]; [1, 4, 8, 8, 8]).
struct QConvGraph {
  Graph g;
  Node *qx, *dq, *wq, *dqc, *conv;
  explicit QConvGraph(bool bias = true, bool tensor_overload = false, std::int64_t axis = 0, DType wdtype = DType::int8,
                      bool transposed = false, std::size_t spatial = 2) {
    const auto dims = [&](std::vector<Dim> head, Dim each) {
      head.insert(head.end(), spatial, each);
      return head;
    };
    const auto ints = [&](std::int64_t v) { return ArgList(spatial, Arg(v)); };
    qx = g.placeholder("qx", meta(dims({1, 4}, 8), DType::uint8));
    dq = test::dequantize_uint8(g, qx, dims({1, 4}, 8), tensor_overload);
    wq = g.placeholder("wq", meta(dims({6, 4}, 3), wdtype));
    dqc = g.call_function(quantized_decomposed::dequantize_per_channel,
                          {wq, g.placeholder("ws", meta({6})), g.placeholder("wz", meta({6}, DType::int64)), axis, -128, 127, Arg(wdtype)});
    dqc->meta.val = meta(dims({6, 4}, 3));
    const Arg b = bias ? Arg(g.placeholder("b", meta({6}))) : Arg();
    conv = g.call_function(aten::convolution, {dq, dqc, b, ints(1), ints(1), ints(1), transposed, ints(0), 1});
    conv->meta.val = meta(dims({1, 6}, 8));
    g.output(ArgList{conv});
  }
};

}  // namespace

TEST_CASE("qconv_weight_prepack turns dequantize -> convolution into qconv_pointwise on qconv_prepack, with and without bias") {
  for (const bool bias : {true, false})
    for (const bool tensors : {false, true}) {
      CAPTURE(bias);
      CAPTURE(tensors);
      QConvGraph q(bias, tensors);
      Counters c;
      CHECK(qconv_weight_prepack(q.g, &c) == 1);
      const OpRef fused = tensors ? onednn::qconv_pointwise_tensor : onednn::qconv_pointwise;
      REQUIRE(count(q.g, fused) == 1);
      CHECK(count(q.g, onednn::qconv_prepack) == 1);
      CHECK(count(q.g, aten::convolution) == 0);
      CHECK(count(q.g, quantized_decomposed::dequantize_per_channel) == 0);
      const Node* n = q.g.find_nodes(OpKind::call_function, fused)[0];
      CHECK(n->arg(0).node() == q.qx);
      CHECK(n->arg(6).is_none() == !bias);
      REQUIRE(n->arg(10).get_if<std::int64_t>());
      CHECK(*n->arg(10).get_if<std::int64_t>() == 1);
      REQUIRE(n->arg(13).get_if<DType>());
      CHECK(*n->arg(13).get_if<DType>() == DType::float32);
      REQUIRE(n->arg(14).get_if<std::string>());
      CHECK(*n->arg(14).get_if<std::string>() == "none");
      CHECK(c.get("qconv_weight_prepack_matcher_count") == 1);
      CHECK(c.get("qconv_weight_prepack_matcher_nodes") == 3);
    }
}

// Inductor 2.11 takes 1-d convolutions as 2-d ones (a 3-d or 4-d activation and weight)
// and leaves 3-d ones (5-d tensors) alone.
TEST_CASE("qconv_weight_prepack takes a 1-d convolution and leaves a 3-d one alone, as Inductor 2.11 does") {
  for (const std::size_t spatial : {1, 3}) {
    CAPTURE(spatial);
    QConvGraph q(true, false, 0, DType::int8, false, spatial);
    Counters c;
    const bool takes = spatial == 1;
    CHECK(qconv_weight_prepack(q.g, &c) == (takes ? 1 : 0));
    CHECK(count(q.g, onednn::qconv_pointwise) == (takes ? 1 : 0));
    CHECK(count(q.g, aten::convolution) == (takes ? 0 : 1));
    CHECK(c.get("qconv_weight_prepack_matcher_count") == (takes ? 1 : 0));
  }
}

TEST_CASE("qconv_weight_prepack leaves alone a dequantize with another user, a per-tensor or non-int8 weight and a transposed conv") {
  const auto untouched = [](QConvGraph& q) {
    Counters c;
    CHECK(qconv_weight_prepack(q.g, &c) == 0);
    CHECK(count(q.g, aten::convolution) == 1);
    CHECK(c.get("qconv_weight_prepack_matcher_count") == 0);
  };
  {
    QConvGraph q;
    Node* r = q.g.call_function(aten::relu, {q.dq});
    r->meta.val = q.dq->meta.val;
    q.g.output_node()->set_args({ArgList{q.conv, r}});
    untouched(q);
  }
  {
    QConvGraph q(true, false, 1);  // weight dequantized along dim 1: not per output channel
    untouched(q);
  }
  {
    QConvGraph q(true, false, 0, DType::uint8);
    untouched(q);
  }
  {
    QConvGraph q(true, false, 0, DType::int8, true);
    untouched(q);
  }
}
