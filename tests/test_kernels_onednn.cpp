// The oneDNN kernels (matrix products, softmax, layer norm, convolution,
// batch norm, pooling) against naive loops written here, with odd sizes,
// strided inputs, constant and non-constant weights, and the ops folded into a
// primitive (batch-norm, relu, residual add) checked against the unfused result.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/kernels/onednn/conv_algorithm.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::at;
using test::random_tensor;

namespace {

double worst_rel(const std::vector<double>& ref, const Tensor& out) {
  double scale = 1e-12, err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::abs(ref[i]));
    err = std::max(err, std::abs(ref[i] - test::element(out, static_cast<std::int64_t>(i))));
  }
  return err / scale;
}
OpRef op(const char* name) { return OpRef(name); }

// Naive NCHW convolution (double accumulation).
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, std::int64_t stride, std::int64_t pad,
                               std::int64_t dil, std::int64_t groups) {
  const auto N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const auto OC = w.shape()[0], KH = w.shape()[2], KW = w.shape()[3], CG = C / groups, OG = OC / groups;
  const auto OH = (H + 2 * pad - dil * (KH - 1) - 1) / stride + 1, OW = (W + 2 * pad - dil * (KW - 1) - 1) / stride + 1;
  std::vector<double> out(N * OC * OH * OW);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < OC; ++o)
      for (std::int64_t i = 0; i < OH; ++i)
        for (std::int64_t j = 0; j < OW; ++j) {
          double acc = b ? b->data<float>()[o] : 0.0;
          const std::int64_t g = o / OG;
          for (std::int64_t c = 0; c < CG; ++c)
            for (std::int64_t p = 0; p < KH; ++p)
              for (std::int64_t q = 0; q < KW; ++q) {
                const std::int64_t y = i * stride - pad + p * dil, z = j * stride - pad + q * dil;
                if (y < 0 || y >= H || z < 0 || z >= W) continue;
                acc += double(at(x, {n, g * CG + c, y, z})) * w.data<float>()[((o * CG + c) * KH + p) * KW + q];
              }
          out[((n * OC + o) * OH + i) * OW + j] = acc;
        }
  return out;
}

// A 3x3 convolution of 8 channels to 8, padding 1, with the weight `w` (a
// get_attr): the residual tests' blocks.
Node* conv8(Graph& g, Node* in, const char* w) {
  return g.call_function(op("torch.conv2d"), {in, g.get_attr(w, meta({8, 8, 3, 3})), nullptr, ArgList{1, 1}, ArgList{1, 1}});
}
// Whether the step of node `name` writes its result into a view: summed in
// place into another value's buffer.
bool writes_in_place(const CompiledGraph& cg, std::string_view name) {
  std::size_t k = 0;
  while (k < cg.num_steps() && cg.step(k).node != name) ++k;
  REQUIRE(k < cg.num_steps());
  return cg.program().values[cg.step(k).writes.at(0)].storage == runtime::Storage::view;
}

}  // namespace

TEST_CASE("linear with a constant weight and bias on a 3-d input, and with the weight as an input") {
  for (bool constant : {true, false}) {
    Graph g;
    Node* x = g.placeholder("x", meta({2, 7, 33}));
    Node* w = constant ? g.get_attr("w", meta({5, 33})) : g.placeholder("w", meta({5, 33}));
    Node* b = constant ? g.get_attr("b", meta({5})) : g.placeholder("b", meta({5}));
    g.output(ArgList{g.call_function(op("torch.nn.functional.linear"), {x, w, b})});
    Tensor tx = random_tensor({2, 7, 33}, 1), tw = random_tensor({5, 33}, 2), tb = random_tensor({5}, 3);
    runtime::Weights weights;
    if (constant) weights = {{"w", tw}, {"b", tb}};
    auto cg = CompiledGraph::compile(g, weights);
    auto out = constant ? cg.run({tx}) : cg.run({tx, tw, tb});
    REQUIRE(out[0].shape() == runtime::Shape{2, 7, 5});
    std::vector<double> ref(2 * 7 * 5);
    for (int r = 0; r < 14; ++r)
      for (int o = 0; o < 5; ++o) {
        double acc = tb.data<float>()[o];
        for (int k = 0; k < 33; ++k) acc += double(tx.data<float>()[r * 33 + k]) * tw.data<float>()[o * 33 + k];
        ref[r * 5 + o] = acc;
      }
    CHECK(worst_rel(ref, out[0]) < 1e-5);
  }
}

TEST_CASE("addmm with alpha, beta and a full bias, bmm of a transposed operand, matmul's 1-d and batch rules") {
  Graph g;
  Node* bias = g.placeholder("bias", meta({7, 1}));
  Node* a = g.placeholder("a", meta({7, 33}));
  Node* m = g.placeholder("m", meta({33, 3}));
  Node* addmm = g.call_function(aten::addmm, {bias, a, m}, {{"beta", Arg(0.5)}, {"alpha", Arg(2.0)}});
  Node* p = g.placeholder("p", meta({4, 1, 6}));
  Node* q = g.placeholder("q", meta({4, 5, 6}));
  Node* bmm = g.call_function(aten::bmm, {p, g.call_function(aten::transpose_int, {q, 1, 2})});  // [4, 1, 5]
  Node* v = g.placeholder("v", meta({6}));
  Node* mv = g.call_function(op("torch.matmul"), {q, v});  // [4, 5]
  g.output(ArgList{addmm, bmm, mv});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tbias = random_tensor({7, 1}, 4), ta = random_tensor({7, 33}, 5), tm = random_tensor({33, 3}, 6);
  Tensor tp = random_tensor({4, 1, 6}, 7), tq = random_tensor({4, 5, 6}, 8), tv = random_tensor({6}, 9);
  auto out = cg.run({tbias, ta, tm, tp, tq, tv});
  std::vector<double> r0(21), r1(20), r2(20);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 3; ++j) {
      double acc = 0;
      for (int k = 0; k < 33; ++k) acc += double(ta.data<float>()[i * 33 + k]) * tm.data<float>()[k * 3 + j];
      r0[i * 3 + j] = 0.5 * tbias.data<float>()[i] + 2.0 * acc;
    }
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 5; ++j) {
      double acc = 0, acc2 = 0;
      for (int k = 0; k < 6; ++k) {
        acc += double(tp.data<float>()[b * 6 + k]) * tq.data<float>()[(b * 5 + j) * 6 + k];
        acc2 += double(tq.data<float>()[(b * 5 + j) * 6 + k]) * tv.data<float>()[k];
      }
      r1[b * 5 + j] = acc;
      r2[b * 5 + j] = acc2;
    }
  CHECK(out[1].shape() == runtime::Shape{4, 1, 5});
  CHECK(out[2].shape() == runtime::Shape{4, 5});
  CHECK(worst_rel(r0, out[0]) < 1e-5);
  CHECK(worst_rel(r1, out[1]) < 1e-5);
  CHECK(worst_rel(r2, out[2]) < 1e-5);

  Graph h;
  Node* x = h.placeholder("x", meta({3, 4}));
  Node* y = h.placeholder("y", meta({5, 2}));
  h.output(ArgList{h.call_function(aten::mm, {x, y}, {}, "mm")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("node mm (aten.mm.default): the operands [3, 4] and [5, 2] do not chain"),
                       runtime::CompileError);
}

TEST_CASE("attention's products read heads interleaved in their buffer as they are, against a loop") {
  // q, k, v: [2, 5, 3, 4] (batch, seq, heads, dim) permuted to [2, 3, 5, 4]; scores = q @ k^T, out = scores @ v.
  Graph g;
  Node* q = g.placeholder("q", meta({2, 5, 3, 4}));
  Node* k = g.placeholder("k", meta({2, 5, 3, 4}));
  Node* v = g.placeholder("v", meta({2, 5, 3, 4}));
  auto heads = [&](Node* t) { return g.call_function(op("torch.permute"), {t, ArgList{0, 2, 1, 3}}); };
  Node* kt = g.call_function(op("torch.transpose"), {heads(k), -1, -2});
  Node* scores = g.call_function(op("torch.matmul"), {heads(q), kt});
  g.output(ArgList{g.call_function(op("torch.matmul"), {scores, heads(v)})});
  const Tensor tq = random_tensor({2, 5, 3, 4}, 70), tk = random_tensor({2, 5, 3, 4}, 71), tv = random_tensor({2, 5, 3, 4}, 72);
  auto cg = CompiledGraph::compile(g, runtime::Weights{});
  // element (b, s, h, d) of a [2, 5, 3, 4] input
  auto el = [](const Tensor& t, int b, int s, int h, int d) { return double(t.data<float>()[((b * 5 + s) * 3 + h) * 4 + d]); };
  std::vector<double> ref(2 * 3 * 5 * 4);
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h)
      for (int i = 0; i < 5; ++i)
        for (int d = 0; d < 4; ++d) {
          double acc = 0;
          for (int j = 0; j < 5; ++j) {
            double sc = 0;
            for (int e = 0; e < 4; ++e) sc += el(tq, b, i, h, e) * el(tk, b, j, h, e);
            acc += sc * el(tv, b, j, h, d);
          }
          ref[((b * 3 + h) * 5 + i) * 4 + d] = acc;
        }
  CHECK(worst_rel(ref, cg.run({tq, tk, tv})[0]) < 1e-5);
}

TEST_CASE("a linear followed by gelu and a residual add runs as one step with the same result") {
  auto build = [](bool fusable) {
    Graph g;
    Node* x = g.placeholder("x", meta({7, 16}));
    Node* w = g.get_attr("w", meta({16, 16}));
    Node* l = g.call_function(op("torch.nn.functional.linear"), {x, w});
    Node* act = g.call_function(op("torch.nn.functional.gelu"), {l});
    Node* sum = g.call_function(op("operator.add"), {act, x});
    // Reading the linear's output elsewhere keeps gelu and the add out of the primitive.
    g.output(fusable ? ArgList{sum} : ArgList{sum, l});
    return g;
  };
  Tensor tx = random_tensor({7, 16}, 10), tw = random_tensor({16, 16}, 11);
  auto fused = CompiledGraph::compile(build(true), {{"w", tw}});
  auto plain = CompiledGraph::compile(build(false), {{"w", tw}});
  CHECK(fused.num_steps() == 1);
  CHECK(plain.num_steps() == 3);
  const auto a = fused.run({tx}), b = plain.run({tx});
  CHECK(test::max_abs_diff(a[0], b[0]) < 1e-5);
  std::vector<double> ref(7 * 16);
  for (int i = 0; i < 7; ++i)
    for (int o = 0; o < 16; ++o) {
      double acc = 0;
      for (int k = 0; k < 16; ++k) acc += double(tx.data<float>()[i * 16 + k]) * tw.data<float>()[o * 16 + k];
      ref[i * 16 + o] = 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0))) + tx.data<float>()[i * 16 + o];
    }
  CHECK(worst_rel(ref, a[0]) < 1e-5);
}

TEST_CASE("softmax and log_softmax along a strided dim, layer norm with and without affine parameters") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 7, 5}));
  Node* xt = g.call_function(aten::transpose_int, {x, 1, 2});  // [3, 5, 7], strided
  Node* sm = g.call_function(aten::softmax, {xt, -1, false});
  Node* lsm = g.call_function(op("torch.nn.functional.log_softmax"), {x}, {{"dim", Arg(1)}});
  Node* w = g.get_attr("w", meta({5}));
  Node* b = g.get_attr("b", meta({5}));
  Node* ln = g.call_function(op("torch.nn.functional.layer_norm"), {x, ArgList{5}}, {{"weight", Arg(w)}, {"bias", Arg(b)}, {"eps", Arg(1e-5)}});
  Node* ln2 = g.call_function(op("torch.nn.functional.layer_norm"), {x, ArgList{7, 5}});
  g.output(ArgList{sm, lsm, ln, ln2});
  Tensor tx = random_tensor({3, 7, 5}, 12), tw = random_tensor({5}, 13), tb = random_tensor({5}, 14);
  auto cg = CompiledGraph::compile(g, {{"w", tw}, {"b", tb}});
  auto out = cg.run({tx});
  auto X = [&](int i, int j, int k) { return double(tx.data<float>()[(i * 7 + j) * 5 + k]); };
  std::vector<double> r0(105), r1(105), r2(105), r3(105);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 5; ++k) {  // softmax over j of x[i, :, k] (the transposed view's last dim)
      double mx = -1e30, s = 0;
      for (int j = 0; j < 7; ++j) mx = std::max(mx, X(i, j, k));
      for (int j = 0; j < 7; ++j) s += std::exp(X(i, j, k) - mx);
      for (int j = 0; j < 7; ++j) {
        r0[(i * 5 + k) * 7 + j] = std::exp(X(i, j, k) - mx) / s;
        r1[(i * 7 + j) * 5 + k] = X(i, j, k) - mx - std::log(s);
      }
    }
    double m2 = 0, v2 = 0;
    for (int j = 0; j < 7; ++j)
      for (int k = 0; k < 5; ++k) m2 += X(i, j, k) / 35;
    for (int j = 0; j < 7; ++j)
      for (int k = 0; k < 5; ++k) v2 += (X(i, j, k) - m2) * (X(i, j, k) - m2) / 35;
    for (int j = 0; j < 7; ++j) {
      double m = 0, v = 0;
      for (int k = 0; k < 5; ++k) m += X(i, j, k) / 5;
      for (int k = 0; k < 5; ++k) v += (X(i, j, k) - m) * (X(i, j, k) - m) / 5;
      for (int k = 0; k < 5; ++k) {
        r2[(i * 7 + j) * 5 + k] = (X(i, j, k) - m) / std::sqrt(v + 1e-5) * tw.data<float>()[k] + tb.data<float>()[k];
        r3[(i * 7 + j) * 5 + k] = (X(i, j, k) - m2) / std::sqrt(v2 + 1e-5);
      }
    }
  }
  CHECK(worst_rel(r0, out[0]) < 1e-5);
  CHECK(worst_rel(r1, out[1]) < 1e-5);
  CHECK(worst_rel(r2, out[2]) < 1e-4);
  CHECK(worst_rel(r3, out[3]) < 1e-4);
}

TEST_CASE("convolution: stride, padding, dilation, groups and depthwise, channels-last and row-major, constant or input weights") {
  struct Case {
    std::int64_t C, OC, H, W, K, stride, pad, dil, groups;
    bool bias;
  };
  const Case cases[] = {{3, 7, 9, 9, 3, 1, 1, 1, 1, true},   {8, 16, 7, 7, 1, 2, 0, 1, 1, false},
                        {6, 6, 8, 11, 3, 1, 2, 2, 2, true},  {33, 33, 7, 7, 3, 2, 1, 1, 33, false},
                        {1, 1, 1, 1, 1, 1, 0, 1, 1, true}};
  for (const Case& c : cases)
    for (auto layout : {runtime::CompileOptions::ConvLayout::channels_last, runtime::CompileOptions::ConvLayout::contiguous})
      for (bool constant : {true, false}) {
        CAPTURE(c.C);
        CAPTURE(c.groups);
        CAPTURE(constant);
        Graph g;
        Node* x = g.placeholder("x", meta({2, c.C, c.H, c.W}));
        Node* w = constant ? g.get_attr("w", meta({c.OC, c.C / c.groups, c.K, c.K})) : g.placeholder("w", meta({c.OC, c.C / c.groups, c.K, c.K}));
        Node* b = !c.bias ? nullptr : constant ? g.get_attr("b", meta({c.OC})) : g.placeholder("b", meta({c.OC}));
        g.output(ArgList{g.call_function(aten::convolution, {x, w, b ? Arg(b) : Arg(), ArgList{c.stride, c.stride}, ArgList{c.pad, c.pad},
                                                             ArgList{c.dil, c.dil}, false, ArgList{0, 0}, c.groups})});
        Tensor tx = random_tensor({2, c.C, c.H, c.W}, 20), tw = random_tensor({c.OC, c.C / c.groups, c.K, c.K}, 21),
               tb = random_tensor({c.OC}, 22);
        runtime::CompileOptions opts;
        opts.conv_layout = layout;
        runtime::Weights weights;
        if (constant) {
          weights.emplace("w", tw);
          if (c.bias) weights.emplace("b", tb);
        }
        auto cg = CompiledGraph::compile(g, weights, opts);
        std::vector<Tensor> ins{tx};
        if (!constant) {
          ins.push_back(tw);
          if (c.bias) ins.push_back(tb);
        }
        auto out = cg.run(std::span<const Tensor>(ins));
        CHECK(worst_rel(naive_conv(tx, tw, c.bias ? &tb : nullptr, c.stride, c.pad, c.dil, c.groups), out[0]) < 1e-5);
      }
}

TEST_CASE("Winograd convolution: 3x3 stride-1 ones run it where oneDNN has it, against a loop, and the others stay direct") {
  // oneDNN 2.6 has Winograd for float only on AVX-512; elsewhere every convolution is direct.
  const bool has_winograd = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  struct Case {
    std::int64_t N, C, OC, H, W, stride;
    bool bias, relu, eligible;
  };
  const Case cases[] = {{2, 32, 48, 14, 14, 1, true, true, true}, {1, 16, 16, 9, 7, 1, false, false, true},
                        {1, 16, 32, 33, 5, 1, true, true, true}, {1, 16, 16, 9, 9, 2, true, false, false}};
  for (const Case& c : cases)
    for (auto layout : {runtime::CompileOptions::ConvLayout::channels_last, runtime::CompileOptions::ConvLayout::contiguous}) {
      CAPTURE(c.C);
      CAPTURE(c.H);
      CAPTURE(c.stride);
      Graph g;
      Node* x = g.placeholder("x", meta({c.N, c.C, c.H, c.W}));
      Node* conv = g.call_function(aten::convolution, {x, g.get_attr("w", meta({c.OC, c.C, 3, 3})),
                                                       c.bias ? Arg(g.get_attr("b", meta({c.OC}))) : Arg(), ArgList{c.stride, c.stride},
                                                       ArgList{1, 1}, ArgList{1, 1}, false, ArgList{0, 0}, 1});
      g.output(ArgList{c.relu ? g.call_function(op("aten.relu.default"), {conv}) : conv});
      Tensor tx = random_tensor({c.N, c.C, c.H, c.W}, 40), tw = random_tensor({c.OC, c.C, 3, 3}, 41), tb = random_tensor({c.OC}, 42);
      runtime::Weights weights{{"w", tw}};
      if (c.bias) weights.emplace("b", tb);
      runtime::CompileOptions opts;
      opts.conv_layout = layout;
      opts.conv_algorithm = runtime::CompileOptions::ConvAlgorithm::winograd;
      auto cg = CompiledGraph::compile(g, weights, opts);
      REQUIRE(cg.num_steps() == 1);  // the relu is still a post-op
      const bool winograd = cg.step(0).implementation.find("wino") != std::string::npos;
      CHECK(winograd == (has_winograd && c.eligible));
      std::vector<double> ref = naive_conv(tx, tw, c.bias ? &tb : nullptr, c.stride, 1, 1, 1);
      if (c.relu)
        for (double& v : ref) v = std::max(v, 0.0);
      // Winograd's transforms round differently from the direct sum: a looser bound than the 1e-5 above.
      CHECK(worst_rel(ref, cg.run({tx})[0]) < 1e-4);
    }
}

TEST_CASE("automatic convolution algorithm: Winograd only with enough multiply-adds per thread, direct when asked") {
  const bool has_winograd = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  auto conv_graph = [](std::int64_t C, std::int64_t HW) {
    Graph g;
    Node* x = g.placeholder("x", meta({1, C, HW, HW}));
    g.output(ArgList{g.call_function(aten::convolution, {x, g.get_attr("w", meta({C, C, 3, 3})), Arg(), ArgList{1, 1},
                                                         ArgList{1, 1}, ArgList{1, 1}, false, ArgList{0, 0}, 1})});
    return g;
  };
  auto uses_winograd = [](const CompiledGraph& cg) { return cg.step(0).implementation.find("wino") != std::string::npos; };
  // 64 channels at 40x40: 59 million multiply-adds, over the 20 million per thread on 1 and 2 threads, under it on 4.
  Graph big = conv_graph(64, 40);
  const std::int64_t macs = 64 * 40 * 40 * 64 * 9;
  REQUIRE(macs / 2 >= kernels::onednn::winograd_min_macs_per_thread);
  REQUIRE(macs / 4 < kernels::onednn::winograd_min_macs_per_thread);
  Tensor tw = random_tensor({64, 64, 3, 3}, 44), tx = random_tensor({1, 64, 40, 40}, 45);
  const std::vector<double> ref = naive_conv(tx, tw, nullptr, 1, 1, 1, 1);
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    runtime::CompileOptions opts;  // conv_algorithm left at its default, automatic
    opts.threads = threads;
    auto cg = CompiledGraph::compile(big, runtime::Weights{{"w", tw}}, opts);
    // Compiling clamps the threads to this machine's CPUs: 4 is 2 on a 2-core machine.
    CHECK(uses_winograd(cg) == (has_winograd && runtime::usable_threads(threads) <= 2));
    CHECK(worst_rel(ref, cg.run({tx})[0]) < 1e-4);
    opts.conv_algorithm = runtime::CompileOptions::ConvAlgorithm::direct;
    CHECK_FALSE(uses_winograd(CompiledGraph::compile(big, runtime::Weights{{"w", tw}}, opts)));
  }
  // A small convolution stays direct at its default even on one thread; forced, it runs Winograd.
  Graph small = conv_graph(16, 8);
  const runtime::Weights ws{{"w", random_tensor({16, 16, 3, 3}, 43)}};
  auto automatic = CompiledGraph::compile(small, ws);
  CHECK_FALSE(uses_winograd(automatic));
  CHECK_FALSE(automatic.step(0).implementation.empty());
  runtime::CompileOptions forced;
  forced.conv_algorithm = runtime::CompileOptions::ConvAlgorithm::winograd;
  CHECK(uses_winograd(CompiledGraph::compile(small, ws, forced)) == has_winograd);
}

TEST_CASE("--fpmath bf16: convolutions and constant-weight products read bf16 copies, within bf16's error of a loop") {
  // Where the CPU has bf16 instructions the products must really be bf16
  // (further from the loop than fp32 gets); elsewhere fp32 stays.
  const bool native_bf16 = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core_bf16;
  runtime::CompileOptions strict, bf16;
  bf16.fpmath = runtime::CompileOptions::FpMath::bf16;
  SUBCASE("convolution with bias, relu and maybe a residual add, channels-last and row-major, constant or input weights") {
    for (auto layout : {runtime::CompileOptions::ConvLayout::channels_last, runtime::CompileOptions::ConvLayout::contiguous})
      for (bool constant : {true, false})
        for (bool residual : {true, false}) {
          CAPTURE(constant);
          CAPTURE(residual);
          Graph g;
          Node* x = g.placeholder("x", meta({2, 19, 9, 7}));
          Node* r = g.placeholder("r", meta({2, 21, 9, 7}));
          Node* w = constant ? g.get_attr("w", meta({21, 19, 3, 3})) : g.placeholder("w", meta({21, 19, 3, 3}));
          Node* conv = g.call_function(aten::convolution, {x, w, Arg(g.get_attr("b", meta({21}))), ArgList{1, 1}, ArgList{1, 1},
                                                           ArgList{1, 1}, false, ArgList{0, 0}, 1});
          Node* act = g.call_function(op("aten.relu.default"), {conv});
          g.output(residual ? ArgList{g.call_function(op("aten.add.Tensor"), {act, r})} : ArgList{act, r});
          Tensor tx = random_tensor({2, 19, 9, 7}, 50), tr = random_tensor({2, 21, 9, 7}, 51),
                 tw = random_tensor({21, 19, 3, 3}, 52), tb = random_tensor({21}, 53);
          runtime::Weights weights{{"b", tb}};
          if (constant) weights.emplace("w", tw);
          std::vector<Tensor> ins{tx, tr};
          if (!constant) ins.push_back(tw);
          std::vector<double> ref = naive_conv(tx, tw, &tb, 1, 1, 1, 1);
          for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(ref[i], 0.0) + (residual ? tr.data<float>()[i] : 0.0f);
          strict.conv_layout = bf16.conv_layout = layout;
          auto a = CompiledGraph::compile(g, weights, strict), b = CompiledGraph::compile(g, weights, bf16);
          CHECK(b.num_steps() == a.num_steps());  // the epilogue still folds in
          const double err_strict = worst_rel(ref, a.run(std::span<const Tensor>(ins))[0]);
          const double err_bf16 = worst_rel(ref, b.run(std::span<const Tensor>(ins))[0]);
          CHECK(err_strict < 1e-5);
          CHECK(err_bf16 < 2e-2);
          // Row-major with a residual add has no bf16 code in oneDNN 2.6: fp32 there.
          if (native_bf16 && (layout == runtime::CompileOptions::ConvLayout::channels_last || !residual)) CHECK(err_bf16 > 1e-5);
          if (!native_bf16) CHECK(err_bf16 < 1e-5);
        }
  }
  SUBCASE("linear with a constant weight on a transposed 3-d input and on a 2-d one, and a product of two inputs that stays fp32") {
    Graph g;
    Node* x = g.placeholder("x", meta({37, 3, 40}));
    Node* y = g.placeholder("y", meta({40, 5}));
    Node* z = g.placeholder("z", meta({7, 40}));
    Node* xt = g.call_function(op("torch.transpose"), {x, 0, 1});  // [3, 37, 40], not contiguous
    Node* lin = g.call_function(op("torch.nn.functional.linear"), {xt, g.get_attr("w", meta({9, 40})), g.get_attr("b", meta({9}))});
    Node* mm = g.call_function(op("torch.matmul"), {xt, y});
    Node* lin2 = g.call_function(op("torch.nn.functional.linear"), {z, g.get_attr("w", meta({9, 40}))});
    g.output(ArgList{lin, mm, lin2});
    Tensor tx = random_tensor({37, 3, 40}, 54), ty = random_tensor({40, 5}, 55), tw = random_tensor({9, 40}, 56),
           tb = random_tensor({9}, 57), tz = random_tensor({7, 40}, 58);
    const runtime::Weights weights{{"w", tw}, {"b", tb}};
    std::vector<double> ref_lin(3 * 37 * 9), ref_mm(3 * 37 * 5);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 37; ++j) {
        const float* row = tx.data<float>() + (j * 3 + i) * 40;
        for (int o = 0; o < 9; ++o) {
          double acc = tb.data<float>()[o];
          for (int k = 0; k < 40; ++k) acc += double(row[k]) * tw.data<float>()[o * 40 + k];
          ref_lin[(i * 37 + j) * 9 + o] = acc;
        }
        for (int o = 0; o < 5; ++o) {
          double acc = 0;
          for (int k = 0; k < 40; ++k) acc += double(row[k]) * ty.data<float>()[k * 5 + o];
          ref_mm[(i * 37 + j) * 5 + o] = acc;
        }
      }
    std::vector<double> ref_lin2(7 * 9);
    for (int j = 0; j < 7; ++j)
      for (int o = 0; o < 9; ++o) {
        double acc = 0;
        for (int k = 0; k < 40; ++k) acc += double(tz.data<float>()[j * 40 + k]) * tw.data<float>()[o * 40 + k];
        ref_lin2[j * 9 + o] = acc;
      }
    const auto a = CompiledGraph::compile(g, weights, strict).run({tx, ty, tz});
    const auto b = CompiledGraph::compile(g, weights, bf16).run({tx, ty, tz});
    CHECK(worst_rel(ref_lin2, a[2]) < 1e-5);
    CHECK(worst_rel(ref_lin2, b[2]) < 2e-2);
    if (native_bf16) CHECK(worst_rel(ref_lin2, b[2]) > 1e-5);
    CHECK(worst_rel(ref_lin, a[0]) < 1e-5);
    CHECK(worst_rel(ref_lin, b[0]) < 2e-2);
    if (native_bf16) CHECK(worst_rel(ref_lin, b[0]) > 1e-5);
    CHECK(worst_rel(ref_mm, b[1]) < 1e-5);  // no constant weight: fp32
  }
}

TEST_CASE("conv, batch-norm, relu and conv, batch-norm, residual add, relu run as single steps") {
  // y = relu(bn2(conv2(x)) + relu(bn1(conv1(x)))): both convolutions take their epilogue.
  auto build = [](Graph& g, bool split) {
    Node* x = g.placeholder("x", meta({1, 8, 6, 6}));
    auto bn = [&](Node* in, const std::string& p) {
      return g.call_function(op("torch.nn.functional.batch_norm"), {in, g.get_attr(p + ".mean", meta({8})), g.get_attr(p + ".var", meta({8}))},
                             {{"weight", Arg(g.get_attr(p + ".w", meta({8})))}, {"bias", Arg(g.get_attr(p + ".b", meta({8})))},
                              {"training", Arg(false)}, {"momentum", Arg(0.1)}, {"eps", Arg(1e-5)}});
    };
    Node* c1 = g.call_function(op("torch.conv2d"), {x, g.get_attr("w1", meta({8, 8, 3, 3})), nullptr, ArgList{1, 1}, ArgList{1, 1}});
    Node* r1 = g.call_function(op("torch.nn.functional.relu"), {bn(c1, "bn1")});
    Node* c2 = g.call_function(op("torch.conv2d"), {r1, g.get_attr("w2", meta({8, 8, 3, 3})), nullptr, ArgList{1, 1}, ArgList{1, 1}});
    Node* b2 = bn(c2, "bn2");
    Node* sum = g.call_function(op("operator.add"), {b2, r1});
    Node* out = g.call_function(op("torch.nn.functional.relu"), {sum});
    g.output(split ? ArgList{out, c1, c2} : ArgList{out});
  };
  runtime::Weights w{{"w1", random_tensor({8, 8, 3, 3}, 30)}, {"w2", random_tensor({8, 8, 3, 3}, 31)}};
  for (const char* p : {"bn1", "bn2"}) {
    Tensor mean = random_tensor({8}, 32), var = random_tensor({8}, 33), gw = random_tensor({8}, 34), gb = random_tensor({8}, 35);
    for (int i = 0; i < 8; ++i) var.data<float>()[i] = 0.5f + std::abs(var.data<float>()[i]);
    w.emplace(std::string(p) + ".mean", mean);
    w.emplace(std::string(p) + ".var", var);
    w.emplace(std::string(p) + ".w", gw);
    w.emplace(std::string(p) + ".b", gb);
  }
  Graph fused_g, plain_g;
  build(fused_g, false);
  build(plain_g, true);  // the convolutions' outputs read elsewhere: nothing folds
  auto fused = CompiledGraph::compile(fused_g, w), plain = CompiledGraph::compile(plain_g, w);
  CHECK(fused.num_steps() == 2);
  // Unfolded: two convolutions, bn1 with r1 inside it (its only reader), bn2, the add, the relu.
  CHECK(plain.num_steps() == 6);
  Tensor tx = random_tensor({1, 8, 6, 6}, 36);
  const auto a = fused.run({tx}), b = plain.run({tx});
  double scale = 0;
  for (std::int64_t i = 0; i < b[0].numel(); ++i) scale = std::max(scale, double(std::abs(test::element(b[0], i))));
  CHECK(test::max_abs_diff(a[0], b[0]) < 1e-5 * scale);
}

TEST_CASE("hardtanh, ReLU6, silu and hardswish after a convolution run in its primitive, against a loop") {
  // Each activation, in each form the exporter writes, after a 3x3 convolution of 8 channels.
  struct Case {
    const char* target;
    std::vector<Arg> extra;
    std::vector<std::pair<std::string, Arg>> kwargs;
    enum { clamp, silu, hardswish } kind;
    double lo = 0, hi = 0;  // the clamp's bounds
  };
  const std::vector<Case> cases{
      {"aten.hardtanh_.default", {0.0, 6.0}, {}, Case::clamp, 0.0, 6.0},
      {"aten.hardtanh.default", {}, {}, Case::clamp, -1.0, 1.0},
      {"torch.nn.functional.hardtanh", {}, {{"min_val", Arg(-0.5)}, {"max_val", Arg(std::int64_t{2})}, {"inplace", Arg(true)}},
       Case::clamp, -0.5, 2.0},
      {"torch.nn.functional.relu6", {}, {}, Case::clamp, 0.0, 6.0},
      {"aten.silu_.default", {}, {}, Case::silu},
      {"torch.nn.functional.silu", {}, {}, Case::silu},
      {"aten.hardswish.default", {}, {}, Case::hardswish},
      {"aten.hardswish_.default", {}, {}, Case::hardswish},
      {"torch.nn.functional.hardswish", {}, {{"inplace", Arg(false)}}, Case::hardswish}};
  const Tensor w = random_tensor({8, 8, 3, 3}, 50), tx = random_tensor({1, 8, 6, 6}, 51);
  Tensor wx = w.clone();  // larger values, so that the clamps cut
  for (std::int64_t i = 0; i < wx.numel(); ++i) wx.data<float>()[i] *= 2.0f;
  const std::vector<double> conv = naive_conv(tx, wx, nullptr, 1, 1, 1, 1);
  for (const Case& c : cases) {
    CAPTURE(c.target);
    Graph g;
    Node* x = g.placeholder("x", meta({1, 8, 6, 6}));
    Node* y = conv8(g, x, "w");
    ArgList args{y};
    for (const Arg& a : c.extra) args.push_back(a);
    ArgDict kw;
    for (const auto& [k, v] : c.kwargs) kw.set(k, v);
    g.output(ArgList{g.call_function(op(c.target), std::move(args), std::move(kw))});
    auto cg = CompiledGraph::compile(g, {{"w", wx}});
    CHECK(cg.num_steps() == 1);
    std::vector<double> ref(conv);
    for (double& v : ref)
      v = c.kind == Case::silu        ? v / (1.0 + std::exp(-v))
          : c.kind == Case::hardswish ? v * std::clamp(v + 3.0, 0.0, 6.0) / 6.0
                                      : std::clamp(v, c.lo, c.hi);
    CHECK(worst_rel(ref, cg.run({tx})[0]) < 1e-5);
  }
}

TEST_CASE("a residual add writes over its addend once every other reader has run, and copies it otherwise") {
  // r = relu(conv0(x)); a = relu(conv1(r)); y = relu(conv2(a) + r): conv1 reads r
  // before conv2 runs, so conv2 may sum into r's own buffer. `later` adds a
  // reader of r after conv2 (r * 2 as an output), `view` a view of r lowered
  // before conv2 and read after it; `plain` keeps conv2's result apart (no
  // sum post-op), as the reference.
  enum class Kind { in_place, later, view, plain };
  auto build = [](Graph& g, Kind kind) {
    Node* x = g.placeholder("x", meta({1, 8, 6, 6}));
    auto conv = [&](Node* in, const char* w) { return conv8(g, in, w); };
    Node* r = g.call_function(op("torch.relu"), {conv(x, "w0")});
    Node* flat = kind == Kind::view ? g.call_function(op("torch.narrow"), {r, 1, 0, 8}) : nullptr;  // always a view
    Node* a = g.call_function(op("torch.relu"), {conv(r, "w1")});
    Node* c2 = conv(a, "w2");
    Node* y = g.call_function(op("torch.relu"), {g.call_function(op("operator.add"), {c2, r})});
    ArgList outs{y};
    if (kind == Kind::later) outs.push_back(g.call_function(op("operator.mul"), {r, 2.0}));
    if (kind == Kind::view) outs.push_back(flat);
    if (kind == Kind::plain) outs.push_back(c2), outs.push_back(r);
    g.output(outs);
  };
  const runtime::Weights w{{"w0", random_tensor({8, 8, 3, 3}, 50)}, {"w1", random_tensor({8, 8, 3, 3}, 51)},
                           {"w2", random_tensor({8, 8, 3, 3}, 52)}};
  const Tensor tx = random_tensor({1, 8, 6, 6}, 53);
  Graph plain_g;
  build(plain_g, Kind::plain);
  const auto ref = CompiledGraph::compile(plain_g, w).run({tx});
  for (Kind kind : {Kind::in_place, Kind::later, Kind::view}) {
    CAPTURE(static_cast<int>(kind));
    Graph g;
    build(g, kind);
    auto cg = CompiledGraph::compile(g, w);
    // The step of conv2 (with the add and relu) is the third convolution's.
    CHECK(writes_in_place(cg, "conv2d_2") == (kind == Kind::in_place));
    const auto out = cg.run({tx});
    // The sum post-op adds inside oneDNN's blocked code, the reference adds after it: rounding apart.
    CHECK(test::max_rel_diff(out[0], ref[0]) < 1e-6);
    if (kind != Kind::in_place) {  // the second output sees r as it was, not the sum
      const double factor = kind == Kind::later ? 2.0 : 1.0;
      REQUIRE(out[1].numel() == ref[2].numel());
      double worst = 0;
      for (std::int64_t i = 0; i < ref[2].numel(); ++i)
        worst = std::max(worst, std::abs(test::element(out[1], i) - factor * test::element(ref[2], i)));
      CHECK(worst < 1e-6);
    }
  }
}

TEST_CASE("a residual add sums in place into an earlier block's in-place result, unless a view of it is read later") {
  // y1 = relu(conv2(conv1(r)) + r) is summed into r's buffer; y2 =
  // relu(conv4(conv3(y1)) + y1) may then be summed into that same buffer, but
  // not while a view of y1 is still to be read (a view of r read later keeps
  // y1 out of r's buffer instead).
  enum class Kind { chain, view_of_y1, view_of_r, plain };
  auto build = [](Graph& g, Kind kind) {
    Node* x = g.placeholder("x", meta({1, 8, 6, 6}));
    auto conv = [&](Node* in, const char* w) { return conv8(g, in, w); };
    Node* r = g.call_function(op("torch.relu"), {conv(x, "w0")});
    Node* vr = kind == Kind::view_of_r ? g.call_function(op("torch.narrow"), {r, 1, 0, 8}) : nullptr;
    Node* y1 = g.call_function(op("torch.relu"), {g.call_function(op("operator.add"), {conv(conv(r, "w1"), "w2"), r})});
    Node* vy1 = kind == Kind::view_of_y1 ? g.call_function(op("torch.narrow"), {y1, 1, 0, 8}) : nullptr;
    Node* c2 = conv(conv(y1, "w3"), "w4");
    Node* y2 = g.call_function(op("torch.relu"), {g.call_function(op("operator.add"), {c2, y1})});
    ArgList outs{y2};
    if (vr) outs.push_back(vr);
    if (vy1) outs.push_back(vy1);
    if (kind == Kind::plain) outs.push_back(y1), outs.push_back(r), outs.push_back(c2);
    g.output(outs);
  };
  const runtime::Weights w{{"w0", random_tensor({8, 8, 3, 3}, 60)}, {"w1", random_tensor({8, 8, 3, 3}, 61)},
                           {"w2", random_tensor({8, 8, 3, 3}, 62)}, {"w3", random_tensor({8, 8, 3, 3}, 64)},
                           {"w4", random_tensor({8, 8, 3, 3}, 65)}};
  const Tensor tx = random_tensor({1, 8, 6, 6}, 63);
  Graph plain_g;
  build(plain_g, Kind::plain);  // every value read as an output: nothing is summed in place
  const auto ref = CompiledGraph::compile(plain_g, w).run({tx});
  for (Kind kind : {Kind::chain, Kind::view_of_y1, Kind::view_of_r}) {
    CAPTURE(static_cast<int>(kind));
    Graph g;
    build(g, kind);
    auto cg = CompiledGraph::compile(g, w);
    CHECK(writes_in_place(cg, "conv2d_2") == (kind != Kind::view_of_r));
    CHECK(writes_in_place(cg, "conv2d_4") == (kind != Kind::view_of_y1));  // after view_of_r, y1 is a buffer of its own
    const auto out = cg.run({tx});
    // The sum post-op adds inside oneDNN's blocked code, the reference adds after it: rounding apart.
    CHECK(test::max_rel_diff(out[0], ref[0]) < 1e-6);
    if (kind != Kind::chain) {  // the view reads its value as it was, not a later sum
      const Tensor& want = kind == Kind::view_of_y1 ? ref[1] : ref[2];
      CHECK(test::max_abs_diff(out[1], want) < 1e-6);
    }
  }
}

TEST_CASE("batch norm, max and average pooling (padding, ceil mode) and adaptive average pooling against loops") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3, 7, 7}));
  Node* mean = g.placeholder("mean", meta({3}));
  Node* var = g.placeholder("var", meta({3}));
  Node* bn = g.call_function(op("torch.nn.functional.batch_norm"), {x, mean, var}, {{"training", Arg(false)}, {"eps", Arg(1e-3)}});
  Node* mp = g.call_function(op("torch.nn.functional.max_pool2d"), {x, 3, 2, 1});
  Node* ap = g.call_function(aten::avg_pool2d, {x, ArgList{2, 2}, ArgList{2, 2}, ArgList{1, 1}, true, false});
  Node* ad = g.call_function(aten::adaptive_avg_pool2d, {g.call_function(aten::slice_Tensor, {x, 2, 0, 6}), ArgList{3, 1}});
  g.output(ArgList{bn, mp, ap, ad});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({2, 3, 7, 7}, 40), tm = random_tensor({3}, 41), tv = random_tensor({3}, 42);
  for (int i = 0; i < 3; ++i) tv.data<float>()[i] = 0.5f + std::abs(tv.data<float>()[i]);
  auto out = cg.run({tx, tm, tv});
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) { return double(tx.data<float>()[((n * 3 + c) * 7 + h) * 7 + w]); };
  std::vector<double> rbn(2 * 3 * 49), rmp(2 * 3 * 16), rap(2 * 3 * 16), rad(2 * 3 * 3);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 7; ++h)
        for (int w = 0; w < 7; ++w)
          rbn[((n * 3 + c) * 7 + h) * 7 + w] = (X(n, c, h, w) - tm.data<float>()[c]) / std::sqrt(tv.data<float>()[c] + 1e-3);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          double mx = -1e30, s = 0;
          int cnt = 0;
          for (int p = 0; p < 3; ++p)
            for (int q = 0; q < 3; ++q) {
              const int y = i * 2 - 1 + p, z = j * 2 - 1 + q;
              if (y >= 0 && y < 7 && z >= 0 && z < 7) mx = std::max(mx, X(n, c, y, z));
            }
          // avg 2x2 stride 2 pad 1, ceil mode, padding not counted: windows clipped to the input.
          for (int p = 0; p < 2; ++p)
            for (int q = 0; q < 2; ++q) {
              const int y = i * 2 - 1 + p, z = j * 2 - 1 + q;
              if (y >= 0 && y < 7 && z >= 0 && z < 7) s += X(n, c, y, z), ++cnt;
            }
          rmp[((n * 3 + c) * 4 + i) * 4 + j] = mx;
          rap[((n * 3 + c) * 4 + i) * 4 + j] = s / cnt;
        }
      for (int i = 0; i < 3; ++i) {
        double s = 0;
        for (int p = 0; p < 2; ++p)
          for (int w = 0; w < 7; ++w) s += X(n, c, i * 2 + p, w);
        rad[(n * 3 + c) * 3 + i] = s / 14;
      }
    }
  CHECK(out[1].shape() == runtime::Shape{2, 3, 4, 4});
  CHECK(out[2].shape() == runtime::Shape{2, 3, 4, 4});
  CHECK(out[3].shape() == runtime::Shape{2, 3, 3, 1});
  CHECK(worst_rel(rbn, out[0]) < 1e-5);
  CHECK(worst_rel(rmp, out[1]) < 1e-6);
  CHECK(worst_rel(rap, out[2]) < 1e-5);
  CHECK(worst_rel(rad, out[3]) < 1e-5);
}

TEST_CASE("a relu reading a batch-norm alone runs inside its primitive, in the functional and the aten tuple form") {
  // DenseNet's order (batch-norm, relu, convolution): no convolution before
  // the batch-norm takes it, so oneDNN's fuse_norm_relu does the relu.
  enum Form { functional, tuple, shared };
  for (Form form : {functional, tuple, shared}) {
    CAPTURE(static_cast<int>(form));
    Graph g;
    Node* x = g.placeholder("x", meta({2, 5, 4, 3}));
    auto p = [&](const char* name) { return g.get_attr(name, meta({5})); };
    Node* bn = nullptr;
    if (form == tuple) {
      Node* t = g.call_function(OpRef("aten._native_batch_norm_legit_no_training.default"),
                                {x, p("bw"), p("bb"), p("mean"), p("var"), 0.1, 1e-3});
      bn = g.call_function(OpRef("operator.getitem"), {t, 0});
    } else {
      bn = g.call_function(op("torch.nn.functional.batch_norm"), {x, p("mean"), p("var")},
                           {{"weight", Arg(p("bw"))}, {"bias", Arg(p("bb"))}, {"training", Arg(false)}, {"eps", Arg(1e-3)}});
    }
    Node* relu = g.call_function(op(form == tuple ? "aten.relu.default" : "torch.nn.functional.relu"), {bn});
    // `shared`: the batch-norm is read by the relu and is an output too, so the relu stays apart.
    g.output(form == shared ? ArgList{relu, bn} : ArgList{relu});
    Tensor var = random_tensor({5}, 91);
    for (int c = 0; c < 5; ++c) var.data<float>()[c] = 0.5f + std::abs(var.data<float>()[c]);
    const runtime::Weights w{{"bw", random_tensor({5}, 92)}, {"bb", random_tensor({5}, 93)}, {"mean", random_tensor({5}, 94)},
                             {"var", var}};
    auto cg = CompiledGraph::compile(g, w);
    CHECK(cg.num_steps() == (form == shared ? 2u : 1u));
    const Tensor tx = random_tensor({2, 5, 4, 3}, 95);
    const auto out = cg.run({tx});
    std::vector<double> ref(tx.numel()), plain(tx.numel());
    for (std::int64_t i = 0; i < tx.numel(); ++i) {
      const std::int64_t c = (i / 12) % 5;
      auto wv = [&](const char* k) { return double(w.at(k).data<float>()[c]); };
      plain[i] = (tx.data<float>()[i] - wv("mean")) / std::sqrt(wv("var") + 1e-3) * wv("bw") + wv("bb");
      ref[i] = std::max(0.0, plain[i]);
    }
    CHECK(worst_rel(ref, out[0]) < 1e-6);
    if (form == shared) CHECK(worst_rel(plain, out[1]) < 1e-6);
  }
}

TEST_CASE("a batch-norm tuple whose saved statistics are read is not folded into the convolution before it") {
  // The fold is refused before anything is recorded, so the convolution stays
  // plain and the batch-norm's own kernel names what it cannot give.
  Graph g;
  Node* x = g.placeholder("x", meta({1, 4, 5, 5}));
  Node* conv = g.call_function(aten::convolution, {x, g.get_attr("w", meta({4, 4, 3, 3})), nullptr, ArgList{1, 1}, ArgList{1, 1},
                                                   ArgList{1, 1}, false, ArgList{0, 0}, 1});
  auto p = [&](const char* name) { return g.get_attr(name, meta({4})); };
  Node* bn = g.call_function(OpRef("aten._native_batch_norm_legit_no_training.default"),
                             {conv, p("bw"), p("bb"), p("mean"), p("var"), 0.1, 1e-5}, {}, "bn");
  g.output(ArgList{g.call_function(OpRef("operator.getitem"), {bn, 0}), g.call_function(OpRef("operator.getitem"), {bn, 1})});
  Tensor var = Tensor::empty({4});
  for (int c = 0; c < 4; ++c) var.data<float>()[c] = 0.5f + c;
  runtime::Weights w{{"w", random_tensor({4, 4, 3, 3}, 80)}, {"bw", random_tensor({4}, 81)}, {"bb", random_tensor({4}, 82)},
                     {"mean", random_tensor({4}, 83)}, {"var", var}};
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, w), doctest::Contains("node bn (aten._native_batch_norm_legit_no_training.default): "
                                                                       "its saved statistics are read"),
                       runtime::CompileError);
}

TEST_CASE("oneDNN kernels refuse what they cannot do, naming the node") {
  Graph g;
  Node* x = g.placeholder("x", meta({1, 4, 5, 5}));
  Node* w = g.placeholder("w", meta({4, 4, 3, 3}));
  g.output(ArgList{g.call_function(aten::convolution, {x, w, nullptr, ArgList{1, 1}, ArgList{0, 0}, ArgList{1, 1}, true, ArgList{0, 0}, 3}, {}, "deconv")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}), doctest::Contains("node deconv (aten.convolution.default): weight [4, 4, 3, 3] with groups=3 does not fit"),
                       runtime::CompileError);
  Graph h;
  Node* y = h.placeholder("y", meta({1, 4, 5, 5}));
  Node* m = h.placeholder("m", meta({4}));
  h.output(ArgList{h.call_function(op("torch.nn.functional.batch_norm"), {y, m, m}, {{"training", Arg(true)}}, "bn")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("node bn (torch.nn.functional.batch_norm): batch_norm in training mode"),
                       runtime::CompileError);
}

// An empty batch into matmul (found by fuzz_compile_run) made oneDNN divide by zero.
TEST_CASE("matrix products refuse an empty operand, naming the node") {
  Graph g;
  Node* x = g.placeholder("x", meta({0, 3, 4}));
  Node* w = g.get_attr("w", meta({4, 5}));
  g.output(ArgList{g.call_function(op("torch.matmul"), {x, w}, {}, "matmul")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {{"w", random_tensor({4, 5}, 1)}}),
                       doctest::Contains("node matmul (torch.matmul): matrix products of an empty operand are not supported"),
                       runtime::CompileError);
  Graph h;
  Node* a = h.placeholder("a", meta({2, 0}));
  Node* b = h.placeholder("b", meta({0, 3}));
  h.output(ArgList{h.call_function(op("torch.mm"), {a, b}, {}, "mm")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("node mm (torch.mm): matrix products of an empty operand"),
                       runtime::CompileError);
}

// A float64 bias (found by fuzz_compile_run) reached oneDNN, which has no float64 memory, and escaped as its own error.
TEST_CASE("a product's bias of a dtype oneDNN cannot read is refused, naming the node") {
  Graph g;
  Node* x = g.placeholder("x", meta({1, 4}));
  Node* w = g.get_attr("w", meta({4, 3}));
  Node* b = g.get_attr("b", meta({3}, DType::float64));
  g.output(ArgList{g.call_function(aten::addmm, {b, x, w}, {}, "addmm")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {{"w", random_tensor({4, 3}, 1)}, {"b", runtime::Tensor::zeros({3}, DType::float64)}}),
                       doctest::Contains("node addmm (aten.addmm.default): a product's bias must be float32 or bfloat16, got float64"),
                       runtime::CompileError);
}
