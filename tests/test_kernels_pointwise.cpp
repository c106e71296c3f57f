// Element-wise kernels against naive loops: unary ops at every level, binary
// ops with broadcasting and scalars, static operator arithmetic, in-place ops,
// casts, dropout and the quantize/dequantize ops.
#include <doctest/doctest.h>

#include <cmath>
#include <bit>
#include <functional>
#include <limits>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::element;
using test::random_tensor;

namespace {

using Ref1 = std::function<double(double)>;

// Elements equal within a relative tolerance, NaN matching NaN.
bool close(double got, double want, double tol = 1e-5) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

// The worst element of `out` against ref(element of each input) over the broadcast shape.
int mismatches(const Tensor& out, const std::vector<Tensor>& ins, const std::function<double(std::vector<double>)>& ref,
               double tol = 1e-5) {
  int bad = 0;
  const auto& shape = out.shape();
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    std::vector<std::int64_t> idx(shape.size());
    for (std::int64_t k = static_cast<std::int64_t>(shape.size()) - 1, r = i; k >= 0; --k) {
      idx[k] = r % shape[k];
      r /= shape[k];
    }
    std::vector<double> xs;
    for (const Tensor& t : ins) {
      std::int64_t off = 0;
      const std::size_t lead = shape.size() - t.rank();
      for (std::size_t k = 0; k < t.rank(); ++k) off += (t.shape()[k] == 1 ? 0 : idx[k + lead]) * t.strides()[k];
      if (t.dtype() == DType::float32) xs.push_back(t.data<float>()[off]);
      else if (t.dtype() == DType::int64) xs.push_back(double(t.data<std::int64_t>()[off]));
      else xs.push_back(t.data<bool>()[off]);
    }
    const double want = ref(xs);
    double got = 0;
    if (out.dtype() == DType::float32) got = element(out, i);
    else if (out.dtype() == DType::int64) got = double(out.data<std::int64_t>()[i]);
    else if (out.dtype() == DType::bool_) got = out.data<bool>()[i];
    else if (out.dtype() == DType::uint8) got = out.data<std::uint8_t>()[i];
    else got = out.data<std::int8_t>()[i];
    if (!close(got, want, tol)) {
      if (bad < 3) MESSAGE("element " << i << ": got " << got << ", want " << want);
      ++bad;
    }
  }
  return bad;
}

// Runs target(x, args...) on a transposed [n, m] view and on a contiguous [7] and [1] tensor.
void check_unary(std::string_view target, const Ref1& ref, ArgList extra = {}, ArgDict kwargs = {},
                 bool method = false, double tol = 1e-5) {
  CAPTURE(target);
  for (const runtime::Shape& shape : {runtime::Shape{33, 7}, runtime::Shape{7}, runtime::Shape{1}}) {
    Graph g;
    Node* x = g.placeholder("x", test::meta({shape.begin(), shape.end()}));
    ArgList args{x};
    args.insert(args.end(), extra.begin(), extra.end());
    Node* y = method ? g.call_method(target, args, kwargs) : g.call_function(OpRef(target), args, kwargs);
    g.output(ArgList{y});
    auto cg = CompiledGraph::compile(g, {});
    Tensor in = random_tensor(shape, 11);
    if (shape.size() == 2) in = random_tensor({shape[1], shape[0]}, 11).transpose(0, 1);
    for (std::int64_t i = 0; i < std::min<std::int64_t>(in.numel(), 3); ++i)
      if (shape.size() == 1) in.data<float>()[i] = float(i) * 3.5f - 3.0f;  // exact values around the kinks
    auto out = cg.run({in});
    CHECK(out[0].shape() == shape);
    CHECK(mismatches(out[0], {in}, [&](std::vector<double> v) { return ref(v[0]); }, tol) == 0);
  }
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

TEST_CASE("unary ops at every level match naive loops on transposed and odd-sized inputs") {
  const Ref1 relu = [](double x) { return std::max(x, 0.0); };
  check_unary("aten.relu.default", relu);
  check_unary("torch.relu", relu);
  check_unary("torch.nn.functional.relu", relu);
  check_unary("relu", relu, {}, {}, true);
  check_unary("aten.sigmoid.default", sigmoid);
  check_unary("torch.sigmoid", sigmoid);
  check_unary("sigmoid", sigmoid, {}, {}, true);
  check_unary("aten.tanh.default", [](double x) { return std::tanh(x); });
  check_unary("torch.tanh", [](double x) { return std::tanh(x); });
  const Ref1 gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  const Ref1 gelu_tanh = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  check_unary("torch.nn.functional.gelu", gelu);
  check_unary("aten.gelu.default", gelu);
  check_unary("aten.gelu.default", gelu_tanh, {}, {{"approximate", Arg("tanh")}});
  check_unary("torch.nn.functional.gelu", gelu_tanh, {}, {{"approximate", Arg("tanh")}});
  check_unary("torch.nn.functional.silu", [](double x) { return x * sigmoid(x); });
  check_unary("aten.silu.default", [](double x) { return x * sigmoid(x); });
  check_unary("torch.exp", [](double x) { return std::exp(x); });
  check_unary("aten.log.default", [](double x) { return std::log(x); });
  // Near 0, where exp(x) - 1 and log(1 + x) in float lose the digits these keep.
  check_unary("aten.expm1.default", [](double x) { return std::expm1(x); });
  check_unary("torch.expm1", [](double x) { return std::expm1(x); });
  check_unary("expm1", [](double x) { return std::expm1(x); }, {}, {}, true);
  check_unary("aten.log1p.default", [](double x) { return std::log1p(x); });
  check_unary("log1p", [](double x) { return std::log1p(x); }, {}, {}, true);
  check_unary("aten.neg.default", [](double x) { return -x; });
  check_unary("operator.neg", [](double x) { return -x; });
  check_unary("torch.abs", [](double x) { return std::abs(x); });
  check_unary("aten.sqrt.default", [](double x) { return std::sqrt(x); });
  check_unary("torch.rsqrt", [](double x) { return 1 / std::sqrt(x); }, {}, {}, false, 1e-4);
  check_unary("aten.reciprocal.default", [](double x) { return 1 / x; }, {}, {}, false, 1e-4);
  const Ref1 hswish = [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; };
  check_unary("torch.nn.functional.hardswish", hswish);
  check_unary("aten.hardswish.default", hswish);
  const Ref1 hsigmoid = [](double x) { return std::clamp(x + 3, 0.0, 6.0) / 6; };
  check_unary("torch.nn.functional.hardsigmoid", hsigmoid);
  check_unary("aten.hardsigmoid.default", hsigmoid);
  check_unary("torch.nn.functional.hardtanh", [](double x) { return std::clamp(x, -1.0, 1.0); });
  check_unary("aten.hardtanh.default", [](double x) { return std::clamp(x, -0.5, 2.0); }, {-0.5, 2.0});
  check_unary("torch.nn.functional.leaky_relu", [](double x) { return x > 0 ? x : 0.01 * x; });
  check_unary("aten.leaky_relu.default", [](double x) { return x > 0 ? x : 0.2 * x; }, {0.2});
  check_unary("torch.clamp", [](double x) { return std::clamp(x, -0.5, 0.25); }, {-0.5, 0.25});
  check_unary("torch.clamp", [](double x) { return std::min(x, 0.25); }, {}, {{"max", Arg(0.25)}});
  check_unary("aten.clamp.default", [](double x) { return std::max(x, -0.5); }, {-0.5, Arg()});
  check_unary("clamp", [](double x) { return std::clamp(x, -1.0, 1.0); }, {}, {{"min", Arg(-1)}, {"max", Arg(1)}}, true);
  check_unary("aten.clamp_min.default", [](double x) { return std::max(x, 0.3); }, {0.3});
  check_unary("aten.clamp_max.default", [](double x) { return std::min(x, 0.3); }, {0.3});
  check_unary("aten.nan_to_num.default", [](double x) { return x; });
}

TEST_CASE("nan_to_num replaces NaN and infinities") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({4}));
  g.output(ArgList{g.call_function(OpRef("torch.nan_to_num"), {x}, {{"nan", Arg(1.5)}, {"posinf", Arg(9.0)}})});
  auto cg = CompiledGraph::compile(g, {});
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v{std::nanf(""), inf, -inf, 2.0f};
  auto out = cg.run({Tensor::from_values<float>({4}, v)});
  CHECK(out[0].data<float>()[0] == 1.5f);
  CHECK(out[0].data<float>()[1] == 9.0f);
  CHECK(out[0].data<float>()[2] == std::numeric_limits<float>::lowest());
  CHECK(out[0].data<float>()[3] == 2.0f);
}

TEST_CASE("int64 relu, neg, abs and clamp") {
  for (auto [target, ref] : std::vector<std::pair<std::string, Ref1>>{
           {"aten.relu.default", [](double x) { return std::max(x, 0.0); }},
           {"aten.neg.default", [](double x) { return -x; }},
           {"torch.abs", [](double x) { return std::abs(x); }}}) {
    Graph g;
    Node* x = g.placeholder("x", test::meta({5, 7}, DType::int64));
    g.output(ArgList{g.call_function(OpRef(target), {x})});
    auto cg = CompiledGraph::compile(g, {});
    Tensor in = random_tensor({7, 5}, 3, DType::int64).transpose(0, 1);
    auto out = cg.run({in});
    CHECK(out[0].dtype() == DType::int64);
    CHECK(mismatches(out[0], {in}, [&](std::vector<double> v) { return ref(v[0]); }) == 0);
  }
  Graph g;
  Node* x = g.placeholder("x", test::meta({33}, DType::int64));
  g.output(ArgList{g.call_function(OpRef("torch.clamp"), {x, -2, 3})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor in = random_tensor({33}, 4, DType::int64);
  auto out = cg.run({in});
  CHECK(mismatches(out[0], {in}, [](std::vector<double> v) { return std::clamp(v[0], -2.0, 3.0); }) == 0);
}

TEST_CASE("a unary op refuses a dtype it does not take, naming the node") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({3}, DType::int64));
  g.output(ArgList{g.call_function(OpRef("torch.sigmoid"), {x}, {}, "sig")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}), doctest::Contains("node sig (torch.sigmoid): input is int64"),
                       runtime::CompileError);
}

TEST_CASE("in-place relu and add_ compute functionally, and refuse an input read later") {
  {
    Graph g;
    Node* x = g.placeholder("x", test::meta({4, 5}));
    Node* y = g.placeholder("y", test::meta({5}));
    Node* a = g.call_function(OpRef("aten.add.Tensor"), {x, x});
    Node* b = g.call_function(OpRef("aten.add_.Tensor"), {a, y});
    Node* r = g.call_function(OpRef("aten.relu_.default"), {b});
    Node* f = g.call_function(OpRef("torch.nn.functional.relu"), {r}, {{"inplace", Arg(true)}});
    g.output(ArgList{f});
    auto cg = CompiledGraph::compile(g, {});
    Tensor tx = random_tensor({4, 5}, 5), ty = random_tensor({5}, 6);
    auto out = cg.run({tx, ty});
    CHECK(mismatches(out[0], {tx, ty}, [](std::vector<double> v) { return std::max(2 * v[0] + v[1], 0.0); }) == 0);
  }
  Graph g;
  Node* x = g.placeholder("x", test::meta({4}));
  Node* a = g.call_function(OpRef("aten.sigmoid.default"), {x});
  Node* r = g.call_function(OpRef("aten.relu_.default"), {a}, {}, "relu_");
  Node* later = g.call_function(OpRef("aten.add.Tensor"), {a, r}, {}, "later");
  g.output(ArgList{later});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       doctest::Contains("node relu_ (aten.relu_.default): writes in place to sigmoid, which later "
                                         "reads later; an in-place write read later is not supported yet"),
                       runtime::CompileError);
}

namespace {
using Ref2 = std::function<double(double, double)>;

// target(a, b, extra...) with a of shape sa (transposed when 2-d), b of shape sb.
void check_binary(std::string_view target, runtime::Shape sa, runtime::Shape sb, const Ref2& ref, ArgDict kwargs = {},
                  DType dt = DType::float32, double tol = 1e-5, bool method = false) {
  CAPTURE(target);
  CAPTURE(runtime::shape_str(sa));
  CAPTURE(runtime::shape_str(sb));
  Graph g;
  Node* a = g.placeholder("a", test::meta({sa.begin(), sa.end()}, dt));
  Node* b = g.placeholder("b", test::meta({sb.begin(), sb.end()}, dt));
  Node* y = method ? g.call_method(target, {a, b}, kwargs) : g.call_function(OpRef(target), {a, b}, kwargs);
  g.output(ArgList{y});
  auto cg = CompiledGraph::compile(g, {});
  Tensor ta = sa.size() == 2 ? random_tensor({sa[1], sa[0]}, 21, dt).transpose(0, 1) : random_tensor(sa, 21, dt);
  Tensor tb = random_tensor(sb, 22, dt);
  if (dt == DType::int64)
    for (std::int64_t i = 0; i < tb.numel(); ++i)
      if (tb.data<std::int64_t>()[i] == 0) tb.data<std::int64_t>()[i] = 3;  // integer division by zero is undefined
  auto out = cg.run({ta, tb});
  CHECK(out[0].shape() == runtime::broadcast_shapes(sa, sb));
  CHECK(mismatches(out[0], {ta, tb}, [&](std::vector<double> v) { return ref(v[0], v[1]); }, tol) == 0);
}

// target(x, scalar) and target(scalar, x) on a [7, 33] tensor.
void check_scalar(std::string_view target, Arg scalar, double s, const Ref2& ref, bool scalar_first = false) {
  CAPTURE(target);
  CAPTURE(scalar_first);
  Graph g;
  Node* x = g.placeholder("x", test::meta({7, 33}));
  Node* y = scalar_first ? g.call_function(OpRef(target), {scalar, x}) : g.call_function(OpRef(target), {x, scalar});
  g.output(ArgList{y});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({7, 33}, 31);
  auto out = cg.run({tx});
  CHECK(mismatches(out[0], {tx}, [&](std::vector<double> v) { return scalar_first ? ref(s, v[0]) : ref(v[0], s); }) ==
        0);
}

double pyfloor_div(double a, double b) { return std::floor(a / b); }
}  // namespace

TEST_CASE("binary ops broadcast, take transposed inputs and odd sizes") {
  const Ref2 add = [](double a, double b) { return a + b; };
  const Ref2 mul = [](double a, double b) { return a * b; };
  for (auto [sa, sb] : std::vector<std::pair<runtime::Shape, runtime::Shape>>{
           {{33, 7}, {7}}, {{33, 7}, {33, 1}}, {{7}, {7}}, {{1}, {33}}, {{33, 7}, {33, 7}}, {{1, 7}, {33, 1}}}) {
    check_binary("aten.add.Tensor", sa, sb, add);
    check_binary("operator.add", sa, sb, add);
    check_binary("torch.mul", sa, sb, mul);
    check_binary("aten.sub.Tensor", sa, sb, [](double a, double b) { return a - b; });
    check_binary("aten.div.Tensor", sa, sb, [](double a, double b) { return a / b; }, {}, DType::float32, 1e-4);
    check_binary("aten.minimum.default", sa, sb, [](double a, double b) { return std::min(a, b); });
    check_binary("torch.maximum", sa, sb, [](double a, double b) { return std::max(a, b); });
    check_binary("aten.clamp_min.Tensor", sa, sb, [](double a, double b) { return std::max(a, b); });
    check_binary("aten.clamp_max.Tensor", sa, sb, [](double a, double b) { return std::min(a, b); });
  }
  // In place: the bound broadcasts into the clamped tensor.
  check_binary("aten.clamp_min_.Tensor", {33, 7}, {7}, [](double a, double b) { return std::max(a, b); });
  check_binary("aten.clamp_max_.Tensor", {33, 7}, {33, 1}, [](double a, double b) { return std::min(a, b); });
  check_binary("torch.add", {33, 7}, {7}, [](double a, double b) { return a + 2.5 * b; }, {{"alpha", Arg(2.5)}});
  check_binary("add", {33, 7}, {7}, [](double a, double b) { return a - b; }, {{"alpha", Arg(-1)}}, DType::float32,
               1e-5, true);
  check_binary("torch.sub", {33, 7}, {1}, [](double a, double b) { return a - 3 * b; }, {{"alpha", Arg(3)}});
  check_binary("aten.rsub.Tensor", {33, 7}, {7}, [](double a, double b) { return b - a; });
  check_binary("operator.truediv", {33, 7}, {7}, [](double a, double b) { return a / b; }, {}, DType::float32, 1e-4);
  check_binary("aten.div.Tensor_mode", {33, 7}, {7}, [](double a, double b) { return std::trunc(a / b); },
               {{"rounding_mode", Arg("trunc")}}, DType::float32, 1e-4);
  check_binary("torch.div", {33, 7}, {7}, pyfloor_div, {{"rounding_mode", Arg("floor")}}, DType::float32, 1e-4);
  check_binary("operator.floordiv", {33, 7}, {7}, pyfloor_div, {}, DType::float32, 1e-4);
  check_binary("aten.pow.Tensor_Tensor", {33, 7}, {7}, [](double a, double b) { return std::pow(a, b); }, {},
               DType::float32, 1e-4);
}

TEST_CASE("int64 binary ops keep int64 and floor division rounds down") {
  const Ref2 add = [](double a, double b) { return a + b; };
  check_binary("aten.add.Tensor", {7, 5}, {5}, add, {}, DType::int64);
  check_binary("operator.mul", {7, 5}, {7, 1}, [](double a, double b) { return a * b; }, {}, DType::int64);
  check_binary("operator.floordiv", {7, 5}, {5}, pyfloor_div, {}, DType::int64);
  check_binary("aten.div.Tensor_mode", {7, 5}, {5}, [](double a, double b) { return std::trunc(a / b); },
               {{"rounding_mode", Arg("trunc")}}, DType::int64);
  // True division of integers gives float32.
  Graph g;
  Node* a = g.placeholder("a", test::meta({5}, DType::int64));
  g.output(ArgList{g.call_function(OpRef("operator.truediv"), {a, 2})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor ta = random_tensor({5}, 9, DType::int64);
  auto out = cg.run({ta});
  CHECK(out[0].dtype() == DType::float32);
  CHECK(mismatches(out[0], {ta}, [](std::vector<double> v) { return v[0] / 2; }) == 0);
}

TEST_CASE("Python scalars on either side of a binary op") {
  check_scalar("aten.add.Tensor", Arg(1.5), 1.5, [](double a, double b) { return a + b; });
  check_scalar("operator.add", Arg(2), 2, [](double a, double b) { return a + b; }, true);
  check_scalar("operator.sub", Arg(1.0), 1, [](double a, double b) { return a - b; }, true);
  check_scalar("operator.mul", Arg(-3), -3, [](double a, double b) { return a * b; });
  check_scalar("aten.div.Tensor", Arg(4.0), 4, [](double a, double b) { return a / b; });
  check_scalar("operator.truediv", Arg(2.0), 2, [](double a, double b) { return a / b; }, true);
  check_scalar("aten.rsub.Scalar", Arg(1.0), 1, [](double a, double b) { return b - a; });
  check_scalar("aten.pow.Tensor_Scalar", Arg(2), 2, [](double a, double b) { return std::pow(a, b); });
  check_scalar("aten.pow.Tensor_Scalar", Arg(3.0), 3, [](double a, double b) { return std::pow(a, b); });
  check_scalar("torch.pow", Arg(2.0), 2, [](double a, double b) { return std::pow(a, b); }, true);
  check_scalar("aten.mul.Scalar", Arg(0.5), 0.5, [](double a, double b) { return a * b; });
}

TEST_CASE("a 0-d constant operand broadcasts as a scalar") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({3, 7}));
  Node* c = g.get_attr("c", test::meta({}));
  g.output(ArgList{g.call_function(OpRef("aten.mul.Tensor"), {x, c})});
  Tensor tc = Tensor::from_values<float>({}, std::vector<float>{-2.5f});
  auto cg = CompiledGraph::compile(g, {{"c", tc}});
  Tensor tx = random_tensor({3, 7}, 41);
  auto out = cg.run({tx});
  CHECK(mismatches(out[0], {tx}, [](std::vector<double> v) { return v[0] * -2.5; }) == 0);
}

TEST_CASE("operator arithmetic on two static values follows Python") {
  // Each static result feeds a tensor op, whose output shows the value.
  struct Case {
    const char* op;
    Arg a, b;
    double want;
  };
  for (const Case& c : {Case{"operator.mul", Arg(3), Arg(4), 12}, Case{"operator.truediv", Arg(7), Arg(2), 3.5},
                        Case{"operator.floordiv", Arg(-7), Arg(2), -4}, Case{"operator.floordiv", Arg(7.5), Arg(2), 3},
                        Case{"operator.sub", Arg(2), Arg(5), -3}, Case{"operator.add", Arg(2), Arg(0.5), 2.5}}) {
    CAPTURE(c.op);
    Graph g;
    Node* x = g.placeholder("x", test::meta({5}));
    Node* s = g.call_function(OpRef(c.op), {c.a, c.b});
    g.output(ArgList{g.call_function(OpRef("operator.add"), {x, s})});
    auto cg = CompiledGraph::compile(g, {});
    Tensor tx = random_tensor({5}, 43);
    auto out = cg.run({tx});
    CHECK(mismatches(out[0], {tx}, [&](std::vector<double> v) { return v[0] + c.want; }) == 0);
  }
}

TEST_CASE("where.self picks by a bool condition with broadcasting") {
  Graph g;
  Node* a = g.placeholder("a", test::meta({33, 7}));
  Node* b = g.placeholder("b", test::meta({7}));
  Node* c = g.call_function(OpRef("aten._to_copy.default"), {b}, {{"dtype", Arg(DType::bool_)}});
  g.output(ArgList{g.call_function(OpRef("aten.where.self"), {c, a, b})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor ta = random_tensor({7, 33}, 51).transpose(0, 1), tb = random_tensor({7}, 52);
  tb.data<float>()[2] = 0.0f;
  tb.data<float>()[5] = 0.0f;
  auto out = cg.run({ta, tb});
  CHECK(mismatches(out[0], {ta, tb}, [](std::vector<double> v) { return v[1] != 0 ? v[0] : v[1]; }) == 0);
}

TEST_CASE("casts between float32, int64 and bool, and dropout in inference") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({4, 33}));
  Node* scaled = g.call_function(OpRef("operator.mul"), {x, 3.0});
  Node* i = g.call_function(OpRef("aten._to_copy.default"), {scaled}, {{"dtype", Arg(DType::int64)}});
  Node* f = g.call_method("to", {i, Arg(DType::float32)});
  Node* b = g.call_method("to", {f}, {{"dtype", Arg(DType::bool_)}});
  Node* bf = g.call_function(OpRef("aten._to_copy.default"), {b}, {{"dtype", Arg(DType::float32)}});
  Node* d = g.call_function(OpRef("torch.nn.functional.dropout"), {x}, {{"p", Arg(0.5)}, {"training", Arg(false)}});
  Node* d2 = g.call_function(OpRef("aten.dropout.default"), {x, 0.1, false});
  g.output(ArgList{i, f, bf, d, d2});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({33, 4}, 61).transpose(0, 1);
  auto out = cg.run({tx});
  CHECK(out[0].dtype() == DType::int64);
  CHECK(mismatches(out[0], {tx}, [](std::vector<double> v) { return std::trunc(float(v[0]) * 3.0f); }) == 0);
  CHECK(mismatches(out[1], {tx}, [](std::vector<double> v) { return std::trunc(float(v[0]) * 3.0f); }) == 0);
  CHECK(mismatches(out[2], {tx}, [](std::vector<double> v) { return std::trunc(float(v[0]) * 3.0f) != 0; }) == 0);
  CHECK(test::max_abs_diff(out[3], tx) == 0);
  CHECK(test::max_abs_diff(out[4], tx) == 0);

  Graph t;
  Node* y = t.placeholder("y", test::meta({4}));
  t.output(ArgList{t.call_function(OpRef("torch.nn.functional.dropout"), {y}, {}, "drop")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(t, {}), doctest::Contains("node drop (torch.nn.functional.dropout): dropout in training mode"),
                       runtime::CompileError);
}

// ---- quantize / dequantize: exact against PyTorch's formulas, written out here ----
namespace {

// The element of `t` (any strides) at a multi-index, as a double; bfloat16 widened.
double value_at(const Tensor& t, const std::vector<std::int64_t>& idx) {
  std::int64_t off = 0;
  for (std::size_t k = 0; k < idx.size(); ++k) off += idx[k] * t.strides()[k];
  const std::byte* p = static_cast<const std::byte*>(t.raw());
  switch (t.dtype()) {
    case DType::float32: return reinterpret_cast<const float*>(p)[off];
    case DType::float64: return reinterpret_cast<const double*>(p)[off];
    case DType::bfloat16: return bf16_to_float(reinterpret_cast<const std::uint16_t*>(p)[off]);
    case DType::int64: return double(reinterpret_cast<const std::int64_t*>(p)[off]);
    case DType::int32: return reinterpret_cast<const std::int32_t*>(p)[off];
    case DType::int8: return reinterpret_cast<const std::int8_t*>(p)[off];
    case DType::uint8: return reinterpret_cast<const std::uint8_t*>(p)[off];
    case DType::bool_: return reinterpret_cast<const bool*>(p)[off];
    default: FAIL("value_at: unexpected dtype"); return 0;
  }
}

// Elements of `out` not exactly equal to want(index); the first few are printed.
int inexact(const Tensor& out, const std::function<double(const std::vector<std::int64_t>&)>& want) {
  int bad = 0;
  std::vector<std::int64_t> idx(out.rank(), 0);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    for (std::int64_t k = static_cast<std::int64_t>(out.rank()) - 1, r = i; k >= 0; --k) {
      idx[k] = r % out.shape()[k];
      r /= out.shape()[k];
    }
    const double got = value_at(out, idx), w = want(idx);
    if (got != w) {
      if (bad < 3) MESSAGE("element " << i << ": got " << got << ", want " << w);
      ++bad;
    }
  }
  return bad;
}

// PyTorch's quantize of one float32: clamp(round half to even(x * inv_scale) + zero_point).
double quantize_ref(float x, float inv_scale, std::int64_t zero_point, std::int64_t qmin, std::int64_t qmax) {
  const float r = std::nearbyint(x * inv_scale) + float(zero_point);
  return std::min(std::max(r, float(qmin)), float(qmax));
}

// Normal values rounded to bfloat16.
Tensor random_bf16(runtime::Shape shape, unsigned seed) {
  const Tensor f = random_tensor(shape, seed);
  Tensor t = Tensor::empty(std::move(shape), DType::bfloat16);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<std::uint16_t>()[i] = float_to_bf16(f.data<float>()[i]);
  return t;
}

// Every value of a quantized dtype, repeated over `shape`.
Tensor all_quantized_values(runtime::Shape shape, DType q) {
  Tensor t = Tensor::empty(std::move(shape), q);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (q == DType::uint8) t.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i * 37 % 256);
    else t.data<std::int8_t>()[i] = static_cast<std::int8_t>(i * 37 % 256 - 128);
  }
  return t;
}

Node* quantize(Graph& g, Node* x, double scale, std::int64_t zp, std::int64_t qmin, std::int64_t qmax, DType q,
               std::string name = "") {
  return g.call_function(OpRef("quantized_decomposed.quantize_per_tensor.default"), {x, scale, zp, qmin, qmax, Arg(q)}, {},
                         std::move(name));
}

}  // namespace

TEST_CASE("quantize_per_tensor rounds half to even and clamps at both ends, uint8 and int8, from float32 and bfloat16") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({5, 8}));
  Node* xb = g.placeholder("xb", test::meta({5, 8}, DType::bfloat16));
  g.output(ArgList{quantize(g, x, 0.25, 128, 0, 255, DType::uint8), quantize(g, x, 0.25, -3, -128, 127, DType::int8),
                   quantize(g, x, 0.25, 2, -10, 10, DType::int8), quantize(g, xb, 0.0117, 5, 0, 255, DType::uint8),
                   quantize(g, xb, 0.03, 0, -128, 127, DType::int8)});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({8, 5}, 91).transpose(0, 1);
  // x * 4 lands exactly half way for odd multiples of 1/8; 1e3 and -1e3 clamp.
  const std::vector<float> ties{0.125f, 0.375f, 0.625f, -0.125f, -0.375f, -0.625f, 1e3f, -1e3f};
  for (std::int64_t j = 0; j < 8; ++j) tx.at<float>(std::vector<std::int64_t>{0, j}) = ties[j];
  Tensor txb = random_bf16({5, 8}, 92);
  txb.data<std::uint16_t>()[0] = float_to_bf16(1e4f);
  txb.data<std::uint16_t>()[1] = float_to_bf16(-1e4f);
  auto out = cg.run({tx, txb});
  CHECK(out[0].dtype() == DType::uint8);
  CHECK(out[1].dtype() == DType::int8);
  const std::vector<int> row0{128, 130, 130, 128, 126, 126, 255, 0};  // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, ...
  for (int j = 0; j < 8; ++j) CHECK(int(out[0].data<std::uint8_t>()[j]) == row0[j]);
  const auto ref = [&](const Tensor& in, float inv, std::int64_t zp, std::int64_t lo, std::int64_t hi) {
    return [&in, inv, zp, lo, hi](const std::vector<std::int64_t>& i) { return quantize_ref(float(value_at(in, i)), inv, zp, lo, hi); };
  };
  CHECK(inexact(out[0], ref(tx, 4.0f, 128, 0, 255)) == 0);
  CHECK(inexact(out[1], ref(tx, 4.0f, -3, -128, 127)) == 0);
  CHECK(inexact(out[2], ref(tx, 4.0f, 2, -10, 10)) == 0);  // a range narrower than the dtype's
  CHECK(inexact(out[3], ref(txb, float(1.0 / 0.0117), 5, 0, 255)) == 0);
  CHECK(inexact(out[4], ref(txb, float(1.0 / 0.03), 0, -128, 127)) == 0);
  CHECK(out[3].data<std::uint8_t>()[0] == 255);
  CHECK(out[3].data<std::uint8_t>()[1] == 0);
}

TEST_CASE("quantize_per_tensor of a large dense tensor on two threads, with infinities and values past 2^22") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({300, 200}));
  g.output(ArgList{quantize(g, x, 0.02, 7, 0, 255, DType::uint8), quantize(g, x, 1e-7, -5, -128, 127, DType::int8)});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({300, 200}, 93);
  const std::vector<float> odd{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 1e30f, -1e30f,
                               4194304.5f, -4194305.0f, 8388609.0f, 0.01f, -0.01f, 0.03f};
  for (std::size_t j = 0; j < odd.size(); ++j) tx.data<float>()[j * 997] = odd[j];
  runtime::RunContext run = cg.make_context(2);
  auto out = run.run({tx});
  const auto ref = [&](float inv, std::int64_t zp, std::int64_t lo, std::int64_t hi) {
    return [&tx, inv, zp, lo, hi](const std::vector<std::int64_t>& i) { return quantize_ref(float(value_at(tx, i)), inv, zp, lo, hi); };
  };
  CHECK(inexact(out[0], ref(float(1.0 / 0.02), 7, 0, 255)) == 0);
  CHECK(inexact(out[1], ref(float(1.0 / 1e-7), -5, -128, 127)) == 0);
  CHECK(out[0].data<std::uint8_t>()[0] == 255);
  CHECK(out[0].data<std::uint8_t>()[997] == 0);
}

TEST_CASE("quantize_per_tensor multiplies by float32(1 / scale), which rounds apart from dividing by the scale") {
  const double scale = 0.0123;
  const float inv = float(1.0 / scale), sf = float(scale);
  // Values next to the half-way points where x * inv and x / scale round to different integers.
  std::vector<float> picked;
  for (int k = 0; k < 4000 && picked.size() < 16; ++k) {
    float x = (float(k) + 0.5f) * sf;
    for (int step = 0; step < 4; ++step, x = std::nextafter(x, 1e9f))
      if (std::nearbyint(x * inv) != std::nearbyint(x / sf)) picked.push_back(x);
  }
  REQUIRE(picked.size() >= 4);
  Graph g;
  Node* x = g.placeholder("x", test::meta({std::int64_t(picked.size())}));
  g.output(ArgList{quantize(g, x, scale, 0, -128, 127, DType::int8)});
  Tensor tx = Tensor::from_values<float>({std::int64_t(picked.size())}, picked);
  auto out = CompiledGraph::compile(g, {}).run({tx});
  CHECK(inexact(out[0], [&](const std::vector<std::int64_t>& i) { return quantize_ref(picked[i[0]], inv, 0, -128, 127); }) == 0);
}

TEST_CASE("quantize_per_tensor.tensor and dequantize_per_tensor.tensor read scale and zero point from one-element tensors each run") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({4, 9}));
  Node* s = g.placeholder("s", test::meta({}));
  Node* z = g.placeholder("z", test::meta({1}, DType::int64));
  Node* s64 = g.placeholder("s64", test::meta({1}, DType::float64));
  Node* z32 = g.placeholder("z32", test::meta({}, DType::int32));
  Node* q = g.call_function(OpRef("quantized_decomposed.quantize_per_tensor.tensor"), {x, s, z, 0, 255, Arg(DType::uint8)});
  Node* dq = g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.tensor"), {q, s, z, 0, 255, Arg(DType::uint8)});
  Node* q8 = g.call_function(OpRef("quantized_decomposed.quantize_per_tensor.tensor"), {x, s64, z32, -128, 127, Arg(DType::int8)});
  Node* dq8 = g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.tensor"), {q8, s64, z32, -128, 127, Arg(DType::int8)},
                              {{"out_dtype", Arg(DType::bfloat16)}});
  g.output(ArgList{q, dq, q8, dq8});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({9, 4}, 93).transpose(0, 1);
  Tensor ts = Tensor::empty({}, DType::float32), tz = Tensor::empty({1}, DType::int64);
  Tensor ts64 = Tensor::empty({1}, DType::float64), tz32 = Tensor::empty({}, DType::int32);
  for (const auto& [scale, zp] : {std::pair{0.013, 131}, std::pair{0.21, 7}}) {
    CAPTURE(scale);
    ts.data<float>()[0] = float(scale);
    tz.data<std::int64_t>()[0] = zp;
    ts64.data<double>()[0] = scale;
    tz32.data<std::int32_t>()[0] = -zp / 3;
    auto out = cg.run({tx, ts, tz, ts64, tz32});
    // item() gives the float32 scale as a double; 1 / it is taken in double, then rounded to float32.
    const float inv = float(1.0 / double(float(scale))), inv64 = float(1.0 / scale);
    CHECK(inexact(out[0], [&](const std::vector<std::int64_t>& i) { return quantize_ref(float(value_at(tx, i)), inv, zp, 0, 255); }) == 0);
    CHECK(inexact(out[1], [&](const std::vector<std::int64_t>& i) {
            return (float(value_at(out[0], i)) - float(zp)) * float(scale);
          }) == 0);
    CHECK(inexact(out[2], [&](const std::vector<std::int64_t>& i) {
            return quantize_ref(float(value_at(tx, i)), inv64, -zp / 3, -128, 127);
          }) == 0);
    CHECK(out[3].dtype() == DType::bfloat16);
    CHECK(inexact(out[3], [&](const std::vector<std::int64_t>& i) {
            return round_to_bf16(round_to_bf16(float(value_at(out[2], i)) - float(-zp / 3)) * float(scale));
          }) == 0);
  }
}

TEST_CASE("dequantize_per_tensor in float32 and, with out_dtype, in bfloat16 rounded after each step") {
  Graph g;
  Node* qu = g.placeholder("qu", test::meta({7, 40}, DType::uint8));
  Node* qs = g.placeholder("qs", test::meta({7, 40}, DType::int8));
  const auto dq = [&](Node* q, std::int64_t zp, std::int64_t lo, std::int64_t hi, DType d, ArgDict kw) {
    return g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.default"), {q, 0.0173, zp, lo, hi, Arg(d)}, std::move(kw));
  };
  g.output(ArgList{dq(qu, 131, 0, 255, DType::uint8, {}), dq(qs, -7, -128, 127, DType::int8, {}),
                   dq(qu, 131, 0, 255, DType::uint8, {{"out_dtype", Arg(DType::bfloat16)}}),
                   dq(qs, -7, -128, 127, DType::int8, {{"out_dtype", Arg(DType::bfloat16)}}),
                   dq(qu, 0, 0, 255, DType::uint8, {{"out_dtype", Arg(DType::float32)}})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tu = all_quantized_values({40, 7}, DType::uint8).transpose(0, 1);
  Tensor ts = all_quantized_values({7, 40}, DType::int8);
  auto out = cg.run({tu, ts});
  const float s = float(0.0173);
  const auto f32 = [&](const Tensor& q, float zp) {
    return [&q, zp, s](const std::vector<std::int64_t>& i) { return (float(value_at(q, i)) - zp) * s; };
  };
  const auto bf16 = [&](const Tensor& q, float zp) {
    return [&q, zp, s](const std::vector<std::int64_t>& i) { return round_to_bf16(round_to_bf16(float(value_at(q, i)) - zp) * s); };
  };
  CHECK(out[0].dtype() == DType::float32);
  CHECK(out[2].dtype() == DType::bfloat16);
  CHECK(inexact(out[0], f32(tu, 131)) == 0);
  CHECK(inexact(out[1], f32(ts, -7)) == 0);
  CHECK(inexact(out[2], bf16(tu, 131)) == 0);
  CHECK(inexact(out[3], bf16(ts, -7)) == 0);
  CHECK(inexact(out[4], f32(tu, 0)) == 0);
}

// A global average pool as the x86 recipe leaves it: dequantize -> mean over H and W ->
// quantize, run as one step from the quantized tensor when each is the only user of the one
// before (pointwise/dequantized_mean.hpp). Against the three run apart (the same graph with
// the mean's float result also an output) and against the mean in double: within one step,
// and equal nearly everywhere. Channels-last and NCHW sources, 70 channels (a block of 64
// and a tail), uint8 and int8 on both sides, keepdim or not, one thread and two.
TEST_CASE("dequantize -> mean over H and W -> quantize run as one step, within one step of the three run apart") {
  struct Case {
    DType in, out;
    std::int64_t in_zp, out_zp, lo, hi;
    bool channels_last, keepdim;
    ArgList dims;
  };
  const std::vector<Case> cases{{DType::uint8, DType::uint8, 131, 3, 0, 255, true, true, ArgList{-1, -2}},
                                {DType::uint8, DType::uint8, 0, 0, 0, 255, false, false, ArgList{2, 3}},
                                {DType::int8, DType::int8, -7, 2, -128, 127, true, false, ArgList{3, 2}},
                                {DType::int8, DType::uint8, 5, 100, 10, 200, false, true, ArgList{-2, -1}}};
  const std::int64_t N = 3, C = 70, H = 7, W = 5;
  const double in_scale = 0.0173, out_scale = 0.0061;
  for (const Case& k : cases)
    for (const int threads : {1, 2}) {
      CAPTURE(k.channels_last);
      CAPTURE(k.keepdim);
      CAPTURE(threads);
      const auto build = [&](bool mean_is_output) {
        Graph g;
        Node* x = k.channels_last ? g.call_function(OpRef("aten.permute.default"),
                                                    {g.placeholder("x", test::meta({N, H, W, C}, k.in)), ArgList{0, 3, 1, 2}})
                                  : g.placeholder("x", test::meta({N, C, H, W}, k.in));
        const std::int64_t in_lo = k.in == DType::uint8 ? 0 : -128, in_hi = k.in == DType::uint8 ? 255 : 127;
        Node* dq = g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.default"), {x, in_scale, k.in_zp, in_lo, in_hi, Arg(k.in)});
        Node* mean = g.call_function(OpRef("aten.mean.dim"), {dq, k.dims, k.keepdim});
        Node* q = quantize(g, mean, out_scale, k.out_zp, k.lo, k.hi, k.out);
        g.output(mean_is_output ? ArgList{q, mean} : ArgList{q});
        return g;
      };
      runtime::CompileOptions o;
      o.threads = threads;
      const auto fused = CompiledGraph::compile(build(false), {}, o), apart = CompiledGraph::compile(build(true), {}, o);
      const auto steps = [](const CompiledGraph& cg, std::string_view what) {
        std::size_t n = 0;
        for (std::size_t i = 0; i < cg.num_steps(); ++i) n += cg.step(i).implementation == what || cg.step(i).op_type == what;
        return n;
      };
      CHECK(steps(fused, "kiln_quantized_mean") == 1);
      CHECK(steps(fused, "aten.mean.dim") == 0);
      CHECK(steps(fused, "quantized_decomposed.dequantize_per_tensor.default") == 0);
      CHECK(steps(apart, "kiln_quantized_mean") == 0);
      CHECK(steps(apart, "aten.mean.dim") == 1);
      const Tensor x = all_quantized_values(k.channels_last ? runtime::Shape{N, H, W, C} : runtime::Shape{N, C, H, W}, k.in);
      const auto f = fused.run({x}), a = apart.run({x});
      REQUIRE(f[0].shape() == a[0].shape());
      CHECK(f[0].shape() == (k.keepdim ? runtime::Shape{N, C, 1, 1} : runtime::Shape{N, C}));
      CHECK(f[0].dtype() == k.out);
      int far = 0, differ = 0, off_reference = 0;
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c) {
          const std::vector<std::int64_t> at = k.keepdim ? std::vector<std::int64_t>{n, c, 0, 0} : std::vector<std::int64_t>{n, c};
          double sum = 0;
          for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t w = 0; w < W; ++w)
              sum += (value_at(x, k.channels_last ? std::vector<std::int64_t>{n, h, w, c} : std::vector<std::int64_t>{n, c, h, w}) -
                      double(k.in_zp)) * double(float(in_scale));
          const double want = quantize_ref(float(sum / double(H * W)), float(1.0 / out_scale), k.out_zp, k.lo, k.hi);
          const double got = value_at(f[0], at), other = value_at(a[0], at);
          far += std::abs(got - other) > 1.0;
          differ += got != other;
          off_reference += std::abs(got - want) > 1.0;
        }
      CHECK(far == 0);
      CHECK(off_reference == 0);
      CHECK(differ <= 2);
    }
}

// Near misses of that fusion: a mean over other dims, a dequantize read by another node too,
// a mean read by another node too, and the .tensor dequantize: each runs as its own steps
// (and the graph with none of them runs as one).
TEST_CASE("dequantize -> mean -> quantize stays three steps where one of them is read elsewhere or the mean is not over H and W") {
  const auto fused = [](int variant) {
    Graph g;
    Node* x = g.placeholder("x", test::meta({2, 16, 4, 4}, DType::uint8));
    Node* dq = variant == 3 ? g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.tensor"),
                                              {x, g.get_attr("s", test::meta({})), g.get_attr("z", test::meta({}, DType::int64)), 0, 255,
                                               Arg(DType::uint8)})
                            : g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.default"), {x, 0.02, 3, 0, 255, Arg(DType::uint8)});
    Node* mean = g.call_function(OpRef("aten.mean.dim"), {dq, variant == 0 ? ArgList{1, 2} : ArgList{2, 3}, true});
    Node* q = quantize(g, mean, 0.01, 0, 0, 255, DType::uint8);
    ArgList outs{q};
    if (variant == 1) outs.push_back(dq);
    if (variant == 2) outs.push_back(mean);
    g.output(outs);
    Tensor s = Tensor::empty({}), z = Tensor::empty({}, DType::int64);
    s.data<float>()[0] = 0.02f, z.data<std::int64_t>()[0] = 3;
    const auto cg = CompiledGraph::compile(g, {{"s", s}, {"z", z}});
    std::size_t n = 0;
    for (std::size_t i = 0; i < cg.num_steps(); ++i) n += cg.step(i).implementation == "kiln_quantized_mean";
    return n;
  };
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    CHECK(fused(variant) == 0);
  }
  CHECK(fused(4) == 1);  // the same graph with none of them: one step
}

TEST_CASE("quantize_per_channel and dequantize_per_channel along any axis of strided inputs") {
  // x is [4, 6, 5], read through a permutation; each axis gets its own scales.
  const runtime::Shape shape{4, 6, 5};
  for (const std::int64_t axis : {0, 1, -1, 2}) {
    CAPTURE(axis);
    const std::int64_t a = axis < 0 ? axis + 3 : axis, c = shape[a];
    Graph g;
    Node* x = g.placeholder("x", test::meta({4, 6, 5}));
    Node* xb = g.placeholder("xb", test::meta({4, 6, 5}, DType::bfloat16));
    Node* s = g.placeholder("s", test::meta({c}));
    Node* z = g.placeholder("z", test::meta({c}, DType::int64));
    Node* s1 = g.placeholder("s1", test::meta({1}));
    const auto qpc = [&](Node* in, Node* sc, Node* zp, std::int64_t lo, std::int64_t hi, DType d) {
      return g.call_function(OpRef("quantized_decomposed.quantize_per_channel.default"), {in, sc, zp, axis, lo, hi, Arg(d)});
    };
    Node* q = qpc(x, s, z, -128, 127, DType::int8);
    Node* qu = qpc(xb, s, z, 0, 255, DType::uint8);
    Node* dq = g.call_function(OpRef("quantized_decomposed.dequantize_per_channel.default"), {q, s, z, axis, -128, 127, Arg(DType::int8)});
    Node* dq_nz = g.call_function(OpRef("quantized_decomposed.dequantize_per_channel.default"),
                                  {qu, s, Arg(), axis, 0, 255, Arg(DType::uint8)}, {{"out_dtype", Arg(DType::bfloat16)}});
    Node* q1 = qpc(x, s1, z, -128, 127, DType::int8);  // one scale for every channel
    g.output(ArgList{q, qu, dq, dq_nz, q1});
    auto cg = CompiledGraph::compile(g, {});
    Tensor tx = random_tensor({5, 6, 4}, 94).permute({2, 1, 0});
    Tensor txb = random_bf16({4, 6, 5}, 95);
    Tensor ts = random_tensor({c}, 96), tz = random_tensor({c}, 97, DType::int64), ts1 = Tensor::empty({1}, DType::float32);
    for (std::int64_t i = 0; i < c; ++i) ts.data<float>()[i] = 0.01f + std::abs(ts.data<float>()[i]) * 0.02f;
    ts1.data<float>()[0] = 0.017f;
    auto out = cg.run({tx, txb, ts, tz, ts1});
    const auto sc = [&](const std::vector<std::int64_t>& i) { return ts.data<float>()[i[a]]; };
    const auto zp = [&](const std::vector<std::int64_t>& i) { return tz.data<std::int64_t>()[i[a]]; };
    CHECK(inexact(out[0], [&](const std::vector<std::int64_t>& i) {
            return quantize_ref(float(value_at(tx, i)), 1.0f / sc(i), zp(i), -128, 127);
          }) == 0);
    CHECK(inexact(out[1], [&](const std::vector<std::int64_t>& i) {
            return quantize_ref(float(value_at(txb, i)), 1.0f / sc(i), zp(i), 0, 255);
          }) == 0);
    CHECK(inexact(out[2], [&](const std::vector<std::int64_t>& i) {
            return float(double(value_at(out[0], i)) - double(zp(i))) * sc(i);
          }) == 0);
    CHECK(out[3].dtype() == DType::bfloat16);
    CHECK(inexact(out[3], [&](const std::vector<std::int64_t>& i) { return round_to_bf16(float(value_at(out[1], i)) * sc(i)); }) == 0);
    CHECK(inexact(out[4], [&](const std::vector<std::int64_t>& i) {
            return quantize_ref(float(value_at(tx, i)), 1.0f / 0.017f, zp(i), -128, 127);
          }) == 0);
  }
}

TEST_CASE("convert_element_type and _to_copy between float32, bfloat16, int64, int8, uint8 and bool") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({3, 4}));
  Node* b = g.placeholder("b", test::meta({3, 4}, DType::bfloat16));
  Node* u = g.placeholder("u", test::meta({3, 4}, DType::uint8));
  const auto conv = [&](Node* in, DType d) { return g.call_function(OpRef("prims.convert_element_type.default"), {in, Arg(d)}); };
  g.output(ArgList{conv(x, DType::bfloat16), conv(b, DType::float32), conv(b, DType::int64), conv(x, DType::uint8),
                   conv(x, DType::int8), conv(u, DType::bfloat16), conv(b, DType::bool_), conv(b, DType::bfloat16),
                   g.call_function(OpRef("aten._to_copy.default"), {b}, {{"dtype", Arg(DType::uint8)}})});
  auto cg = CompiledGraph::compile(g, {});
  // Floats half way between two bfloat16 values (ties go to the even one), and
  // values a uint8 or int8 cast wraps, as PyTorch's casts through int64 do.
  const std::vector<std::uint32_t> bits{0x3f808000, 0x3f818000, 0x3f818001, 0xbf808000};
  const std::vector<float> other{-1.5f, 300.7f, -300.2f, 0.0f, 2.99f, -0.5f, 1e-3f, 127.9f};
  Tensor tx = Tensor::empty({3, 4}, DType::float32);
  for (int i = 0; i < 4; ++i) tx.data<float>()[i] = std::bit_cast<float>(bits[i]);
  for (int i = 0; i < 8; ++i) tx.data<float>()[4 + i] = other[i];
  Tensor tb = Tensor::empty({3, 4}, DType::bfloat16);
  for (int i = 0; i < 12; ++i) tb.data<std::uint16_t>()[i] = float_to_bf16(tx.data<float>()[i]);
  Tensor tu = all_quantized_values({3, 4}, DType::uint8);
  auto out = cg.run({tx, tb, tu});
  CHECK(out[0].data<std::uint16_t>()[0] == 0x3f80);
  CHECK(out[0].data<std::uint16_t>()[1] == 0x3f82);
  CHECK(out[0].data<std::uint16_t>()[2] == 0x3f82);
  CHECK(out[0].data<std::uint16_t>()[3] == 0xbf80);
  const auto in = [](const Tensor& t) { return [&t](const std::vector<std::int64_t>& i) { return value_at(t, i); }; };
  CHECK(inexact(out[0], [&](const std::vector<std::int64_t>& i) { return round_to_bf16(float(value_at(tx, i))); }) == 0);
  CHECK(inexact(out[1], in(tb)) == 0);
  CHECK(inexact(out[2], [&](const std::vector<std::int64_t>& i) { return std::trunc(value_at(tb, i)); }) == 0);
  CHECK(inexact(out[3], [&](const std::vector<std::int64_t>& i) {
          return double(std::uint8_t(std::int64_t(value_at(tx, i))));
        }) == 0);
  CHECK(inexact(out[4], [&](const std::vector<std::int64_t>& i) { return double(std::int8_t(std::int64_t(value_at(tx, i)))); }) == 0);
  CHECK(int(out[3].data<std::uint8_t>()[4]) == 255);  // -1.5 -> -1 -> 255
  CHECK(int(out[3].data<std::uint8_t>()[5]) == 44);   // 300.7 -> 300 -> 44
  CHECK(inexact(out[5], in(tu)) == 0);
  CHECK(inexact(out[6], [&](const std::vector<std::int64_t>& i) { return double(value_at(tb, i) != 0); }) == 0);
  CHECK(inexact(out[7], in(tb)) == 0);
  CHECK(inexact(out[8], [&](const std::vector<std::int64_t>& i) { return double(std::uint8_t(std::int64_t(value_at(tb, i)))); }) == 0);
}

TEST_CASE("quantize and dequantize refuse, naming the node and the field, what PyTorch refuses and what kiln does not take") {
  const auto refused = [](const std::function<void(Graph&)>& build, const std::string& message) {
    CAPTURE(message);
    Graph g;
    build(g);
    CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}), doctest::Contains(message.c_str()), runtime::CompileError);
  };
  // scale and zero_point numbers, or (`.tensor`) placeholders of two elements.
  const auto per_tensor = [](std::string op, std::int64_t lo, std::int64_t hi, DType q, DType in = DType::float32, ArgDict kw = {}) {
    return [=](Graph& g) {
      Node* x = g.placeholder("x", test::meta({2, 3}, in));
      ArgList args{x, 0.1, 0, lo, hi, Arg(q)};
      if (op.ends_with(".tensor")) args[1] = args[2] = g.placeholder("s", test::meta({2}));
      g.output(ArgList{g.call_function(OpRef("quantized_decomposed." + op), args, kw, "qnode")});
    };
  };
  refused(per_tensor("quantize_per_tensor.default", -1, 255, DType::uint8),
          "node qnode (quantized_decomposed.quantize_per_tensor.default): quant_min -1 is outside uint8's range [0, 255]");
  refused(per_tensor("quantize_per_tensor.default", -128, 128, DType::int8), "quant_max 128 is outside int8's range [-128, 127]");
  refused(per_tensor("quantize_per_tensor.default", 0, 9, DType::int32), "quantized dtype int32 is not supported (uint8 and int8 are)");
  refused(per_tensor("quantize_per_tensor.default", 0, 255, DType::uint8, DType::int64),
          "the input is int64; quantize takes float32 or bfloat16");
  refused(per_tensor("quantize_per_tensor.tensor", 0, 255, DType::uint8),
          "node qnode (quantized_decomposed.quantize_per_tensor.tensor): scale must hold one element, got shape [2]");
  refused(per_tensor("dequantize_per_tensor.default", 0, 255, DType::uint8, DType::int8),
          "the input is int8 but dtype says uint8");
  refused(per_tensor("dequantize_per_tensor.default", 0, 255, DType::uint8, DType::uint8, {{"out_dtype", Arg(DType::float16)}}),
          "out_dtype must be float32 or bfloat16, got float16");
  refused(
      [](Graph& g) {
        Node* x = g.placeholder("x", test::meta({2}));
        Node* s = g.placeholder("s", test::meta({}, DType::int64));
        g.output(ArgList{g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.tensor"),
                                         {x, s, s, 0, 255, Arg(DType::uint8)})});
      },
      "the input is float32 but dtype says uint8");
  const auto per_channel = [](std::string op, runtime::Shape scales, DType sd, std::int64_t axis, DType in, std::int64_t lo = -128) {
    return [=](Graph& g) {
      Node* x = g.placeholder("x", test::meta({4, 6}, in));
      Node* s = g.placeholder("s", test::meta({scales.begin(), scales.end()}, sd));
      Node* z = g.placeholder("z", test::meta({scales.begin(), scales.end()}, DType::int64));
      g.output(ArgList{g.call_function(OpRef("quantized_decomposed." + op), {x, s, z, axis, lo, 127, Arg(DType::int8)}, {}, "qc")});
    };
  };
  refused(per_channel("quantize_per_channel.default", {5}, DType::float32, 1, DType::float32),
          "node qc (quantized_decomposed.quantize_per_channel.default): scales must have shape [6] (the size of axis 1 of the input), got [5]");
  refused(per_channel("dequantize_per_channel.default", {4, 1}, DType::float32, 0, DType::int8),
          "scales must have shape [4] (the size of axis 0 of the input), got [4, 1]");
  refused(per_channel("dequantize_per_channel.default", {6}, DType::float64, -1, DType::int8), "scales must be float32, got float64");
  refused(per_channel("quantize_per_channel.default", {6}, DType::float32, 2, DType::float32), "axis 2 is out of range for a tensor of rank 2");
  refused(per_channel("dequantize_per_channel.default", {6}, DType::float32, 1, DType::int8, -129),
          "quant_min -129 is outside int8's range [-128, 127]");
}

TEST_CASE("large maps run over several threads in chunks") {
  Graph g;
  Node* a = g.placeholder("a", test::meta({300, 257}));
  Node* b = g.placeholder("b", test::meta({257}));
  Node* s = g.call_function(OpRef("aten.add.Tensor"), {a, b});
  g.output(ArgList{g.call_function(OpRef("torch.sigmoid"), {s}), g.call_function(OpRef("aten.mul.Tensor"), {s, 2.0})});
  runtime::CompileOptions opts;
  opts.threads = 4;
  auto cg = CompiledGraph::compile(g, {}, opts);
  Tensor ta = random_tensor({257, 300}, 81).transpose(0, 1), tb = random_tensor({257}, 82);
  auto out = cg.run({ta, tb});
  CHECK(mismatches(out[0], {ta, tb}, [](std::vector<double> v) { return sigmoid(float(v[0] + v[1])); }) == 0);
  CHECK(mismatches(out[1], {ta, tb}, [](std::vector<double> v) { return 2 * float(v[0] + v[1]); }) == 0);
}

TEST_CASE("a per-channel operand over a channels-last activation, as squeeze-and-excitation multiplies") {
  // The rows of C channels are assigned several at a time with the per-channel
  // run repeated (up to 256 elements a call), never across a batch boundary;
  // 200 channels take the one-row path. where.self has a third operand that
  // continues across rows.
  for (std::int64_t c : {5, 37, 200}) {
    for (int threads : {1, 4}) {
      CAPTURE(c);
      CAPTURE(threads);
      Graph g;
      Node* x = g.placeholder("x", test::meta({2, 9, 11, c}));
      Node* s = g.placeholder("s", test::meta({2, c, 1, 1}));
      Node* xcl = g.call_function(OpRef("aten.permute.default"), {x, ArgList{0, 3, 1, 2}});
      Node* prod = g.call_function(OpRef("operator.mul"), {xcl, s});
      Node* pick = g.call_function(OpRef("aten.where.self"), {g.call_function(OpRef("aten.gt.Scalar"), {s, 0.0}), xcl, prod});
      g.output(ArgList{prod, pick});
      runtime::CompileOptions opts;
      opts.threads = threads;
      auto cg = CompiledGraph::compile(g, {}, opts);
      const Tensor tx = random_tensor({2, 9, 11, c}, 83), ts = random_tensor({2, c, 1, 1}, 84);
      const auto out = cg.run({tx, ts});
      const Tensor xv = tx.permute({0, 3, 1, 2});
      CHECK(out[0].shape() == runtime::Shape{2, c, 9, 11});
      CHECK(mismatches(out[0], {xv, ts}, [](std::vector<double> v) { return float(v[0] * v[1]); }, 0) == 0);
      CHECK(mismatches(out[1], {xv, ts}, [](std::vector<double> v) { return v[1] > 0 ? v[0] : float(v[0] * v[1]); }, 0) == 0);
    }
  }
}

TEST_CASE("shapes that do not broadcast are refused naming the node") {
  Graph g;
  Node* a = g.placeholder("a", test::meta({3, 4}));
  Node* b = g.placeholder("b", test::meta({5}));
  g.output(ArgList{g.call_function(OpRef("aten.add.Tensor"), {a, b}, {}, "bad_add")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       doctest::Contains("node bad_add (aten.add.Tensor): shapes [3, 4] and [5] do not broadcast"),
                       runtime::CompileError);
}

TEST_CASE("sliced inputs (row and column slices, a step) are read through their strides") {
  Graph g;
  Node* a = g.placeholder("a", test::meta({5, 7}));
  Node* b = g.placeholder("b", test::meta({7}));
  Node* s = g.call_function(OpRef("aten.sub.Tensor"), {a, b});
  g.output(ArgList{g.call_function(OpRef("torch.nn.functional.relu6"), {s}),
                   g.call_function(OpRef("aten.hardtanh_.default"), {a, -0.5, 0.5}),
                   g.call_function(OpRef("aten.hardsigmoid_.default"), {s})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor base = random_tensor({9, 20}, 91);
  for (std::int64_t i = 0; i < base.numel(); ++i) base.data<float>()[i] *= 4;  // reach both bounds of relu6
  Tensor ta = base.slice(0, 2, 7).slice(1, 3, 17, 2);  // [5, 7] with strides [20, 2]
  Tensor tb = random_tensor({3, 7}, 92).select(0, 1);
  REQUIRE(ta.shape() == runtime::Shape{5, 7});
  REQUIRE_FALSE(ta.is_contiguous());
  auto out = cg.run({ta, tb});
  CHECK(mismatches(out[0], {ta, tb}, [](std::vector<double> v) { return std::clamp(double(float(v[0] - v[1])), 0.0, 6.0); }) == 0);
  CHECK(mismatches(out[1], {ta}, [](std::vector<double> v) { return std::clamp(v[0], -0.5, 0.5); }) == 0);
  CHECK(mismatches(out[2], {ta, tb}, [](std::vector<double> v) { return std::clamp(double(float(v[0] - v[1])) + 3, 0.0, 6.0) / 6; }) == 0);
}

TEST_CASE("operator.iadd on a tensor is in place: refused when the tensor is read later, a number when static") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({3}));
  Node* y = g.call_function(OpRef("torch.exp"), {x}, {}, "y");
  Node* acc = g.call_function(OpRef("operator.iadd"), {y, x}, {}, "acc");
  g.output(ArgList{g.call_function(OpRef("torch.mul"), {y, acc}, {}, "reads_y")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       doctest::Contains("node acc (operator.iadd): writes in place to y, which reads_y reads later"),
                       runtime::CompileError);
  Graph h;
  Node* z = h.placeholder("z", test::meta({3}));
  Node* n = h.call_function(OpRef("operator.iadd"), {2, 3});
  h.output(ArgList{h.call_function(OpRef("operator.mul"), {z, n})});
  auto cg = CompiledGraph::compile(h, {});
  Tensor tz = random_tensor({3}, 93);
  auto out = cg.run({tz});
  CHECK(mismatches(out[0], {tz}, [](std::vector<double> v) { return 5 * v[0]; }) == 0);
}

TEST_CASE("fmod keeps the dividend's sign for float32 and int64 tensors and scalars, against std::fmod") {
  const Ref2 fmod = [](double a, double b) { return std::fmod(a, b); };
  for (auto [sa, sb] : std::vector<std::pair<runtime::Shape, runtime::Shape>>{{{33, 7}, {7}}, {{7}, {33, 1}}}) {
    check_binary("aten.fmod.Tensor", sa, sb, fmod, {}, DType::float32, 1e-5);
    check_binary("torch.fmod", sa, sb, fmod, {}, DType::int64);
  }
  check_binary("fmod", {33, 7}, {7}, fmod, {}, DType::float32, 1e-5, true);
  check_scalar("aten.fmod.Scalar", Arg(0.75), 0.75, fmod);
  check_scalar("aten.fmod.Scalar", Arg(-2), -2, fmod);
  // int64 by an int scalar stays int64 (roll's index math); by a float scalar it computes in float32.
  for (const Arg& s : {Arg(3), Arg(-3), Arg(2.5)}) {
    Graph g;
    Node* a = g.placeholder("a", test::meta({11}, DType::int64));
    g.output(ArgList{g.call_function(OpRef("aten.fmod.Scalar"), {a, s})});
    auto cg = CompiledGraph::compile(g, {});
    Tensor ta = random_tensor({11}, 57, DType::int64);
    auto out = cg.run({ta});
    const double d = s.get_if<double>() ? *s.get_if<double>() : double(*s.get_if<std::int64_t>());
    CHECK(out[0].dtype() == (s.get_if<double>() ? DType::float32 : DType::int64));
    CHECK(mismatches(out[0], {ta}, [&](std::vector<double> v) { return std::fmod(v[0], d); }) == 0);
  }
  // An integer divisor of zero is a compile error; a float one gives NaN as in C.
  Graph g;
  Node* a = g.placeholder("a", test::meta({4}, DType::int64));
  g.output(ArgList{g.call_function(OpRef("aten.fmod.Scalar"), {a, 0}, {}, "bad")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       doctest::Contains("node bad (aten.fmod.Scalar): fmod: integer division by zero"),
                       runtime::CompileError);
  check_scalar("aten.fmod.Scalar", Arg(0.0), 0.0, fmod);
  // An integer tensor divisor of zero gives 0 rather than a trap (PyTorch raises).
  Graph h;
  Node* p = h.placeholder("p", test::meta({3}, DType::int64));
  Node* q = h.placeholder("q", test::meta({3}, DType::int64));
  h.output(ArgList{h.call_function(OpRef("aten.fmod.Tensor"), {p, q})});
  const Tensor tp = Tensor::from_values<std::int64_t>({3}, std::vector<std::int64_t>{7, -7, 5});
  const Tensor tq = Tensor::from_values<std::int64_t>({3}, std::vector<std::int64_t>{0, 3, -2});
  const Tensor r = CompiledGraph::compile(h, {}).run({tp, tq})[0];
  CHECK(r.data<std::int64_t>()[0] == 0);
  CHECK(r.data<std::int64_t>()[1] == -1);
  CHECK(r.data<std::int64_t>()[2] == 1);
}
