// The int8-mixed-bf16 graph as autocast makes it (tools/export_fx.py --quantize
// x86 --autocast bfloat16 on torch 2.11, the QuantMLP model): each linear is
// addmm(to_bf16(bias), to_bf16(dequant(x)), t(to_bf16(dequant_per_channel(w))))
// with the transpose spelled aten.t, a dequantize read by two linears has a
// convert per reader, and the quantizes read bfloat16 values directly. Built
// here node for node as that export printed it; the quantization pipeline must
// give Inductor 2.11's counters on the same model compiled under autocast
// (bench/quantization/inductor_autocast_2026-11-28_torch2.11.jsonl), and the
// fused graph the unfused one's values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/bfloat16.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/quantization/quantization_pipeline.hpp"
#include "quant_graph_support.hpp"
#include "quant_kernel_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::count;
using test::with_meta;

namespace {

constexpr std::int64_t kBatch = 4;

// The autocast QuantMLP: linear 32->64 + relu, 64->64 + gelu, 64->64 plus the
// gelu's dequantized output then relu, 64->16; its weights.
struct AutocastMlp {
  Graph g;
  runtime::Weights weights;
  int linears = 0;

  Node* quantize(Node* x, double scale, std::int64_t zp, std::int64_t n) {
    Node* q = g.call_function(quantized_decomposed::quantize_per_tensor, {x, scale, zp, std::int64_t{0}, std::int64_t{255}, Arg(DType::uint8)});
    return with_meta(q, {kBatch, n}, DType::uint8);
  }
  Node* dequantize(Node* q, double scale, std::int64_t zp, std::int64_t n) {
    Node* dq = g.call_function(quantized_decomposed::dequantize_per_tensor, {q, scale, zp, std::int64_t{0}, std::int64_t{255}, Arg(DType::uint8)});
    return with_meta(dq, {kBatch, n});
  }
  Node* to_bf16(Node* x, std::vector<Dim> shape) {
    return with_meta(g.call_function(prims::convert_element_type, {x, Arg(DType::bfloat16)}), std::move(shape), DType::bfloat16);
  }
  // addmm(to_bf16(b), to_bf16(x), t(to_bf16(dequant_per_channel(w)))): bfloat16 [kBatch, n].
  Node* linear(Node* x, std::int64_t k, std::int64_t n) {
    const std::string i = std::to_string(linears++);
    weights.emplace("w" + i, test::random_ints({n, k}, DType::int8, -64, 64, 20 + linears));
    Tensor s = Tensor::empty({n}), z = Tensor::empty({n}, DType::int64);
    for (std::int64_t j = 0; j < n; ++j) s.data<float>()[j] = 0.004f + 0.0001f * float(j % 7), z.data<std::int64_t>()[j] = 0;
    weights.emplace("s" + i, s), weights.emplace("z" + i, z);
    weights.emplace("b" + i, test::random_tensor({n}, 40 + linears));
    Node* w = g.get_attr("w" + i, TensorMeta{{n, k}, DType::int8, std::nullopt});
    Node* dqc = with_meta(g.call_function(quantized_decomposed::dequantize_per_channel,
                                          {w, g.get_attr("s" + i, TensorMeta{{n}, DType::float32, std::nullopt}),
                                           g.get_attr("z" + i, TensorMeta{{n}, DType::int64, std::nullopt}), std::int64_t{0},
                                           std::int64_t{-128}, std::int64_t{127}, Arg(DType::int8)}),
                          {n, k});
    Node* b = to_bf16(g.get_attr("b" + i, TensorMeta{{n}, DType::float32, std::nullopt}), {n});
    Node* wt = with_meta(g.call_function(aten::t, {to_bf16(dqc, {n, k})}), {k, n}, DType::bfloat16);
    return with_meta(g.call_function(aten::addmm, {b, to_bf16(x, {kBatch, k}), wt}), {kBatch, n}, DType::bfloat16);
  }

  AutocastMlp() {
    Node* x = g.placeholder("x", TensorMeta{{kBatch, 32}, DType::float32, std::nullopt});
    Node* dq0 = dequantize(quantize(x, 0.0236, 111, 32), 0.0236, 111, 32);
    Node* relu = with_meta(g.call_function(aten::relu, {linear(dq0, 32, 64)}), {kBatch, 64}, DType::bfloat16);
    Node* dq1 = dequantize(quantize(relu, 0.0061, 0, 64), 0.0061, 0, 64);  // read by the next two linears
    Node* gelu = with_meta(g.call_function(aten::gelu, {linear(dq1, 64, 64)}), {kBatch, 64}, DType::bfloat16);
    Node* l3 = linear(dq1, 64, 64);
    Node* dq2 = dequantize(quantize(gelu, 0.0031, 55, 64), 0.0031, 55, 64);
    Node* add = with_meta(g.call_function(aten::add_Tensor, {l3, dq2}), {kBatch, 64});  // bf16 + float32: float32
    Node* relu2 = with_meta(g.call_function(aten::relu, {add}), {kBatch, 64});
    Node* dq3 = dequantize(quantize(relu2, 0.0047, 0, 64), 0.0047, 0, 64);
    g.output(ArgList{linear(dq3, 64, 16)});
  }
};

}  // namespace

TEST_CASE("the quantization pipeline on autocast's int8-mixed-bf16 QuantMLP gives Inductor 2.11's counters and the unfused values") {
  AutocastMlp unfused, t;
  const Tensor x = test::random_tensor({kBatch, 32}, 7);
  const Tensor want = CompiledGraph::compile(unfused.g, unfused.weights).run({x})[0];

  PassRegistry registry;
  register_quantization_passes(registry);
  register_quantization_pipeline(registry);
  PassManager pm(registry);
  pm.run(t.g, {"quantization"});
  lint(t.g);
  // Inductor's counters on the same model (bench/quantization/inductor_autocast_2026-11-28_torch2.11.jsonl).
  const std::pair<const char*, std::int64_t> inductor[] = {
      {"dequant_promotion_matcher_count", 1},       {"dequant_promotion_matcher_nodes", 2},
      {"qlinear_weight_prepack_matcher_count", 4},  {"qlinear_weight_prepack_matcher_nodes", 24},
      {"qlinear_unary_matcher_count", 2},           {"qlinear_unary_matcher_nodes", 12},
      {"qlinear_binary_matcher_count", 1},          {"qlinear_binary_matcher_nodes", 4},
      {"qlinear_unary_lower_count", 3},             {"qlinear_binary_lower_count", 1}};
  for (const auto& [key, value] : inductor) {
    CAPTURE(key);
    CHECK(pm.counters().get(key) == value);
  }
  // Inductor's 13/47 hold one more match, its joint-graph unnecessary_dtype_convert
  // (seen in its match log) on a convert its own decomposition makes.
  CHECK(pm.counters().get("pattern_matcher_count") == 13 - 1);
  CHECK(pm.counters().get("pattern_matcher_nodes") == 47 - 1);
  CHECK(count(t.g, onednn::qlinear_pointwise) == 3);
  CHECK(count(t.g, onednn::qlinear_pointwise_binary) == 1);
  CHECK(count(t.g, aten::addmm) == 0);

  // The fused graph computes what the unfused one does: int8 products are exact,
  // each side rounds its bfloat16 results once, and a value on a quantization
  // step's edge may land one step apart.
  const Tensor got = CompiledGraph::compile(t.g, t.weights).run({x})[0];
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == DType::bfloat16);
  double scale = 0, worst = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double a = bf16_to_float(want.data<std::uint16_t>()[i]), b = bf16_to_float(got.data<std::uint16_t>()[i]);
    scale = std::max(scale, std::abs(a));
    worst = std::max(worst, std::abs(a - b));
  }
  CHECK(scale > 0);
  CHECK(worst <= 0.02 * scale);
}
