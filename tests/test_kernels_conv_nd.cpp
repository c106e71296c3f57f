// 1-d and 3-d convolution and transposed convolution (1-, 2- and 3-d) against
// naive loops written here: odd sizes, per-dim stride / padding / dilation,
// groups, a strided (transposed-view) input, constant and input weights, both
// activation layouts, at the aten (aten.convolution, aten.convNd) and torch levels.
#include <doctest/doctest.h>

#include <array>
#include <cmath>

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


struct ConvCase {
  std::int64_t N, C, OC;
  Dims size, kernel, stride, padding, dilation, output_padding;  // per spatial dim
  std::int64_t groups;
  bool bias;
};

// Spatial sizes padded in front with 1s to three dims, so that one loop nest serves every rank.
std::array<std::int64_t, 3> three(const Dims& v, std::int64_t fill) {
  std::array<std::int64_t, 3> out{fill, fill, fill};
  for (std::size_t k = 0; k < v.size(); ++k) out[3 - v.size() + k] = v[k];
  return out;
}

// A row-major flat index of [n, c, d, h, w] in a tensor of shape [N, C, sp...].
std::int64_t flat(std::int64_t n, std::int64_t c, std::int64_t C, std::array<std::int64_t, 3> at, std::array<std::int64_t, 3> sp) {
  return (((n * C + c) * sp[0] + at[0]) * sp[1] + at[1]) * sp[2] + at[2];
}

Dims out_size(const ConvCase& c, bool transposed) {
  Dims o;
  for (std::size_t k = 0; k < c.size.size(); ++k) {
    const std::int64_t span = c.dilation[k] * (c.kernel[k] - 1);
    o.push_back(transposed ? (c.size[k] - 1) * c.stride[k] - 2 * c.padding[k] + span + c.output_padding[k] + 1
                           : (c.size[k] + 2 * c.padding[k] - span - 1) / c.stride[k] + 1);
  }
  return o;
}

// Naive convolution (transposed: every input element scattered through the
// kernel), double accumulation. `x` may have any strides; `w` is PyTorch's
// [OC, C/G, k...] or, transposed, [C, OC/G, k...].
std::vector<double> naive_conv(const ConvCase& c, bool transposed, const Tensor& x, const Tensor& w, const Tensor* b) {
  const Dims osz = out_size(c, transposed);
  const auto I = three(c.size, 1), O = three(osz, 1), K = three(c.kernel, 1), S = three(c.stride, 1), P = three(c.padding, 0),
             D = three(c.dilation, 1);
  const std::int64_t CG = c.C / c.groups, OG = c.OC / c.groups;
  std::vector<double> out(c.N * c.OC * O[0] * O[1] * O[2]);
  for (std::int64_t n = 0; n < c.N; ++n)
    for (std::int64_t o = 0; o < c.OC; ++o)
      for (std::int64_t i0 = 0; i0 < O[0]; ++i0)
        for (std::int64_t i1 = 0; i1 < O[1]; ++i1)
          for (std::int64_t i2 = 0; i2 < O[2]; ++i2) out[flat(n, o, c.OC, {i0, i1, i2}, O)] = b ? b->data<float>()[o] : 0.0;
  for (std::int64_t n = 0; n < c.N; ++n)
    for (std::int64_t g = 0; g < c.groups; ++g)
      for (std::int64_t ci = 0; ci < CG; ++ci)
        for (std::int64_t oi = 0; oi < OG; ++oi)
          for (std::int64_t k0 = 0; k0 < K[0]; ++k0)
            for (std::int64_t k1 = 0; k1 < K[1]; ++k1)
              for (std::int64_t k2 = 0; k2 < K[2]; ++k2) {
                const std::array<std::int64_t, 3> k{k0, k1, k2};
                const std::int64_t ch = g * CG + ci, oc = g * OG + oi;
                const std::int64_t widx = transposed ? flat(ch, oi, OG, k, K) : flat(oc, ci, CG, k, K);
                const double wv = w.data<float>()[widx];
                const auto& outer = transposed ? I : O;  // the positions looped over
                const auto& inner = transposed ? O : I;  // the positions they reach
                for (std::int64_t p0 = 0; p0 < outer[0]; ++p0)
                  for (std::int64_t p1 = 0; p1 < outer[1]; ++p1)
                    for (std::int64_t p2 = 0; p2 < outer[2]; ++p2) {
                      const std::array<std::int64_t, 3> p{p0, p1, p2};
                      std::array<std::int64_t, 3> q{};
                      bool inside = true;
                      for (int d = 0; d < 3; ++d) {
                        q[d] = p[d] * S[d] - P[d] + k[d] * D[d];
                        inside &= q[d] >= 0 && q[d] < inner[d];
                      }
                      if (!inside) continue;
                      if (transposed)
                        out[flat(n, oc, c.OC, q, O)] += double(test::element(x, flat(n, ch, c.C, p, I))) * wv;
                      else
                        out[flat(n, oc, c.OC, p, O)] += double(test::element(x, flat(n, ch, c.C, q, I))) * wv;
                    }
              }
  return out;
}

double worst_rel(const std::vector<double>& ref, const Tensor& out) {
  REQUIRE(static_cast<std::size_t>(out.numel()) == ref.size());
  double scale = 1e-12, err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::abs(ref[i]));
    err = std::max(err, std::abs(ref[i] - test::element(out, static_cast<std::int64_t>(i))));
  }
  return err / scale;
}

enum class Form { aten, torch, functional, aten_nd };  // aten_nd: aten.convNd.default

// Runs the case through a whole compile + run at `form`, the input read through a
// transposed view when `strided`, and checks it against the loop.
void check_case(const ConvCase& c, bool transposed, Form form, bool constant, bool strided,
                runtime::CompileOptions::ConvLayout layout) {
  const std::size_t nd = c.size.size();
  CAPTURE(nd);
  CAPTURE(c.C);
  CAPTURE(c.groups);
  CAPTURE(transposed);
  CAPTURE(static_cast<int>(form));
  CAPTURE(constant);
  CAPTURE(strided);
  Dims xshape{c.N, c.C};
  xshape.insert(xshape.end(), c.size.begin(), c.size.end());
  Dims wshape = transposed ? Dims{c.C, c.OC / c.groups} : Dims{c.OC, c.C / c.groups};
  wshape.insert(wshape.end(), c.kernel.begin(), c.kernel.end());
  const Tensor tx = random_tensor(xshape, 60), tw = random_tensor(wshape, 61), tb = random_tensor({c.OC}, 62);
  // The graph's input holds dims 1 and 2 swapped; a transpose gives back the NC... view.
  const Tensor given = strided ? Tensor::wrap(tx.raw(), runtime::transposed(tx.layout(), 1, 2)).contiguous() : tx;

  Graph g;
  Node* x = g.placeholder("x", meta(dims_of(given.shape())));
  if (strided) x = g.call_function(aten::transpose_int, {x, 1, 2});
  Node* w = constant ? g.get_attr("w", meta(dims_of(wshape))) : g.placeholder("w", meta(dims_of(wshape)));
  Node* b = !c.bias ? nullptr : constant ? g.get_attr("b", meta({c.OC})) : g.placeholder("b", meta({c.OC}));
  const Arg bias = b ? Arg(b) : Arg();
  const std::string n = std::to_string(nd);
  Node* conv = nullptr;
  if (form == Form::aten_nd) {
    const std::string name = "aten.conv" + n + "d.default";
    conv = g.call_function(OpRef(name.c_str()), {x, w, bias, ints(c.stride), ints(c.padding), ints(c.dilation), c.groups});
  } else if (form == Form::aten) {
    conv = g.call_function(aten::convolution, {x, w, bias, ints(c.stride), ints(c.padding), ints(c.dilation), transposed,
                                               ints(transposed ? c.output_padding : Dims(nd, 0)), c.groups});
  } else {
    const std::string name = (form == Form::torch ? "torch." : "torch.nn.functional.") +
                             std::string(transposed ? "conv_transpose" : "conv") + n + "d";
    ArgDict kw{{"stride", Arg(ints(c.stride))}, {"padding", Arg(ints(c.padding))}, {"dilation", Arg(ints(c.dilation))},
               {"groups", Arg(c.groups)}};
    if (transposed) kw.set("output_padding", Arg(ints(c.output_padding)));
    conv = g.call_function(OpRef(name.c_str()), {x, w, bias}, kw);
  }
  g.output(ArgList{conv});
  runtime::Weights weights;
  std::vector<Tensor> ins{given};
  if (constant) {
    weights.emplace("w", tw);
    if (c.bias) weights.emplace("b", tb);
  } else {
    ins.push_back(tw);
    if (c.bias) ins.push_back(tb);
  }
  runtime::CompileOptions opts;
  opts.conv_layout = layout;
  auto cg = CompiledGraph::compile(g, weights, opts);
  const auto out = cg.run(std::span<const Tensor>(ins));
  Dims oshape{c.N, c.OC};
  const Dims osz = out_size(c, transposed);
  oshape.insert(oshape.end(), osz.begin(), osz.end());
  REQUIRE(out[0].shape() == runtime::Shape(oshape.begin(), oshape.end()));
  CHECK(worst_rel(naive_conv(c, transposed, tx, tw, c.bias ? &tb : nullptr), out[0]) < 1e-5);
}

constexpr std::array kLayouts{runtime::CompileOptions::ConvLayout::channels_last, runtime::CompileOptions::ConvLayout::contiguous};

}  // namespace

TEST_CASE("conv1d and conv3d (and aten.convNd): stride, padding, dilation per dim, groups, depthwise, odd sizes, strided input") {
  const ConvCase cases[] = {
      {2, 3, 7, {33}, {3}, {2}, {1}, {1}, {}, 1, true},
      {1, 6, 4, {7}, {2}, {1}, {0}, {3}, {}, 2, false},
      {1, 1, 1, {1}, {1}, {1}, {0}, {1}, {}, 1, true},
      {1, 4, 6, {5, 7, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {}, 2, true},
      {2, 3, 5, {7, 1, 9}, {3, 1, 2}, {2, 1, 1}, {1, 0, 0}, {1, 1, 2}, {}, 1, false},
      {1, 8, 8, {3, 5, 4}, {1, 3, 3}, {1, 2, 1}, {0, 1, 1}, {1, 1, 1}, {}, 8, true},
      {1, 3, 5, {7, 9}, {3, 2}, {2, 1}, {1, 0}, {1, 2}, {}, 1, true},  // 2-d, through aten.conv2d
  };
  for (const ConvCase& c : cases)
    for (Form form : {Form::aten, Form::torch, Form::functional, Form::aten_nd})
      for (bool constant : {true, false})
        for (auto layout : kLayouts) check_case(c, false, form, constant, form == Form::torch, layout);
}

TEST_CASE("transposed convolution 1-, 2- and 3-d: output_padding, groups, dilation, odd sizes, strided input") {
  const ConvCase cases[] = {
      {2, 4, 6, {7}, {3}, {2}, {1}, {1}, {1}, 2, true},
      {1, 1, 1, {1}, {1}, {1}, {0}, {1}, {0}, 1, false},
      {1, 3, 5, {9, 8}, {3, 2}, {2, 3}, {1, 0}, {1, 1}, {1, 2}, 1, true},
      {2, 6, 6, {5, 5}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {0, 0}, 3, false},
      {1, 3, 33, {1, 7}, {1, 3}, {1, 2}, {0, 1}, {1, 1}, {0, 1}, 1, true},
      {1, 2, 3, {3, 4, 5}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 1, true},
      {1, 4, 2, {3, 3, 2}, {3, 1, 2}, {1, 2, 1}, {1, 0, 0}, {1, 1, 2}, {0, 1, 0}, 2, false},
  };
  for (const ConvCase& c : cases)
    for (Form form : {Form::aten, Form::torch, Form::functional})
      for (bool constant : {true, false})
        for (auto layout : kLayouts) check_case(c, true, form, constant, form == Form::functional, layout);
}

TEST_CASE("a conv3d takes a following batch-norm and relu into its primitive, and a conv1d a residual add") {
  // relu(bn(conv3d(x))) runs as one step; conv1d(y) + y as one step with the sum post-op.
  Graph g;
  Node* x = g.placeholder("x", meta({1, 3, 5, 6, 7}));
  Node* c3 = g.call_function(OpRef("torch.conv3d"), {x, g.get_attr("w3", meta({4, 3, 3, 3, 3})), g.get_attr("b3", meta({4}))},
                             {{"padding", Arg(ArgList{1, 1, 1})}});
  Node* bn = g.call_function(OpRef("torch.nn.functional.batch_norm"), {c3, g.get_attr("mean", meta({4})), g.get_attr("var", meta({4}))},
                             {{"training", Arg(false)}, {"eps", Arg(1e-3)}});
  Node* r = g.call_function(OpRef("torch.relu"), {bn});
  Node* y = g.placeholder("y", meta({2, 5, 9}));
  Node* c1 = g.call_function(OpRef("torch.conv1d"), {y, g.get_attr("w1", meta({5, 5, 3}))}, {{"padding", Arg(std::string("same"))}});
  Node* sum = g.call_function(OpRef("operator.add"), {c1, y});
  g.output(ArgList{r, sum});
  Tensor mean = random_tensor({4}, 70), var = random_tensor({4}, 71);
  for (int i = 0; i < 4; ++i) var.data<float>()[i] = 0.5f + std::abs(var.data<float>()[i]);
  const Tensor w3 = random_tensor({4, 3, 3, 3, 3}, 72), b3 = random_tensor({4}, 73), w1 = random_tensor({5, 5, 3}, 74);
  auto cg = CompiledGraph::compile(g, {{"w3", w3}, {"b3", b3}, {"mean", mean}, {"var", var}, {"w1", w1}});
  CHECK(cg.num_steps() == 2);
  const Tensor tx = random_tensor({1, 3, 5, 6, 7}, 75), ty = random_tensor({2, 5, 9}, 76);
  const auto out = cg.run({tx, ty});
  std::vector<double> r3 = naive_conv({1, 3, 4, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {}, 1, true}, false, tx, w3, &b3);
  for (std::size_t i = 0; i < r3.size(); ++i) {
    const std::size_t ch = i / (5 * 6 * 7) % 4;
    r3[i] = std::max(0.0, (r3[i] - mean.data<float>()[ch]) / std::sqrt(double(var.data<float>()[ch]) + 1e-3));
  }
  std::vector<double> r1 = naive_conv({2, 5, 5, {9}, {3}, {1}, {1}, {1}, {}, 1, false}, false, ty, w1, nullptr);
  for (std::size_t i = 0; i < r1.size(); ++i) r1[i] += ty.data<float>()[i];
  CHECK(worst_rel(r3, out[0]) < 1e-5);
  CHECK(worst_rel(r1, out[1]) < 1e-5);
}

namespace {

// What compiling one convolution node `conv` of input and weight placeholders says.
std::string conv_compile_error(std::vector<Dim> xs, std::vector<Dim> ws, const char* target, ArgDict kw) {
  Graph g;
  Node* x = g.placeholder("x", meta(std::move(xs)));
  g.output(ArgList{g.call_function(OpRef(target), {x, g.placeholder("w", meta(std::move(ws)))}, std::move(kw), "conv")});
  try {
    CompiledGraph::compile(g, {});
  } catch (const runtime::CompileError& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

}  // namespace

TEST_CASE("convolution refuses what does not fit, naming the node and the field") {
  auto compile_error = conv_compile_error;
  CHECK(compile_error({1, 2, 5}, {3, 2, 3}, "torch.conv1d", {{"stride", Arg(ArgList{1, 1})}}).find(
            "node conv (torch.conv1d): stride must have 1 value for a 1-d convolution") != std::string::npos);
  CHECK(compile_error({1, 2, 5, 5}, {3, 2, 3}, "torch.conv1d", {}).find("a 1-d convolution takes a 3-d input and weight") !=
        std::string::npos);
  CHECK(compile_error({1, 4, 5}, {4, 2, 3}, "torch.conv_transpose1d", {{"stride", Arg(2)}, {"output_padding", Arg(2)}})
            .find("output_padding must be smaller than the stride or the dilation") != std::string::npos);
  CHECK(compile_error({1, 3, 5}, {4, 2, 3}, "torch.conv_transpose1d", {}).find("does not fit input") != std::string::npos);
}

// A stride of 0 (found by fuzz_compile_run) divided by zero sizing the output.
TEST_CASE("convolution refuses a stride or dilation below 1 and a negative padding") {
  const std::vector<Dim> x{1, 2, 6, 6}, w{4, 2, 3, 3};
  CHECK(conv_compile_error(x, w, "torch.conv2d", {{"stride", Arg(ArgList{0, 1})}})
            .find("node conv (torch.conv2d): stride 0 is out of range (1 to 2^31)") != std::string::npos);
  CHECK(conv_compile_error(x, w, "torch.nn.functional.conv2d", {{"stride", Arg(ArgList{1, -2})}})
            .find("stride -2 is out of range") != std::string::npos);
  CHECK(conv_compile_error(x, w, "torch.conv2d", {{"dilation", Arg(0)}}).find("dilation 0 is out of range") !=
        std::string::npos);
  CHECK(conv_compile_error(x, w, "torch.conv2d", {{"padding", Arg(ArgList{-1, 0})}}).find("padding -1 is out of range") !=
        std::string::npos);
  CHECK(conv_compile_error({1, 4, 5}, {4, 2, 3}, "torch.conv_transpose1d", {{"stride", Arg(0)}})
            .find("stride 0 is out of range") != std::string::npos);
  CHECK(conv_compile_error(x, w, "torch.conv2d", {{"stride", Arg(std::int64_t{1} << 40)}})
            .find("is out of range") != std::string::npos);
}
