// Element-wise kernels against naive loops: unary ops at every level, binary
// ops with broadcasting and scalars, static operator arithmetic, in-place ops,
// casts, dropout and the quantize/dequantize ops.
#include <doctest/doctest.h>

#include <cmath>
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
  }
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

TEST_CASE("quantize and dequantize per tensor and per channel") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({4, 33}));
  Node* q = g.call_function(OpRef("quantized_decomposed.quantize_per_tensor.default"),
                            {x, 0.05, 128, 0, 255, Arg(DType::uint8)});
  Node* dq = g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.default"),
                             {q, 0.05, 128, 0, 255, Arg(DType::uint8)});
  Node* wq = g.placeholder("wq", test::meta({5, 7}, DType::int8));
  Node* ws = g.placeholder("ws", test::meta({5}));
  Node* wz = g.placeholder("wz", test::meta({5}, DType::int64));
  Node* dw = g.call_function(OpRef("quantized_decomposed.dequantize_per_channel.default"),
                             {wq, ws, wz, 0, -128, 127, Arg(DType::int8)});
  g.output(ArgList{q, dq, dw});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({33, 4}, 71).transpose(0, 1);
  tx.at<float>(std::vector<std::int64_t>{0, 0}) = 100.0f;  // clamps to 255
  tx.at<float>(std::vector<std::int64_t>{0, 1}) = 0.025f;  // half way: rounds to even (128)
  Tensor twq = Tensor::empty({5, 7}, DType::int8);
  for (int i = 0; i < 35; ++i) twq.data<std::int8_t>()[i] = static_cast<std::int8_t>(i * 7 - 120);
  Tensor tws = random_tensor({5}, 72);
  Tensor twz = random_tensor({5}, 73, DType::int64);
  auto out = cg.run({tx, twq, tws, twz});
  const auto quant = [](double v) { return std::clamp(double(std::nearbyint(float(v) * float(1.0 / 0.05))) + 128, 0.0, 255.0); };
  CHECK(out[0].dtype() == DType::uint8);
  CHECK(out[0].data<std::uint8_t>()[0] == 255);
  CHECK(out[0].data<std::uint8_t>()[1] == 128);
  CHECK(mismatches(out[0], {tx}, [&](std::vector<double> v) { return quant(v[0]); }) == 0);
  CHECK(mismatches(out[1], {tx}, [&](std::vector<double> v) { return (quant(v[0]) - 128) * 0.05; }) == 0);
  int bad = 0;
  for (int c = 0; c < 5; ++c)
    for (int k = 0; k < 7; ++k) {
      const double want = (double(twq.data<std::int8_t>()[c * 7 + k]) - double(twz.data<std::int64_t>()[c])) *
                          double(tws.data<float>()[c]);
      bad += !close(out[2].data<float>()[c * 7 + k], want);
    }
  CHECK(bad == 0);
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
