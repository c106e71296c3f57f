// Reductions (sum, mean, amax, amin, the p-norms and F.normalize) at every level
// against naive loops, over dim lists with negative dims and keepdim, on
// transposed and odd-sized inputs.
#include <doctest/doctest.h>

#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::random_tensor;

namespace {

enum class Kind { sum, mean, amax, amin, norm1, norm2, norm_inf, norm_neg_inf, norm0, norm_p };

// The naive reduction of `in` over `dims` (all when empty), as a contiguous tensor of the kept shape.
std::vector<double> naive(const Tensor& in, std::vector<std::int64_t> dims, Kind kind, runtime::Shape& out_shape,
                          bool keepdim, double order = 2) {
  const auto rank = static_cast<std::int64_t>(in.rank());
  std::vector<bool> red(in.rank(), dims.empty());
  for (auto d : dims) red[d < 0 ? d + rank : d] = true;
  out_shape.clear();
  for (std::size_t k = 0; k < in.rank(); ++k)
    if (!red[k]) out_shape.push_back(in.shape()[k]);
    else if (keepdim) out_shape.push_back(1);
  std::int64_t out_n = 1;
  for (std::size_t k = 0; k < in.rank(); ++k)
    if (!red[k]) out_n *= in.shape()[k];
  const double init = kind == Kind::norm_inf ? 0.0
                      : kind == Kind::amax ? -std::numeric_limits<double>::infinity()
                      : kind == Kind::amin || kind == Kind::norm_neg_inf ? std::numeric_limits<double>::infinity()
                                           : 0.0;
  std::vector<double> acc(out_n, init);
  std::vector<std::int64_t> count(out_n, 0);
  std::vector<std::int64_t> idx(in.rank(), 0);
  for (std::int64_t i = 0; i < in.numel(); ++i) {
    std::int64_t r = i, o = 0, mul = 1;
    for (std::int64_t k = rank - 1; k >= 0; --k) {
      idx[k] = r % in.shape()[k];
      r /= in.shape()[k];
    }
    for (std::int64_t k = rank - 1; k >= 0; --k)
      if (!red[k]) o += idx[k] * mul, mul *= in.shape()[k];
    double v = in.dtype() == DType::float32 ? double(in.at<float>(idx)) : double(in.at<std::int64_t>(idx));
    if (kind == Kind::norm1 || kind == Kind::norm_inf || kind == Kind::norm_neg_inf) v = std::abs(v);
    if (kind == Kind::norm2) v = v * v;
    if (kind == Kind::norm_p) v = std::pow(std::abs(v), order);
    if (kind == Kind::norm0) v = v != 0;
    if (kind == Kind::amax || kind == Kind::norm_inf) acc[o] = std::max(acc[o], v);
    else if (kind == Kind::amin || kind == Kind::norm_neg_inf) acc[o] = std::min(acc[o], v);
    else acc[o] += v;
    ++count[o];
  }
  if (kind == Kind::mean)
    for (std::int64_t o = 0; o < out_n; ++o) acc[o] /= double(count[o]);
  if (kind == Kind::norm2)
    for (std::int64_t o = 0; o < out_n; ++o) acc[o] = std::sqrt(acc[o]);
  if (kind == Kind::norm_p)
    for (std::int64_t o = 0; o < out_n; ++o) acc[o] = std::pow(acc[o], 1 / order);
  return acc;
}

void check_reduce(std::string_view target, Kind kind, runtime::Shape shape, std::optional<std::vector<std::int64_t>> dims,
                  bool keepdim, bool transposed = true, DType dt = DType::float32, bool method = false,
                  int threads = 1, std::optional<Arg> p = std::nullopt) {
  CAPTURE(target);
  CAPTURE(runtime::shape_str(shape));
  CAPTURE(keepdim);
  Graph g;
  Node* x = g.placeholder("x", test::meta({shape.begin(), shape.end()}, dt));
  ArgList args{x};
  if (p) args.push_back(*p);  // a norm's p (or ord) comes before its dims
  ArgDict kwargs;
  if (dims) {
    ArgList l;
    for (auto d : *dims) l.push_back(Arg(d));
    if (dims->size() == 1) args.push_back(Arg((*dims)[0]));  // an int dim, as x.sum(1) writes it
    else args.push_back(Arg(l));
    kwargs.set("keepdim", Arg(keepdim));
  }
  Node* y = method ? g.call_method(target, args, kwargs) : g.call_function(OpRef(target), args, kwargs);
  g.output(ArgList{y});
  runtime::CompileOptions opts;
  opts.threads = threads;
  auto cg = CompiledGraph::compile(g, {}, opts);
  // A transposed input: the last two dims swapped in memory.
  Tensor in = random_tensor(shape, 5, dt);
  if (transposed && shape.size() >= 2) {
    runtime::Shape swapped = shape;
    std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
    const auto r = static_cast<std::int64_t>(shape.size());
    in = random_tensor(swapped, 5, dt).transpose(r - 1, r - 2);
  }
  auto out = cg.run({in});
  runtime::Shape want_shape;
  double order = 2;
  if (p && p->get_if<double>()) order = *p->get_if<double>();
  if (p && p->get_if<std::int64_t>()) order = static_cast<double>(*p->get_if<std::int64_t>());
  const auto want = naive(in, dims.value_or(std::vector<std::int64_t>{}), kind, want_shape, dims && keepdim, order);
  REQUIRE(out[0].shape() == want_shape);
  CHECK(out[0].dtype() == dt);
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double got = dt == DType::float32 ? double(out[0].data<float>()[i]) : double(out[0].data<std::int64_t>()[i]);
    if (std::abs(got - want[i]) > 1e-4 * (1 + std::abs(want[i]))) {
      if (bad < 3) MESSAGE("element " << i << ": got " << got << ", want " << want[i]);
      ++bad;
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("mean and sum over dim lists, negative dims and keepdim at every level") {
  for (bool keepdim : {false, true}) {
    check_reduce("aten.mean.dim", Kind::mean, {2, 3, 7, 7}, std::vector<std::int64_t>{-1, -2}, keepdim);
    check_reduce("aten.mean.dim", Kind::mean, {2, 3, 7, 7}, std::vector<std::int64_t>{-1, -2}, keepdim, false);
    check_reduce("torch.mean", Kind::mean, {33, 7}, std::vector<std::int64_t>{0}, keepdim);
    check_reduce("mean", Kind::mean, {5, 33, 7}, std::vector<std::int64_t>{1}, keepdim, true, DType::float32, true);
    check_reduce("aten.sum.dim_IntList", Kind::sum, {5, 33, 7}, std::vector<std::int64_t>{0, 2}, keepdim);
    check_reduce("torch.sum", Kind::sum, {1, 33}, std::vector<std::int64_t>{-1}, keepdim);
    check_reduce("sum", Kind::sum, {7, 1, 3}, std::vector<std::int64_t>{1}, keepdim, true, DType::float32, true);
  }
  check_reduce("aten.mean.default", Kind::mean, {33, 7}, std::nullopt, false);
  check_reduce("aten.sum.default", Kind::sum, {7}, std::nullopt, false);
  check_reduce("torch.sum", Kind::sum, {1}, std::nullopt, false);
  check_reduce("torch.sum", Kind::sum, {5, 7}, std::vector<std::int64_t>{1}, false, true, DType::int64);
}

TEST_CASE("amax and amin over dims") {
  for (bool keepdim : {false, true}) {
    check_reduce("aten.amax.default", Kind::amax, {33, 7}, std::vector<std::int64_t>{1}, keepdim);
    check_reduce("torch.amax", Kind::amax, {5, 7, 33}, std::vector<std::int64_t>{0, -1}, keepdim);
    check_reduce("aten.amin.default", Kind::amin, {5, 7, 33}, std::vector<std::int64_t>{1}, keepdim);
    check_reduce("amin", Kind::amin, {33, 7}, std::vector<std::int64_t>{0}, keepdim, true, DType::int64, true);
  }
  check_reduce("aten.amax.default", Kind::amax, {7, 33}, std::nullopt, false);
}

TEST_CASE("a large mean runs over several threads") {
  check_reduce("aten.mean.dim", Kind::mean, {8, 64, 9, 9}, std::vector<std::int64_t>{-1, -2}, true, false,
               DType::float32, false, 4);
  check_reduce("torch.sum", Kind::sum, {257, 300}, std::vector<std::int64_t>{0}, false, true, DType::float32, false, 4);
}

TEST_CASE("the dtype keyword may be None") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({3, 5}));
  g.output(ArgList{g.call_function(OpRef("torch.mean"), {x}, {{"dim", Arg(ArgList{Arg(1)})}, {"dtype", Arg()}})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor in = random_tensor({3, 5}, 8);
  auto out = cg.run({in});
  REQUIRE(out[0].shape() == runtime::Shape{3});
  for (int i = 0; i < 3; ++i) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += in.data<float>()[i * 5 + j];
    CHECK(out[0].data<float>()[i] == doctest::Approx(s / 5).epsilon(1e-5));
  }
}

TEST_CASE("a reduction over a dim out of range, or a mean of int64, is refused naming the node") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({3, 5}));
  g.output(ArgList{g.call_function(OpRef("aten.sum.dim_IntList"), {x, ArgList{Arg(2)}}, {}, "bad_sum")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       doctest::Contains("node bad_sum (aten.sum.dim_IntList): dim 2 is out of range for a tensor of rank 2"),
                       runtime::CompileError);
  Graph h;
  Node* y = h.placeholder("y", test::meta({3, 5}, DType::int64));
  h.output(ArgList{h.call_function(OpRef("torch.mean"), {y}, {}, "int_mean")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("node int_mean (torch.mean): input is int64"),
                       runtime::CompileError);
}

TEST_CASE("the p-norms over dims (1, 2, inf, -inf, 0 and any other p), keepdim, at the aten, torch and method levels") {
  const double inf = std::numeric_limits<double>::infinity();
  for (bool keepdim : {false, true}) {
    check_reduce("aten.norm.ScalarOpt_dim", Kind::norm2, {2, 3, 7}, std::vector<std::int64_t>{-1}, keepdim, true,
                 DType::float32, false, 1, Arg(2));
    check_reduce("aten.linalg_vector_norm.default", Kind::norm1, {5, 33, 7}, std::vector<std::int64_t>{0, 2}, keepdim,
                 true, DType::float32, false, 1, Arg(1.0));
    check_reduce("torch.norm", Kind::norm_inf, {33, 7}, std::vector<std::int64_t>{0}, keepdim, true, DType::float32,
                 false, 1, Arg(inf));
    check_reduce("norm", Kind::norm2, {4, 9}, std::vector<std::int64_t>{1}, keepdim, true, DType::float32, true, 1,
                 Arg(std::string("fro")));
    // Other p: pairwise_distance's norm at aten level takes its p as it is.
    check_reduce("aten.norm.ScalarOpt_dim", Kind::norm_p, {2, 3, 7}, std::vector<std::int64_t>{-1}, keepdim, true,
                 DType::float32, false, 1, Arg(1.5));
    check_reduce("torch.norm", Kind::norm_p, {5, 33, 7}, std::vector<std::int64_t>{0, 2}, keepdim, true, DType::float32,
                 false, 1, Arg(3));
    check_reduce("aten.linalg_vector_norm.default", Kind::norm_p, {4, 9}, std::vector<std::int64_t>{1}, keepdim, true,
                 DType::float32, false, 1, Arg(-2.5));
    check_reduce("torch.linalg.vector_norm", Kind::norm_neg_inf, {33, 7}, std::vector<std::int64_t>{0}, keepdim, true,
                 DType::float32, false, 1, Arg(-inf));
    check_reduce("aten.norm.ScalarOpt_dim", Kind::norm0, {6, 5}, std::vector<std::int64_t>{1}, keepdim, true,
                 DType::float32, false, 1, Arg(0.0));
  }
  check_reduce("aten.norm.Scalar", Kind::norm2, {6, 5}, std::nullopt, false, true, DType::float32, false, 1, Arg(2.0));
  check_reduce("torch.linalg.vector_norm", Kind::norm2, {300, 257}, std::vector<std::int64_t>{1}, false, true,
               DType::float32, false, 4, Arg());  // ord None is 2; several threads
}

TEST_CASE("norms refuse a matrix norm's name, a nan p and integer inputs, naming the node") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({3, 5}));
  g.output(ArgList{g.call_function(OpRef("aten.norm.ScalarOpt_dim"), {x, std::string("nuc"), ArgList{Arg(1)}}, {}, "nuc")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       doctest::Contains("node nuc (aten.norm.ScalarOpt_dim): p 'nuc' is not supported; numbers and 'fro' are"),
                       runtime::CompileError);
  Graph n;
  Node* z = n.placeholder("z", test::meta({3, 5}));
  n.output(ArgList{n.call_function(OpRef("torch.norm"), {z, std::nan("")}, {}, "nan")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(n, {}), doctest::Contains("node nan (torch.norm): p is nan"), runtime::CompileError);
  Graph h;
  Node* y = h.placeholder("y", test::meta({3, 5}, DType::int64));
  h.output(ArgList{h.call_function(OpRef("aten.linalg_vector_norm.default"), {y}, {}, "int_norm")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("node int_norm (aten.linalg_vector_norm.default): input is int64"),
                       runtime::CompileError);
}

TEST_CASE("F.normalize divides by the p-norm along dim, at least eps, against a loop") {
  struct Case {
    ArgList args;
    ArgDict kwargs;
    std::int64_t dim;
    double p, eps;
  };
  const std::vector<Case> cases{
      {{}, {}, 1, 2.0, 1e-12},
      {{}, {{"dim", Arg(-1)}}, 2, 2.0, 1e-12},
      {{Arg(1.0), Arg(0)}, {{"eps", Arg(0.5)}}, 0, 1.0, 0.5},
  };
  for (const Case& c : cases) {
    CAPTURE(c.dim);
    Graph g;
    Node* x = g.placeholder("x", test::meta({3, 4, 5}));
    ArgList args{x};
    for (const Arg& a : c.args) args.push_back(a);
    g.output(ArgList{g.call_function(OpRef("torch.nn.functional.normalize"), args, c.kwargs)});
    auto cg = CompiledGraph::compile(g, {});
    Tensor in = random_tensor({3, 4, 5}, 9);
    for (std::int64_t j = 0; j < 5; ++j) in.data<float>()[j] = 0.0f;  // a zero row: the norm is clamped to eps
    const Tensor out = cg.run({in})[0];
    REQUIRE(out.shape() == in.shape());
    int bad = 0;
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        for (std::int64_t k = 0; k < 5; ++k) {
          std::vector<std::int64_t> at{i, j, k};
          double norm = 0;
          for (std::int64_t t = 0; t < in.shape()[c.dim]; ++t) {
            std::vector<std::int64_t> o = at;
            o[c.dim] = t;
            const double v = in.at<float>(o);
            norm += c.p == 1.0 ? std::abs(v) : v * v;
          }
          if (c.p == 2.0) norm = std::sqrt(norm);
          const double want = in.at<float>(at) / std::max(norm, c.eps);
          bad += std::abs(out.at<float>(at) - want) > 1e-5 * (1 + std::abs(want));
        }
    CHECK(bad == 0);
  }
}

// The global average pool of a channels-last tensor: the outputs (channels) lie
// contiguous, the summed elements do not. Each output equals the sum of its
// elements added one by one in row-major order, then divided, on one thread or
// four; channel counts past a block of 64 and below one, a wide one (1280, as
// MobileNetV2's pool) and batches of one and two rows.
TEST_CASE("a mean or sum over the spatial dims of a channels-last tensor adds each output's elements in order") {
  for (const auto& [N, C] : std::vector<std::pair<std::int64_t, std::int64_t>>{{3, 70}, {3, 13}, {3, 128}, {1, 1280}, {2, 1100}, {1, 40}})
    for (const bool mean : {true, false})
      for (const int threads : {1, 4}) {
        CAPTURE(N);
        CAPTURE(C);
        CAPTURE(mean);
        CAPTURE(threads);
        constexpr std::int64_t H = 5, W = 7;
        Graph g;
        Node* x = g.placeholder("x", test::meta({N, H, W, C}));
        Node* nchw = g.call_function(OpRef("aten.permute.default"), {x, ArgList{0, 3, 1, 2}});
        const ArgList dims{Arg(std::int64_t{2}), Arg(std::int64_t{3})};
        g.output(ArgList{mean ? g.call_function(OpRef("aten.mean.dim"), {nchw, dims, true})
                              : g.call_function(OpRef("aten.sum.dim_IntList"), {nchw, dims, true})});
        runtime::CompileOptions opts;
        opts.threads = threads;
        const Tensor in = random_tensor({N, H, W, C}, 9);
        const auto out = CompiledGraph::compile(g, {}, opts).run({in});
        REQUIRE(out[0].shape() == runtime::Shape{N, C, 1, 1});
        int off = 0;
        for (std::int64_t n = 0; n < N; ++n)
          for (std::int64_t c = 0; c < C; ++c) {
            float acc = 0;
            for (std::int64_t i = 0; i < H * W; ++i) acc += in.data<float>()[(n * H * W + i) * C + c];
            if (mean) acc /= static_cast<float>(H * W);
            off += out[0].data<float>()[n * C + c] != acc;
          }
        CHECK(off == 0);
      }
}
