// The int8-mixed-bf16 forms of the qlinear and qconv weight prepacks, and of
// their unary post-op fusions (a bfloat16 float output, and the output
// quantize read through a convert to float32), on q/dq
// graphs built here (the activation's dequantize and the weight's
// dequantize_per_channel each through convert_element_type to bfloat16): what
// each form becomes (a bfloat16-output oneDNN op), the near misses left alone
// (a float16 convert, a convert missing on one side, a dequantize or a convert
// with a second user), Inductor's counters; and numerics. The reference is the
// same graph in float32 (the converts left out, the bias of the same
// bf16-representable values), run by kiln: the fused bf16 output must equal it
// within bf16 rounding (int8 products are exact, so only the output's rounding
// to bfloat16 separates them), a fused int8 output within one quantization step
// of it; the qconv prepack is also checked against the unfused bf16 graph.
// Also the qlinear bmm form (a linear over a non-contiguous 3-D input), float32 and bf16; and the binary
// (add) fusions of a bf16 qlinear and a bf16 qconv (both with Inductor's
// in-place add too: the sum converted back to bfloat16; the qlinear's also
// checked against the unfused bf16 graph, which kiln runs after the prepack).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/bfloat16.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/quantization/qconv_post_op_fusion.hpp"
#include "kiln/passes/quantization/qconv_weight_prepack.hpp"
#include "kiln/passes/quantization/qlinear_post_op_fusion.hpp"
#include "kiln/passes/quantization/qlinear_weight_prepack.hpp"
#include "quant_graph_support.hpp"
#include "quant_kernel_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::count;
using test::meta;
using test::only;
using test::with_meta;

namespace {

constexpr double XS = 0.05;
constexpr std::int64_t XZ = 128;

// How a graph's inputs reach the float op: float32 (no converts), or the
// int8-mixed-bf16 form, with the converts' dtypes and which converts exist.
struct Mix {
  bool bf16 = true;
  DType act_to = DType::bfloat16, w_to = DType::bfloat16;
  bool act_convert = true, w_convert = true;
  DType float_dtype() const { return bf16 ? DType::bfloat16 : DType::float32; }
};

Node* convert(Graph& g, Node* in, DType to) {
  const TensorMeta* m = in->meta.val.tensor();
  return with_meta(g.call_function(prims::convert_element_type, {in, Arg(to)}), m->shape, to);
}

// Values in [-2, 2] that bfloat16 holds exactly, as float32 or bfloat16.
Tensor bf16_values(runtime::Shape shape, DType d, unsigned seed) {
  const Tensor f = test::random_tensor(shape, seed);
  Tensor t = Tensor::empty(shape, d);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const float v = round_to_bf16(std::fmax(-2.0f, std::fmin(2.0f, f.data<float>()[i])));
    if (d == DType::bfloat16) t.data<std::uint16_t>()[i] = float_to_bf16(v);
    else t.data<float>()[i] = v;
  }
  return t;
}

// A float32 copy of a float32 or bfloat16 tensor.
std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> out(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto f = static_cast<std::int64_t>(i);
    out[i] = c.dtype() == DType::bfloat16 ? bf16_to_float(c.data<std::uint16_t>()[f]) : c.data<float>()[f];
  }
  return out;
}

// Each |got - want| within bf16's rounding of want (half a unit in the last of
// 8 significant bits, 2^-9 relative; 2^-8 allowed) plus `abs` for float sums.
void check_bf16_close(const Tensor& got, const Tensor& want, double abs = 1e-4) {
  REQUIRE(got.dtype() == DType::bfloat16);
  REQUIRE(got.shape() == want.shape());
  const auto g = values(got), w = values(want);
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) - (std::abs(w[i]) * 0x1p-8 + abs));
  CHECK(worst <= 0);
}

Node* dequantize(Graph& g, Node* qx, const std::vector<Dim>& shape, bool tensors, runtime::Weights& weights) {
  ArgList args{qx, XS, XZ, 0, 255, Arg(DType::uint8)};
  if (tensors) {
    Tensor xs = Tensor::empty({}), xz = Tensor::empty({}, DType::int64);
    xs.data<float>()[0] = float(XS), xz.data<std::int64_t>()[0] = XZ;
    weights.emplace("xs", xs), weights.emplace("xz", xz);
    args[1] = g.get_attr("xs", meta({})), args[2] = g.get_attr("xz", meta({}, DType::int64));
  }
  return with_meta(
      g.call_function(tensors ? quantized_decomposed::dequantize_per_tensor_tensor : quantized_decomposed::dequantize_per_tensor, args), shape);
}

// The int8 weight `name` of `shape` (within [-64, 64], so the int8 primitive
// runs on any CPU) dequantized per channel, its scales and zero points constants.
Node* dequantize_weight(Graph& g, runtime::Weights& weights, const std::vector<std::int64_t>& shape) {
  const std::int64_t n = shape[0];
  Tensor ws = Tensor::empty({n}), wz = Tensor::empty({n}, DType::int64);
  for (std::int64_t j = 0; j < n; ++j) ws.data<float>()[j] = 0.004f + 0.001f * float(j), wz.data<std::int64_t>()[j] = 0;
  weights.emplace("w", test::random_ints(runtime::Shape(shape.begin(), shape.end()), DType::int8, -64, 64, 2));
  weights.emplace("ws", ws), weights.emplace("wz", wz);
  return with_meta(g.call_function(quantized_decomposed::dequantize_per_channel,
                                   {g.get_attr("w", meta(test::dims_of(shape), DType::int8)), g.get_attr("ws", meta({n})),
                                    g.get_attr("wz", meta({n}, DType::int64)), 0, -128, 127, Arg(DType::int8)}),
                   test::dims_of(shape));
}

// The forms of a linear the prepack takes: kiln's aten.linear, and Inductor's
// decomposition (addmm/mm on permute(w), between reshapes over a 3-D input).
enum class LinearForm { linear, decomposed };

constexpr std::int64_t N = 8, K = 32;

// uint8 x of `shape` (last dim K) -> dequantize [-> to bf16] -> a linear of N
// outputs with the weight dequantized per channel [-> to bf16] and a bias.
struct LinearNet {
  Graph g;
  runtime::Weights weights;
  Node *qx, *dq, *act, *dqc, *w, *bias_node = nullptr, *out = nullptr;
  LinearNet(std::vector<std::int64_t> shape, bool bias, Mix mix, LinearForm form = LinearForm::linear, bool tensors = false) {
    const std::vector<Dim> xs = test::dims_of(shape);
    std::vector<Dim> ys = xs;
    ys.back() = N;
    qx = g.placeholder("qx", meta(xs, DType::uint8));
    dq = dequantize(g, qx, xs, tensors, weights);
    act = mix.bf16 && mix.act_convert ? convert(g, dq, mix.act_to) : dq;
    dqc = dequantize_weight(g, weights, {N, K});
    w = mix.bf16 && mix.w_convert ? convert(g, dqc, mix.w_to) : dqc;
    const DType fd = mix.float_dtype();
    Arg b;
    if (bias) {
      weights.emplace("b", bf16_values({N}, fd, 3));
      b = bias_node = g.get_attr("b", meta({N}, fd));
    }
    if (form == LinearForm::linear) {
      out = with_meta(bias ? g.call_function(aten::linear, {act, w, b}) : g.call_function(aten::linear, {act, w}), ys, fd);
      return;
    }
    Node* t = with_meta(g.call_function(aten::permute, {w, ArgList{1, 0}}), {K, N}, fd);
    const std::int64_t m = [&] {
      std::int64_t p = 1;
      for (std::size_t i = 0; i + 1 < shape.size(); ++i) p *= shape[i];
      return p;
    }();
    Node* a2 = shape.size() > 2 ? with_meta(g.call_function(aten::reshape, {act, ArgList{m, K}}), {m, K}, fd) : act;
    out = with_meta(bias ? g.call_function(aten::addmm, {b, a2, t}) : g.call_function(aten::mm, {a2, t}), {m, N}, fd);
    if (shape.size() > 2) out = with_meta(g.call_function(aten::reshape, {out, ints_arg(shape_of(ys))}), ys, fd);
  }
  static Arg ints_arg(const std::vector<std::int64_t>& v) {
    ArgList l;
    for (std::int64_t x : v) l.push_back(Arg(x));
    return l;
  }
  static std::vector<std::int64_t> shape_of(const std::vector<Dim>& d) {
    std::vector<std::int64_t> v;
    for (const Dim& x : d) v.push_back(std::get<std::int64_t>(x));
    return v;
  }
  LinearNet& finish() {
    g.output(ArgList{out});
    return *this;
  }
  Tensor run(const Tensor& x) const { return CompiledGraph::compile(g, weights).run({x})[0]; }
};

// The bf16 forms' near misses: `mix`, and which node gets a second user
// (1 the dequantize, 2 the activation's convert, 3 the weight's convert).
struct NearMiss {
  const char* what;
  Mix mix;
  int second_user = 0;
};
std::vector<NearMiss> near_misses() {
  return {{"the activation converted to float16", Mix{.act_to = DType::float16}},
          {"the weight converted to float16", Mix{.w_to = DType::float16}},
          {"the weight's convert missing", Mix{.w_convert = false}},
          {"the activation's convert missing", Mix{.act_convert = false}},
          {"the dequantize has a second user", Mix{}, 1},
          {"the activation's convert has a second user", Mix{}, 2},
          {"the weight's convert has a second user", Mix{}, 3}};
}

// More than a quarter of a uint8 reference off the quantize's saturation, so
// that comparing with it sees the sum and not only the clamp.
void check_mostly_unsaturated(const Tensor& want) {
  std::int64_t inside = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) inside += want.data<std::uint8_t>()[i] > 0 && want.data<std::uint8_t>()[i] < 255;
  CHECK(inside * 4 > want.numel());
}
}  // namespace

TEST_CASE("qlinear_weight_prepack int8-mixed-bf16: linear(to_bf16(dequant), to_bf16(dequant_per_channel)) becomes a bf16-output qlinear") {
  for (const bool bias : {true, false})
    for (const bool three_d : {false, true})
      for (const bool tensors : {false, true}) {
        CAPTURE(bias);
        CAPTURE(three_d);
        CAPTURE(tensors);
        LinearNet t(three_d ? std::vector<std::int64_t>{4, 8, K} : std::vector<std::int64_t>{16, K}, bias, Mix{}, LinearForm::linear, tensors);
        t.finish();
        Counters c;
        CHECK(qlinear_weight_prepack(t.g, &c) == 1);
        lint(t.g);
        const Node* q = only(t.g, tensors ? onednn::qlinear_pointwise_tensor : onednn::qlinear_pointwise);
        CHECK(q->arg(0).node() == t.qx);
        CHECK(q->arg(9) == Arg(DType::bfloat16));
        CHECK(q->meta.val.tensor()->dtype == DType::bfloat16);
        CHECK(q->arg(6) == (bias ? Arg(t.bias_node) : Arg()));
        CHECK(count(t.g, prims::convert_element_type) == 0);
        CHECK(count(t.g, quantized_decomposed::dequantize_per_channel) == 0);
        CHECK(count(t.g, onednn::qlinear_prepack) == 1);
        // Inductor's graph: dq, to_bf16, dqc, to_bf16, permute, addmm or mm, and two reshapes over a 3-D input.
        CHECK(c.get("qlinear_weight_prepack_matcher_count") == 1);
        CHECK(c.get("qlinear_weight_prepack_matcher_nodes") == (three_d ? 8 : 6));
      }
}

TEST_CASE("qlinear_weight_prepack int8-mixed-bf16: Inductor's decomposed addmm and mm, 2-D and between reshapes") {
  for (const bool bias : {true, false})
    for (const bool three_d : {false, true}) {
      CAPTURE(bias);
      CAPTURE(three_d);
      LinearNet t(three_d ? std::vector<std::int64_t>{4, 8, K} : std::vector<std::int64_t>{16, K}, bias, Mix{}, LinearForm::decomposed);
      t.finish();
      Counters c;
      CHECK(qlinear_weight_prepack(t.g, &c) == 1);
      lint(t.g);
      const Node* q = only(t.g, onednn::qlinear_pointwise);
      CHECK(q->arg(9) == Arg(DType::bfloat16));
      CHECK(count(t.g, aten::permute) == 0);
      CHECK(count(t.g, aten::reshape) == 0);
      CHECK(c.get("qlinear_weight_prepack_matcher_nodes") == (three_d ? 8 : 6));
      CHECK(c.get("pattern_matcher_nodes") == (three_d ? 8 : 6));
    }
}

TEST_CASE("qlinear_weight_prepack int8-mixed-bf16 near misses: a float16 convert, one convert missing, a second user") {
  for (const LinearForm form : {LinearForm::linear, LinearForm::decomposed})
    for (const NearMiss& miss : near_misses()) {
      CAPTURE(static_cast<int>(form));
      CAPTURE(std::string(miss.what));
      LinearNet t({16, K}, true, miss.mix, form);
      ArgList outs{t.out};
      if (Node* extra = miss.second_user == 1 ? t.dq : miss.second_user == 2 ? t.act : miss.second_user == 3 ? t.w : nullptr)
        outs.push_back(extra);
      t.g.output(std::move(outs));
      Counters c;
      CHECK(qlinear_weight_prepack(t.g, &c) == 0);
      CHECK(count(t.g, onednn::qlinear_pointwise) == 0);
      CHECK(c.get("qlinear_weight_prepack_matcher_count") == 0);
    }
}

TEST_CASE("qlinear int8-mixed-bf16 numerics: the fused bf16 output within bf16 rounding of the float32 graph run by kiln") {
  for (const LinearForm form : {LinearForm::linear, LinearForm::decomposed})
    for (const bool bias : {true, false})
      for (const bool three_d : {false, true}) {
        CAPTURE(static_cast<int>(form));
        CAPTURE(bias);
        CAPTURE(three_d);
        const std::vector<std::int64_t> shape = three_d ? std::vector<std::int64_t>{4, 8, K} : std::vector<std::int64_t>{16, K};
        const Tensor x = test::random_ints(runtime::Shape(shape.begin(), shape.end()), DType::uint8, 0, 255, 11);
        LinearNet ref(shape, bias, Mix{.bf16 = false}, form);
        const Tensor want = ref.finish().run(x);
        LinearNet t(shape, bias, Mix{}, form);
        t.finish();
        REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
        check_bf16_close(t.run(x), want);
      }
}

namespace {

const std::vector<Dim> X4{1, 4, 8, 8}, Y4{1, 6, 8, 8};

// uint8 x [1, 4, 8, 8] -> dequantize [-> to bf16] -> 3x3 convolution with the
// weight [6, 4, 3, 3] dequantized per channel [-> to bf16] and a bias (or None).
struct ConvNet {
  Graph g;
  runtime::Weights weights;
  Node *qx, *dq, *act, *dqc, *w, *conv, *accum = nullptr;
  ConvNet(bool bias, Mix mix, bool tensors = false) {
    qx = g.placeholder("qx", meta(X4, DType::uint8));
    dq = dequantize(g, qx, X4, tensors, weights);
    act = mix.bf16 && mix.act_convert ? convert(g, dq, mix.act_to) : dq;
    dqc = dequantize_weight(g, weights, {6, 4, 3, 3});
    w = mix.bf16 && mix.w_convert ? convert(g, dqc, mix.w_to) : dqc;
    const DType fd = mix.float_dtype();
    Arg b;
    if (bias) {
      weights.emplace("b", bf16_values({6}, fd, 3));
      b = g.get_attr("b", meta({6}, fd));
    }
    conv = with_meta(
        g.call_function(aten::convolution, {act, w, b, ArgList{1, 1}, ArgList{1, 1}, ArgList{1, 1}, false, ArgList{0, 0}, 1}), Y4, fd);
  }
  ConvNet& finish() {
    g.output(ArgList{conv});
    return *this;
  }
  Tensor run(const Tensor& x) const { return CompiledGraph::compile(g, weights).run({x})[0]; }
};

}  // namespace

TEST_CASE("qconv_weight_prepack int8-mixed-bf16: convolution(to_bf16(dequant), to_bf16(dequant_per_channel)) becomes a bf16-output qconv") {
  for (const bool bias : {true, false})
    for (const bool tensors : {false, true}) {
      CAPTURE(bias);
      CAPTURE(tensors);
      ConvNet t(bias, Mix{}, tensors);
      t.finish();
      Counters c;
      CHECK(qconv_weight_prepack(t.g, &c) == 1);
      lint(t.g);
      const Node* q = only(t.g, tensors ? onednn::qconv_pointwise_tensor : onednn::qconv_pointwise);
      CHECK(q->arg(0).node() == t.qx);
      CHECK(q->arg(13) == Arg(DType::bfloat16));
      CHECK(q->meta.val.tensor()->dtype == DType::bfloat16);
      CHECK(count(t.g, prims::convert_element_type) == 0);
      CHECK(count(t.g, aten::convolution) == 0);
      CHECK(c.get("qconv_weight_prepack_matcher_count") == 1);
      CHECK(c.get("qconv_weight_prepack_matcher_nodes") == 5);  // dq, to_bf16, dqc, to_bf16, convolution
    }
}

TEST_CASE("qconv_weight_prepack int8-mixed-bf16 near misses: a float16 convert, one convert missing, a second user") {
  for (const NearMiss& miss : near_misses()) {
    CAPTURE(std::string(miss.what));
    ConvNet t(true, miss.mix);
    ArgList outs{t.conv};
    if (Node* extra = miss.second_user == 1 ? t.dq : miss.second_user == 2 ? t.act : miss.second_user == 3 ? t.w : nullptr)
      outs.push_back(extra);
    t.g.output(std::move(outs));
    Counters c;
    CHECK(qconv_weight_prepack(t.g, &c) == 0);
    CHECK(count(t.g, onednn::qconv_pointwise) == 0);
    CHECK(c.get("qconv_weight_prepack_matcher_count") == 0);
  }
}

TEST_CASE("qconv int8-mixed-bf16 numerics: the fused bf16 output within bf16 rounding of the float32 graph, near the unfused bf16 graph") {
  const Tensor x = test::random_ints({1, 4, 8, 8}, DType::uint8, 0, 255, 11);
  for (const bool bias : {true, false})
    for (const bool tensors : {false, true}) {
      CAPTURE(bias);
      CAPTURE(tensors);
      ConvNet ref(bias, Mix{.bf16 = false}, tensors);
      const Tensor want = ref.finish().run(x);
      ConvNet t(bias, Mix{}, tensors);
      t.finish();
      // The same graph unfused: its bf16 convolution rounds the same sums once.
      const Tensor unfused = t.run(x);
      REQUIRE(unfused.dtype() == DType::bfloat16);
      REQUIRE(qconv_weight_prepack(t.g, nullptr) == 1);
      const Tensor fused = t.run(x);
      check_bf16_close(fused, want);
      // The unfused graph rounds the dequantized activation and weight to bf16 before
      // multiplying (the fused qconv multiplies the int8 values exactly), so the two
      // agree within two bf16 steps at the outputs' scale, not element by element.
      const auto u = values(unfused), f = values(fused);
      double scale = 0, worst = 0;
      for (std::size_t i = 0; i < u.size(); ++i) scale = std::max(scale, std::abs(u[i])), worst = std::max(worst, std::abs(u[i] - f[i]));
      CHECK(worst <= scale * 0x1p-7);
    }
}

namespace {

constexpr std::int64_t B = 4, M = 8;

// Inductor's decomposition of a linear over a non-contiguous 3-D input: uint8
// x [M, B, K] permuted to [B, M, K] -> dequantize [-> to bf16] -> expand(act_size)
// -> bmm(., expand(permute(dequant_per_channel(w) [-> to bf16], [1, 0]), wgt_size))
// [-> add(., b)]. The sizes are the valid ones unless given.
struct BmmNet {
  Graph g;
  runtime::Weights weights;
  Node *qx, *dq, *act, *dqc, *w, *bias_node = nullptr, *bmm, *out;
  BmmNet(bool bias, Mix mix, std::vector<std::int64_t> act_size = {B, M, K}, std::vector<std::int64_t> wgt_size = {B, K, N},
         std::vector<std::int64_t> bias_size = {N}) {
    const DType fd = mix.float_dtype();
    Node* raw = g.placeholder("qx", meta({M, B, K}, DType::uint8));
    qx = with_meta(g.call_function(aten::permute, {raw, ArgList{1, 0, 2}}), {B, M, K}, DType::uint8);
    dq = dequantize(g, qx, {B, M, K}, false, weights);
    act = mix.bf16 && mix.act_convert ? convert(g, dq, mix.act_to) : dq;
    dqc = dequantize_weight(g, weights, {N, K});
    w = mix.bf16 && mix.w_convert ? convert(g, dqc, mix.w_to) : dqc;
    Node* t = with_meta(g.call_function(aten::permute, {w, ArgList{1, 0}}), {K, N}, fd);
    Node* ae = with_meta(g.call_function(aten::expand, {act, LinearNet::ints_arg(act_size)}), test::dims_of(act_size), fd);
    Node* we = with_meta(g.call_function(aten::expand, {t, LinearNet::ints_arg(wgt_size)}), test::dims_of(wgt_size), fd);
    out = bmm = with_meta(g.call_function(aten::bmm, {ae, we}), {B, M, N}, fd);
    if (bias) {
      weights.emplace("b", bf16_values(runtime::Shape(bias_size.begin(), bias_size.end()), fd, 3));
      bias_node = g.get_attr("b", meta(test::dims_of(bias_size), fd));
      out = with_meta(g.call_function(aten::add_Tensor, {bmm, bias_node}), {B, M, N}, fd);
    }
    g.output(ArgList{out});
  }
  Tensor run(const Tensor& x) const { return CompiledGraph::compile(g, weights).run({x})[0]; }
};

}  // namespace

TEST_CASE("qlinear_weight_prepack: the bmm form of a non-contiguous 3-D input, with and without bias, float32 and int8-mixed-bf16") {
  for (const bool bias : {true, false})
    for (const bool bf16 : {false, true}) {
      CAPTURE(bias);
      CAPTURE(bf16);
      BmmNet t(bias, Mix{.bf16 = bf16});
      Counters c;
      CHECK(qlinear_weight_prepack(t.g, &c) == 1);
      lint(t.g);
      const Node* q = only(t.g, onednn::qlinear_pointwise);
      CHECK(q->arg(0).node() == t.qx);
      CHECK(q->arg(6) == (bias ? Arg(t.bias_node) : Arg()));
      CHECK(q->arg(9) == Arg(bf16 ? DType::bfloat16 : DType::float32));
      CHECK(count(t.g, aten::bmm) == 0);
      CHECK(count(t.g, aten::expand) == 0);
      CHECK(count(t.g, aten::add_Tensor) == 0);
      CHECK(count(t.g, aten::permute) == 1);  // the activation's own, outside the match
      // Inductor's match: dq, expand, dqc, permute, expand, bmm, the add of a bias, the two converts in bf16.
      CHECK(c.get("qlinear_weight_prepack_matcher_count") == 1);
      CHECK(c.get("qlinear_weight_prepack_matcher_nodes") == 6 + (bias ? 1 : 0) + (bf16 ? 2 : 0));
      CHECK(c.get("pattern_matcher_nodes") == 6 + (bias ? 1 : 0) + (bf16 ? 2 : 0));
    }
}

TEST_CASE("qlinear_weight_prepack bmm form near misses: an expand that broadcasts, a wrong weight expand, a bias that is no [N] vector") {
  SUBCASE("the activation's expand asks another size than the activation's") {
    BmmNet t(false, Mix{}, {2 * B, M, K}, {2 * B, K, N});
    CHECK(qlinear_weight_prepack(t.g, nullptr) == 0);
    CHECK(count(t.g, aten::bmm) == 1);
  }
  SUBCASE("the weight's expand batch differs from the activation's") {
    BmmNet t(false, Mix{}, {B, M, K}, {1, K, N});
    CHECK(qlinear_weight_prepack(t.g, nullptr) == 0);
  }
  SUBCASE("the bias is a full [B, M, N] addend: the bare bmm still fuses, the add stays") {
    BmmNet t(true, Mix{}, {B, M, K}, {B, K, N}, {B, M, N});
    Counters c;
    CHECK(qlinear_weight_prepack(t.g, &c) == 1);
    lint(t.g);
    CHECK(count(t.g, aten::add_Tensor) == 1);
    CHECK(only(t.g, onednn::qlinear_pointwise)->arg(6) == Arg());
    CHECK(c.get("qlinear_weight_prepack_matcher_nodes") == 8);
  }
  SUBCASE("the int8-mixed-bf16 form with a float16 convert") {
    BmmNet t(true, Mix{.act_to = DType::float16});
    CHECK(qlinear_weight_prepack(t.g, nullptr) == 0);
  }
}

// Records on the activation (and its convert) the strides of [M, B, K] permuted to [B, M, K], or contiguous ones.
void record_strides(LinearNet& t, bool permuted) {
  const std::vector<Dim> strides = permuted ? std::vector<Dim>{K, B * K, 1} : std::vector<Dim>{M * K, K, 1};
  for (Node* n : {t.qx, t.dq, t.act}) n->meta.val = TensorMeta{{B, M, K}, n->meta.val.tensor()->dtype, strides};
}

TEST_CASE("qlinear_weight_prepack counts kiln's linear over a permuted 3-D input as Inductor's bmm form, a contiguous one as reshapes") {
  for (const bool permuted : {true, false})
    for (const bool bias : {true, false})
      for (const bool bf16 : {false, true}) {
        CAPTURE(permuted);
        CAPTURE(bias);
        CAPTURE(bf16);
        LinearNet t({B, M, K}, bias, Mix{.bf16 = bf16});
        record_strides(t, permuted);
        t.finish();
        Counters c;
        CHECK(qlinear_weight_prepack(t.g, &c) == 1);
        // kiln's dq, dqc, linear (and the converts); Inductor's adds a permute and two reshapes,
        // or a permute, two expands and (with a bias) the add.
        const std::int64_t kiln = 3 + (bf16 ? 2 : 0);
        CHECK(c.get("qlinear_weight_prepack_matcher_nodes") == kiln + 3 + (permuted && bias ? 1 : 0));
      }
}

TEST_CASE("dequant_promotion counts a dequantize shared by linears over a permuted 3-D input without the reshape Inductor would not have") {
  for (const bool permuted : {true, false}) {
    CAPTURE(permuted);
    LinearNet t({B, M, K}, true, Mix{.bf16 = false});
    record_strides(t, permuted);
    Node* second = with_meta(t.g.call_function(aten::linear, {t.act, t.w, t.bias_node}), {B, M, N});  // t's weight and bias again
    t.g.output(ArgList{t.out, second});
    Counters c;
    CHECK(dequant_promotion(t.g, &c) == 1);
    CHECK(c.get("dequant_promotion_matcher_nodes") == (permuted ? 1 : 2));
  }
}

TEST_CASE("qlinear bmm form numerics: the fused qlinear on the permuted input against the unfused float32 graph run by kiln") {
  const Tensor x = test::random_ints({M, B, K}, DType::uint8, 0, 255, 11);
  for (const bool bias : {true, false}) {
    CAPTURE(bias);
    BmmNet ref(bias, Mix{.bf16 = false});
    const Tensor want = ref.run(x);
    {
      BmmNet t(bias, Mix{.bf16 = false});
      REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
      CHECK(test::max_abs_diff(t.run(x), want) <= 1e-4);
    }
    BmmNet t(bias, Mix{});
    REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
    check_bf16_close(t.run(x), want);
  }
}

namespace {

constexpr double OS = 0.04;
constexpr std::int64_t OZ = 7;

// `y` -> [convert to float32 ->] quantize_per_tensor (uint8, OS, OZ), over `shape`.
Node* quantize_out(Graph& g, Node* y, const std::vector<Dim>& shape, bool to_fp32, DType convert_to = DType::float32) {
  if (to_fp32) y = convert(g, y, convert_to);
  return with_meta(g.call_function(quantized_decomposed::quantize_per_tensor, {y, OS, OZ, 0, 255, Arg(DType::uint8)}), shape, DType::uint8);
}

// `op` (none, relu, gelu, gelu_tanh, hardtanh, hardswish, silu) on `y`, its dtype kept.
Node* unary(Graph& g, const std::string& op, Node* y) {
  const TensorMeta* m = y->meta.val.tensor();
  Node* n = nullptr;
  if (op == "relu") n = g.call_function(aten::relu, {y});
  else if (op == "gelu") n = g.call_function(aten::gelu, {y});
  else if (op == "gelu_tanh") n = g.call_function(aten::gelu, {y}, ArgDict{{"approximate", Arg(std::string("tanh"))}});
  else if (op == "hardtanh") n = g.call_function(aten::hardtanh, {y, 0.0, 6.0});
  else if (op == "hardswish") n = g.call_function(aten::hardswish, {y});
  else if (op == "silu") n = g.call_function(aten::silu, {y});
  else return y;
  return with_meta(n, m->shape, m->dtype);
}

// Largest |a - b| over two uint8 tensors of one shape.
int max_step_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == DType::uint8);
  REQUIRE(b.dtype() == DType::uint8);
  REQUIRE(a.shape() == b.shape());
  int d = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::abs(int(a.data<std::uint8_t>()[i]) - int(b.data<std::uint8_t>()[i])));
  return d;
}

const std::vector<Dim> Y2{16, N};

}  // namespace

TEST_CASE("qlinear unary fusion int8-mixed-bf16: quant(to_fp32(op(qlinear))) and a bf16 float output op(qlinear), Inductor's counters") {
  for (const std::string op : {"none", "relu", "gelu", "gelu_tanh"})
    for (const bool quantized : {true, false}) {
      if (op == "none" && !quantized) continue;
      CAPTURE(op);
      CAPTURE(quantized);
      LinearNet t({16, K}, true, Mix{});
      Node* y = unary(t.g, op, t.out);
      t.g.output(ArgList{quantized ? quantize_out(t.g, y, Y2, true) : y});
      Counters c;
      REQUIRE(qlinear_weight_prepack(t.g, &c) == 1);
      CHECK(qlinear_post_op_fusion(t.g, &c) == 1);
      lint(t.g);
      const Node* q = only(t.g, onednn::qlinear_pointwise);
      CHECK(q->arg(9) == Arg(quantized ? DType::uint8 : DType::bfloat16));
      CHECK(q->arg(10) == Arg(std::string(op == "none" ? "none" : op == "relu" ? "relu" : "gelu")));
      CHECK(count(t.g, prims::convert_element_type) == 0);
      CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 0);
      // Inductor's bf16 gelu: to_fp32, the decomposition (5 nodes, tanh 9), and back (the convert before the quantize).
      const std::int64_t unary_nodes = op == "none" ? 0 : op == "relu" ? 1 : op == "gelu" ? 6 : 10;
      CHECK(c.get("qlinear_unary_matcher_count") == 1);
      CHECK(c.get("qlinear_unary_matcher_nodes") == 1 + unary_nodes + (quantized ? 2 : (op == "gelu" || op == "gelu_tanh" ? 1 : 0)));
    }
}

// The near misses of the quantized forms keep their quantize (the relu before
// it may still fuse as a float output); `float_only`: no quantize, nothing fuses.
TEST_CASE("qlinear unary fusion int8-mixed-bf16 near misses: a float16 convert, a convert read twice, a float32 qlinear, another output dtype") {
  const auto unfused = [](LinearNet& t, bool float_only = false) {
    REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
    Counters c;
    qlinear_post_op_fusion(t.g, &c);
    lint(t.g);
    const Node* q = only(t.g, onednn::qlinear_pointwise);
    CHECK(q->arg(9) != Arg(DType::uint8));
    if (float_only) CHECK(q->arg(10) == Arg(std::string("none")));
    else CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 1);
  };
  SUBCASE("the convert before the quantize is to float16") {
    LinearNet t({16, K}, true, Mix{});
    t.g.output(ArgList{quantize_out(t.g, unary(t.g, "relu", t.out), Y2, true, DType::float16)});
    unfused(t);
  }
  SUBCASE("the convert before the quantize has a second user") {
    LinearNet t({16, K}, true, Mix{});
    Node* r = unary(t.g, "relu", t.out);
    Node* q = quantize_out(t.g, r, Y2, true);
    t.g.output(ArgList{q, q->arg(0).node()});
    unfused(t);
  }
  SUBCASE("a convert to float32 after a float32 qlinear") {
    LinearNet t({16, K}, true, Mix{.bf16 = false});
    t.g.output(ArgList{quantize_out(t.g, t.out, Y2, true)});
    unfused(t);
  }
  SUBCASE("a float output whose dtype is not the qlinear's") {
    LinearNet t({16, K}, true, Mix{});
    Node* r = unary(t.g, "relu", t.out);
    r->meta.val = meta(Y2, DType::float32);
    t.g.output(ArgList{r});
    unfused(t, true);
  }
}

TEST_CASE("qlinear unary fusion int8-mixed-bf16 numerics: against the float32 graph run by kiln, one output step or bf16 rounding") {
  const Tensor x = test::random_ints({16, K}, DType::uint8, 0, 255, 11);
  for (const std::string op : {"none", "relu", "gelu", "gelu_tanh"})
    for (const bool quantized : {true, false}) {
      if (op == "none" && !quantized) continue;
      CAPTURE(op);
      CAPTURE(quantized);
      LinearNet ref({16, K}, true, Mix{.bf16 = false});
      Node* ry = unary(ref.g, op, ref.out);
      ref.g.output(ArgList{quantized ? quantize_out(ref.g, ry, Y2, false) : ry});
      const Tensor want = ref.run(x);
      LinearNet t({16, K}, true, Mix{});
      Node* y = unary(t.g, op, t.out);
      t.g.output(ArgList{quantized ? quantize_out(t.g, y, Y2, true) : y});
      REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
      REQUIRE(qlinear_post_op_fusion(t.g, nullptr) == 1);
      const Tensor got = t.run(x);
      if (quantized) CHECK(max_step_diff(got, want) <= 1);
      else check_bf16_close(got, want);
    }
}

TEST_CASE("qconv unary fusion int8-mixed-bf16: quant(to_fp32(op(qconv))) and a bf16 float output op(qconv), Inductor's counters") {
  for (const std::string op : {"none", "relu", "hardtanh", "hardswish", "silu"})
    for (const bool quantized : {true, false}) {
      if (op == "none" && !quantized) continue;
      CAPTURE(op);
      CAPTURE(quantized);
      ConvNet t(true, Mix{});
      Node* y = unary(t.g, op, t.conv);
      t.g.output(ArgList{quantized ? quantize_out(t.g, y, Y4, true) : y});
      Counters c;
      REQUIRE(qconv_weight_prepack(t.g, &c) == 1);
      CHECK(qconv_post_op_fusion(t.g, &c) == 1);
      lint(t.g);
      const Node* q = only(t.g, onednn::qconv_pointwise);
      CHECK(q->arg(13) == Arg(quantized ? DType::uint8 : DType::bfloat16));
      CHECK(q->arg(14) == Arg(std::string(op == "silu" ? "swish" : op)));
      CHECK(count(t.g, prims::convert_element_type) == 0);
      CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 0);
      // Inductor: hardtanh is clamp_min + clamp_max, hardswish 5 nodes, silu 2; in bf16 each between to_fp32 and a convert back.
      const bool decomposed = op == "hardtanh" || op == "hardswish" || op == "silu";
      const std::int64_t unary_nodes = op == "none" ? 0 : op == "relu" ? 1 : op == "hardswish" ? 6 : 3;
      CHECK(c.get("qconv_unary_matcher_count") == 1);
      CHECK(c.get("qconv_unary_matcher_nodes") == 1 + unary_nodes + (quantized ? 2 : (decomposed ? 1 : 0)));
    }
}

TEST_CASE("qconv unary fusion int8-mixed-bf16 near misses: a float16 convert, a float32 qconv's convert, another output dtype") {
  const auto unfused = [](ConvNet& t, bool float_only = false) {
    REQUIRE(qconv_weight_prepack(t.g, nullptr) == 1);
    Counters c;
    qconv_post_op_fusion(t.g, &c);
    lint(t.g);
    const Node* q = only(t.g, onednn::qconv_pointwise);
    CHECK(q->arg(13) != Arg(DType::uint8));
    if (float_only) CHECK(q->arg(14) == Arg(std::string("none")));
    else CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 1);
  };
  SUBCASE("the convert before the quantize is to float16") {
    ConvNet t(true, Mix{});
    t.g.output(ArgList{quantize_out(t.g, unary(t.g, "relu", t.conv), Y4, true, DType::float16)});
    unfused(t);
  }
  SUBCASE("a convert to float32 after a float32 qconv") {
    ConvNet t(true, Mix{.bf16 = false});
    t.g.output(ArgList{quantize_out(t.g, unary(t.g, "hardswish", t.conv), Y4, true)});
    unfused(t);
  }
  SUBCASE("a float output whose dtype is not the qconv's") {
    ConvNet t(true, Mix{});
    Node* r = unary(t.g, "silu", t.conv);
    r->meta.val = meta(Y4, DType::float32);
    t.g.output(ArgList{r});
    unfused(t, true);
  }
}

TEST_CASE("qconv unary fusion int8-mixed-bf16 numerics: against the float32 graph run by kiln, one output step or bf16 rounding") {
  const Tensor x = test::random_ints({1, 4, 8, 8}, DType::uint8, 0, 255, 11);
  for (const std::string op : {"none", "relu", "hardtanh", "hardswish", "silu"})
    for (const bool quantized : {true, false}) {
      if (op == "none" && !quantized) continue;
      CAPTURE(op);
      CAPTURE(quantized);
      ConvNet ref(true, Mix{.bf16 = false});
      Node* ry = unary(ref.g, op, ref.conv);
      ref.g.output(ArgList{quantized ? quantize_out(ref.g, ry, Y4, false) : ry});
      const Tensor want = ref.run(x);
      ConvNet t(true, Mix{});
      Node* y = unary(t.g, op, t.conv);
      t.g.output(ArgList{quantized ? quantize_out(t.g, y, Y4, true) : y});
      REQUIRE(qconv_weight_prepack(t.g, nullptr) == 1);
      REQUIRE(qconv_post_op_fusion(t.g, nullptr) == 1);
      const Tensor got = t.run(x);
      if (quantized) CHECK(max_step_diff(got, want) <= 1);
      else check_bf16_close(got, want);
    }
}

namespace {

// qlinear (bf16 or float32, 2-D with bias) + an addend `other` of dtype `od` (an input) [-> convert to
// `inplace_to` (Inductor's in-place add)] [-> relu] [-> convert to float32] [-> quantize].
struct BinaryCase {
  bool quantized, convert, relu, swapped;
  DType od;
  bool inplace = false;
};
Node* linear_add(LinearNet& t, const BinaryCase& k, DType convert_to = DType::float32, DType inplace_to = DType::bfloat16) {
  Node* other = t.g.placeholder("other", meta(Y2, k.od));
  const DType sum_dtype = t.out->meta.val.tensor()->dtype == DType::bfloat16 && k.od == DType::bfloat16 ? DType::bfloat16 : DType::float32;
  Node* s = with_meta(t.g.call_function(aten::add_Tensor, k.swapped ? ArgList{other, t.out} : ArgList{t.out, other}), Y2, sum_dtype);
  if (k.inplace) s = convert(t.g, s, inplace_to);
  if (k.relu) s = unary(t.g, "relu", s);
  return k.quantized ? quantize_out(t.g, s, Y2, k.convert, convert_to) : s;
}

// Inductor's int8-mixed-bf16 table: (1)/(2) a bf16 addend, (3)/(4) a float32
// one (a float output float32), (5)/(6) the in-place add of a float32 one.
std::vector<BinaryCase> binary_cases() {
  std::vector<BinaryCase> v;
  for (const bool quantized : {true, false})
    for (const bool convert : {false, true})
      for (const bool relu : {false, true})
        for (const bool swapped : {false, true})
          for (const DType od : {DType::bfloat16, DType::float32})
            for (const bool inplace : {false, true}) {
              if (!quantized && convert) continue;                // no quantize to convert for
              if (inplace && od != DType::float32) continue;  // the in-place form adds a float32 addend
              v.push_back({quantized, convert, relu, swapped, od, inplace});
            }
  return v;
}

// The fused float output's dtype: bfloat16 after the in-place convert or for bf16 + bf16, else float32.
DType binary_float_dtype(const BinaryCase& k) { return k.inplace || k.od == DType::bfloat16 ? DType::bfloat16 : DType::float32; }

}  // namespace

TEST_CASE("qlinear binary fusion int8-mixed-bf16: a bf16 or float32 addend, the in-place add's to_bf16, relu, the quantize read directly or through to_fp32, a float output") {
  for (const BinaryCase& k : binary_cases())
    for (const bool tensors : {false, true}) {
      CAPTURE(k.quantized);
      CAPTURE(k.convert);
      CAPTURE(k.relu);
      CAPTURE(k.swapped);
      CAPTURE(k.inplace);
      CAPTURE(std::string(dtype_name(k.od)));
      CAPTURE(tensors);
      LinearNet t({16, K}, true, Mix{}, LinearForm::linear, tensors);
      t.g.output(ArgList{linear_add(t, k)});
      Counters c;
      REQUIRE(qlinear_weight_prepack(t.g, &c) == 1);
      CHECK(qlinear_post_op_fusion(t.g, &c) == 1);
      lint(t.g);
      const Node* q = only(t.g, tensors ? onednn::qlinear_pointwise_binary_tensor : onednn::qlinear_pointwise_binary);
      CHECK(q->arg(10) == Arg(k.quantized ? DType::uint8 : binary_float_dtype(k)));
      CHECK(q->arg(6).node()->name() == "other");
      // Inductor's post-op: "add" before a quantize and after the in-place convert, "sum" for a float sum.
      CHECK(q->arg(13) == Arg(std::string(k.quantized || k.inplace ? "add" : "sum")));
      CHECK(q->arg(15) == Arg(std::string(k.relu ? "relu" : "none")));
      CHECK(q->meta.val.tensor()->dtype == (k.quantized ? DType::uint8 : binary_float_dtype(k)));
      CHECK(count(t.g, aten::add_Tensor) == 0);
      CHECK(count(t.g, prims::convert_element_type) == 0);
      CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 0);
      CHECK(c.get("qlinear_binary_matcher_count") == 1);
      CHECK(c.get("qlinear_binary_matcher_nodes") ==
            2 + (k.inplace ? 1 : 0) + (k.relu ? 1 : 0) + (k.quantized ? 1 : 0) + (k.convert ? 1 : 0));
    }
}

TEST_CASE("qlinear binary fusion int8-mixed-bf16 near misses: a float16 addend, a float16 convert, an addend with another user, another output dtype") {
  // The quantize stays; so does the add, but where a bf16 sum may still fuse before a convert it refuses.
  const auto unfused = [](const BinaryCase& k, DType convert_to = DType::float32, bool add_stays = true) {
    LinearNet t({16, K}, true, Mix{});
    t.g.output(ArgList{linear_add(t, k, convert_to)});
    REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
    qlinear_post_op_fusion(t.g, nullptr);
    lint(t.g);
    CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == (k.quantized ? 1 : 0));
    if (add_stays) CHECK(count(t.g, aten::add_Tensor) == 1);
    else CHECK(only(t.g, onednn::qlinear_pointwise_binary)->arg(10) == Arg(DType::bfloat16));
  };
  SUBCASE("a float16 addend") { unfused({true, false, false, false, DType::float16}); }
  SUBCASE("the convert before the quantize is to float16") { unfused({true, true, false, false, DType::bfloat16}, DType::float16, false); }
  SUBCASE("the addend has a second user") {
    for (const bool quantized : {true, false})
      for (const bool inplace : {false, true}) {
        CAPTURE(quantized);
        CAPTURE(inplace);
        LinearNet t({16, K}, true, Mix{});
        Node* y = linear_add(t, {quantized, false, true, false, DType::float32, inplace});
        t.g.output(ArgList{y, only(t.g, aten::add_Tensor)->arg(1)});
        REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
        Counters c;
        qlinear_post_op_fusion(t.g, &c);
        lint(t.g);
        CHECK(c.get("qlinear_binary_matcher_count") == 0);
        CHECK(count(t.g, aten::add_Tensor) == 1);
      }
  }
  SUBCASE("a float output whose dtype is not the add's") {
    for (const DType od : {DType::bfloat16, DType::float32}) {
      LinearNet t({16, K}, true, Mix{});
      Node* y = linear_add(t, {false, false, false, false, od});
      y->meta.val = meta(Y2, od == DType::bfloat16 ? DType::float32 : DType::bfloat16);
      t.g.output(ArgList{y});
      REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
      CHECK(qlinear_post_op_fusion(t.g, nullptr) == 0);
      CHECK(count(t.g, aten::add_Tensor) == 1);
    }
  }
}

// The in-place form refused: its convert stays, the add alone fuses at the
// float sum's pass (a float32 output), the quantize stays.
TEST_CASE("qlinear binary fusion int8-mixed-bf16 in-place near misses: a convert to float16 after the add, a to_bf16 after a float32 qlinear's add") {
  const auto convert_stays = [](bool bf16, DType to) {
    for (const bool quantized : {true, false})
      for (const bool relu : {false, true}) {
        CAPTURE(quantized);
        CAPTURE(relu);
        LinearNet t({16, K}, true, Mix{.bf16 = bf16});
        t.g.output(ArgList{linear_add(t, {quantized, false, relu, false, DType::float32, true}, DType::float32, to)});
        REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
        Counters c;
        CHECK(qlinear_post_op_fusion(t.g, &c) == 1);
        lint(t.g);
        const Node* q = only(t.g, onednn::qlinear_pointwise_binary);
        CHECK(q->arg(10) == Arg(DType::float32));
        CHECK(q->arg(13) == Arg(std::string("sum")));
        CHECK(q->arg(15) == Arg(std::string("none")));
        CHECK(count(t.g, prims::convert_element_type) == 1);
        CHECK(count(t.g, aten::relu) == (relu ? 1 : 0));
        CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == (quantized ? 1 : 0));
        CHECK(c.get("qlinear_binary_matcher_nodes") == 2);
      }
  };
  SUBCASE("a convert to float16 after a bf16 qlinear's add") { convert_stays(true, DType::float16); }
  SUBCASE("a convert to bfloat16 after a float32 qlinear's add") { convert_stays(false, DType::bfloat16); }
}

// Two references: the float32 graph (no converts), and the unfused bf16 graph
// itself after the weight prepack (kiln runs the bf16-output qlinear, then the
// add, converts, relu and quantize as written). The fused op adds the addend
// to the unrounded product, the unfused graph to its bf16 rounding: apart by
// 2^-9 of the product (|product| <= |sum| + 2, the addend within [-2, 2]; 2^-8
// allowed), and a bf16 output by one more unit in its last place (each side
// rounds its own sum; 2^-7 in all).
TEST_CASE("qlinear binary fusion int8-mixed-bf16 numerics: against the float32 graph and the unfused bf16 graph run by kiln") {
  const Tensor x = test::random_ints({16, K}, DType::uint8, 0, 255, 11);
  for (const BinaryCase& k : binary_cases()) {
    if (k.swapped) continue;
    // The x_scale/x_zero_point tensor form (qlinear_pointwise.binary_tensor) on half of the cases.
    const bool tensors = k.relu != k.convert;
    CAPTURE(k.quantized);
    CAPTURE(k.convert);
    CAPTURE(k.relu);
    CAPTURE(k.inplace);
    CAPTURE(std::string(dtype_name(k.od)));
    CAPTURE(tensors);
    const Tensor other = bf16_values({16, N}, k.od, 5);
    LinearNet ref({16, K}, true, Mix{.bf16 = false});
    ref.g.output(ArgList{linear_add(ref, {k.quantized, false, k.relu, false, DType::float32})});
    const Tensor want = CompiledGraph::compile(ref.g, ref.weights).run({x, bf16_values({16, N}, DType::float32, 5)})[0];
    LinearNet u({16, K}, true, Mix{}, LinearForm::linear, tensors);
    u.g.output(ArgList{linear_add(u, k)});
    REQUIRE(qlinear_weight_prepack(u.g, nullptr) == 1);
    const Tensor unfused = CompiledGraph::compile(u.g, u.weights).run({x, other})[0];
    LinearNet t({16, K}, true, Mix{}, LinearForm::linear, tensors);
    t.g.output(ArgList{linear_add(t, k)});
    REQUIRE(qlinear_weight_prepack(t.g, nullptr) == 1);
    REQUIRE(qlinear_post_op_fusion(t.g, nullptr) == 1);
    REQUIRE(count(t.g, tensors ? onednn::qlinear_pointwise_binary_tensor : onednn::qlinear_pointwise_binary) == 1);
    const Tensor got = CompiledGraph::compile(t.g, t.weights).run({x, other})[0];
    if (k.quantized) {
      check_mostly_unsaturated(want);
      CHECK(max_step_diff(got, want) <= 1);
      CHECK(max_step_diff(got, unfused) <= 1);
      continue;
    }
    REQUIRE(got.dtype() == binary_float_dtype(k));
    REQUIRE(unfused.dtype() == got.dtype());
    REQUIRE(unfused.shape() == got.shape());
    const std::vector<double> g = values(got), w = values(want), uw = values(unfused);
    for (std::size_t i = 0; i < g.size(); ++i) {
      CAPTURE(i);
      if (got.dtype() == DType::bfloat16) CHECK(std::abs(g[i] - w[i]) <= std::abs(w[i]) * 0x1p-8 + 1e-4);
      // A float32 output from exact int8 products: float32 rounding from the float32 graph.
      else CHECK(std::abs(g[i] - w[i]) <= 1e-4 + 1e-5 * std::abs(w[i]));
      CHECK(std::abs(g[i] - uw[i]) <= (std::abs(uw[i]) + 2) * (got.dtype() == DType::bfloat16 ? 0x1p-7 : 0x1p-8) + 1e-4);
    }
  }
}

namespace {

// bf16 or float32 qconv + dequantize(uint8 accum "accum" of Y4), either order, [-> convert to `to` (Inductor's
// in-place add of int8-mixed-bf16)] [-> relu] [-> quantize].
struct ConvBinaryCase {
  bool quantized, inplace, relu, swapped;
};
Node* conv_add(ConvNet& t, const ConvBinaryCase& k, DType to = DType::bfloat16) {
  t.accum = t.g.placeholder("accum", meta(Y4, DType::uint8));
  Node* dqa = dequantize(t.g, t.accum, Y4, false, t.weights);
  Node* s = with_meta(t.g.call_function(aten::add_Tensor, k.swapped ? ArgList{dqa, t.conv} : ArgList{t.conv, dqa}), Y4, DType::float32);
  if (k.inplace) s = convert(t.g, s, to);
  if (k.relu) s = unary(t.g, "relu", s);
  return k.quantized ? quantize_out(t.g, s, Y4, false) : s;
}

std::vector<ConvBinaryCase> conv_binary_cases() {
  std::vector<ConvBinaryCase> v;
  for (const bool quantized : {true, false})
    for (const bool inplace : {true, false})
      for (const bool relu : {false, true})
        for (const bool swapped : {false, true}) v.push_back({quantized, inplace, relu, swapped});
  return v;
}

}  // namespace

TEST_CASE("qconv binary fusion int8-mixed-bf16: a bf16 qconv + dequant(accum), the in-place add's to_bf16, relu, int8 or float output") {
  for (const ConvBinaryCase& k : conv_binary_cases()) {
    CAPTURE(k.quantized);
    CAPTURE(k.inplace);
    CAPTURE(k.relu);
    CAPTURE(k.swapped);
    ConvNet t(true, Mix{});
    t.g.output(ArgList{conv_add(t, k)});
    Counters c;
    REQUIRE(qconv_weight_prepack(t.g, &c) == 1);
    CHECK(qconv_post_op_fusion(t.g, &c) == 1);
    lint(t.g);
    const Node* q = only(t.g, onednn::qconv2d_pointwise_binary);
    // A float output is the in-place add's bf16, or the float32 of a bf16 + float32 add.
    CHECK(q->arg(14) == Arg(k.quantized ? DType::uint8 : k.inplace ? DType::bfloat16 : DType::float32));
    // The kernel's accum: the int8 tensor itself (its scale and zero point beside it), or the dequantized float32 one.
    if (k.quantized) CHECK((q->arg(6).node() == t.accum && q->arg(15) == Arg(XS) && q->arg(16) == Arg(XZ)));
    else CHECK(q->arg(6).node()->target() == quantized_decomposed::dequantize_per_tensor);
    CHECK(q->arg(17) == Arg(std::string("sum")));
    CHECK(q->arg(19) == Arg(std::string(k.relu ? "relu" : "none")));
    CHECK(count(t.g, aten::add_Tensor) == 0);
    CHECK(count(t.g, prims::convert_element_type) == 0);
    CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == 0);
    // Inductor's match: qconv, add, [to_bf16], [relu], and with an int8 output the accum's dequantize and the quantize.
    CHECK(c.get("qconv2d_binary_matcher_count") == 1);
    CHECK(c.get("qconv2d_binary_matcher_nodes") == 2 + (k.inplace ? 1 : 0) + (k.relu ? 1 : 0) + (k.quantized ? 2 : 0));
  }
}

TEST_CASE("qconv binary fusion int8-mixed-bf16 near misses: the in-place add's convert to float16, a to_bf16 after a float32 qconv") {
  // The convert form is refused; the add alone still fuses at the float32 sum's pass, the convert and quantize stay.
  const auto convert_stays = [](bool bf16, DType to) {
    for (const bool quantized : {true, false}) {
      CAPTURE(quantized);
      ConvNet t(true, Mix{.bf16 = bf16});
      t.g.output(ArgList{conv_add(t, {quantized, true, false, false}, to)});
      REQUIRE(qconv_weight_prepack(t.g, nullptr) == 1);
      Counters c;
      CHECK(qconv_post_op_fusion(t.g, &c) == 1);
      lint(t.g);
      CHECK(only(t.g, onednn::qconv2d_pointwise_binary)->arg(14) == Arg(DType::float32));
      CHECK(count(t.g, prims::convert_element_type) == 1);
      CHECK(count(t.g, quantized_decomposed::quantize_per_tensor) == (quantized ? 1 : 0));
      CHECK(c.get("qconv2d_binary_matcher_nodes") == 2);
    }
  };
  SUBCASE("a convert to float16 after a bf16 qconv's add") { convert_stays(true, DType::float16); }
  SUBCASE("a convert to bfloat16 after a float32 qconv's add") { convert_stays(false, DType::bfloat16); }
}

TEST_CASE("qconv binary fusion int8-mixed-bf16 numerics: against the float32 graph run by kiln, one output step or bf16 rounding") {
  const Tensor x = test::random_ints({1, 4, 8, 8}, DType::uint8, 0, 255, 11);
  const Tensor a = test::random_ints({1, 6, 8, 8}, DType::uint8, 0, 255, 12);
  for (const ConvBinaryCase& k : conv_binary_cases()) {
    if (k.swapped) continue;
    CAPTURE(k.quantized);
    CAPTURE(k.inplace);
    CAPTURE(k.relu);
    ConvNet ref(true, Mix{.bf16 = false});
    ref.g.output(ArgList{conv_add(ref, {k.quantized, false, k.relu, false})});
    const Tensor want = CompiledGraph::compile(ref.g, ref.weights).run({x, a})[0];
    ConvNet t(true, Mix{});
    t.g.output(ArgList{conv_add(t, k)});
    REQUIRE(qconv_weight_prepack(t.g, nullptr) == 1);
    REQUIRE(qconv_post_op_fusion(t.g, nullptr) == 1);
    const Tensor got = CompiledGraph::compile(t.g, t.weights).run({x, a})[0];
    if (k.quantized) {
      check_mostly_unsaturated(want);
      CHECK(max_step_diff(got, want) <= 1);
    } else if (k.inplace) {
      check_bf16_close(got, want);
    } else {
      // A float32 output from exact int8 products: float32 rounding apart.
      REQUIRE(got.dtype() == DType::float32);
      const std::vector<double> g = values(got), w = values(want);
      REQUIRE(g.size() == w.size());
      for (std::size_t i = 0; i < g.size(); ++i) CHECK(std::abs(g[i] - w[i]) <= 1e-4 + 1e-5 * std::abs(w[i]));
    }
  }
}
