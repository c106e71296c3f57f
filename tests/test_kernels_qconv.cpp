// onednn.qconv_pointwise and onednn.qconv2d_pointwise.binary against the
// unfused q/dq computation written as a naive loop: dequantize, float
// convolution, post-ops, quantize; a quantized output may differ by one step
// (oneDNN sums in another order).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "kiln/kernels/detail/int8_depthwise.hpp"
#include "kiln/kernels/onednn/qconv.hpp"
#include "quant_kernel_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {

constexpr double XS = 0.05, OS = 0.03, AS = 0.04;
constexpr std::int64_t OZ = 5, AZ = 120;

// One convolution's geometry and operands (uint8 source [B, C, H, W], int8 weight [OC, C/g, KH, KW]).
struct Conv {
  std::int64_t B = 2, C = 4, H = 7, W = 6, OC = 6, KH = 3, KW = 3, groups = 1, stride = 1, pad = 1, dil = 1;
  std::int64_t xz = 128;
  std::string prefix;  // of its operands' names (w, ws, wz, b), for two convolutions in one graph
  DType xdtype = DType::uint8;
  Tensor x, w, ws, wz, b, accum;
  std::int64_t OH() const { return (H + 2 * pad - dil * (KH - 1) - 1) / stride + 1; }
  std::int64_t OW() const { return (W + 2 * pad - dil * (KW - 1) - 1) / stride + 1; }
  runtime::Shape out_shape() const { return {B, OC, OH(), OW()}; }
  std::vector<Dim> out_dims() const { return {B, OC, OH(), OW()}; }
  // Weights within [-64, 64]: the int8 primitive runs on any CPU (see int8_products_exact).
  void make(int wlo = -64, int whi = 64) {
    const bool s8 = xdtype == DType::int8;
    x = random_ints({B, C, H, W}, xdtype, s8 ? -128 : 0, s8 ? 127 : 255, 1), w = random_ints({OC, C / groups, KH, KW}, DType::int8, wlo, whi, 2);
    ws = Tensor::empty({OC}), wz = Tensor::empty({OC}, DType::int64), b = random_tensor({OC}, 3);
    for (std::int64_t j = 0; j < OC; ++j) ws.data<float>()[j] = 0.002f + 0.0005f * float(j), wz.data<std::int64_t>()[j] = 0;
    accum = random_ints(out_shape(), DType::uint8, 0, 255, 4);
  }
  runtime::Weights weights() const { return {{prefix + "w", w}, {prefix + "ws", ws}, {prefix + "wz", wz}, {prefix + "b", b}}; }

  // y[n, oc, oh, ow] in float from dequantized operands, then post(y, dequantized accum).
  template <class Post>
  std::vector<double> reference(Post post) const {
    const std::int64_t oh_n = OH(), ow_n = OW(), cg = C / groups, og = OC / groups;
    std::vector<double> out(static_cast<std::size_t>(B * OC * oh_n * ow_n));
    std::size_t i = 0;
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t oc = 0; oc < OC; ++oc)
        for (std::int64_t oh = 0; oh < oh_n; ++oh)
          for (std::int64_t ow = 0; ow < ow_n; ++ow, ++i) {
            double acc = b.data<float>()[oc];
            for (std::int64_t c = 0; c < cg; ++c)
              for (std::int64_t kh = 0; kh < KH; ++kh)
                for (std::int64_t kw = 0; kw < KW; ++kw) {
                  const std::int64_t ih = oh * stride - pad + kh * dil, iw = ow * stride - pad + kw * dil;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;  // zero padding of the float source
                  const std::int64_t ic = (oc / og) * cg + c;
                  const std::int64_t at = ((n * C + ic) * H + ih) * W + iw;
                  const double xv = x.dtype() == DType::int8 ? double(x.data<std::int8_t>()[at]) : double(x.data<std::uint8_t>()[at]);
                  const double xd = (xv - double(xz)) * XS;
                  const double wd = double(w.data<std::int8_t>()[((oc * cg + c) * KH + kh) * KW + kw]) * ws.data<float>()[oc];
                  acc += xd * wd;
                }
            const double a = accum.dtype() == DType::int8 ? double(accum.data<std::int8_t>()[i]) : double(accum.data<std::uint8_t>()[i]);
            out[i] = post(acc, (a - double(AZ)) * AS);
          }
    return out;
  }

  Node* prepacked(Graph& g) const {
    return g.call_function(OpRef("onednn.qconv_prepack.default"),
                           {g.get_attr(prefix + "w", meta({OC, C / groups, KH, KW}, DType::int8)), g.get_attr(prefix + "ws", meta({OC})), XS, xz,
                            ArgList{stride, stride}, ArgList{pad, pad}, ArgList{dil, dil}, groups, Arg()});
  }
  ArgList geometry() const { return {ArgList{stride, stride}, ArgList{pad, pad}, ArgList{dil, dil}, groups}; }
};

double quantize(double y) { return std::clamp(std::nearbyint(y / OS) + double(OZ), 0.0, 255.0); }

// qconv_pointwise(.tensor) of the source placeholder with `attr` and `scalars`: a quantized output
// (OS, OZ) when out_dtype is None (the source's dtype), uint8 or int8, a float one when it is float32.
Node* qconv(Graph& g, const Conv& c, Node* x, bool tensors, Arg out_dtype, const std::string& attr, ArgList scalars) {
  Arg xs = XS, xz = c.xz;
  if (tensors) xs = g.get_attr("xs", meta({})), xz = g.get_attr("xz", meta({}, DType::int64));
  const auto* d = out_dtype.get_if<DType>();
  const bool q = out_dtype.is_none() || (d && (*d == DType::uint8 || *d == DType::int8));
  ArgList args{x, xs, xz, c.prepacked(g), g.get_attr(c.prefix + "ws", meta({c.OC})), g.get_attr(c.prefix + "wz", meta({c.OC}, DType::int64)),
               g.get_attr(c.prefix + "b", meta({c.OC}))};
  for (const Arg& a : c.geometry()) args.push_back(a);
  for (const Arg& a : ArgList{q ? OS : 1.0, q ? OZ : 0, out_dtype, attr, scalars, Arg()}) args.push_back(a);
  return g.call_function(OpRef(tensors ? "onednn.qconv_pointwise.tensor" : "onednn.qconv_pointwise.default"), args, {}, "qc");
}

// Runs qconv_pointwise with a uint8 and a float32 output; checks both against the reference with `f` as post-op.
void check_unary(const Conv& c, const std::string& attr, const ArgList& scalars, double (*f)(double), bool tensors = false) {
  Graph g;
  Node* x = g.placeholder("x", meta({c.B, c.C, c.H, c.W}, DType::uint8));
  g.output(ArgList{qconv(g, c, x, tensors, Arg(), attr, scalars), qconv(g, c, x, tensors, Arg(DType::float32), attr, scalars)});
  runtime::Weights w = c.weights();
  Tensor xs = Tensor::empty({}), xz = Tensor::empty({}, DType::int64);
  xs.data<float>()[0] = float(XS), xz.data<std::int64_t>()[0] = c.xz;
  w.emplace("xs", xs), w.emplace("xz", xz);
  auto out = CompiledGraph::compile(g, w).run({c.x});
  REQUIRE(out[0].shape() == c.out_shape());
  CHECK(out[0].dtype() == DType::uint8);
  CHECK(out[1].dtype() == DType::float32);
  CHECK(max_abs_error(c.reference([&](double y, double) { return quantize(f(y)); }), out[0]) <= 1.0);
  CHECK(max_abs_error(c.reference([&](double y, double) { return f(y); }), out[1]) < 1e-3);
}

double identity(double v) { return v; }

// The steps of `cg` whose op type (else implementation) is `what`.
std::size_t count_steps(const CompiledGraph& cg, std::string_view what, bool by_op_type) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < cg.num_steps(); ++i) n += (by_op_type ? cg.step(i).op_type : cg.step(i).implementation) == what;
  return n;
}
double relu(double v) { return std::max(v, 0.0); }

}  // namespace

TEST_CASE("qconv_pointwise with padding and a non-zero source zero point, stride, dilation, groups and depthwise") {
  struct Shape {
    std::int64_t groups, OC, stride, pad, dil, xz;
  };
  const std::vector<Shape> shapes{{1, 6, 1, 1, 1, 128}, {1, 6, 2, 1, 1, 77}, {1, 6, 1, 2, 2, 200}, {2, 6, 1, 1, 1, 128},
                                  {4, 4, 1, 1, 1, 128}, {4, 8, 2, 1, 1, 31},  {1, 6, 1, 0, 1, 128}, {1, 6, 1, 1, 1, 0}};
  for (const Shape& s : shapes)
    for (const bool tensors : {false, true}) {
      CAPTURE(s.groups);
      CAPTURE(s.OC);
      CAPTURE(s.stride);
      CAPTURE(s.pad);
      CAPTURE(s.dil);
      CAPTURE(s.xz);
      CAPTURE(tensors);
      Conv c;
      c.groups = s.groups, c.OC = s.OC, c.stride = s.stride, c.pad = s.pad, c.dil = s.dil, c.xz = s.xz;
      c.make();
      check_unary(c, "none", {}, identity, tensors);
    }
}

TEST_CASE("qconv_pointwise post-ops relu, hardtanh, hardswish and swish") {
  Conv c;
  c.make();
  check_unary(c, "relu", {}, relu);
  check_unary(c, "hardtanh", {0.0, 6.0}, [](double v) { return std::clamp(v, 0.0, 6.0); });
  check_unary(c, "hardtanh", {-0.5, 0.25}, [](double v) { return std::clamp(v, -0.5, 0.25); });
  check_unary(c, "hardswish", {}, [](double v) { return v * std::clamp(v + 3.0, 0.0, 6.0) / 6.0; });
  check_unary(c, "swish", {}, [](double v) { return v / (1.0 + std::exp(-v)); });
}

TEST_CASE("qconv_pointwise with full-range weights or weights given as inputs runs within one step of the reference") {
  Conv c;
  c.make(-128, 127);
  check_unary(c, "relu", {}, relu);
  Conv d;
  d.make();
  Graph g;
  Node* x = g.placeholder("x", meta({d.B, d.C, d.H, d.W}, DType::uint8));
  Node* w = g.placeholder("w", meta({d.OC, d.C, d.KH, d.KW}, DType::int8));
  ArgList args{x, XS, d.xz, w, g.placeholder("ws", meta({d.OC})), g.placeholder("wz", meta({d.OC}, DType::int64)),
               g.placeholder("b", meta({d.OC}))};
  for (const Arg& a : d.geometry()) args.push_back(a);
  for (const Arg& a : ArgList{OS, OZ, Arg(), "relu", ArgList{}, Arg()}) args.push_back(a);
  g.output(ArgList{g.call_function(OpRef("onednn.qconv_pointwise.default"), args)});
  auto out = CompiledGraph::compile(g, {}).run({d.x, d.w, d.ws, d.wz, d.b});
  CHECK(max_abs_error(d.reference([](double y, double) { return quantize(relu(y)); }), out[0]) <= 1.0);
}

// A uint8 or int8 accum with a quantized output is summed in the destination
// (oneDNN's sum post-op); with a float output it is dequantized and added.
TEST_CASE("qconv2d_pointwise.binary adds a uint8, int8 or float32 accum, then relu, with uint8 and float32 outputs") {
  for (const DType accum_dtype : {DType::uint8, DType::int8, DType::float32})
    for (const std::string binary : {"add", "sum"})
      for (const std::string after : {"none", "relu"}) {
        const bool float_accum = accum_dtype == DType::float32;
        CAPTURE(accum_dtype);
        CAPTURE(binary);
        CAPTURE(after);
        Conv c;
        c.make();
        if (accum_dtype == DType::int8) c.accum = random_ints(c.out_shape(), DType::int8, -128, 127, 4);
        Tensor accum = c.accum;
        if (float_accum) {
          accum = Tensor::empty(c.out_shape());
          for (std::int64_t i = 0; i < accum.numel(); ++i)
            accum.data<float>()[i] = float((double(c.accum.data<std::uint8_t>()[i]) - double(AZ)) * AS);
        }
        Graph g;
        Node* x = g.placeholder("x", meta({c.B, c.C, c.H, c.W}, DType::uint8));
        Node* a = g.placeholder("accum", meta(c.out_dims(), accum_dtype));
        const auto node = [&](Arg out_dtype) {
          const bool q = out_dtype.is_none();
          ArgList args{x, XS, c.xz, c.prepacked(g), g.get_attr("ws", meta({c.OC})), g.get_attr("wz", meta({c.OC}, DType::int64)), a,
                       g.get_attr("b", meta({c.OC}))};
          for (const Arg& v : c.geometry()) args.push_back(v);
          for (const Arg& v : ArgList{q ? OS : 1.0, q ? OZ : 0, out_dtype, float_accum ? 1.0 : AS, float_accum ? 0 : AZ, binary, 1.0,
                                      after, ArgList{}, Arg()})
            args.push_back(v);
          return g.call_function(OpRef("onednn.qconv2d_pointwise.binary"), args);
        };
        g.output(ArgList{node(Arg()), node(Arg(DType::float32))});
        auto out = CompiledGraph::compile(g, c.weights()).run({c.x, accum});
        const auto f = [&](double y, double o) { return after == "relu" ? relu(y + o) : y + o; };
        CHECK(max_abs_error(c.reference([&](double y, double o) { return quantize(f(y, o)); }), out[0]) <= 1.0);
        CHECK(max_abs_error(c.reference(f), out[1]) < 1e-3);
      }
}

// A 1-d convolution (3-d tensors, which Inductor 2.11's passes prepack and fuse as 2-d
// ones) writes channels-last as 2-d ones do: oneDNN's int8 kernels take NWC, and with
// NCW it ran its reference code. relu, and the sum + relu Inductor's own 1-d kernel refuses.
TEST_CASE("1-d qconv_pointwise and qconv2d_pointwise.binary run on oneDNN's int8 kernels within one step of the reference") {
  for (const auto& [stride, pad] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {2, 0}}) {
    CAPTURE(stride);
    CAPTURE(pad);
    const std::int64_t B = 2, C = 4, W = 10, OC = 6, K = 3, xz = 128, OW = (W + 2 * pad - K) / stride + 1;
    const Tensor x = random_ints({B, C, W}, DType::uint8, 0, 255, 1), w = random_ints({OC, C, K}, DType::int8, -64, 64, 2);
    const Tensor accum = random_ints({B, OC, OW}, DType::uint8, 0, 255, 4), b = random_tensor({OC}, 3);
    Tensor ws = Tensor::empty({OC}), wz = Tensor::empty({OC}, DType::int64);
    for (std::int64_t j = 0; j < OC; ++j) ws.data<float>()[j] = 0.002f + 0.0005f * float(j), wz.data<std::int64_t>()[j] = 0;
    Graph g;
    Node* xn = g.placeholder("x", meta({B, C, W}, DType::uint8));
    Node* an = g.placeholder("accum", meta({B, OC, OW}, DType::uint8));
    const ArgList geometry{ArgList{stride}, ArgList{pad}, ArgList{1}, 1};
    Node* packed = g.call_function(OpRef("onednn.qconv_prepack.default"),
                                   {g.get_attr("w", meta({OC, C, K}, DType::int8)), g.get_attr("ws", meta({OC})), XS, xz, ArgList{stride},
                                    ArgList{pad}, ArgList{1}, 1, Arg()});
    ArgList head{xn, XS, xz, packed, g.get_attr("ws", meta({OC})), g.get_attr("wz", meta({OC}, DType::int64))};
    ArgList unary = head, binary = head;
    unary.push_back(g.get_attr("b", meta({OC})));
    binary.push_back(an), binary.push_back(g.get_attr("b", meta({OC})));
    for (const Arg& a : geometry) unary.push_back(a), binary.push_back(a);
    for (const Arg& a : ArgList{OS, OZ, Arg(), "relu", ArgList{}, Arg()}) unary.push_back(a);
    for (const Arg& a : ArgList{OS, OZ, Arg(), AS, AZ, "sum", 1.0, "relu", ArgList{}, Arg()}) binary.push_back(a);
    g.output(ArgList{g.call_function(OpRef("onednn.qconv_pointwise.default"), unary),
                     g.call_function(OpRef("onednn.qconv2d_pointwise.binary"), binary)});
    const CompiledGraph cg = CompiledGraph::compile(g, {{"w", w}, {"ws", ws}, {"wz", wz}, {"b", b}});
    for (std::size_t i = 0; i < cg.num_steps(); ++i) {
      CAPTURE(cg.step(i).implementation);
      CHECK(cg.step(i).implementation.find("ref") == std::string::npos);
    }
    const auto out = cg.run({x, accum});
    std::vector<double> want_unary, want_binary;
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t oc = 0; oc < OC; ++oc)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double acc = b.data<float>()[oc];
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t k = 0; k < K; ++k) {
              const std::int64_t iw = ow * stride - pad + k;
              if (iw < 0 || iw >= W) continue;
              acc += (double(x.data<std::uint8_t>()[(n * C + c) * W + iw]) - double(xz)) * XS * double(w.data<std::int8_t>()[(oc * C + c) * K + k]) *
                     ws.data<float>()[oc];
            }
          const double other = (double(accum.data<std::uint8_t>()[(n * OC + oc) * OW + ow]) - double(AZ)) * AS;
          want_unary.push_back(quantize(relu(acc))), want_binary.push_back(quantize(relu(acc + other)));
        }
    REQUIRE(out[0].shape() == runtime::Shape{B, OC, OW});
    CHECK(max_abs_error(want_unary, out[0]) <= 1.0);
    CHECK(max_abs_error(want_binary, out[1]) <= 1.0);
  }
}

// An int8 convolution's result is channels-last in any graph, where PyTorch's was
// row-major (the strides the exporter records, and quant_lift_up keeps): a view of
// it copies in PyTorch's order, as AlexNet's flatten needs, instead of refusing.
TEST_CASE("a view of an int8 convolution's channels-last result reads it in PyTorch's row-major order") {
  Conv c;
  c.make();
  Graph g;
  Node* x = g.placeholder("x", meta({c.B, c.C, c.H, c.W}, DType::uint8));
  Node* q = qconv(g, c, x, false, Arg(), "relu", {});
  Node* dq = g.call_function(OpRef("quantized_decomposed.dequantize_per_tensor.default"), {q, OS, OZ, 0, 255, Arg(DType::uint8)});
  TensorMeta dm = meta(c.out_dims());
  dm.stride = std::vector<Dim>{c.OC * c.OH() * c.OW(), c.OH() * c.OW(), c.OW(), 1};
  dq->meta.val = dm;
  Node* flat = g.call_function(OpRef("aten.view.default"), {dq, ArgList{c.B, -1}});
  g.output(ArgList{dq, flat});
  runtime::CompileOptions options;  // no aten.convolution: the graph is not laid out channels-last
  const auto out = CompiledGraph::compile(g, c.weights(), options).run({c.x});
  REQUIRE(out[1].shape() == runtime::Shape{c.B, c.OC * c.OH() * c.OW()});
  int bad = 0;
  for (std::int64_t i = 0; i < out[1].numel(); ++i) bad += element(out[1], i) != element(out[0], i);
  CHECK(bad == 0);
}

TEST_CASE("qconv_pointwise refuses, naming the node, the dtypes and post-ops it does not take") {
  const auto refused = [](const std::string& op, DType xd, ArgList tail, const std::string& message) {
    CAPTURE(message);
    Conv c;
    c.make();
    Graph g;
    Node* x = g.placeholder("x", meta({c.B, c.C, c.H, c.W}, xd));
    ArgList args{x, XS, c.xz, c.prepacked(g), g.get_attr("ws", meta({c.OC})), g.get_attr("wz", meta({c.OC}, DType::int64))};
    if (op.find("binary") != std::string::npos) args.push_back(g.placeholder("accum", meta(c.out_dims(), DType::uint8)));
    args.push_back(g.get_attr("b", meta({c.OC})));
    for (const Arg& a : c.geometry()) args.push_back(a);
    for (const Arg& a : tail) args.push_back(a);
    g.output(ArgList{g.call_function(OpRef(op), args, {}, "qc")});
    CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, c.weights()), doctest::Contains(message.c_str()), runtime::CompileError);
  };
  const std::string unary = "onednn.qconv_pointwise.default", binary = "onednn.qconv2d_pointwise.binary";
  refused(unary, DType::float32, {OS, OZ, Arg(), "none", ArgList{}, Arg()},
          "node qc (onednn.qconv_pointwise.default): the input is float32; qconv takes uint8 or int8");
  refused(unary, DType::uint8, {OS, OZ, Arg(), "gelu", ArgList{}, Arg()},
          "node qc (onednn.qconv_pointwise.default): unary post-op 'gelu' is not supported");
  refused(unary, DType::uint8, {OS, OZ, Arg(), "hardtanh", ArgList{1.0}, Arg()}, "hardtanh takes two scalars");
  refused(unary, DType::uint8, {OS, OZ, Arg(DType::int64), "none", ArgList{}, Arg()}, "output_dtype must be uint8, int8, float32 or bfloat16");
  refused(unary, DType::uint8, {OS, OZ, Arg(DType::float32), "none", ArgList{}, Arg()},
          "a float output takes output_scale 1 and output_zero_point 0");
  refused(binary, DType::uint8, {OS, OZ, Arg(), AS, AZ, "mul", 1.0, "none", ArgList{}, Arg()},
          "node qc (onednn.qconv2d_pointwise.binary): binary post-op 'mul' is not supported (add and sum are)");
  refused(binary, DType::uint8, {OS, OZ, Arg(), AS, AZ, "sum", 2.0, "none", ArgList{}, Arg()}, "alpha must be 1");
  refused(binary, DType::uint8, {OS, OZ, Arg(), AS, AZ, "sum", 1.0, "gelu", ArgList{}, Arg()}, "unary post-op 'gelu' is not supported");
}

// kAmxMinReduction and kAmxMinOutputs: a convolution summing fewer than 64
// products per output (here 4 channels x 3x3 = 36), or one with fewer than 64
// output channels (64 x 3x3 into 6), takes oneDNN's next implementation where its
// first choice is AMX; one summing 64 x 3x3 into 64 keeps oneDNN's choice. (On a
// CPU without AMX all run VNNI or AVX-512 code and the check holds trivially.)
TEST_CASE("an int8 convolution with a reduction or output channels under 64 does not run on AMX") {
  Conv narrow, few, wide;
  few.C = 64;
  wide.C = 64, wide.OC = 64;
  for (Conv* c : {&narrow, &few, &wide}) {
    c->make();
    Graph g;
    Node* x = g.placeholder("x", meta({c->B, c->C, c->H, c->W}, DType::uint8));
    g.output(ArgList{qconv(g, *c, x, false, Arg(), "relu", ArgList{})});
    const CompiledGraph cg = CompiledGraph::compile(g, c->weights());
    std::string impl;
    for (std::size_t s = 0; s < cg.num_steps(); ++s) impl += cg.step(s).implementation;
    CAPTURE(impl);
    if (c != &wide) CHECK(impl.find("amx") == std::string::npos);
    CHECK(max_abs_error(c->reference([](double y, double) { return quantize(relu(y)); }), cg.run({c->x})[0]) <= 1.0);
  }
}

namespace {

struct Post {
  std::string attr;
  ArgList scalars;
  double (*f)(double);
};
const std::vector<Post> kPosts{{"none", {}, identity}, {"relu", {}, relu},
                               {"hardtanh", {0.0, 0.4}, [](double v) { return std::clamp(v, 0.0, 0.4); }},
                               // Bounds below a uint8 output's range: every quantized output saturates to its low end.
                               {"hardtanh", {-6.0, -3.0}, [](double v) { return std::clamp(v, -6.0, -3.0); }},
                               // Bounds past both ends of the uint8 output's range (OS, OZ): its saturation clamps,
                               // and the primitive runs without the post-op (unary_is_saturation); not so for int8's.
                               {"hardtanh", {-1.0, 100.0}, [](double v) { return std::clamp(v, -1.0, 100.0); }}};

// Convolution `c` (made) with `post` to the source's dtype, float32 and int8 (zero point
// -3), from an NCHW source or a channels-last one (an NHWC placeholder permuted to NCHW,
// as kiln's int8 convolutions hand each other): `steps` steps named `implementation`
// (a prefix), each output within one step of the reference, and the same bytes split
// over two threads.
// The graph check_conv_outputs runs, built into `g`; gives the input it takes.
Tensor build_conv_graph(Graph& g, const Conv& c, const Post& post, bool channels_last) {
  Node* x = nullptr;
  Tensor input = c.x;
  if (channels_last) {
    input = Tensor::empty({c.B, c.H, c.W, c.C}, c.xdtype);
    const auto* from = static_cast<const std::uint8_t*>(c.x.raw());
    auto* to = static_cast<std::uint8_t*>(input.raw());
    for (std::int64_t n = 0; n < c.B; ++n)
      for (std::int64_t ch = 0; ch < c.C; ++ch)
        for (std::int64_t i = 0; i < c.H * c.W; ++i) to[(n * c.H * c.W + i) * c.C + ch] = from[(n * c.C + ch) * c.H * c.W + i];
    x = g.call_function(OpRef("aten.permute.default"), {g.placeholder("x", meta({c.B, c.H, c.W, c.C}, c.xdtype)), ArgList{0, 3, 1, 2}});
  } else {
    x = g.placeholder("x", meta({c.B, c.C, c.H, c.W}, c.xdtype));
  }
  ArgList int8_out{x, XS, c.xz, c.prepacked(g), g.get_attr("ws", meta({c.OC})), g.get_attr("wz", meta({c.OC}, DType::int64)),
                   g.get_attr("b", meta({c.OC}))};
  for (const Arg& a : c.geometry()) int8_out.push_back(a);
  for (const Arg& a : ArgList{OS, -3, DType::int8, post.attr, post.scalars, Arg()}) int8_out.push_back(a);
  g.output(ArgList{qconv(g, c, x, false, Arg(), post.attr, post.scalars), qconv(g, c, x, false, Arg(DType::float32), post.attr, post.scalars),
                   g.call_function(OpRef("onednn.qconv_pointwise.default"), int8_out)});
  return input;
}

void check_conv_outputs(const Conv& c, const Post& post, bool channels_last, std::string_view implementation, std::size_t steps) {
  Graph g;
  const Tensor input = build_conv_graph(g, c, post, channels_last);
  const CompiledGraph cg = CompiledGraph::compile(g, c.weights());
  std::size_t named = 0;
  for (std::size_t i = 0; i < cg.num_steps(); ++i) named += cg.step(i).implementation.starts_with(implementation);
  CHECK(named == steps);
  const auto out = cg.run({input});
  REQUIRE(out[0].shape() == c.out_shape());
  CHECK(out[2].dtype() == DType::int8);
  // output_dtype None is the source's dtype.
  CHECK(out[0].dtype() == c.xdtype);
  const auto q8 = [&](double y, double zp) { return std::clamp(std::nearbyint(post.f(y) / OS) + zp, -128.0, 127.0); };
  if (c.xdtype == DType::int8) CHECK(max_abs_error(c.reference([&](double y, double) { return q8(y, double(OZ)); }), out[0]) <= 1.0);
  else CHECK(max_abs_error(c.reference([&](double y, double) { return quantize(post.f(y)); }), out[0]) <= 1.0);
  CHECK(max_abs_error(c.reference([&](double y, double) { return post.f(y); }), out[1]) < 1e-3);
  CHECK(max_abs_error(c.reference([&](double y, double) { return q8(y, -3.0); }), out[2]) <= 1.0);
  runtime::CompileOptions two;
  two.threads = 2;
  const auto split = CompiledGraph::compile(g, c.weights(), two).run({input});
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(std::memcmp(split[i].raw(), out[i].raw(), out[i].nbytes()) == 0);
}

}  // namespace

// Which relu and hardtanh post-ops the quantized output's saturation already applies.
TEST_CASE("a relu or hardtanh whose bounds the quantized output's range covers is left to the saturation") {
  kernels::onednn_detail::QConvSpec s;
  s.tail.out = DType::uint8, s.tail.output_scale = 6.0 / 255, s.tail.output_zero_point = 0;
  s.unary.name = "hardtanh", s.unary.scalars = {0.0, 6.0};
  CHECK(kernels::onednn_detail::unary_is_saturation(s));  // MobileNetV2's ReLU6 before a scale of 6/255
  s.tail.output_scale = 5.0 / 255;
  CHECK(kernels::onednn_detail::unary_is_saturation(s));  // a smaller range: 6 lies past its top
  s.tail.output_scale = 7.0 / 255;
  CHECK_FALSE(kernels::onednn_detail::unary_is_saturation(s));  // 6 quantizes to 219: the clamp is needed
  s.tail.output_scale = 6.0 / 255, s.tail.output_zero_point = 3;
  CHECK_FALSE(kernels::onednn_detail::unary_is_saturation(s));  // 0 quantizes to 3
  s.tail.output_zero_point = 0;
  s.tail.out = DType::int8;
  CHECK_FALSE(kernels::onednn_detail::unary_is_saturation(s));  // int8's range goes below 0
  s.tail.output_zero_point = -128;
  CHECK(kernels::onednn_detail::unary_is_saturation(s));
  s.tail.out = DType::uint8, s.tail.output_zero_point = 0;
  s.unary.name = "relu", s.unary.scalars.clear();
  CHECK(kernels::onednn_detail::unary_is_saturation(s));
  s.tail.output_zero_point = 1;
  CHECK_FALSE(kernels::onednn_detail::unary_is_saturation(s));
  s.tail.output_zero_point = 0;
  s.unary.name = "hardswish";
  CHECK_FALSE(kernels::onednn_detail::unary_is_saturation(s));
  s.unary.name = "relu";
  s.after_add.name = "relu";  // a post-op after an addend: the first relu is not the last op
  CHECK_FALSE(kernels::onednn_detail::unary_is_saturation(s));
  s.after_add.name = "none";
  s.tail.out = DType::float32;
  CHECK_FALSE(kernels::onednn_detail::unary_is_saturation(s));
}

// A network's input quantized for its first convolution (float32 -> quantize_per_tensor ->
// a convolution of 3 channels): the widened copy quantizes the floats as it copies them
// and the quantize's step is dropped. The outputs are those of the quantize run on its own
// (the same graph with the quantized tensor also an output), byte for byte, on one thread
// and two; values past the range clamp and halves round to even as the quantize does.
TEST_CASE("a first convolution quantizes the float input as it widens it, equal to the quantize run on its own") {
  Conv c;
  c.C = 3, c.OC = 6, c.H = 9, c.W = 37, c.stride = 2, c.pad = 1, c.xz = 131;
  c.make(-128, 127);
  Tensor xf = random_tensor({c.B, c.C, c.H, c.W}, 11);
  for (std::int64_t i = 0; i < xf.numel(); ++i) xf.data<float>()[i] *= 4.0f;  // past the range at both ends
  for (std::int64_t i = 0; i < 8; ++i) xf.data<float>()[i * 5] = float((double(i) - 3.5) * XS);  // exact halves
  const auto build = [&](bool quantized_is_output) {
    Graph g;
    Node* x = g.placeholder("x", meta({c.B, c.C, c.H, c.W}));
    Node* q = g.call_function(OpRef("quantized_decomposed.quantize_per_tensor.default"), {x, XS, c.xz, 0, 255, Arg(DType::uint8)}, {},
                              "quantize");
    Node* conv = qconv(g, c, q, false, Arg(), "relu", {});
    g.output(quantized_is_output ? ArgList{conv, q} : ArgList{conv});
    return g;
  };
  const Graph fused = build(false), apart = build(true);
  for (const int threads : {1, 2}) {
    CAPTURE(threads);
    runtime::CompileOptions o;
    o.threads = threads;
    const auto f = CompiledGraph::compile(fused, c.weights(), o), a = CompiledGraph::compile(apart, c.weights(), o);
    CHECK(count_steps(f, "kiln_widen_channels:quantizing", false) == 1);
    CHECK(count_steps(f, "quantized_decomposed.quantize_per_tensor.default", true) == 0);
    // The quantized tensor read elsewhere too: the quantize runs, the copy reads its result.
    CHECK(count_steps(a, "kiln_widen_channels", false) == 1);
    CHECK(count_steps(a, "quantized_decomposed.quantize_per_tensor.default", true) == 1);
    const auto fo = f.run({xf});
    const auto ao = a.run({xf});
    REQUIRE(fo[0].nbytes() == ao[0].nbytes());
    CHECK(std::memcmp(fo[0].raw(), ao[0].raw(), fo[0].nbytes()) == 0);
    // And the quantize's own result is PyTorch's formula: clamp(round_half_even(x * (1 / scale)) + zp).
    const float inv = static_cast<float>(1.0 / XS);
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < xf.numel(); ++i)
      wrong += ao[1].data<std::uint8_t>()[i] !=
               static_cast<std::uint8_t>(std::clamp(std::nearbyint(xf.data<float>()[i] * inv) + float(c.xz), 0.0f, 255.0f));
    CHECK(wrong == 0);
  }
}

// Depthwise convolutions as MobileNet's are (groups = channels), on kiln's own
// kernel where it applies and on oneDNN elsewhere: channel counts
// past a multiple of 16 and past 64, 2x2 to 7x7 kernels, stride, padding with a non-zero
// zero point, dilation, an int8 source, full-range weights, none/relu/hardtanh,
// uint8/int8/float32 outputs, from an NCHW source and from a channels-last one,
// on one thread and split over two (each thread widening its own rows).
TEST_CASE("depthwise int8 convolutions of many shapes, sources and outputs run within one step of the reference") {
  struct Shape {
    std::int64_t C, K, stride, pad, dil, xz;
    DType xdtype;
    std::int64_t H = 11, W = 19, B = 2;
  };
  // The last: padding rows above the second image land in the row slots (ih % 4) where
  // the first image's rows were, with H = 4 (a padding row once took a real row's tag there).
  const std::vector<Shape> shapes{{20, 3, 1, 1, 1, 128, DType::uint8}, {32, 3, 2, 1, 1, 77, DType::uint8},
                                  {16, 5, 1, 2, 1, 0, DType::uint8},   {24, 3, 1, 2, 2, -5, DType::int8},
                                  {16, 3, 1, 0, 1, 128, DType::uint8}, {48, 7, 2, 3, 1, 200, DType::uint8},
                                  {24, 3, 1, 2, 2, 5, DType::uint8},   {40, 3, 2, 1, 1, 0, DType::uint8},
                                  {32, 2, 1, 0, 1, 9, DType::uint8},   {16, 4, 1, 1, 1, 128, DType::uint8},
                                  {16, 3, 3, 1, 1, 50, DType::uint8},  {16, 4, 1, 3, 1, 77, DType::uint8, 4},
                                  // 64 channels and more: kiln's kernel narrows 4 groups of 16 at once, then the rest one by one.
                                  {64, 3, 1, 1, 1, 128, DType::uint8}, {100, 3, 1, 1, 1, 30, DType::uint8},
                                  {144, 3, 1, 1, 1, 0, DType::uint8, 5},
                                  // Rows of 7, 12 and 13 pixels: the kernel's last 1-7 pixels of a row as one block, of each width.
                                  {32, 3, 1, 1, 1, 128, DType::uint8, 7, 7}, {16, 3, 1, 1, 1, 0, DType::uint8, 11, 12},
                                  {48, 3, 1, 1, 1, 60, DType::uint8, 6, 13},
                                  // Rows two at a time: 3 images of 10 rows split over two threads, the second
                                  // thread starting at an odd row of the second image; a 2x2 kernel (3 source rows a pair).
                                  {32, 3, 1, 1, 1, 9, DType::uint8, 10, 9, 3}, {16, 2, 1, 1, 1, 200, DType::uint8, 10, 9, 3}};
  for (const Shape& s : shapes)
    for (const bool channels_last : {false, true})
      for (const Post& post : kPosts) {
        CAPTURE(s.C);
        CAPTURE(s.K);
        CAPTURE(s.stride);
        CAPTURE(s.pad);
        CAPTURE(s.dil);
        CAPTURE(channels_last);
        CAPTURE(post.attr);
        Conv c;
        c.B = s.B, c.C = c.OC = c.groups = s.C, c.H = s.H, c.W = s.W, c.KH = c.KW = s.K, c.stride = s.stride, c.pad = s.pad, c.dil = s.dil;
        c.xz = s.xz, c.xdtype = s.xdtype;
        c.make(-128, 127);
        // kiln's own kernel (kernels/detail/int8_depthwise.hpp) takes the quantized outputs of a
        // uint8 channels-last source at stride 1 with up to 4 kernel rows, undilated, where this build has it.
        const bool takes = kernels::detail::kInt8DepthwiseBuilt && channels_last && c.xdtype == DType::uint8 && s.K <= 4 && s.dil == 1 && s.stride == 1;
        check_conv_outputs(c, post, channels_last, "kiln_int8_depthwise", takes ? 2 : 0);
      }
}

// An image's first convolution (1 to 3 channels) runs on a copy of its source widened
// to 4 channels and padded with the zero point (onednn/qconv.hpp widens_narrow_source):
// channel counts 1 to 3, widths past the copy's 16 pixels, padding with zero points 0
// to 255, stride, from an NCHW source and a channels-last one, none/relu/hardtanh,
// uint8/float32/int8 outputs; within one step of the reference, the same bytes on two
// threads. 4 channels and 2 groups are not widened.
TEST_CASE("int8 convolutions of 1 to 3 channels run widened to 4 within one step of the reference") {
  struct Shape {
    std::int64_t C, groups, W, stride, pad, xz;
  };
  const std::vector<Shape> shapes{{3, 1, 37, 2, 1, 131}, {3, 1, 16, 1, 1, 0},  {1, 1, 19, 1, 2, 255},
                                  {2, 1, 5, 2, 0, 77},   {3, 1, 33, 1, 3, 200}, {4, 1, 19, 2, 1, 131}, {2, 2, 19, 1, 1, 131}};
  for (const Shape& s : shapes)
    for (const bool channels_last : {false, true})
      for (const Post& post : kPosts) {
        CAPTURE(s.C);
        CAPTURE(s.W);
        CAPTURE(s.pad);
        CAPTURE(channels_last);
        CAPTURE(post.attr);
        Conv c;
        c.C = s.C, c.groups = s.groups, c.OC = 6, c.H = 9, c.W = s.W, c.stride = s.stride, c.pad = s.pad, c.xz = s.xz;
        c.make(-128, 127);
        // Each of the three convolutions widens its own copy.
        check_conv_outputs(c, post, channels_last, "kiln_widen_channels", s.C < 4 && s.groups == 1 ? 3 : 0);
      }
}

// kiln's own int8 kernels keep per-thread buffers (the depthwise kernel's interleaved
// rows) and split rows over the run's threads: two threads running one compiled graph at
// once, each with its own context of two threads and its own input, get the bytes a
// lone run gives, run after run.
TEST_CASE("two threads run one compiled graph of kiln's int8 depthwise and widened convolutions at once") {
  Conv dw;
  dw.B = 2, dw.C = dw.OC = dw.groups = 72, dw.H = 9, dw.W = 21, dw.KH = dw.KW = 3, dw.pad = 1, dw.xz = 128;
  dw.make(-128, 127);
  Conv wide;
  wide.C = 3, wide.OC = 8, wide.H = 11, wide.W = 37, wide.stride = 2, wide.pad = 1, wide.xz = 131;
  wide.make(-128, 127);
  struct Case {
    const Conv& c;
    std::string_view implementation;
    std::size_t steps;  // the depthwise kernel takes the two quantized outputs, every output widens
  };
  for (const auto& [c, implementation, steps] : {Case{dw, "kiln_int8_depthwise", 2}, Case{wide, "kiln_widen_channels", 3}}) {
    CAPTURE(implementation);
    Graph g;
    const Tensor input = build_conv_graph(g, c, kPosts[2], true);
    const CompiledGraph cg = CompiledGraph::compile(g, c.weights());
    std::size_t named = 0;
    for (std::size_t i = 0; i < cg.num_steps(); ++i) named += cg.step(i).implementation.starts_with(implementation);
    REQUIRE(named == steps);
    // A second input: every byte moved by 77.
    Tensor other = Tensor::empty(input.shape(), input.dtype());
    for (std::int64_t i = 0; i < input.numel(); ++i)
      other.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(input.data<std::uint8_t>()[i] + 77);
    const std::vector<Tensor> inputs{input, other};
    std::vector<std::vector<Tensor>> want;
    for (const Tensor& t : inputs) want.push_back(cg.run({t}));
    REQUIRE(std::memcmp(want[0][0].raw(), want[1][0].raw(), want[0][0].nbytes()) != 0);
    std::vector<int> bad(2, 0);
    auto work = [&](int k) {
      auto ctx = cg.make_context(2);
      for (int r = 0; r < 50; ++r) {
        const auto& out = ctx.run({inputs[k]});
        for (std::size_t o = 0; o < out.size(); ++o) {
          const Tensor dense = out[o].clone();  // the context's outputs may be channels-last views; want holds dense copies
          bad[k] += std::memcmp(dense.raw(), want[k][o].raw(), dense.nbytes()) != 0;
        }
      }
    };
    std::thread t0(work, 0), t1(work, 1);
    t0.join();
    t1.join();
    CHECK(bad[0] == 0);
    CHECK(bad[1] == 0);
  }
}

// MobileNet's expand and depthwise (onednn/qconv_pointwise_source.hpp): a 1x1
// convolution whose uint8 result only a depthwise convolution on kiln's kernel
// reads is computed by that kernel, row by row, and its own step is dropped.
// Input channels 4 to 32 in multiples of 4, expanded channel counts on and past a
// multiple of 16, strides 1 to 3 (the depthwise kernel takes any stride with a
// folded source), widths past and under the 8-pixel blocks, every post-op of the
// 1x1 (clamps inside, below and past the output's range), one image to three split
// over two threads: within one step of the same graph with the 1x1's result also an
// output (which keeps the 1x1 apart, on oneDNN), nearly all bytes equal, and the same
// bytes on one thread and two, and on two threads running it at once. A 1x1 of 36 input
// channels, or one read twice, is not folded.
TEST_CASE("a 1x1 convolution read only by a depthwise convolution is computed inside it, within one step of the two run apart") {
  struct Shape {
    std::int64_t C, E, stride, H, W, B;
  };
  const std::vector<Shape> shapes{{16, 96, 2, 12, 14, 2}, {24, 144, 1, 9, 21, 2}, {32, 40, 2, 7, 9, 3},
                                  {4, 16, 1, 5, 5, 1},    {8, 20, 3, 11, 10, 2},  {36, 32, 1, 6, 8, 2}};
  for (const Shape& sh : shapes)
    for (const Post& post : kPosts) {
      CAPTURE(sh.C);
      CAPTURE(sh.E);
      CAPTURE(sh.stride);
      CAPTURE(post.attr);
      Conv e, d;
      e.B = d.B = sh.B, e.H = d.H = sh.H, e.W = d.W = sh.W;
      e.C = sh.C, e.OC = sh.E, e.KH = e.KW = 1, e.pad = 0, e.xz = 131, e.prefix = "e";
      e.make();
      d.C = d.OC = d.groups = sh.E, d.KH = d.KW = 3, d.pad = 1, d.stride = sh.stride, d.xz = OZ, d.prefix = "d";
      d.make(-128, 127);
      const auto build = [&](bool expanded_is_output) {
        Graph g;
        Node* x = g.call_function(OpRef("aten.permute.default"), {g.placeholder("x", meta({e.B, e.H, e.W, e.C}, DType::uint8)), ArgList{0, 3, 1, 2}});
        Node* expanded = qconv(g, e, x, false, Arg(DType::uint8), post.attr, post.scalars);
        Node* dw = qconv(g, d, expanded, false, Arg(DType::uint8), kPosts[1].attr, kPosts[1].scalars);
        g.output(expanded_is_output ? ArgList{dw, expanded} : ArgList{dw});
        return g;
      };
      runtime::Weights weights = e.weights();
      weights.merge(d.weights());
      const Tensor input = random_ints({e.B, e.H, e.W, e.C}, DType::uint8, 0, 255, 21);
      const Graph fused = build(false), apart = build(true);
      const bool folds = kernels::detail::kInt8DepthwiseBuilt && sh.C <= 32;
      std::vector<Tensor> one_thread;
      for (const int threads : {1, 2}) {
        CAPTURE(threads);
        runtime::CompileOptions o;
        o.threads = threads;
        const auto f = CompiledGraph::compile(fused, weights, o), a = CompiledGraph::compile(apart, weights, o);
        CHECK(count_steps(f, "kiln_int8_depthwise:avx512_vnni+1x1", false) == (folds ? 1u : 0u));
        CHECK(count_steps(f, "onednn.qconv_pointwise.default", true) == (folds ? 1u : 2u));
        CHECK(count_steps(a, "onednn.qconv_pointwise.default", true) == 2u);
        CHECK(count_steps(a, "kiln_int8_depthwise:avx512_vnni+1x1", false) == 0);
        const auto fo = f.run({input});
        const auto ao = a.run({input});
        REQUIRE(fo[0].shape() == ao[0].shape());
        std::int64_t differ = 0;
        double worst = 0;
        for (std::int64_t i = 0; i < fo[0].numel(); ++i) {
          const int u = fo[0].data<std::uint8_t>()[i], v = ao[0].data<std::uint8_t>()[i];
          differ += u != v;
          worst = std::max(worst, double(std::abs(u - v)));
        }
        CHECK(worst <= 1.0);
        CHECK(differ * 100 <= fo[0].numel());
        if (threads == 1) one_thread = {fo[0].clone()};
        else CHECK(std::memcmp(fo[0].raw(), one_thread[0].raw(), fo[0].nbytes()) == 0);
        if (threads == 2 && &sh == &shapes[0] && &post == &kPosts[2]) {
          // Two threads running the compiled graph at once, each with its own context and
          // input (every byte moved by 77), get a lone run's bytes, run after run.
          Tensor other = input.clone();
          auto* bytes = other.data<std::uint8_t>();
          for (std::int64_t i = 0; i < other.numel(); ++i) bytes[i] = static_cast<std::uint8_t>(bytes[i] + 77);
          const std::vector<Tensor> inputs{input, other};
          const std::vector<Tensor> want{fo[0].clone(), f.run({other})[0].clone()};
          REQUIRE(std::memcmp(want[0].raw(), want[1].raw(), want[0].nbytes()) != 0);
          std::vector<int> bad(2, 0);
          auto work = [&](int k) {
            auto ctx = f.make_context(2);
            for (int r = 0; r < 30; ++r) bad[k] += std::memcmp(ctx.run({inputs[k]})[0].clone().raw(), want[k].raw(), want[k].nbytes()) != 0;
          };
          std::thread t0(work, 0), t1(work, 1);
          t0.join();
          t1.join();
          CHECK(bad[0] == 0);
          CHECK(bad[1] == 0);
        }
      }
    }
}
