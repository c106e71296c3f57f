// The qconv post-op fusions (Inductor's passes 3 to 5 for convolutions) on
// q/dq graphs built here: what each form becomes, the near misses left alone,
// the counters with Inductor's node counts, the lower counters, and numerics:
// each fused graph run by kiln against its unfused q/dq graph (weights within
// [-64, 64], so the int8 primitive runs on any CPU), equal within one step of
// the output's quantization.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/quantization/qconv_lower.hpp"
#include "kiln/passes/quantization/qconv_post_op_fusion.hpp"
#include "kiln/passes/quantization/qconv_weight_prepack.hpp"
#include "quant_graph_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::count;
using test::with_meta;

namespace {

constexpr double XS = 0.05, OS = 0.04, AS = 0.03;
constexpr std::int64_t XZ = 128, AZ = 100;
const std::vector<Dim> Y_SHAPE{1, 6, 8, 8};

Tensor uniform_ints(runtime::Shape shape, DType d, int lo, int hi, unsigned seed) {
  Tensor t = Tensor::empty(std::move(shape), d);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (d == DType::uint8) t.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(u(rng));
    else t.data<std::int8_t>()[i] = static_cast<std::int8_t>(u(rng));
  }
  return t;
}

// A q/dq conv net: uint8 x [1, C, 8, 8] -> dequantize -> 3x3 convolution (int8
// weight dequantized per channel, bias) -> float [1, 6, 8, 8]; the tests add the
// ops after it. Weights are get_attr constants, as in an exported graph.
struct Net {
  Graph g;
  runtime::Weights weights;
  Node *x, *conv;
  std::int64_t C;
  // `tensor_qparams`: x dequantized by the .tensor overload, its scale and zero point constants.
  explicit Net(std::int64_t channels = 4, bool tensor_qparams = false) : C(channels) {
    x = g.placeholder("x", meta({1, C, 8, 8}, DType::uint8));
    Tensor ws = Tensor::empty({6}), wz = Tensor::empty({6}, DType::int64);
    for (std::int64_t j = 0; j < 6; ++j) ws.data<float>()[j] = 0.004f + 0.001f * float(j), wz.data<std::int64_t>()[j] = 0;
    weights = {{"w", uniform_ints({6, C, 3, 3}, DType::int8, -64, 64, 2)}, {"ws", ws}, {"wz", wz}, {"b", test::random_tensor({6}, 3)}};
    if (!tensor_qparams) {
      conv = conv_of(dequantize(x, XS, XZ, {1, C, 8, 8}));
      return;
    }
    Tensor xs = Tensor::empty({}), xz = Tensor::empty({}, DType::int64);
    xs.data<float>()[0] = float(XS), xz.data<std::int64_t>()[0] = XZ;
    weights.emplace("xs", xs), weights.emplace("xz", xz);
    conv = conv_of(with_meta(g.call_function(quantized_decomposed::dequantize_per_tensor_tensor,
                                             {x, g.get_attr("xs", meta({})), g.get_attr("xz", meta({}, DType::int64)), 0, 255,
                                              Arg(DType::uint8)}),
                             {1, C, 8, 8}));
  }
  Node* dequantize(Node* q, double scale, std::int64_t zp, const std::vector<Dim>& shape, DType d = DType::uint8) {
    const std::int64_t lo = d == DType::uint8 ? 0 : -128, hi = d == DType::uint8 ? 255 : 127;
    return with_meta(g.call_function(quantized_decomposed::dequantize_per_tensor, {q, scale, zp, lo, hi, Arg(d)}), shape);
  }
  Node* quantize(Node* y, DType d = DType::uint8, std::int64_t lo = -1, std::int64_t hi = -1) {
    if (lo < 0 && hi < 0) lo = d == DType::uint8 ? 0 : -128, hi = d == DType::uint8 ? 255 : 127;
    const std::int64_t zp = d == DType::uint8 ? 7 : -3;
    return with_meta(g.call_function(quantized_decomposed::quantize_per_tensor, {y, OS, zp, lo, hi, Arg(d)}), Y_SHAPE, d);
  }
  Node* conv_of(Node* dq) {
    Node* w = g.get_attr("w", meta({6, C, 3, 3}, DType::int8));
    Node* dqc = with_meta(g.call_function(quantized_decomposed::dequantize_per_channel,
                                          {w, g.get_attr("ws", meta({6})), g.get_attr("wz", meta({6}, DType::int64)), 0, -128, 127,
                                           Arg(DType::int8)}),
                          {6, C, 3, 3});
    return with_meta(g.call_function(aten::convolution, {dq, dqc, g.get_attr("b", meta({6})), ArgList{1, 1}, ArgList{1, 1}, ArgList{1, 1},
                                                         false, ArgList{0, 0}, 1}),
                     Y_SHAPE);
  }
  Node* unary(const std::string& op, Node* y) {
    if (op == "relu") return with_meta(g.call_function(aten::relu, {y}), Y_SHAPE);
    if (op == "hardtanh") return with_meta(g.call_function(aten::hardtanh, {y, 0.0, 6.0}), Y_SHAPE);
    if (op == "hardswish") return with_meta(g.call_function(aten::hardswish, {y}), Y_SHAPE);
    if (op == "silu") return with_meta(g.call_function(aten::silu, {y}), Y_SHAPE);
    return y;
  }
  Node* add(Node* a, Node* b) { return with_meta(g.call_function(aten::add_Tensor, {a, b}), Y_SHAPE); }
  // The graph's float output: `y`, dequantized first when it is int8.
  void output(Node* y, DType d = DType::float32) {
    if (d != DType::float32) y = dequantize(y, OS, d == DType::uint8 ? 7 : -3, Y_SHAPE, d);
    g.output(ArgList{y});
  }
  Tensor run(const std::vector<Tensor>& inputs) const { return CompiledGraph::compile(g, weights).run(inputs)[0]; }
  // Prepack and fuse; gives the number of fusions.
  std::size_t fuse(Counters* c) {
    REQUIRE(qconv_weight_prepack(g, c) == 1);
    return qconv_post_op_fusion(g, c);
  }
};

bool is_number(const Arg& a, double v) {
  if (const auto* d = a.get_if<double>()) return *d == v;
  if (const auto* i = a.get_if<std::int64_t>()) return static_cast<double>(*i) == v;
  return false;
}

std::string attr_of(const Node* n, std::size_t i) {
  const auto* s = n->arg(i).get_if<std::string>();
  return s ? *s : std::string("?");
}

// The fused graph against the unfused one on the same inputs, within `tol`.
void check_numerics(Net& net, const std::vector<Tensor>& inputs, double tol, std::size_t fusions) {
  const Tensor before = net.run(inputs);
  Counters c;
  CHECK(net.fuse(&c) == fusions);
  const Tensor after = net.run(inputs);
  CHECK(test::max_abs_diff(after, before) <= tol);
}

}  // namespace

TEST_CASE("qconv unary fusion folds none, relu, hardtanh, hardswish and silu and a uint8 or int8 output quantize") {
  struct Case {
    std::string op, attr;
    std::int64_t inductor_nodes;  // Inductor decomposes hardtanh (2 nodes), hardswish (5) and silu (2)
  };
  for (const Case& k : std::vector<Case>{{"none", "none", 2}, {"relu", "relu", 3}, {"hardtanh", "hardtanh", 4}, {"hardswish", "hardswish", 7},
                                         {"silu", "swish", 4}})
    for (const DType d : {DType::uint8, DType::int8}) {
      CAPTURE(k.op);
      const std::string dtype(dtype_name(d));
      CAPTURE(dtype);
      Net net;
      net.output(net.quantize(net.unary(k.op, net.conv), d), d);
      Counters c;
      CHECK(net.fuse(&c) == 1);
      REQUIRE(count(net.g, onednn::qconv_pointwise) == 1);
      CHECK(count(net.g, quantized_decomposed::quantize_per_tensor) == 0);
      const Node* n = net.g.find_nodes(OpKind::call_function, onednn::qconv_pointwise)[0];
      CHECK(is_number(n->arg(11), OS));
      REQUIRE(n->arg(12).get_if<std::int64_t>());
      CHECK(*n->arg(12).get_if<std::int64_t>() == (d == DType::uint8 ? 7 : -3));
      REQUIRE(n->arg(13).get_if<DType>());
      CHECK(*n->arg(13).get_if<DType>() == d);
      CHECK(attr_of(n, 14) == k.attr);
      const auto* scalars = n->arg(15).get_if<ArgList>();
      REQUIRE(scalars);
      CHECK(scalars->size() == (k.op == "hardtanh" ? 2u : 0u));
      CHECK(c.get("qconv_unary_matcher_count") == 1);
      CHECK(c.get("qconv_unary_matcher_nodes") == k.inductor_nodes);
      // kiln's matcher counted its own nodes; the difference makes the total Inductor's.
      CHECK(c.get("pattern_matcher_nodes") == 3 + k.inductor_nodes);
    }
}

TEST_CASE("qconv unary fusion with a float output: relu, hardtanh, hardswish and silu at pass 4") {
  for (const std::string op : {"relu", "hardtanh", "hardswish", "silu"}) {
    CAPTURE(op);
    Net net;
    net.output(net.unary(op, net.conv));
    Counters c;
    CHECK(net.fuse(&c) == 1);
    REQUIRE(count(net.g, onednn::qconv_pointwise) == 1);
    const Node* n = net.g.find_nodes(OpKind::call_function, onednn::qconv_pointwise)[0];
    CHECK(*n->arg(13).get_if<DType>() == DType::float32);
    CHECK(attr_of(n, 14) == (op == "silu" ? "swish" : op));
    CHECK(n->num_users() == 1);
    CHECK(c.get("qconv_unary_matcher_count") == 1);
  }
}

TEST_CASE("qconv unary fusion near misses: a second user or a narrowed quantize range keep the quantize, the float form still fuses") {
  // The int8 form fails; Inductor's pass 4 then fuses the relu alone, with a float output.
  const auto float_relu_only = [](Net& net) {
    Counters c;
    CHECK(net.fuse(&c) == 1);
    CHECK(count(net.g, quantized_decomposed::quantize_per_tensor) == 1);
    CHECK(count(net.g, aten::relu) == 0);
    REQUIRE(count(net.g, onednn::qconv_pointwise) == 1);
    const Node* n = net.g.find_nodes(OpKind::call_function, onednn::qconv_pointwise)[0];
    CHECK(*n->arg(13).get_if<DType>() == DType::float32);
    CHECK(attr_of(n, 14) == "relu");
    CHECK(c.get("qconv_unary_matcher_nodes") == 2);
  };
  {
    Net net;  // the relu's float output is read by the graph's output too
    Node* r = net.unary("relu", net.conv);
    net.g.output(ArgList{net.quantize(r), r});
    float_relu_only(net);
  }
  {
    Net net;  // quant_max 127 for uint8: the primitive would saturate at 255
    net.output(net.quantize(net.unary("relu", net.conv), DType::uint8, 0, 127), DType::uint8);
    float_relu_only(net);
  }
  {
    Net net;  // the qconv's float output read twice: by the quantize and by the output
    net.g.output(ArgList{net.quantize(net.conv), net.conv});
    Counters c;
    CHECK(net.fuse(&c) == 0);
    CHECK(c.get("qconv_unary_matcher_count") == 0);
  }
  {
    Net net;  // a relu after a qconv that already has one
    net.output(net.unary("relu", net.conv));
    Counters c;
    REQUIRE(net.fuse(&c) == 1);
    Node* fused = net.g.find_nodes(OpKind::call_function, onednn::qconv_pointwise)[0];
    Node* again = with_meta(net.g.call_function(aten::relu, {fused}), Y_SHAPE);
    net.g.output_node()->set_args({ArgList{again}});
    CHECK(qconv_post_op_fusion(net.g, &c) == 0);
  }
}

TEST_CASE("qconv binary fusion: quant(qconv + dequant(accum)) with and without relu, either add order, uint8 accum into sum") {
  for (const bool relu : {false, true})
    for (const bool swapped : {false, true}) {
      CAPTURE(relu);
      CAPTURE(swapped);
      Net net;
      Node* a = net.g.placeholder("a", meta(Y_SHAPE, DType::uint8));
      Node* da = net.dequantize(a, AS, AZ, Y_SHAPE);
      Node* s = swapped ? net.add(da, net.conv) : net.add(net.conv, da);
      net.output(net.quantize(relu ? net.unary("relu", s) : s), DType::uint8);
      Counters c;
      CHECK(net.fuse(&c) == 1);
      REQUIRE(count(net.g, onednn::qconv2d_pointwise_binary) == 1);
      CHECK(count(net.g, onednn::qconv_pointwise) == 0);
      CHECK(count(net.g, aten::add_Tensor) == 0);
      const Node* n = net.g.find_nodes(OpKind::call_function, onednn::qconv2d_pointwise_binary)[0];
      CHECK(n->arg(6).node() == a);
      CHECK(*n->arg(14).get_if<DType>() == DType::uint8);
      CHECK(is_number(n->arg(15), AS));
      CHECK(*n->arg(16).get_if<std::int64_t>() == AZ);
      CHECK(attr_of(n, 17) == "sum");
      CHECK(attr_of(n, 19) == (relu ? "relu" : "none"));
      CHECK(c.get("qconv2d_binary_matcher_count") == 1);
      CHECK(c.get("qconv2d_binary_matcher_nodes") == (relu ? 5 : 4));
      Counters lower;
      const QConvLowerCounts lc = count_qconv_lowerings(net.g, &lower);
      CHECK(lc.binary == 1);
      CHECK(lc.unary == 0);
      CHECK(lower.get("qconv2d_binary_lower_count") == 1);
      CHECK(lower.get("pattern_matcher_count") == 1);
    }
}

TEST_CASE("qconv binary fusion with a float output: relu(qconv + accum) at pass 4 and qconv + accum at pass 5") {
  for (const bool relu : {false, true})
    for (const bool swapped : {false, true}) {
      CAPTURE(relu);
      CAPTURE(swapped);
      Net net;
      Node* da = net.dequantize(net.g.placeholder("a", meta(Y_SHAPE, DType::uint8)), AS, AZ, Y_SHAPE);
      Node* s = swapped ? net.add(da, net.conv) : net.add(net.conv, da);
      net.output(relu ? net.unary("relu", s) : s);
      Counters c;
      CHECK(net.fuse(&c) == 1);
      REQUIRE(count(net.g, onednn::qconv2d_pointwise_binary) == 1);
      const Node* n = net.g.find_nodes(OpKind::call_function, onednn::qconv2d_pointwise_binary)[0];
      CHECK(n->arg(6).node() == da);  // the float addend itself
      CHECK(*n->arg(14).get_if<DType>() == DType::float32);
      CHECK(attr_of(n, 19) == (relu ? "relu" : "none"));
      CHECK(c.get("qconv2d_binary_matcher_nodes") == (relu ? 3 : 2));
    }
}

TEST_CASE("qconv binary fusion near misses: a float addend not dequantized or read elsewhere, an accum read again or by the conv, a broadcast") {
  const auto untouched = [](Net& net) {
    Counters c;
    net.fuse(&c);
    CHECK(c.get("qconv2d_binary_matcher_count") == 0);
    CHECK(count(net.g, onednn::qconv2d_pointwise_binary) == 0);
  };
  // The int8 form fails; Inductor's pass 5 then adds the dequantized accum as a float addend.
  const auto float_sum_only = [](Net& net) {
    Counters c;
    CHECK(net.fuse(&c) == 1);
    CHECK(count(net.g, quantized_decomposed::quantize_per_tensor) == 1);
    REQUIRE(count(net.g, onednn::qconv2d_pointwise_binary) == 1);
    const Node* n = net.g.find_nodes(OpKind::call_function, onednn::qconv2d_pointwise_binary)[0];
    CHECK(*n->arg(14).get_if<DType>() == DType::float32);
    CHECK(n->arg(6).node()->target() == quantized_decomposed::dequantize_per_tensor);
    CHECK(c.get("qconv2d_binary_matcher_nodes") == 2);
  };
  {
    Net net;  // a float input as addend: Inductor wants it from a dequantize
    net.output(net.unary("relu", net.add(net.conv, net.g.placeholder("f", meta(Y_SHAPE)))));
    untouched(net);
  }
  {
    Net net;  // the dequantized addend is also an output
    Node* da = net.dequantize(net.g.placeholder("a", meta(Y_SHAPE, DType::uint8)), AS, AZ, Y_SHAPE);
    net.g.output(ArgList{net.add(net.conv, da), da});
    untouched(net);
  }
  {
    Net net;  // an addend of another shape (broadcast along H and W)
    const std::vector<Dim> small{1, 6, 1, 1};
    Node* da = net.dequantize(net.g.placeholder("a", meta(small, DType::uint8)), AS, AZ, small);
    net.output(net.add(net.conv, da));
    untouched(net);
  }
  {
    Net net;  // the uint8 accum read again after the conv (oneDNN's sum would write into it)
    Node* a = net.g.placeholder("a", meta(Y_SHAPE, DType::uint8));
    Node* q = net.quantize(net.add(net.conv, net.dequantize(a, AS, AZ, Y_SHAPE)));
    net.g.output(ArgList{q, net.dequantize(a, AS, AZ, Y_SHAPE)});
    float_sum_only(net);
  }
  {
    Net net(6);  // the accum is the conv's own uint8 input
    net.output(net.quantize(net.add(net.conv, net.dequantize(net.x, AS, AZ, Y_SHAPE))), DType::uint8);
    float_sum_only(net);
  }
}

TEST_CASE("qconv unary fusion numerics: each fused form within one output step of the unfused q/dq graph run by kiln") {
  const Tensor x = uniform_ints({1, 4, 8, 8}, DType::uint8, 0, 255, 11);
  for (const std::string op : {"none", "relu", "hardtanh", "hardswish", "silu"})
    for (const DType d : {DType::uint8, DType::int8, DType::float32}) {
      if (op == "none" && d == DType::float32) continue;
      CAPTURE(op);
      const std::string dtype(dtype_name(d));
      CAPTURE(dtype);
      Net net;
      Node* y = net.unary(op, net.conv);
      net.output(d == DType::float32 ? y : net.quantize(y, d), d);
      check_numerics(net, {x}, d == DType::float32 ? 1e-4 : OS * 1.001, 1);
    }
}

TEST_CASE("qconv binary fusion numerics: each fused form within one output step of the unfused q/dq graph run by kiln") {
  const Tensor x = uniform_ints({1, 4, 8, 8}, DType::uint8, 0, 255, 11);
  const Tensor a = uniform_ints({1, 6, 8, 8}, DType::uint8, 0, 255, 12);
  for (const bool relu : {false, true})
    for (const bool quantized : {false, true}) {
      CAPTURE(relu);
      CAPTURE(quantized);
      Net net;
      Node* da = net.dequantize(net.g.placeholder("a", meta(Y_SHAPE, DType::uint8)), AS, AZ, Y_SHAPE);
      Node* s = net.add(net.conv, da);
      if (relu) s = net.unary("relu", s);
      net.output(quantized ? net.quantize(s) : s, quantized ? DType::uint8 : DType::float32);
      check_numerics(net, {x, a}, quantized ? OS * 1.001 : 1e-4, 1);
    }
}

TEST_CASE("qconv post-op fusion keeps the .tensor overload, and takes an int8 accum, numerics against the unfused graph") {
  const Tensor x = uniform_ints({1, 4, 8, 8}, DType::uint8, 0, 255, 11);
  {
    Net net(4, true);  // unary, int8 output
    net.output(net.quantize(net.unary("relu", net.conv), DType::int8), DType::int8);
    check_numerics(net, {x}, OS * 1.001, 1);
    CHECK(count(net.g, onednn::qconv_pointwise_tensor) == 1);
  }
  for (const DType accum : {DType::uint8, DType::int8}) {
    const std::string dtype(dtype_name(accum));
    CAPTURE(dtype);
    Net net(4, true);  // binary: qconv_pointwise.tensor becomes qconv2d_pointwise.binary_tensor
    Node* da = net.dequantize(net.g.placeholder("a", meta(Y_SHAPE, accum)), AS, accum == DType::uint8 ? AZ : 5, Y_SHAPE, accum);
    net.output(net.quantize(net.unary("relu", net.add(da, net.conv))), DType::uint8);
    const Tensor a = accum == DType::uint8 ? uniform_ints({1, 6, 8, 8}, accum, 0, 255, 12) : uniform_ints({1, 6, 8, 8}, accum, -128, 127, 12);
    check_numerics(net, {x, a}, OS * 1.001, 1);
    REQUIRE(count(net.g, onednn::qconv2d_pointwise_binary_tensor) == 1);
    const Node* n = net.g.find_nodes(OpKind::call_function, onednn::qconv2d_pointwise_binary_tensor)[0];
    CHECK(n->arg(6).node()->meta.val.tensor()->dtype == accum);
  }
}
