// cosine_similarity and pairwise_distance (kernels/distances.hpp) at the
// torch, aten and module levels, against loops written here over broadcast
// indices, with eps large enough to clamp; and the errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::Dims;
using test::dims_of;
using test::max_rel;
using test::error_of;
using test::random_tensor;

namespace {

// t at the multi-index `idx` of a broadcast shape (t's dims aligned right; a size-1 dim reads index 0).
float broadcast_at(const Tensor& t, const Dims& idx) {
  const std::size_t lead = idx.size() - t.rank();
  std::int64_t off = 0;
  for (std::size_t k = 0; k < t.rank(); ++k) off += (t.shape()[k] == 1 ? 0 : idx[lead + k]) * t.strides()[k];
  return t.data<float>()[off];
}

// For every index of `shape` with dim `d` left out: f(the line of (a, b) along d), in row-major order.
std::vector<double> per_line(const Tensor& a, const Tensor& b, const runtime::Shape& shape, std::size_t d,
                             const std::function<double(const std::vector<float>&, const std::vector<float>&)>& f) {
  std::vector<double> out;
  Dims idx(shape.size(), 0);
  for (bool more = true; more;) {
    std::vector<float> xa, xb;
    for (idx[d] = 0; idx[d] < shape[d]; ++idx[d]) xa.push_back(broadcast_at(a, idx)), xb.push_back(broadcast_at(b, idx));
    idx[d] = 0;
    out.push_back(f(xa, xb));
    more = false;
    for (std::size_t k = shape.size(); k-- > 0;) {
      if (k == d) continue;
      if (++idx[k] < shape[k]) {
        more = true;
        break;
      }
      idx[k] = 0;
    }
  }
  return out;
}

double cosine(const std::vector<float>& x, const std::vector<float>& y, double eps) {
  double dot = 0, nx = 0, ny = 0;
  for (std::size_t k = 0; k < x.size(); ++k) dot += double(x[k]) * y[k], nx += double(x[k]) * x[k], ny += double(y[k]) * y[k];
  return dot / (std::max(std::sqrt(nx), eps) * std::max(std::sqrt(ny), eps));
}

double distance(const std::vector<float>& x, const std::vector<float>& y, double p, float eps) {
  std::vector<double> d;
  for (std::size_t k = 0; k < x.size(); ++k) d.push_back(std::abs(double(x[k] - y[k] + eps)));
  if (std::isinf(p)) return p > 0 ? *std::max_element(d.begin(), d.end()) : *std::min_element(d.begin(), d.end());
  if (p == 0) return static_cast<double>(std::count_if(d.begin(), d.end(), [](double v) { return v != 0; }));
  double s = 0;
  for (double v : d) s += std::pow(v, p);
  return std::pow(s, 1 / p);
}


}  // namespace

TEST_CASE("cosine_similarity broadcasts, reduces along dim and clamps each norm by eps, at torch and aten level") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3, 4}));
  Node* y = g.placeholder("y", meta({4, 1}));
  Node* t = g.call_function(aten::transpose_int, {x, 1, 2});  // [2, 4, 3], strided
  Node* c0 = g.call_function(OpRef("torch.cosine_similarity"), {t, y});            // dim 1, eps 1e-8
  Node* c1 = g.call_function(OpRef("torch.nn.functional.cosine_similarity"), {t, y}, {{"dim", Arg(-1)}, {"eps", Arg(2.0)}});
  Node* c2 = g.call_function(OpRef("aten.cosine_similarity.default"), {x, x, 0, 0.5});
  g.output(ArgList{c0, c1, c2});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tx = random_tensor({2, 3, 4}, 71), ty = random_tensor({4, 1}, 72);
  const auto out = cg.run({tx, ty});
  // x transposed as the reference reads it: an explicit copy.
  Tensor txt = Tensor::empty({2, 4, 3});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 3; ++k) txt.data<float>()[(i * 4 + j) * 3 + k] = test::at(tx, {i, k, j});
  CHECK(out[0].shape() == runtime::Shape{2, 3});
  CHECK(out[1].shape() == runtime::Shape{2, 4});
  CHECK(out[2].shape() == runtime::Shape{3, 4});
  CHECK(max_rel(out[0], per_line(txt, ty, {2, 4, 3}, 1, [](auto& a, auto& b) { return cosine(a, b, 1e-8); })) < 1e-6);
  CHECK(max_rel(out[1], per_line(txt, ty, {2, 4, 3}, 2, [](auto& a, auto& b) { return cosine(a, b, 2.0); })) < 1e-6);
  CHECK(max_rel(out[2], per_line(tx, tx, {2, 3, 4}, 0, [](auto& a, auto& b) { return cosine(a, b, 0.5); })) < 1e-6);
  // eps = 2 exceeds some of these norms (|N(0,1)| over 3 elements): the clamp is exercised.
  int clamped = 0;
  per_line(txt, ty, {2, 4, 3}, 2, [&](auto& a, auto&) {
    clamped += cosine(a, a, 1e-8) != cosine(a, a, 2.0);
    return 0.0;
  });
  CHECK(clamped > 0);
}

TEST_CASE("pairwise_distance is the p-norm of x1 - x2 + eps over the last dim, for p = 2, 1, 3.5, 0 and inf, keepdim") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 5}));
  Node* y = g.placeholder("y", meta({5}));
  Node* xt = g.call_function(aten::t, {g.placeholder("z", meta({5, 3}))});  // [3, 5], strided
  std::vector<std::pair<double, float>> forms{{2.0, 1e-6f}, {1.0, 0.25f}, {3.5, 1e-6f}, {0.0, 0.0f},
                                              {std::numeric_limits<double>::infinity(), 1e-6f},
                                              {-std::numeric_limits<double>::infinity(), 1e-6f}};
  ArgList outs;
  outs.push_back(g.call_function(OpRef("torch.pairwise_distance"), {x, y}));
  for (const auto& [p, eps] : forms)
    outs.push_back(g.call_function(OpRef("aten.pairwise_distance.default"), {xt, y, p, double(eps), false}));
  outs.push_back(g.call_function(OpRef("torch.nn.functional.pairwise_distance"), {x, xt}, {{"keepdim", Arg(true)}, {"p", Arg(1.5)}}));
  g.output(outs);
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({3, 5}, 81), ty = random_tensor({5}, 82), tz = random_tensor({5, 3}, 83);
  tz.data<float>()[0] = tx.data<float>()[0];  // one exact zero difference, for p = 0 with eps 0
  ty.data<float>()[1] = test::at(tz, {1, 0});
  const auto out = cg.run({tx, ty, tz});
  Tensor tzt = Tensor::empty({3, 5});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 5; ++j) tzt.data<float>()[i * 5 + j] = test::at(tz, {j, i});
  CHECK(out[0].shape() == runtime::Shape{3});
  CHECK(max_rel(out[0], per_line(tx, ty, {3, 5}, 1, [](auto& a, auto& b) { return distance(a, b, 2.0, 1e-6f); })) < 1e-6);
  for (std::size_t i = 0; i < forms.size(); ++i) {
    const double p = forms[i].first;
    const float eps = forms[i].second;
    CAPTURE(p);
    CHECK(max_rel(out[1 + i], per_line(tzt, ty, {3, 5}, 1, [&](auto& a, auto& b) { return distance(a, b, p, eps); })) < 1e-6);
  }
  CHECK(out.back().shape() == runtime::Shape{3, 1});
  CHECK(max_rel(out.back(), per_line(tx, tzt, {3, 5}, 1, [](auto& a, auto& b) { return distance(a, b, 1.5, 1e-6f); })) < 1e-6);
}

TEST_CASE("the CosineSimilarity and PairwiseDistance modules lower as their functions, with their attributes") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 6}));
  Node* y = g.placeholder("y", meta({2, 6}));
  g.modules().set(ModuleInfo{"cos", "torch.nn.modules.distance.CosineSimilarity", {{"attrs", R"({"dim":0,"eps":1e-8})"}}});
  g.modules().set(ModuleInfo{"dist", "torch.nn.modules.distance.PairwiseDistance",
                             {{"attrs", R"({"norm":3.0,"eps":0.5,"keepdim":true})"}}});
  Node* c = g.call_module("cos", {x}, {{"x2", Arg(y)}});
  Node* d = g.call_module("dist", {x, y});
  g.output(ArgList{c, d});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tx = random_tensor({2, 6}, 91), ty = random_tensor({2, 6}, 92);
  const auto out = cg.run({tx, ty});
  CHECK(out[0].shape() == runtime::Shape{6});
  CHECK(out[1].shape() == runtime::Shape{2, 1});
  CHECK(max_rel(out[0], per_line(tx, ty, {2, 6}, 0, [](auto& a, auto& b) { return cosine(a, b, 1e-8); })) < 1e-6);
  CHECK(max_rel(out[1], per_line(tx, ty, {2, 6}, 1, [](auto& a, auto& b) { return distance(a, b, 3.0, 0.5f); })) < 1e-6);

  Graph h;
  h.modules().set(ModuleInfo{"cos", "torch.nn.modules.distance.CosineSimilarity", {{"attrs", R"({"dim":1,"eps":1e-8})"}}});
  h.output(ArgList{h.call_module("cos", {h.placeholder("x", meta({2, 6}))}, {}, "one")});
  CHECK(error_of([&] { (void)CompiledGraph::compile(h, {}); }) ==
        "node one (cos): torch.nn.modules.distance.CosineSimilarity is called with 1 arguments; its kernel takes 2 inputs");
}

TEST_CASE("cosine_similarity and pairwise_distance refuse other dtypes, a dim out of range and shapes that do not broadcast") {
  auto refused = [](const char* target, runtime::Shape a, runtime::Shape b, ArgList extra, DType dt = DType::float32) {
    Graph g;
    ArgList args{g.placeholder("a", meta(dims_of(a), dt)), g.placeholder("b", meta(dims_of(b)))};
    args.insert(args.end(), extra.begin(), extra.end());
    g.output(ArgList{g.call_function(OpRef(target), std::move(args), {}, "bad")});
    return error_of([&] { (void)CompiledGraph::compile(g, {}); });
  };
  CHECK(refused("torch.cosine_similarity", {2, 3}, {2, 3}, {}, DType::int64) ==
        "node bad (torch.cosine_similarity): takes float32 inputs, got int64 and float32");
  CHECK(refused("torch.cosine_similarity", {2, 3}, {2, 3}, {2}).find("node bad (torch.cosine_similarity): dim 2") == 0);
  CHECK(refused("torch.pairwise_distance", {2, 3}, {4}, {}) ==
        "node bad (torch.pairwise_distance): shapes [2, 3] and [4] do not broadcast");
  CHECK(refused("aten.pairwise_distance.default", {2, 3}, {3}, {std::nan("")}) ==
        "node bad (aten.pairwise_distance.default): p is nan");
}
