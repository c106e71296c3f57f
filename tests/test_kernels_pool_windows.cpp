// Pooling that oneDNN's primitive does not give, against naive loops written
// here: adaptive average and max pooling to sizes that do not divide the
// input's, max pooling's indices (aten.max_pool2d_with_indices, F's
// return_indices), average pooling with divisor_override; and layer norm's
// mean and rstd outputs. Odd sizes, strided (transposed-view) inputs, aten and
// torch levels, each through a whole compile + run.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::random_tensor;

namespace {

OpRef op(const char* name) { return OpRef(name); }

// The int64 at row-major position `flat` of a tensor of any strides.
std::int64_t index_at(const Tensor& t, std::int64_t flat) {
  std::int64_t off = 0;
  for (std::size_t k = t.rank(); k-- > 0;) {
    off += (flat % t.shape()[k]) * t.strides()[k];
    flat /= t.shape()[k];
  }
  return t.data<std::int64_t>()[off];
}

double worst_abs(const std::vector<double>& ref, const Tensor& out) {
  REQUIRE(static_cast<std::size_t>(out.numel()) == ref.size());
  double err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::abs(ref[i] - test::element(out, static_cast<std::int64_t>(i))));
  return err;
}

std::size_t index_mismatches(const std::vector<std::int64_t>& ref, const Tensor& idx) {
  REQUIRE(idx.dtype() == DType::int64);
  REQUIRE(static_cast<std::size_t>(idx.numel()) == ref.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) bad += index_at(idx, static_cast<std::int64_t>(i)) != ref[i];
  return bad;
}

// An NCHW input as the graph sees it: a placeholder holding [N, H, C, W]
// transposed back (a strided view), or a plain one.
struct Input {
  Tensor logical;  // [N, C, H, W], contiguous: what the references read
  Tensor given;    // what the graph's placeholder takes
  Node* node = nullptr;
};
Input make_input(Graph& g, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, bool strided, unsigned seed) {
  Input in;
  in.logical = random_tensor({N, C, H, W}, seed);
  in.given = strided ? Tensor::wrap(in.logical.raw(), runtime::transposed(in.logical.layout(), 1, 2)).contiguous() : in.logical;
  const auto& s = in.given.shape();
  in.node = g.placeholder("x", meta({s[0], s[1], s[2], s[3]}));
  if (strided) in.node = g.call_function(aten::transpose_int, {in.node, 1, 2});
  return in;
}

// Windows of one output position along one dim, as PyTorch's kernels take them.
struct Window {
  std::int64_t start, end, step, count;
};
Window adaptive_window(std::int64_t i, std::int64_t in, std::int64_t out) {
  const std::int64_t s = static_cast<std::int64_t>(std::floor(double(i) * in / out));
  const std::int64_t e = static_cast<std::int64_t>(std::ceil(double(i + 1) * in / out));
  return {s, e, 1, e - s};
}

// Naive 2-d pooling of `x` [N, C, H, W] over the windows `wh(i)` x `ww(j)`:
// the max (first one, flat index h * W + w) or the mean (sum / divisor).
template <class WH, class WW>
void naive_pool(const Tensor& x, std::int64_t OH, std::int64_t OW, WH wh, WW ww, bool max, std::optional<double> divisor,
                std::vector<double>& values, std::vector<std::int64_t>& indices) {
  const auto N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  values.assign(N * C * OH * OW, 0);
  indices.assign(N * C * OH * OW, -1);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < OH; ++i)
        for (std::int64_t j = 0; j < OW; ++j) {
          const Window a = wh(i), b = ww(j);
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          std::int64_t at = -1;
          for (std::int64_t h = a.start; h < a.end; h += a.step)
            for (std::int64_t w = b.start; w < b.end; w += b.step) {
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              const double v = x.data<float>()[((n * C + c) * H + h) * W + w];
              sum += v;
              if (v > best) best = v, at = h * W + w;
            }
          const std::int64_t o = ((n * C + c) * OH + i) * OW + j;
          values[o] = max ? best : sum / (divisor ? *divisor : double(a.count * b.count));
          indices[o] = at;
        }
}

}  // namespace

TEST_CASE("adaptive average and max pooling to sizes that do not divide, against PyTorch's floor/ceil windows") {
  struct Case {
    std::int64_t N, C, H, W, OH, OW;
    bool strided;
  };
  const Case cases[] = {{2, 3, 7, 33, 3, 5, true}, {1, 1, 1, 7, 1, 3, false}, {1, 4, 33, 7, 7, 7, true},
                        {2, 3, 7, 33, 7, 11, false}};  // the last divides: oneDNN's pooling
  for (const Case& c : cases) {
    CAPTURE(c.H);
    CAPTURE(c.OH);
    const bool divides = c.H % c.OH == 0 && c.W % c.OW == 0;
    Graph g;
    Input x = make_input(g, c.N, c.C, c.H, c.W, c.strided, 80);
    const ArgList size{c.OH, c.OW};
    Node* avg_aten = g.call_function(aten::adaptive_avg_pool2d, {x.node, size});
    Node* avg_f = g.call_function(op("torch.nn.functional.adaptive_avg_pool2d"), {x.node, size});
    Node* max_f = g.call_function(op("torch.nn.functional.adaptive_max_pool2d"), {x.node, size});
    Node* max_aten = g.call_function(op("aten.adaptive_max_pool2d.default"), {x.node, size});
    Node* max_with = g.call_function(op("torch.nn.functional.adaptive_max_pool2d"), {x.node, size}, {{"return_indices", Arg(true)}});
    g.output(ArgList{avg_aten, avg_f, max_f, g.call_function(op("operator.getitem"), {max_aten, 0}),
                     g.call_function(op("operator.getitem"), {max_aten, 1}), g.call_function(op("operator.getitem"), {max_with, 0}),
                     g.call_function(op("operator.getitem"), {max_with, 1})});
    auto cg = CompiledGraph::compile(g, {});
    // Sizes that divide keep oneDNN's primitive where no index is read (it names its implementation).
    std::size_t onednn_steps = 0;
    for (std::size_t k = 0; k < cg.num_steps(); ++k) onednn_steps += !cg.step(k).implementation.empty();
    CHECK(onednn_steps == (divides ? 3u : 0u));
    const auto out = cg.run({x.given});
    std::vector<double> avg, mx;
    std::vector<std::int64_t> idx, unused;
    auto wh = [&](std::int64_t i) { return adaptive_window(i, c.H, c.OH); };
    auto ww = [&](std::int64_t j) { return adaptive_window(j, c.W, c.OW); };
    naive_pool(x.logical, c.OH, c.OW, wh, ww, false, std::nullopt, avg, unused);
    naive_pool(x.logical, c.OH, c.OW, wh, ww, true, std::nullopt, mx, idx);
    REQUIRE(out[0].shape() == runtime::Shape{c.N, c.C, c.OH, c.OW});
    CHECK(worst_abs(avg, out[0]) < 1e-5);
    CHECK(worst_abs(avg, out[1]) < 1e-5);
    CHECK(worst_abs(mx, out[2]) == 0);
    CHECK(worst_abs(mx, out[3]) == 0);
    CHECK(index_mismatches(idx, out[4]) == 0);
    CHECK(worst_abs(mx, out[5]) == 0);
    CHECK(index_mismatches(idx, out[6]) == 0);
  }
}

TEST_CASE("max pooling with its indices read: padding, stride, dilation, ceil mode, at the aten and torch levels") {
  struct Case {
    std::int64_t N, C, H, W, K, S, P, D;
    bool ceil, strided;
  };
  const Case cases[] = {{2, 3, 7, 33, 3, 2, 1, 1, true, true}, {1, 2, 9, 8, 2, 1, 0, 2, false, false},
                        {1, 1, 1, 7, 1, 1, 0, 1, false, true}, {1, 5, 33, 7, 3, 3, 1, 2, true, false}};
  for (const Case& c : cases) {
    CAPTURE(c.H);
    CAPTURE(c.K);
    CAPTURE(c.D);
    Graph g;
    Input x = make_input(g, c.N, c.C, c.H, c.W, c.strided, 81);
    const ArgList k{c.K, c.K}, s{c.S, c.S}, p{c.P, c.P}, d{c.D, c.D};
    Node* a = g.call_function(aten::max_pool2d_with_indices, {x.node, k, s, p, d, c.ceil});
    Node* f = g.call_function(op("torch.nn.functional.max_pool2d"), {x.node, c.K},
                              {{"stride", Arg(c.S)}, {"padding", Arg(c.P)}, {"dilation", Arg(c.D)}, {"ceil_mode", Arg(c.ceil)},
                               {"return_indices", Arg(true)}});
    Node* fw = g.call_function(op("torch.nn.functional.max_pool2d_with_indices"), {x.node, k, s, p, d, c.ceil});
    Node* plain = g.call_function(op("torch.nn.functional.max_pool2d"), {x.node, k, s, p, d, c.ceil});  // oneDNN's
    auto item = [&](Node* n, std::int64_t i) { return Arg(g.call_function(op("operator.getitem"), {n, i})); };
    g.output(ArgList{item(a, 0), item(a, 1), item(f, 0), item(f, 1), item(fw, 1), plain});
    auto cg = CompiledGraph::compile(g, {});
    const auto out = cg.run({x.given});
    // PyTorch's output size, as the kernels compute it.
    auto osize = [&](std::int64_t n) {
      const std::int64_t span = n + 2 * c.P - c.D * (c.K - 1) - 1;
      std::int64_t o = (c.ceil ? (span + c.S - 1) / c.S : span / c.S) + 1;
      if (c.ceil && (o - 1) * c.S >= n + c.P) --o;
      return o;
    };
    const std::int64_t OH = osize(c.H), OW = osize(c.W);
    auto win = [&](std::int64_t i) { return Window{i * c.S - c.P, i * c.S - c.P + c.D * (c.K - 1) + 1, c.D, 0}; };
    std::vector<double> mx;
    std::vector<std::int64_t> idx;
    naive_pool(x.logical, OH, OW, win, win, true, std::nullopt, mx, idx);
    REQUIRE(out[0].shape() == runtime::Shape{c.N, c.C, OH, OW});
    CHECK(worst_abs(mx, out[0]) == 0);
    CHECK(index_mismatches(idx, out[1]) == 0);
    CHECK(worst_abs(mx, out[2]) == 0);
    CHECK(index_mismatches(idx, out[3]) == 0);
    CHECK(index_mismatches(idx, out[4]) == 0);
    CHECK(worst_abs(mx, out[5]) == 0);
  }
}

TEST_CASE("average pooling with divisor_override divides every window's sum by it") {
  struct Case {
    std::int64_t N, C, H, W, K, S, P, divisor;
    bool ceil, include_pad, strided;
  };
  const Case cases[] = {{2, 3, 7, 33, 3, 2, 1, 5, true, true, true}, {1, 2, 9, 8, 2, 2, 0, 3, false, false, false},
                        {1, 1, 1, 7, 1, 1, 0, 7, false, true, true}, {1, 4, 33, 7, 3, 1, 1, 2, true, false, false}};
  for (const Case& c : cases) {
    CAPTURE(c.H);
    CAPTURE(c.divisor);
    Graph g;
    Input x = make_input(g, c.N, c.C, c.H, c.W, c.strided, 82);
    Node* a = g.call_function(aten::avg_pool2d, {x.node, ArgList{c.K, c.K}, ArgList{c.S, c.S}, ArgList{c.P, c.P}, c.ceil, c.include_pad,
                                                 c.divisor});
    Node* f = g.call_function(op("torch.nn.functional.avg_pool2d"), {x.node, c.K},
                              {{"stride", Arg(c.S)}, {"padding", Arg(c.P)}, {"ceil_mode", Arg(c.ceil)},
                               {"count_include_pad", Arg(c.include_pad)}, {"divisor_override", Arg(c.divisor)}});
    g.output(ArgList{a, f});
    const auto out = CompiledGraph::compile(g, {}).run({x.given});
    auto osize = [&](std::int64_t n) {
      const std::int64_t span = n + 2 * c.P - c.K;
      std::int64_t o = (c.ceil ? (span + c.S - 1) / c.S : span / c.S) + 1;
      if (c.ceil && (o - 1) * c.S >= n + c.P) --o;
      return o;
    };
    const std::int64_t OH = osize(c.H), OW = osize(c.W);
    auto win = [&](std::int64_t i) { return Window{i * c.S - c.P, i * c.S - c.P + c.K, 1, 0}; };
    std::vector<double> ref;
    std::vector<std::int64_t> unused;
    naive_pool(x.logical, OH, OW, win, win, false, double(c.divisor), ref, unused);
    REQUIRE(out[0].shape() == runtime::Shape{c.N, c.C, OH, OW});
    CHECK(worst_abs(ref, out[0]) < 1e-5);
    CHECK(worst_abs(ref, out[1]) < 1e-5);
  }
}

TEST_CASE("native_layer_norm gives its mean and rstd where they are read, shaped [*, 1...] as PyTorch does") {
  struct Case {
    std::vector<std::int64_t> shape;
    std::size_t normalized;  // trailing dims normalized over
    bool affine, strided;
  };
  const Case cases[] = {{{2, 7, 33}, 1, true, false}, {{3, 4, 7}, 2, false, true}, {{1, 1}, 1, true, false}, {{33, 5}, 1, false, true}};
  for (const Case& c : cases) {
    CAPTURE(c.shape.size());
    CAPTURE(c.normalized);
    CAPTURE(c.strided);
    const std::size_t r = c.shape.size();
    const Tensor logical = random_tensor(c.shape, 83);
    // Strided: the placeholder holds the last two dims swapped; a transpose gives the input back.
    const Tensor given =
        c.strided ? Tensor::wrap(logical.raw(), runtime::transposed(logical.layout(), r - 2, r - 1)).contiguous() : logical;
    Graph g;
    Node* x = g.placeholder("x", meta(std::vector<Dim>(given.shape().begin(), given.shape().end())));
    if (c.strided) x = g.call_function(aten::transpose_int, {x, static_cast<std::int64_t>(r - 2), static_cast<std::int64_t>(r - 1)});
    std::vector<std::int64_t> norm(c.shape.end() - static_cast<std::ptrdiff_t>(c.normalized), c.shape.end());
    std::int64_t C = 1;
    for (std::int64_t v : norm) C *= v;
    const std::int64_t R = logical.numel() / C;
    ArgList norm_arg;
    for (std::int64_t v : norm) norm_arg.push_back(Arg(v));
    Node* w = c.affine ? g.placeholder("w", meta(std::vector<Dim>(norm.begin(), norm.end()))) : nullptr;
    Node* b = c.affine ? g.placeholder("b", meta(std::vector<Dim>(norm.begin(), norm.end()))) : nullptr;
    Node* ln = g.call_function(aten::native_layer_norm, {x, norm_arg, w ? Arg(w) : Arg(), b ? Arg(b) : Arg(), 1e-3});
    ArgList outs;
    for (std::int64_t i : {0, 1, 2}) outs.push_back(g.call_function(op("operator.getitem"), {ln, i}));
    g.output(outs);
    const Tensor tw = random_tensor(norm, 84), tb = random_tensor(norm, 85);
    std::vector<Tensor> ins{given};
    if (c.affine) ins.push_back(tw), ins.push_back(tb);
    const auto out = CompiledGraph::compile(g, {}).run(std::span<const Tensor>(ins));
    runtime::Shape stat_shape(c.shape.begin(), c.shape.end() - static_cast<std::ptrdiff_t>(c.normalized));
    stat_shape.resize(r, 1);
    REQUIRE(out[1].shape() == stat_shape);
    REQUIRE(out[2].shape() == stat_shape);
    std::vector<double> ry(logical.numel()), rmean(R), rrstd(R);
    for (std::int64_t row = 0; row < R; ++row) {
      const float* v = logical.data<float>() + row * C;
      double m = 0, var = 0;
      for (std::int64_t i = 0; i < C; ++i) m += v[i];
      m /= C;
      for (std::int64_t i = 0; i < C; ++i) var += (v[i] - m) * (v[i] - m);
      var /= C;
      rmean[row] = m;
      rrstd[row] = 1 / std::sqrt(var + 1e-3);
      for (std::int64_t i = 0; i < C; ++i)
        ry[row * C + i] = (v[i] - m) * rrstd[row] * (c.affine ? tw.data<float>()[i] : 1.0) + (c.affine ? tb.data<float>()[i] : 0.0);
    }
    CHECK(worst_abs(ry, out[0]) < 1e-4);
    CHECK(worst_abs(rmean, out[1]) < 1e-5);
    double rel = 0;
    for (std::int64_t i = 0; i < R; ++i) rel = std::max(rel, std::abs(test::element(out[2], i) - rrstd[i]) / rrstd[i]);
    CHECK(rel < 1e-5);
  }
}

TEST_CASE("pooling refuses a stride, kernel_size or dilation below 1 and a negative padding, naming them") {
  struct Case {
    std::int64_t K, S, P, D;
  };
  for (const Case& c : {Case{2, 0, 0, 1}, Case{0, 1, 0, 1}, Case{2, 1, -1, 1}, Case{2, 1, 0, 0}}) {
    CAPTURE(c.S);
    CAPTURE(c.K);
    Graph g;
    Node* x = g.placeholder("x", meta({1, 2, 6, 6}));
    Node* m = g.call_function(op("aten.max_pool2d.default"), {x, ArgList{c.K, c.K}, ArgList{c.S, c.S}, ArgList{c.P, c.P}, ArgList{c.D, c.D}});
    g.output(ArgList{m});
    CHECK_THROWS_WITH(CompiledGraph::compile(g, {}),
                      doctest::Contains("kernel_size, stride and dilation must be positive and padding not negative"));
  }
}
