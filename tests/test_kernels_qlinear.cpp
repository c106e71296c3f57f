// onednn.qlinear_pointwise (unary and binary forms, numbers and tensors for
// the source's quantization) against the unfused q/dq computation written as
// a naive loop: dequantize, float linear, post-ops, quantize; a quantized
// output may differ by one step (oneDNN sums in another order).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>
#include <string>

#include "kiln/executor/compiled_graph.hpp"
#include "kiln/io.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/quantization/quantization_pipeline.hpp"
#include "quant_kernel_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {

constexpr std::int64_t M0 = 2, M1 = 3, K = 33, N = 5;
constexpr double XS = 0.05, OS = 0.02;
constexpr std::int64_t XZ = 128, OZ = 3;

struct Params {
  // Weights within [-64, 64]: the int8 primitive runs on any CPU (see int8_products_exact).
  Tensor x = random_ints({M0, M1, K}, DType::uint8, 0, 255, 1), w = random_ints({N, K}, DType::int8, -64, 64, 2);
  Tensor ws = Tensor::empty({N}), wz = Tensor::empty({N}, DType::int64), b = random_tensor({N}, 3);
  Tensor other = random_tensor({M0, M1, N}, 4);
  Params() {
    for (std::int64_t j = 0; j < N; ++j) ws.data<float>()[j] = 0.002f + 0.001f * j, wz.data<std::int64_t>()[j] = 0;
  }
  runtime::Weights weights() const { return {{"w", w}, {"ws", ws}, {"wz", wz}, {"b", b}}; }
};

// The unfused reference: y[r, n] from dequantized operands in float32, then `post`.
template <class Post>
std::vector<double> reference(const Params& p, Post post, bool with_other) {
  std::vector<double> out(M0 * M1 * N);
  for (std::int64_t r = 0; r < M0 * M1; ++r)
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = p.b.data<float>()[n];
      for (std::int64_t k = 0; k < K; ++k) {
        const float xd = float(double(p.x.data<std::uint8_t>()[r * K + k]) - double(XZ)) * float(XS);
        const float wd = float(p.w.data<std::int8_t>()[n * K + k]) * p.ws.data<float>()[n];
        acc += double(xd) * wd;
      }
      out[r * N + n] = post(acc, with_other ? double(p.other.data<float>()[r * N + n]) : 0.0);
    }
  return out;
}
double quantize(double y) { return std::clamp(std::nearbyint(float(y) * float(1.0 / OS)) + double(OZ), 0.0, 255.0); }
double gelu(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }
double gelu_tanh(double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); }

// One qlinear_pointwise node over the fixed operands; `tensors` reads x_scale/x_zero_point from constants.
Node* qlinear(Graph& g, Node* x, bool tensors, Arg out_dtype, const std::string& post, const std::string& algorithm) {
  Node* w = g.call_function(OpRef("onednn.qlinear_prepack.default"), {g.get_attr("w", meta({N, K}, DType::int8)), Arg()});
  Arg xs = XS, xz = XZ;
  if (tensors) xs = g.get_attr("xs", meta({})), xz = g.get_attr("xz", meta({}, DType::int64));
  const double os = out_dtype.is_none() ? OS : 1.0;
  const std::int64_t oz = out_dtype.is_none() ? OZ : 0;
  return g.call_function(OpRef(tensors ? "onednn.qlinear_pointwise.tensor" : "onednn.qlinear_pointwise.default"),
                         {x, xs, xz, w, g.get_attr("ws", meta({N})), g.get_attr("wz", meta({N}, DType::int64)),
                          g.get_attr("b", meta({N})), os, oz, out_dtype, post, ArgList{}, algorithm});
}

}  // namespace

TEST_CASE("qlinear_pointwise with relu, gelu and no post-op, uint8 and float32 outputs, scale as number and as tensor") {
  const Params p;
  struct Case {
    std::string post, algorithm;
    double (*f)(double);
  };
  const std::vector<Case> cases{{"none", "", [](double v) { return v; }},
                                {"relu", "", [](double v) { return std::max(v, 0.0); }},
                                {"gelu", "none", gelu},
                                {"gelu", "tanh", gelu_tanh}};
  for (const bool tensors : {false, true})
    for (const Case& c : cases) {
      CAPTURE(tensors);
      CAPTURE(c.post);
      CAPTURE(c.algorithm);
      Graph g;
      Node* x = g.placeholder("x", meta({M0, M1, K}, DType::uint8));
      g.output(ArgList{qlinear(g, x, tensors, Arg(), c.post, c.algorithm), qlinear(g, x, tensors, Arg(DType::float32), c.post, c.algorithm)});
      runtime::Weights w = p.weights();
      Tensor xs = Tensor::empty({}), xz = Tensor::empty({}, DType::int64);
      xs.data<float>()[0] = float(XS), xz.data<std::int64_t>()[0] = XZ;
      w.emplace("xs", xs), w.emplace("xz", xz);
      auto cg = CompiledGraph::compile(g, w);
      auto out = cg.run({p.x});
      REQUIRE(out[0].shape() == runtime::Shape{M0, M1, N});
      CHECK(out[0].dtype() == DType::uint8);
      CHECK(out[1].dtype() == DType::float32);
      CHECK(max_abs_error(reference(p, [&](double y, double) { return quantize(c.f(y)); }, false), out[0]) <= 1.0);
      CHECK(max_abs_error(reference(p, [&](double y, double) { return c.f(y); }, false), out[1]) < 1e-4);
    }
}

TEST_CASE("qlinear_pointwise.binary adds a float tensor, then relu, with uint8 and float32 outputs") {
  const Params p;
  for (const std::string binary : {"add", "sum"})
    for (const std::string after : {"none", "relu"}) {
      CAPTURE(binary);
      CAPTURE(after);
      Graph g;
      Node* x = g.placeholder("x", meta({M0, M1, K}, DType::uint8));
      Node* other = g.placeholder("other", meta({M0, M1, N}));
      const auto node = [&](Arg out_dtype) {
        Node* w = g.call_function(OpRef("onednn.qlinear_prepack.default"), {g.get_attr("w", meta({N, K}, DType::int8)), Arg()});
        const bool q = out_dtype.is_none();
        return g.call_function(OpRef("onednn.qlinear_pointwise.binary"),
                               {x, XS, XZ, w, g.get_attr("ws", meta({N})), g.get_attr("wz", meta({N}, DType::int64)), other,
                                g.get_attr("b", meta({N})), q ? OS : 1.0, q ? OZ : 0, out_dtype, 1.0, 0, binary, 1.0, after,
                                ArgList{}, ""});
      };
      g.output(ArgList{node(Arg()), node(Arg(DType::float32))});
      auto cg = CompiledGraph::compile(g, p.weights());
      auto out = cg.run({p.x, p.other});
      const auto f = [&](double y, double o) { return after == "relu" ? std::max(y + o, 0.0) : y + o; };
      CHECK(max_abs_error(reference(p, [&](double y, double o) { return quantize(f(y, o)); }, true), out[0]) <= 1.0);
      CHECK(max_abs_error(reference(p, f, true), out[1]) < 1e-4);
    }
}

TEST_CASE("qlinear_pointwise with the weight, scales and zero points as inputs, and asymmetric weights, runs the unfused computation") {
  Params p;
  for (std::int64_t j = 0; j < N; ++j) p.wz.data<std::int64_t>()[j] = j - 2;
  Graph g;
  Node* x = g.placeholder("x", meta({M0, M1, K}, DType::uint8));
  Node* w = g.placeholder("w", meta({N, K}, DType::int8));
  Node* ws = g.placeholder("ws", meta({N}));
  Node* wz = g.placeholder("wz", meta({N}, DType::int64));
  Node* b = g.placeholder("b", meta({N}));
  Node* other = g.placeholder("other", meta({M0, M1, N}));
  Node* packed = g.call_function(OpRef("onednn.qlinear_prepack.default"), {w, Arg()});
  g.output(ArgList{g.call_function(OpRef("onednn.qlinear_pointwise.default"), {x, XS, XZ, packed, ws, wz, b, OS, OZ, Arg(), "relu", ArgList{}, ""}),
                   g.call_function(OpRef("onednn.qlinear_pointwise.binary"), {x, XS, XZ, packed, ws, wz, other, b, 1.0, 0,
                                                                              Arg(DType::float32), 1.0, 0, "sum", 1.0, "relu", ArgList{}, ""})});
  auto cg = CompiledGraph::compile(g, {});
  auto out = cg.run({p.x, p.w, p.ws, p.wz, p.b, p.other});
  std::vector<double> ref_sum(M0 * M1 * N);
  std::vector<double> ref(M0 * M1 * N);
  for (std::int64_t r = 0; r < M0 * M1; ++r)
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = p.b.data<float>()[n];
      for (std::int64_t k = 0; k < K; ++k)
        acc += double(float(double(p.x.data<std::uint8_t>()[r * K + k]) - double(XZ)) * float(XS)) *
               double(float(double(p.w.data<std::int8_t>()[n * K + k]) - double(n - 2)) * p.ws.data<float>()[n]);
      ref[r * N + n] = quantize(std::max(acc, 0.0));
      ref_sum[r * N + n] = std::max(acc + p.other.data<float>()[r * N + n], 0.0);
    }
  CHECK(max_abs_error(ref, out[0]) <= 1.0);
  CHECK(max_abs_error(ref_sum, out[1]) < 1e-4);
}

TEST_CASE("qlinear_pointwise refuses, naming the node, the post-ops and quantization it does not take") {
  const auto refused = [](const std::string& op, ArgList tail, const std::string& message) {
    CAPTURE(message);
    const Params p;
    Graph g;
    Node* x = g.placeholder("x", meta({M0, M1, K}, DType::uint8));
    Node* w = g.call_function(OpRef("onednn.qlinear_prepack.default"), {g.get_attr("w", meta({N, K}, DType::int8)), Arg()});
    ArgList args{x, XS, XZ, w, g.get_attr("ws", meta({N})), g.get_attr("wz", meta({N}, DType::int64))};
    if (op.find("binary") != std::string::npos) args.push_back(g.placeholder("other", meta({M0, M1, N})));
    args.push_back(g.get_attr("b", meta({N})));
    for (const Arg& a : tail) args.push_back(a);
    g.output(ArgList{g.call_function(OpRef(op), args, {}, "ql")});
    CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, p.weights()), doctest::Contains(message.c_str()), runtime::CompileError);
  };
  const std::string unary = "onednn.qlinear_pointwise.default", binary = "onednn.qlinear_pointwise.binary";
  refused(unary, {OS, OZ, Arg(), "hardswish", ArgList{}, ""},
          "node ql (onednn.qlinear_pointwise.default): unary post-op 'hardswish' (algorithm '') is not supported");
  refused(unary, {OS, OZ, Arg(), "gelu", ArgList{}, "fast"}, "unary post-op 'gelu' (algorithm 'fast') is not supported");
  refused(unary, {OS, OZ, Arg(DType::float32), "none", ArgList{}, ""}, "a float output takes output_scale 1 and output_zero_point 0");
  refused(unary, {OS, OZ, Arg(DType::int64), "none", ArgList{}, ""}, "output_dtype must be uint8, int8, float32 or bfloat16");
  refused(binary, {OS, OZ, Arg(), 1.0, 0, "mul", 1.0, "none", ArgList{}, ""},
          "node ql (onednn.qlinear_pointwise.binary): binary post-op 'mul' is not supported (add and sum are)");
  refused(binary, {OS, OZ, Arg(), 0.5, 3, "add", 1.0, "none", ArgList{}, ""}, "a quantized addend (other_scale != 1 or other_zp != 0)");
  refused(binary, {OS, OZ, Arg(), 1.0, 0, "add", 2.0, "none", ArgList{}, ""}, "binary_alpha must be 1");
  refused(binary, {OS, OZ, Arg(), 1.0, 0, "add", 1.0, "gelu", ArgList{}, ""}, "unary post-op 'gelu' after the add is not supported");
}

TEST_CASE("qlinear_pointwise with full-range int8 weights stays within one step of the unfused computation on any CPU") {
  Params p;
  p.w = random_ints({N, K}, DType::int8, -128, 127, 7);
  Graph g;
  Node* x = g.placeholder("x", meta({M0, M1, K}, DType::uint8));
  g.output(ArgList{qlinear(g, x, false, Arg(), "relu", ""), qlinear(g, x, false, Arg(DType::float32), "none", "")});
  auto cg = CompiledGraph::compile(g, p.weights());
  auto out = cg.run({p.x});
  CHECK(max_abs_error(reference(p, [](double y, double) { return quantize(std::max(y, 0.0)); }, false), out[0]) <= 1.0);
  CHECK(max_abs_error(reference(p, [](double y, double) { return y; }, false), out[1]) < 1e-4);
}

TEST_CASE("the qmlp fixture after the quantization pipeline, its buffers bound as weights, matches the unfused graph on the int8 kernels") {
  auto file = io::read_fx_json(std::string(KILN_FIXTURES_DIR) + "/inductor/qmlp_exported.json.gz");
  Graph fused = file.graph.clone();
  PassRegistry registry;
  register_quantization_passes(registry);
  register_quantization_pipeline(registry);
  PassManager(registry).run(fused, {"quantization"});
  // Weights within [-64, 64], so the int8 primitive runs on any CPU.
  runtime::Weights w;
  const std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> layers{
      {"l1", {64, 32}}, {"l2", {64, 64}}, {"l3", {64, 64}}, {"l4", {16, 64}}};
  unsigned seed = 20;
  for (const auto& layer : layers) {
    const std::string l = layer.first;
    const std::int64_t n = layer.second.first, k = layer.second.second;
    w.emplace("b_" + l + "_wq", random_ints({n, k}, DType::int8, -64, 64, seed++));
    Tensor s = Tensor::empty({n}), b = random_tensor({n}, seed++);
    for (std::int64_t j = 0; j < n; ++j) s.data<float>()[j] = 0.002f + 0.0001f * float(j % 13);
    w.emplace("b_" + l + "_ws", s);
    w.emplace("b_" + l + "_wz", random_ints({n}, DType::int64, 0, 0, seed++));
    w.emplace("b_" + l + "_b", b);
  }
  const Tensor x = random_tensor({4, 8, 32}, 30);
  auto unfused = CompiledGraph::compile(file.graph, w).run({x});
  auto out = CompiledGraph::compile(fused, w).run({x});
  REQUIRE(out[0].shape() == runtime::Shape{4, 8, 16});
  double err = 0, scale = 1e-12;
  for (std::int64_t i = 0; i < out[0].numel(); ++i) {
    err = std::max(err, std::abs(double(element(out[0], i)) - element(unfused[0], i)));
    scale = std::max(scale, std::abs(double(element(unfused[0], i))));
  }
  CHECK(err / scale < 1e-3);
}
