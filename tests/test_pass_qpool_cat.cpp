// qmaxpool2d, qcat and qreshape on graphs built here: each match, the near
// misses (another output scale, differing input scales, a dequantize with a
// second user, the indices read), the counters; and the lowered int8 graphs
// run against naive loops over the int8 values (quantized.max_pool2d on u8 and
// s8, cat and reshape of u8 tensors), which must equal them exactly. Also
// quant_lift_up: a quantize moved above the views feeding it, and its misses.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/quantization/qcat.hpp"
#include "kiln/passes/quantization/qmaxpool2d.hpp"
#include "kiln/passes/quantization/qreshape.hpp"
#include "kiln/passes/quantization/quant_lift_up.hpp"
#include "quant_graph_support.hpp"
#include "quant_kernel_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::count;
using test::meta;

namespace {

constexpr double S = 0.05;
constexpr std::int64_t Z = 128;

Node* dequantize(Graph& g, Node* q, const std::vector<Dim>& shape, double scale = S, std::int64_t zp = Z) {
  Node* dq = g.call_function(quantized_decomposed::dequantize_per_tensor, {q, scale, zp, 0, 255, Arg(DType::uint8)});
  dq->meta.val = meta(shape);
  return dq;
}
Node* quantize(Graph& g, Node* x, const std::vector<Dim>& shape, double scale = S, std::int64_t zp = Z) {
  Node* q = g.call_function(quantized_decomposed::quantize_per_tensor, {x, scale, zp, 0, 255, Arg(DType::uint8)});
  q->meta.val = meta(shape, DType::uint8);
  return q;
}

// qx [1, 2, 6, 6] -> dequantize -> max_pool2d_with_indices(k 3, s 2, p 1) -> getitem `item` -> quantize(out_scale).
struct PoolGraph {
  Graph g;
  Node *qx, *dq, *pool, *item, *q;
  explicit PoolGraph(double out_scale = S, std::int64_t item_index = 0) {
    qx = g.placeholder("qx", meta({1, 2, 6, 6}, DType::uint8));
    dq = dequantize(g, qx, {1, 2, 6, 6});
    pool = g.call_function(aten::max_pool2d_with_indices, {dq, ArgList{3, 3}, ArgList{2, 2}, ArgList{1, 1}});
    item = g.call_function(pyop::getitem, {pool, item_index});
    item->meta.val = meta({1, 2, 3, 3});
    q = quantize(g, item, {1, 2, 3, 3}, out_scale);
  }
};

// How many matches `pass` lowers in `t`'s graph with its quantize as the
// output, and `other_user` (a second user of some node in it) beside it if given.
template <class Net>
std::size_t lowered(Net& t, std::size_t (*pass)(Graph&, Counters*), Node* other_user = nullptr) {
  ArgList outs{t.q};
  if (other_user) outs.push_back(other_user);
  t.g.output(std::move(outs));
  return pass(t.g, nullptr);
}

// Values over the whole range of a uint8 or int8 tensor.
Tensor u8(runtime::Shape shape, unsigned seed, DType d = DType::uint8) {
  const int lo = d == DType::uint8 ? 0 : -128;
  return test::random_ints(std::move(shape), d, lo, lo + 255, seed);
}
int value(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::uint8 ? int(t.data<std::uint8_t>()[i]) : int(t.data<std::int8_t>()[i]);
}

}  // namespace

TEST_CASE("qmaxpool2d lowers dequantize, max_pool2d_with_indices, getitem 0, quantize of one scale to quantized.max_pool2d") {
  PoolGraph t;
  t.g.output(ArgList{t.q});
  Counters c;
  CHECK(qmaxpool2d(t.g, &c) == 1);
  lint(t.g);
  const auto pools = t.g.find_nodes(OpKind::call_function, quantized::max_pool2d);
  REQUIRE(pools.size() == 1);
  CHECK(pools[0]->arg(0).node() == t.qx);
  CHECK(pools[0]->args().size() == 6);
  CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 0);
  CHECK(count(t.g, aten::max_pool2d_with_indices) == 0);
  CHECK(c.get("qmaxpool2d_matcher_count") == 1);
  CHECK(c.get("qmaxpool2d_matcher_nodes") == 4);
}

TEST_CASE("qmaxpool2d also takes kernel_size alone, and an unread indices getitem") {
  Graph g;
  Node* qx = g.placeholder("qx", meta({1, 2, 6, 6}, DType::uint8));
  Node* pool = g.call_function(aten::max_pool2d_with_indices, {dequantize(g, qx, {1, 2, 6, 6}), ArgList{2, 2}});
  Node* item = g.call_function(pyop::getitem, {pool, 0});
  g.call_function(pyop::getitem, {pool, 1});
  item->meta.val = meta({1, 2, 3, 3});
  g.output(ArgList{quantize(g, item, {1, 2, 3, 3})});
  Counters c;
  CHECK(qmaxpool2d(g, &c) == 1);
  lint(g);
  const auto pools = g.find_nodes(OpKind::call_function, quantized::max_pool2d);
  REQUIRE(pools.size() == 1);
  CHECK(pools[0]->arg(2) == Arg(ArgList{2, 2}));  // stride defaults to the kernel
  CHECK(pools[0]->arg(3) == Arg(ArgList{0, 0}));
  CHECK(c.get("qmaxpool2d_matcher_count") == 1);
}

TEST_CASE("qmaxpool2d near misses: another output scale, the indices, a dequantize with a second user") {
  SUBCASE("the quantize has another scale") {
    PoolGraph t(0.1);
    CHECK(lowered(t, qmaxpool2d) == 0);
  }
  SUBCASE("getitem 1 (the indices) is quantized") {
    PoolGraph t(S, 1);
    CHECK(lowered(t, qmaxpool2d) == 0);
  }
  SUBCASE("the dequantize has a non-quant user") {
    PoolGraph t;
    CHECK(lowered(t, qmaxpool2d, t.g.call_function(aten::relu, {t.dq})) == 0);
  }
}

TEST_CASE("quantized.max_pool2d on uint8 and int8 equals a naive max over the int8 windows") {
  for (const DType d : {DType::uint8, DType::int8}) {
    CAPTURE(d);
    for (const bool ceil : {false, true}) {
      CAPTURE(ceil);
      const std::int64_t H = 8, W = 6, K = 3, ST = 2, P = 1;
      const std::int64_t OH = ceil ? 5 : 4, OW = ceil ? 4 : 3;
      Graph g;
      Node* x = g.placeholder("x", meta({2, 3, H, W}, d));
      Node* p = g.call_function(quantized::max_pool2d, {x, ArgList{K, K}, ArgList{ST, ST}, ArgList{P, P}, ArgList{1, 1}, ceil});
      p->meta.val = meta({2, 3, OH, OW}, d);
      g.output(ArgList{p});
      const Tensor in = u8({2, 3, H, W}, 7, d);
      const Tensor out = CompiledGraph::compile(g, {}).run({in})[0];
      REQUIRE(out.shape() == runtime::Shape{2, 3, OH, OW});
      REQUIRE(out.dtype() == d);
      int wrong = 0;
      for (std::int64_t nc = 0; nc < 6; ++nc)
        for (std::int64_t oh = 0; oh < OH; ++oh)
          for (std::int64_t ow = 0; ow < OW; ++ow) {
            int best = -1000;
            for (std::int64_t i = oh * ST - P; i < oh * ST - P + K; ++i)
              for (std::int64_t j = ow * ST - P; j < ow * ST - P + K; ++j)
                if (i >= 0 && i < H && j >= 0 && j < W) best = std::max(best, value(in, (nc * H + i) * W + j));
            wrong += value(out, (nc * OH + oh) * OW + ow) != best;
          }
      CHECK(wrong == 0);
    }
  }
  SUBCASE("a float32 input is refused, naming the dtype") {
    Graph g;
    Node* x = g.placeholder("x", meta({1, 1, 4, 4}));
    Node* p = g.call_function(quantized::max_pool2d, {x, ArgList{2, 2}, ArgList{2, 2}, ArgList{0, 0}, ArgList{1, 1}, false});
    p->meta.val = meta({1, 1, 2, 2});
    g.output(ArgList{p});
    CHECK(test::compile_error(g).find("uint8 or int8") != std::string::npos);
  }
}

namespace {

// qa [1, 2, 3], qb [1, 4, 3] -> dequantize each (b's scale `b_scale`) -> cat dim 1 -> quantize.
struct CatGraph {
  Graph g;
  Node *qa, *qb, *da, *db, *cat, *q;
  explicit CatGraph(double b_scale = S, std::int64_t out_zp = Z) {
    qa = g.placeholder("qa", meta({1, 2, 3}, DType::uint8));
    qb = g.placeholder("qb", meta({1, 4, 3}, DType::uint8));
    da = dequantize(g, qa, {1, 2, 3});
    db = dequantize(g, qb, {1, 4, 3}, b_scale);
    cat = g.call_function(aten::cat, {ArgList{da, db}, 1});
    cat->meta.val = meta({1, 6, 3});
    q = quantize(g, cat, {1, 6, 3}, S, out_zp);
  }
};

}  // namespace

TEST_CASE("qcat lowers a cat of dequantizes with one scale and zero point to a cat of the uint8 tensors, equal to a naive cat") {
  CatGraph t;
  t.g.output(ArgList{t.q});
  Counters c;
  CHECK(qcat(t.g, &c) == 1);
  lint(t.g);
  CHECK(count(t.g, quantized_decomposed::dequantize_per_tensor) == 0);
  CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 0);
  CHECK(c.get("qcat_matcher_count") == 1);
  CHECK(c.get("qcat_matcher_nodes") == 4);
  const Tensor a = u8({1, 2, 3}, 1), b = u8({1, 4, 3}, 2);
  const Tensor out = CompiledGraph::compile(t.g, {}).run({a, b})[0];
  REQUIRE(out.shape() == runtime::Shape{1, 6, 3});
  REQUIRE(out.dtype() == DType::uint8);
  int wrong = 0;
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t k = 0; k < 3; ++k) wrong += value(out, r * 3 + k) != (r < 2 ? value(a, r * 3 + k) : value(b, (r - 2) * 3 + k));
  CHECK(wrong == 0);
}

TEST_CASE("qcat near misses: differing input scales, another output zero point, a dequantize with a second user") {
  SUBCASE("the inputs' scales differ") {
    CatGraph t(0.07);
    CHECK(lowered(t, qcat) == 0);
  }
  SUBCASE("the quantize has another zero point") {
    CatGraph t(S, 0);
    CHECK(lowered(t, qcat) == 0);
  }
  SUBCASE("a dequantize has a non-quant user") {
    CatGraph t;
    CHECK(lowered(t, qcat, t.g.call_function(aten::relu, {t.db})) == 0);
  }
}

TEST_CASE("qreshape lowers dequantize, reshape, quantize of one scale to a reshape of the uint8 tensor, and its near misses") {
  const auto build = [](Graph& g, double out_scale) {
    Node* qx = g.placeholder("qx", meta({2, 6}, DType::uint8));
    Node* r = g.call_function(aten::reshape, {dequantize(g, qx, {2, 6}), ArgList{3, 4}});
    r->meta.val = meta({3, 4});
    return quantize(g, r, {3, 4}, out_scale);
  };
  SUBCASE("lowered, and equal to the input's values") {
    Graph g;
    g.output(ArgList{build(g, S)});
    Counters c;
    CHECK(qreshape(g, &c) == 1);
    lint(g);
    CHECK(count(g, quantized_decomposed::quantize_per_tensor) == 0);
    CHECK(c.get("qreshape_matcher_count") == 1);
    CHECK(c.get("qreshape_matcher_nodes") == 3);
    const Tensor x = u8({2, 6}, 3);
    const Tensor out = CompiledGraph::compile(g, {}).run({x})[0];
    REQUIRE(out.shape() == runtime::Shape{3, 4});
    int wrong = 0;
    for (std::int64_t i = 0; i < 12; ++i) wrong += value(out, i) != value(x, i);
    CHECK(wrong == 0);
  }
  SUBCASE("another output scale") {
    Graph g;
    g.output(ArgList{build(g, 0.1)});
    CHECK(qreshape(g) == 0);
  }
}

namespace {

// x [2, 3, 4] -> relu -> view [2, 12]... : relu -> permute [0, 2, 1] -> reshape [2, 12] -> quantize.
struct LiftGraph {
  Graph g;
  Node *x, *relu, *perm, *reshape, *q;
  LiftGraph() {
    x = g.placeholder("x", meta({2, 3, 4}));
    relu = g.call_function(aten::relu, {x});
    TensorMeta rm = meta({2, 3, 4});
    rm.stride = std::vector<Dim>{12, 4, 1};
    relu->meta.val = rm;
    perm = g.call_function(aten::permute, {relu, ArgList{0, 2, 1}});
    TensorMeta pm = meta({2, 4, 3});
    pm.stride = std::vector<Dim>{12, 1, 4};
    perm->meta.val = pm;
    reshape = g.call_function(aten::reshape, {perm, ArgList{2, 12}});
    reshape->meta.val = meta({2, 12});
    q = quantize(g, reshape, {2, 12});
  }
};

}  // namespace

TEST_CASE("quant_lift_up moves a per-tensor quantize above permute and reshape, and the result equals the unlifted graph") {
  LiftGraph t;
  t.g.output(ArgList{dequantize(t.g, t.q, {2, 12})});
  {
    LiftGraph r;
    r.g.output(ArgList{dequantize(r.g, r.q, {2, 12})});
    const Tensor x = test::random_tensor({2, 3, 4}, 5);
    const Tensor want = CompiledGraph::compile(r.g, {}).run({x})[0];
    Counters c;
    CHECK(quant_lift_up(t.g, &c) == 1);
    lint(t.g);
    CHECK(c.get("quant_lift_up_count") == 1);
    const auto qs = t.g.find_nodes(OpKind::call_function, quantized_decomposed::quantize_per_tensor);
    REQUIRE(qs.size() == 1);
    CHECK(qs[0]->arg(0).node() == t.relu);
    CHECK(t.perm->arg(0).node() == qs[0]);
    CHECK(t.reshape->meta.val.tensor()->dtype == DType::uint8);
    // The strides PyTorch gave stay recorded: the quantize's are its input's, a view's its own.
    CHECK(qs[0]->meta.val.tensor()->stride == std::optional<std::vector<Dim>>(std::vector<Dim>{12, 4, 1}));
    CHECK(t.perm->meta.val.tensor()->stride == std::optional<std::vector<Dim>>(std::vector<Dim>{12, 1, 4}));
    const Tensor got = CompiledGraph::compile(t.g, {}).run({x})[0];
    CHECK(test::max_abs_diff(got, want) == 0.0);
  }
}

TEST_CASE("quant_lift_up leaves a quantize whose views or their input have other users") {
  SUBCASE("a view has a second user") {
    LiftGraph t;
    CHECK(lowered(t, quant_lift_up, t.perm) == 0);
  }
  SUBCASE("the chain's input has a second user") {
    LiftGraph t;
    CHECK(lowered(t, quant_lift_up, t.relu) == 0);
  }
  SUBCASE("no view before the quantize") {
    Graph g;
    Node* x = g.placeholder("x", meta({2, 3}));
    Node* r = g.call_function(aten::relu, {x});
    r->meta.val = meta({2, 3});
    g.output(ArgList{quantize(g, r, {2, 3})});
    CHECK(quant_lift_up(g) == 0);
  }
}
