// torch.nn's other activations (kernels/pointwise/activations.hpp) at the
// torch-function and aten levels against naive per-element formulas: elu,
// selu, celu, softplus (beta, threshold), mish, softsign, tanhshrink, the
// shrinks, threshold, log-sigmoid (and aten's tuple form), rrelu in eval,
// prelu with 1 and C slopes, glu along a dim, softmin, sign; LP pooling
// against a naive window loop; the errors.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <functional>
#include <string>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::Dims;
using test::dims_of;
using test::ints;
using test::random_tensor;

namespace {

// Values spread over [-6, 6], so that thresholds and both branches are hit.
Tensor wide_input(const Dims& shape, unsigned seed = 7) {
  Tensor t = random_tensor(shape, seed);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= 2.5f;
  return t;
}

Node* call(Graph& g, const char* target, ArgList args, ArgDict kw = {}, std::string name = "") {
  return g.call_function(OpRef(target), std::move(args), std::move(kw), std::move(name));
}

// The first output of a graph of one call of `target` on x (extra positional args and kwargs).
Tensor run_op(const char* target, const Tensor& x, ArgList extra = {}, ArgDict kw = {}, bool tuple = false) {
  Graph g;
  Node* xn = g.placeholder("x", meta(dims_of(x.shape())));
  ArgList args{xn};
  for (const Arg& a : extra) args.push_back(a);
  Node* y = call(g, target, args, std::move(kw));
  if (tuple) y = call(g, "operator.getitem", {y, std::int64_t{0}});
  g.output(ArgList{y});
  return CompiledGraph::compile(g, {}).run({x})[0];
}

void check_elementwise(const Tensor& got, const Tensor& x, const std::function<double(double)>& f) {
  REQUIRE(got.shape() == x.shape());
  int bad = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double want = f(test::element(x, i)), g = test::element(got, i);
    if (std::abs(g - want) > 1e-5 * (1 + std::abs(want))) {
      if (bad < 3) MESSAGE("element " << i << " (x = " << test::element(x, i) << "): got " << g << ", want " << want);
      ++bad;
    }
  }
  CHECK(bad == 0);
}

double softplus(double x, double beta, double threshold) { return x * beta > threshold ? x : std::log1p(std::exp(beta * x)) / beta; }

std::string compile_error(const std::function<void(Graph&, Node*)>& build, const Dims& shape) {
  Graph g;
  Node* x = g.placeholder("x", meta(dims_of(shape)));
  build(g, x);
  try {
    CompiledGraph::compile(g, {});
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("elu, selu and celu at both levels") {
  const Tensor x = wide_input({2, 3, 5, 7});
  auto elu = [](double a, double s, double is) {
    return [=](double v) { return v > 0 ? s * v : s * a * (std::exp(v * is) - 1); };
  };
  check_elementwise(run_op("torch.nn.functional.elu", x, {0.7}), x, elu(0.7, 1, 1));
  check_elementwise(run_op("aten.elu.default", x, {0.7, 1.2, 0.5}), x, elu(0.7, 1.2, 0.5));
  check_elementwise(run_op("torch.nn.functional.selu", x), x, elu(1.6732632423543772, 1.0507009873554805, 1));
  check_elementwise(run_op("torch.nn.functional.celu", x, {}, {{"alpha", Arg(1.3)}}), x,
                    [](double v) { return std::max(0.0, v) + std::min(0.0, 1.3 * (std::exp(v / 1.3) - 1)); });
  check_elementwise(run_op("aten.celu.default", x, {0.5}), x,
                    [](double v) { return std::max(0.0, v) + std::min(0.0, 0.5 * (std::exp(v / 0.5) - 1)); });
  CHECK(compile_error([](Graph& g, Node* x) { g.output(ArgList{call(g, "aten.celu.default", {x, 0.0}, {}, "c")}); }, {3})
            .find("node c (aten.celu.default): celu: alpha must not be 0") != std::string::npos);
}

TEST_CASE("softplus, mish, softsign, tanhshrink and log-sigmoid") {
  const Tensor x = wide_input({3, 17});
  check_elementwise(run_op("torch.nn.functional.softplus", x, {}, {{"beta", Arg(2.0)}, {"threshold", Arg(3.0)}}), x,
                    [](double v) { return softplus(v, 2, 3); });
  check_elementwise(run_op("aten.softplus.default", x, {1.0, 20.0}), x, [](double v) { return softplus(v, 1, 20); });
  for (const char* t : {"torch.nn.functional.mish", "aten.mish.default"})
    check_elementwise(run_op(t, x), x, [](double v) { return v * std::tanh(std::log1p(std::exp(v))); });
  check_elementwise(run_op("torch.nn.functional.softsign", x), x, [](double v) { return v / (1 + std::abs(v)); });
  check_elementwise(run_op("torch.nn.functional.tanhshrink", x), x, [](double v) { return v - std::tanh(v); });
  auto log_sigmoid = [](double v) { return std::log(1 / (1 + std::exp(-v))); };
  check_elementwise(run_op("torch.nn.functional.log_sigmoid", x), x, log_sigmoid);
  check_elementwise(run_op("aten.log_sigmoid_forward.default", x, {}, {}, true), x, log_sigmoid);
  // Large magnitudes: no overflow to inf or nan.
  Tensor big = random_tensor({8}, 3);
  for (std::int64_t i = 0; i < 8; ++i) big.data<float>()[i] *= 60.0f;
  check_elementwise(run_op("torch.nn.functional.log_sigmoid", big), big,
                    [](double v) { return std::min(v, 0.0) - std::log1p(std::exp(-std::abs(v))); });
  check_elementwise(run_op("torch.nn.functional.mish", big), big,
                    [](double v) { return v * std::tanh(v > 20 ? v : std::log1p(std::exp(v))); });
}

TEST_CASE("softshrink, hardshrink, threshold and rrelu in eval") {
  const Tensor x = wide_input({4, 9});
  auto soft = [](double l) { return [=](double v) { return v > l ? v - l : v < -l ? v + l : 0.0; }; };
  check_elementwise(run_op("torch.nn.functional.softshrink", x, {0.3}), x, soft(0.3));
  check_elementwise(run_op("aten.softshrink.default", x), x, soft(0.5));
  for (const char* t : {"torch.hardshrink", "aten.hardshrink.default"})
    check_elementwise(run_op(t, x, {0.4}), x, [](double v) { return std::abs(v) > 0.4 ? v : 0.0; });
  for (const char* t : {"torch.nn.functional._threshold", "aten.threshold.default"})
    check_elementwise(run_op(t, x, {0.2, -1.0}), x, [](double v) { return v > 0.2 ? v : -1.0; });
  check_elementwise(run_op("torch.nn.functional.rrelu", x, {0.1, 0.3, false}), x, [](double v) { return v > 0 ? v : 0.2 * v; });
  Graph g;
  Node* xn = g.placeholder("x", meta({4, 9}));
  Node* noise = call(g, "aten.empty_like.default", {xn});
  g.output(ArgList{call(g, "aten.rrelu_with_noise.default", {xn, noise, 0.125, 1.0 / 3, false})});
  check_elementwise(CompiledGraph::compile(g, {}).run({x})[0], x, [](double v) { return v > 0 ? v : (0.125 + 1.0 / 3) / 2 * v; });
  CHECK(compile_error([](Graph& g, Node* x) { g.output(ArgList{call(g, "torch.nn.functional.rrelu", {x, 0.1, 0.3, true}, {}, "r")}); },
                      {3})
            .find("node r (torch.nn.functional.rrelu): rrelu in training mode draws random slopes") != std::string::npos);
  CHECK(compile_error([](Graph& g, Node* x) { g.output(ArgList{call(g, "aten.softshrink.default", {x, -1.0}, {}, "s")}); }, {3})
            .find("softshrink: lambd must be >= 0") != std::string::npos);
}

TEST_CASE("prelu with one and with C slopes") {
  for (std::int64_t n : {1, 5}) {
    for (const char* t : {"torch.prelu", "aten.prelu.default"}) {
      CAPTURE(n);
      CAPTURE(t);
      const Tensor x = wide_input({2, 5, 3, 4}), w = random_tensor({n}, 9);
      Graph g;
      Node* xn = g.placeholder("x", meta({2, 5, 3, 4}));
      g.output(ArgList{call(g, t, {xn, g.get_attr("w", meta({n}))})});
      const Tensor got = CompiledGraph::compile(g, {{"w", w}}).run({x})[0];
      REQUIRE(got.shape() == x.shape());
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        const float v = x.data<float>()[i], a = w.data<float>()[n == 1 ? 0 : (i / 12) % 5];
        REQUIRE(got.data<float>()[i] == doctest::Approx(v > 0 ? v : a * v));
      }
    }
  }
  CHECK(compile_error([](Graph& g, Node* x) { g.output(ArgList{call(g, "torch.prelu", {x, g.placeholder("w", meta({3}))}, {}, "p")}); },
                      {2, 5, 4})
            .find("node p (torch.prelu): prelu's weight holds 3 values; the input [2, 5, 4] needs 1 or 5") != std::string::npos);
}

TEST_CASE("glu along a dim and softmin") {
  const Dims shape{2, 6, 3, 4};
  const Tensor x = wide_input(shape);
  for (std::int64_t dim : {1, -1, 0}) {
    CAPTURE(dim);
    const std::int64_t d = dim < 0 ? dim + 4 : dim;
    const Tensor got = run_op(dim == -1 ? "torch.nn.functional.glu" : "aten.glu.default", x, {dim});
    Dims os = shape;
    os[d] /= 2;
    REQUIRE(got.shape() == runtime::Shape(os.begin(), os.end()));
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      std::array<std::int64_t, 4> idx{};
      for (std::int64_t k = 3, r = i; k >= 0; --k) idx[k] = r % os[k], r /= os[k];
      auto at = [&](std::int64_t shift) {
        auto j = idx;
        j[d] += shift;
        return x.data<float>()[((j[0] * shape[1] + j[1]) * shape[2] + j[2]) * shape[3] + j[3]];
      };
      REQUIRE(got.data<float>()[i] == doctest::Approx(at(0) / (1 + std::exp(-at(os[d])))));
    }
  }
  CHECK(compile_error([](Graph& g, Node* x) { g.output(ArgList{call(g, "aten.glu.default", {x, 1}, {}, "glu")}); }, {2, 5})
            .find("node glu (aten.glu.default): glu halves dim 1 of [2, 5], which is odd") != std::string::npos);
  // softmin along dim 1: exp(-x) / sum over the dim.
  const Tensor s = run_op("torch.nn.functional.softmin", x, {}, {{"dim", Arg(std::int64_t{1})}});
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t n = i / 72, rest = i % 12;
    double sum = 0;
    for (std::int64_t c = 0; c < 6; ++c) sum += std::exp(-x.data<float>()[n * 72 + c * 12 + rest]);
    REQUIRE(s.data<float>()[i] == doctest::Approx(std::exp(-x.data<float>()[i]) / sum));
  }
}

TEST_CASE("sign, and lp_pool1d and lp_pool2d as average pooling of powers") {
  const Tensor x = wide_input({2, 3, 6, 7});
  check_elementwise(run_op("aten.sign.default", x), x, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; });
  // lp_pool2d with p = 2, a 3x2 window, stride (2, 3), ceil_mode off: sqrt of the window's sum of squares.
  const Tensor y = run_op("torch.nn.functional.lp_pool2d", x, {2.0, ints({3, 2})}, {{"stride", Arg(ints({2, 3}))}});
  REQUIRE(y.shape() == runtime::Shape{2, 3, 2, 2});
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    const std::int64_t nc = i / 4, oh = (i / 2) % 2, ow = i % 2;
    double sum = 0;
    for (std::int64_t kh = 0; kh < 3; ++kh)
      for (std::int64_t kw = 0; kw < 2; ++kw) sum += std::pow(x.data<float>()[nc * 42 + (oh * 2 + kh) * 7 + ow * 3 + kw], 2);
    REQUIRE(y.data<float>()[i] == doctest::Approx(std::sqrt(sum)));
  }
  // lp_pool1d with p = 3 on positive values, stride defaulting to the kernel size, as a module.
  Tensor pos = random_tensor({2, 3, 7}, 5);
  for (std::int64_t i = 0; i < pos.numel(); ++i) pos.data<float>()[i] = std::abs(pos.data<float>()[i]) + 0.1f;
  Graph g;
  g.modules().set(ModuleInfo{"m", "torch.nn.modules.pooling.LPPool1d",
                             {{"attrs", R"({"norm_type": 3.0, "kernel_size": 2, "stride": null, "ceil_mode": false})"}}});
  Node* xn = g.placeholder("x", meta({2, 3, 7}));
  g.output(ArgList{g.call_module("m", {Arg(xn)})});
  const Tensor z = CompiledGraph::compile(g, {}).run({pos})[0];
  REQUIRE(z.shape() == runtime::Shape{2, 3, 3});
  for (std::int64_t i = 0; i < z.numel(); ++i) {
    const float* w = pos.data<float>() + (i / 3) * 7 + (i % 3) * 2;
    REQUIRE(z.data<float>()[i] == doctest::Approx(std::cbrt(std::pow(w[0], 3) + std::pow(w[1], 3))));
  }
  CHECK(compile_error([](Graph& g, Node* x) { g.output(ArgList{call(g, "torch.nn.functional.lp_pool1d", {x, 0.0, 2}, {}, "lp")}); }, {1, 2, 4})
            .find("node lp (torch.nn.functional.lp_pool1d): lp_pool: norm_type must not be 0") != std::string::npos);
}
