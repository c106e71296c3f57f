// call_module kernels (kernels/modules.hpp): each leaf module of a
// torch.fx.symbolic_trace graph against its functional form (built here with
// keyword arguments, so a module kernel that passes an attribute in the wrong
// position differs) or a naive loop, on random inputs of odd sizes; the errors
// for missing attributes and parameters and for unsupported settings. Also:
// 1- and 3-d pooling (and 3-d max pooling's indices) against naive loops,
// unbatched convolution inputs against the batched result, and the name a
// missing kernel is reported under.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
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


// Positive values (a variance).
Tensor positive_tensor(runtime::Shape shape, unsigned seed) {
  Tensor t = random_tensor(std::move(shape), seed);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::abs(t.data<float>()[i]) + 0.5f;
  return t;
}

// One module and what it should equal: its class (after torch.nn.modules.),
// attrs as the exporter writes them, its parameters (PATH.name), and the
// functional form built from the same input and get_attr nodes of those parameters.
struct ModuleCase {
  std::string cls;
  std::string attrs;
  std::vector<std::pair<std::string, Tensor>> params;
  Tensor input;
  std::function<Node*(Graph&, Node* x, const std::function<Node*(const char*)>& param)> functional;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

Graph module_graph(const ModuleCase& c, const char* path = "blk.m") {
  Graph g;
  g.modules().set(ModuleInfo{path, "torch.nn.modules." + c.cls, {{"attrs", c.attrs}}});
  Node* x = g.placeholder("x", meta(dims_of(c.input.shape()), c.input.dtype()));
  Node* m = g.call_module(path, {Arg(x)});
  g.output(ArgList{Arg(m)});
  return g;
}

runtime::Weights module_weights(const ModuleCase& c, const char* path = "blk.m") {
  runtime::Weights w;
  for (const auto& [name, t] : c.params) w.emplace(std::string(path) + "." + name, t);
  return w;
}

Tensor run_one(const Graph& g, const runtime::Weights& w, const Tensor& x,
               runtime::CompileOptions::ConvLayout layout = runtime::CompileOptions::ConvLayout::decide) {
  runtime::CompileOptions o;
  o.conv_layout = layout;
  auto cg = CompiledGraph::compile(g, w, o);
  auto out = cg.run({x});
  REQUIRE(out.size() == 1);
  return out[0];
}

// The module form against the functional form, both layouts of convolution graphs.
void check_against_functional(const ModuleCase& c) {
  CAPTURE(c.cls);
  const runtime::Weights w = module_weights(c);
  Graph f;
  Node* x = f.placeholder("x", meta(dims_of(c.input.shape()), c.input.dtype()));
  auto param = [&](const char* name) {
    const std::string full = std::string("blk.m.") + name;
    for (const auto& [n, t] : c.params)
      if (n == name) return f.get_attr(full, meta(dims_of(t.shape()), t.dtype()));
    FAIL("the case has no parameter " << name);
    return static_cast<Node*>(nullptr);
  };
  f.output(ArgList{Arg(c.functional(f, x, param))});
  for (auto layout : {runtime::CompileOptions::ConvLayout::channels_last, runtime::CompileOptions::ConvLayout::contiguous}) {
    const Tensor got = run_one(module_graph(c), w, c.input, layout);
    const Tensor want = run_one(f, w, c.input, layout);
    REQUIRE(got.shape() == want.shape());
    CHECK(test::max_abs_diff(got, want) <= 1e-5);
  }
}

Node* call(Graph& g, const char* target, ArgList args, ArgDict kw = {}) { return g.call_function(OpRef(target), std::move(args), std::move(kw)); }

// ---- naive pooling over 1 to 3 spatial dims (padded in front to three) ---------

std::array<std::int64_t, 3> three(const Dims& v, std::int64_t fill) {
  std::array<std::int64_t, 3> out{fill, fill, fill};
  for (std::size_t k = 0; k < v.size(); ++k) out[3 - v.size() + k] = v[k];
  return out;
}

struct PoolSpec {
  Dims kernel, stride, padding, dilation;
  bool max = true;
  bool count_include_pad = true;
};

Dims pooled(const Dims& in, const PoolSpec& p) {
  Dims o;
  for (std::size_t k = 0; k < in.size(); ++k) o.push_back((in[k] + 2 * p.padding[k] - p.dilation[k] * (p.kernel[k] - 1) - 1) / p.stride[k] + 1);
  return o;
}

// Values and (max) flat indices into each channel's volume, row-major over [N, C, out...].
void naive_pool(const Tensor& x, const PoolSpec& p, std::vector<double>& vals, std::vector<std::int64_t>& idx) {
  const std::int64_t N = x.shape()[0], C = x.shape()[1];
  const Dims in(x.shape().begin() + 2, x.shape().end());
  const auto I = three(in, 1), O = three(pooled(in, p), 1), K = three(p.kernel, 1), S = three(p.stride, 1),
             P = three(p.padding, 0), D = three(p.dilation, 1);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t o0 = 0; o0 < O[0]; ++o0)
        for (std::int64_t o1 = 0; o1 < O[1]; ++o1)
          for (std::int64_t o2 = 0; o2 < O[2]; ++o2) {
            const std::array<std::int64_t, 3> o{o0, o1, o2};
            double best = -std::numeric_limits<double>::infinity(), sum = 0;
            std::int64_t at = -1, inside = 0;
            for (std::int64_t k0 = 0; k0 < K[0]; ++k0)
              for (std::int64_t k1 = 0; k1 < K[1]; ++k1)
                for (std::int64_t k2 = 0; k2 < K[2]; ++k2) {
                  const std::array<std::int64_t, 3> k{k0, k1, k2};
                  std::array<std::int64_t, 3> q{};
                  bool ok = true;
                  for (int d = 0; d < 3; ++d) {
                    q[d] = o[d] * S[d] - P[d] + k[d] * D[d];
                    ok &= q[d] >= 0 && q[d] < I[d];
                  }
                  if (!ok) continue;
                  const std::int64_t flat = (q[0] * I[1] + q[1]) * I[2] + q[2];
                  const double v = test::element(x, (n * C + c) * I[0] * I[1] * I[2] + flat);
                  ++inside;
                  sum += v;
                  if (v > best) best = v, at = flat;
                }
            if (p.max) {
              vals.push_back(best);
              idx.push_back(at);
            } else {
              vals.push_back(sum / static_cast<double>(p.count_include_pad ? K[0] * K[1] * K[2] : inside));
            }
          }
}

// Adaptive average pooling's windows: [floor(i * I / O), ceil((i + 1) * I / O)).
// Adaptive pooling of x [N, C, spatial...] to `out` over PyTorch's floor/ceil
// windows: the mean, or the max (the first largest) with its flat index into
// each channel's volume in `indices`.
std::vector<double> naive_adaptive(const Tensor& x, const Dims& out, bool max, std::vector<std::int64_t>* indices = nullptr) {
  const std::int64_t N = x.shape()[0], C = x.shape()[1];
  const Dims in(x.shape().begin() + 2, x.shape().end());
  const auto I = three(in, 1), O = three(out, 1);
  std::vector<double> vals;
  auto lo = [](std::int64_t i, std::int64_t I, std::int64_t O) { return i * I / O; };
  auto hi = [](std::int64_t i, std::int64_t I, std::int64_t O) { return ((i + 1) * I + O - 1) / O; };
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t o0 = 0; o0 < O[0]; ++o0)
        for (std::int64_t o1 = 0; o1 < O[1]; ++o1)
          for (std::int64_t o2 = 0; o2 < O[2]; ++o2) {
            double sum = 0, best = -std::numeric_limits<double>::infinity();
            std::int64_t cnt = 0, at = -1;
            for (std::int64_t a = lo(o0, I[0], O[0]); a < hi(o0, I[0], O[0]); ++a)
              for (std::int64_t b = lo(o1, I[1], O[1]); b < hi(o1, I[1], O[1]); ++b)
                for (std::int64_t e = lo(o2, I[2], O[2]); e < hi(o2, I[2], O[2]); ++e) {
                  const std::int64_t flat = (a * I[1] + b) * I[2] + e;
                  const double v = test::element(x, (n * C + c) * I[0] * I[1] * I[2] + flat);
                  sum += v;
                  ++cnt;
                  if (v > best) best = v, at = flat;
                }
            vals.push_back(max ? best : sum / static_cast<double>(cnt));
            if (indices) indices->push_back(at);
          }
  return vals;
}
std::vector<double> naive_adaptive_avg(const Tensor& x, const Dims& out) { return naive_adaptive(x, out, false); }

double worst_abs(const std::vector<double>& ref, const Tensor& out) {
  REQUIRE(static_cast<std::size_t>(out.numel()) == ref.size());
  double err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::abs(ref[i] - test::element(out, static_cast<std::int64_t>(i))));
  return err;
}

std::int64_t index_at(const Tensor& t, std::int64_t flat) {
  std::int64_t off = 0;
  for (std::size_t k = t.rank(); k-- > 0;) {
    off += (flat % t.shape()[k]) * t.strides()[k];
    flat /= t.shape()[k];
  }
  return t.data<std::int64_t>()[off];
}

}  // namespace

TEST_CASE("call_module convolutions, linear and normalization equal their functional forms") {
  using P = std::function<Node*(const char*)>;
  const ModuleCase cases[] = {
      {"conv.Conv1d", R"({"stride":[2],"padding":[1],"dilation":[1],"groups":1,"padding_mode":"zeros"})",
       {{"weight", random_tensor({6, 3, 3}, 1)}, {"bias", random_tensor({6}, 2)}}, random_tensor({2, 3, 17}, 3),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.conv1d", {x, p("weight"), p("bias")},
                     {{"stride", Arg(ints({2}))}, {"padding", Arg(ints({1}))}, {"dilation", Arg(ints({1}))}, {"groups", Arg(1)}});
       }},
      // padding_mode reflect and circular: F.pad first (pads reversed, each twice), then unpadded
      {"conv.Conv2d", R"({"stride":[1,2],"padding":[1,2],"dilation":[1,1],"groups":1,"padding_mode":"reflect"})",
       {{"weight", random_tensor({4, 3, 3, 3}, 6)}, {"bias", random_tensor({4}, 7)}}, random_tensor({2, 3, 7, 8}, 8),
       [](Graph& g, Node* x, const P& p) {
         Node* padded = call(g, "torch.nn.functional.pad", {x, ints({2, 2, 1, 1})}, {{"mode", Arg("reflect")}});
         return call(g, "torch.nn.functional.conv2d", {padded, p("weight"), p("bias")}, {{"stride", Arg(ints({1, 2}))}});
       }},
      {"conv.Conv1d", R"({"stride":[1],"padding":[2],"dilation":[1],"groups":1,"padding_mode":"circular"})",
       {{"weight", random_tensor({2, 3, 3}, 9)}}, random_tensor({2, 3, 6}, 10),
       [](Graph& g, Node* x, const P& p) {
         Node* padded = call(g, "torch.nn.functional.pad", {x, ints({2, 2})}, {{"mode", Arg("circular")}});
         return call(g, "torch.nn.functional.conv1d", {padded, p("weight")});
       }},
      // 'same' padding, dilation, groups, no bias (bias=False: no PATH.bias weight)
      {"conv.Conv2d", R"({"stride":[1,1],"padding":"same","dilation":[2,2],"groups":2,"padding_mode":"zeros","kernel_size":[3,2]})",
       {{"weight", random_tensor({4, 3, 3, 2}, 4)}}, random_tensor({1, 6, 9, 7}, 5),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.conv2d", {x, p("weight")},
                     {{"padding", Arg("same")}, {"dilation", Arg(ints({2, 2}))}, {"groups", Arg(2)}});
       }},
      {"conv.Conv2d", R"({"stride":[2,1],"padding":"valid","dilation":[1,1],"groups":1,"padding_mode":"zeros"})",
       {{"weight", random_tensor({5, 3, 3, 3}, 6)}, {"bias", random_tensor({5}, 7)}}, random_tensor({2, 3, 8, 7}, 8),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.conv2d", {x, p("weight"), p("bias")}, {{"stride", Arg(ints({2, 1}))}});
       }},
      {"conv.Conv3d", R"({"stride":[1,2,1],"padding":[1,0,1],"dilation":[1,1,1],"groups":1,"padding_mode":"zeros"})",
       {{"weight", random_tensor({5, 2, 3, 3, 3}, 9)}, {"bias", random_tensor({5}, 10)}}, random_tensor({1, 2, 5, 7, 6}, 11),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.conv3d", {x, p("weight"), p("bias")},
                     {{"stride", Arg(ints({1, 2, 1}))}, {"padding", Arg(ints({1, 0, 1}))}});
       }},
      {"conv.ConvTranspose2d",
       R"({"stride":[2,2],"padding":[1,1],"output_padding":[1,0],"groups":1,"dilation":[1,1],"padding_mode":"zeros"})",
       {{"weight", random_tensor({3, 4, 3, 3}, 12)}, {"bias", random_tensor({4}, 13)}}, random_tensor({1, 3, 5, 6}, 14),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.conv_transpose2d", {x, p("weight"), p("bias")},
                     {{"stride", Arg(ints({2, 2}))}, {"padding", Arg(ints({1, 1}))}, {"output_padding", Arg(ints({1, 0}))}});
       }},
      {"conv.ConvTranspose1d",
       R"({"stride":[3],"padding":[0],"output_padding":[0],"groups":2,"dilation":[2],"padding_mode":"zeros"})",
       {{"weight", random_tensor({4, 3, 2}, 15)}}, random_tensor({2, 4, 7}, 16),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.conv_transpose1d", {x, p("weight")},
                     {{"stride", Arg(ints({3}))}, {"groups", Arg(2)}, {"dilation", Arg(ints({2}))}});
       }},
      {"linear.Linear", R"({"in_features":33,"out_features":7})",
       {{"weight", random_tensor({7, 33}, 17)}, {"bias", random_tensor({7}, 18)}}, random_tensor({2, 5, 33}, 19),
       [](Graph& g, Node* x, const P& p) { return call(g, "torch.nn.functional.linear", {x, p("weight")}, {{"bias", Arg(p("bias"))}}); }},
      {"batchnorm.BatchNorm2d", R"({"track_running_stats":true,"momentum":0.1,"eps":0.001,"num_features":5,"affine":true})",
       {{"weight", random_tensor({5}, 20)}, {"bias", random_tensor({5}, 21)}, {"running_mean", random_tensor({5}, 22)},
        {"running_var", positive_tensor({5}, 23)}},
       random_tensor({2, 5, 7, 3}, 24),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.batch_norm", {x, p("running_mean"), p("running_var")},
                     {{"weight", Arg(p("weight"))}, {"bias", Arg(p("bias"))}, {"eps", Arg(0.001)}});
       }},
      {"batchnorm.BatchNorm1d", R"({"track_running_stats":true,"momentum":0.1,"eps":1e-05,"num_features":5,"affine":false})",
       {{"running_mean", random_tensor({5}, 25)}, {"running_var", positive_tensor({5}, 26)}}, random_tensor({3, 5, 9}, 27),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.batch_norm", {x, p("running_mean"), p("running_var")});
       }},
      {"batchnorm.BatchNorm3d", R"({"track_running_stats":true,"momentum":0.1,"eps":1e-05,"num_features":3,"affine":true})",
       {{"weight", random_tensor({3}, 28)}, {"bias", random_tensor({3}, 29)}, {"running_mean", random_tensor({3}, 30)},
        {"running_var", positive_tensor({3}, 31)}},
       random_tensor({1, 3, 4, 5, 3}, 32),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.batch_norm", {x, p("running_mean"), p("running_var"), p("weight"), p("bias")});
       }},
      {"normalization.LayerNorm", R"({"normalized_shape":[7],"eps":1e-05,"elementwise_affine":true})",
       {{"weight", random_tensor({7}, 33)}, {"bias", random_tensor({7}, 34)}}, random_tensor({3, 4, 7}, 35),
       [](Graph& g, Node* x, const P& p) {
         return call(g, "torch.nn.functional.layer_norm", {x, ints({7})}, {{"weight", Arg(p("weight"))}, {"bias", Arg(p("bias"))}});
       }},
      {"normalization.LayerNorm", R"({"normalized_shape":[4,7],"eps":0.01,"elementwise_affine":false})", {},
       random_tensor({3, 4, 7}, 36),
       [](Graph& g, Node* x, const P&) { return call(g, "torch.nn.functional.layer_norm", {x, ints({4, 7})}, {{"eps", Arg(0.01)}}); }},
      {"sparse.Embedding", R"({"num_embeddings":10,"embedding_dim":4,"padding_idx":null,"max_norm":null})",
       {{"weight", random_tensor({10, 4}, 37)}}, [] {
         Tensor t = random_tensor({2, 3}, 38, DType::int64);
         for (std::int64_t i = 0; i < t.numel(); ++i) t.data<std::int64_t>()[i] = (t.data<std::int64_t>()[i] + 5) % 10;
         return t;
       }(),
       [](Graph& g, Node* x, const P& p) { return call(g, "torch.nn.functional.embedding", {x, p("weight")}); }},
  };
  for (const ModuleCase& c : cases) check_against_functional(c);
}

TEST_CASE("call_module activations, dropout, flatten and softmax equal their functional forms") {
  using P = std::function<Node*(const char*)>;
  const Tensor x = random_tensor({2, 3, 7}, 40);
  auto unary = [&](const char* cls, const char* attrs, const char* target, ArgDict kw = {}) {
    return ModuleCase{cls, attrs, {}, x, [target, kw](Graph& g, Node* in, const P&) { return call(g, target, {in}, kw); }};
  };
  const ModuleCase cases[] = {
      unary("activation.ReLU", R"({"inplace":false})", "torch.relu"),
      unary("activation.ReLU", R"({"inplace":true})", "torch.relu"),
      unary("activation.GELU", R"({"approximate":"tanh"})", "torch.nn.functional.gelu", {{"approximate", Arg("tanh")}}),
      unary("activation.GELU", R"({"approximate":"none"})", "torch.nn.functional.gelu"),
      unary("activation.SiLU", R"({"inplace":false})", "torch.nn.functional.silu"),
      unary("activation.Sigmoid", "{}", "torch.sigmoid"),
      unary("activation.Tanh", "{}", "torch.tanh"),
      unary("activation.Hardswish", R"({"inplace":false})", "torch.nn.functional.hardswish"),
      unary("activation.Hardsigmoid", R"({"inplace":false})", "torch.nn.functional.hardsigmoid"),
      unary("activation.Hardtanh", R"({"min_val":-0.5,"max_val":0.7,"inplace":false})", "torch.nn.functional.hardtanh",
            {{"min_val", Arg(-0.5)}, {"max_val", Arg(0.7)}}),
      unary("activation.ReLU6", R"({"min_val":0.0,"max_val":6.0,"inplace":false})", "torch.nn.functional.relu6"),
      unary("activation.LeakyReLU", R"({"inplace":false,"negative_slope":0.2})", "torch.nn.functional.leaky_relu",
            {{"negative_slope", Arg(0.2)}}),
      unary("activation.Softmax", R"({"dim":1})", "torch.nn.functional.softmax", {{"dim", Arg(1)}}),
      unary("activation.LogSoftmax", R"({"dim":-1})", "torch.nn.functional.log_softmax", {{"dim", Arg(-1)}}),
      // dim=None on a 3-d input: PyTorch's legacy choice, dim 0
      unary("activation.Softmax", R"({"dim":null})", "torch.nn.functional.softmax", {{"dim", Arg(0)}}),
      unary("flatten.Flatten", R"({"start_dim":1,"end_dim":-1})", "torch.flatten", {{"start_dim", Arg(1)}}),
      unary("flatten.Flatten", R"({"start_dim":0,"end_dim":1})", "torch.flatten", {{"start_dim", Arg(0)}, {"end_dim", Arg(1)}}),
  };
  for (const ModuleCase& c : cases) check_against_functional(c);
  // Dropout in eval mode is the identity.
  for (const char* cls : {"dropout.Dropout", "dropout.Dropout2d"}) {
    const ModuleCase c{cls, R"({"p":0.3,"inplace":false})", {}, x, nullptr};
    const Tensor got = run_one(module_graph(c), {}, x);
    CHECK(test::max_abs_diff(got, x) == 0);
  }
  // 2-d pooling modules against F's, on a 4-d input.
  const Tensor img = random_tensor({2, 3, 9, 7}, 41);
  check_against_functional({"pooling.MaxPool2d",
                            R"({"kernel_size":3,"stride":2,"padding":1,"dilation":1,"return_indices":false,"ceil_mode":true})",
                            {}, img, [](Graph& g, Node* in, const P&) {
                              return call(g, "torch.nn.functional.max_pool2d", {in, 3},
                                          {{"stride", Arg(2)}, {"padding", Arg(1)}, {"ceil_mode", Arg(true)}});
                            }});
  check_against_functional({"pooling.AvgPool2d",
                            R"({"kernel_size":[3,2],"stride":[2,1],"padding":[1,0],"ceil_mode":false,"count_include_pad":false,"divisor_override":null})",
                            {}, img, [](Graph& g, Node* in, const P&) {
                              return call(g, "torch.nn.functional.avg_pool2d", {in, ints({3, 2})},
                                          {{"stride", Arg(ints({2, 1}))}, {"padding", Arg(ints({1, 0}))}, {"count_include_pad", Arg(false)}});
                            }});
  check_against_functional({"pooling.AdaptiveAvgPool2d", R"({"output_size":[4,null]})", {}, img, [](Graph& g, Node* in, const P&) {
                              return call(g, "torch.nn.functional.adaptive_avg_pool2d", {in, ArgList{Arg(4), Arg()}});
                            }});
  check_against_functional({"pooling.AdaptiveMaxPool2d", R"({"output_size":[2,3],"return_indices":false})", {}, img,
                            [](Graph& g, Node* in, const P&) {
                              return call(g, "torch.nn.functional.adaptive_max_pool2d", {in, ints({2, 3})});
                            }});
}

TEST_CASE("1-d and 3-d pooling modules and functions against naive loops") {
  struct Case {
    const char* cls;
    const char* attrs;
    Dims shape;
    PoolSpec spec;
  };
  const Case cases[] = {
      {"pooling.MaxPool1d", R"({"kernel_size":3,"stride":2,"padding":1,"dilation":2,"return_indices":false,"ceil_mode":false})",
       {2, 3, 17}, {{3}, {2}, {1}, {2}, true}},
      {"pooling.MaxPool3d",
       R"({"kernel_size":[3,2,3],"stride":[2,1,2],"padding":[1,0,1],"dilation":1,"return_indices":false,"ceil_mode":false})",
       {1, 2, 7, 5, 9}, {{3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 1, 1}, true}},
      {"pooling.AvgPool1d", R"({"kernel_size":[4],"stride":[3],"padding":[2],"ceil_mode":false,"count_include_pad":true})",
       {2, 3, 17}, {{4}, {3}, {2}, {1}, false, true}},
      {"pooling.AvgPool3d",
       R"({"kernel_size":3,"stride":2,"padding":1,"ceil_mode":false,"count_include_pad":false,"divisor_override":null})",
       {1, 3, 7, 6, 5}, {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false, false}},
      {"pooling.AvgPool3d",
       R"({"kernel_size":[2,3,1],"stride":[1,2,1],"padding":[1,1,0],"ceil_mode":false,"count_include_pad":true,"divisor_override":null})",
       {2, 2, 5, 7, 3}, {{2, 3, 1}, {1, 2, 1}, {1, 1, 0}, {1, 1, 1}, false, true}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.cls);
    CAPTURE(c.attrs);
    const Tensor x = random_tensor(c.shape, 50);
    const Tensor got = run_one(module_graph({c.cls, c.attrs, {}, x, nullptr}), {}, x);
    std::vector<double> vals;
    std::vector<std::int64_t> idx;
    naive_pool(x, c.spec, vals, idx);
    Dims want_shape{c.shape[0], c.shape[1]};
    const Dims o = pooled(Dims(c.shape.begin() + 2, c.shape.end()), c.spec);
    want_shape.insert(want_shape.end(), o.begin(), o.end());
    REQUIRE(got.shape() == runtime::Shape(want_shape.begin(), want_shape.end()));
    CHECK(worst_abs(vals, got) < 1e-5);
  }
  // Adaptive average pooling: sizes that divide (oneDNN) and that do not (the loop), None keeping a size.
  struct Adaptive {
    const char* cls;
    const char* attrs;
    Dims shape, out;
  };
  const Adaptive adaptive[] = {
      {"pooling.AdaptiveAvgPool1d", R"({"output_size":5})", {2, 3, 17}, {5}},
      {"pooling.AdaptiveAvgPool1d", R"({"output_size":[4]})", {2, 3, 16}, {4}},
      {"pooling.AdaptiveAvgPool3d", R"({"output_size":[2,3,null]})", {1, 2, 4, 6, 3}, {2, 3, 3}},
      {"pooling.AdaptiveAvgPool3d", R"({"output_size":3})", {1, 3, 7, 5, 4}, {3, 3, 3}},
  };
  for (const Adaptive& c : adaptive) {
    CAPTURE(c.cls);
    CAPTURE(c.attrs);
    const Tensor x = random_tensor(c.shape, 51);
    const Tensor got = run_one(module_graph({c.cls, c.attrs, {}, x, nullptr}), {}, x);
    CHECK(worst_abs(naive_adaptive_avg(x, c.out), got) < 1e-5);
  }
}

TEST_CASE("adaptive max pooling in 1 and 3 dims: modules, functions and aten's with indices, against a loop") {
  struct Adaptive {
    const char* cls;  // the module; the functions of its dims are checked beside it
    const char* attrs;
    Dims shape, out;
  };
  const Adaptive adaptive[] = {
      {"pooling.AdaptiveMaxPool1d", R"({"output_size":5,"return_indices":false})", {2, 3, 17}, {5}},   // windows overlap
      {"pooling.AdaptiveMaxPool1d", R"({"output_size":[4],"return_indices":false})", {2, 3, 16}, {4}},  // divides: oneDNN
      {"pooling.AdaptiveMaxPool3d", R"({"output_size":[2,3,null],"return_indices":false})", {1, 2, 4, 7, 3}, {2, 3, 3}},
      {"pooling.AdaptiveMaxPool3d", R"({"output_size":2,"return_indices":false})", {2, 3, 4, 6, 2}, {2, 2, 2}},
  };
  for (const Adaptive& c : adaptive) {
    CAPTURE(std::string(c.cls));
    CAPTURE(std::string(c.attrs));
    const Tensor x = random_tensor(c.shape, 53);
    std::vector<std::int64_t> idx;
    const std::vector<double> want = naive_adaptive(x, c.out, true, &idx);
    CHECK(worst_abs(want, run_one(module_graph({c.cls, c.attrs, {}, x, nullptr}), {}, x)) == 0);
    const bool one_d = c.shape.size() == 3;
    Graph g;
    Node* in = g.placeholder("x", meta(dims_of(c.shape)));
    const ArgList size = ints(c.out);
    Node* f = call(g, one_d ? "torch.nn.functional.adaptive_max_pool1d" : "torch.nn.functional.adaptive_max_pool3d", {in, size});
    Node* with = call(g, one_d ? "torch.nn.functional.adaptive_max_pool1d_with_indices" : "torch.nn.functional.adaptive_max_pool3d_with_indices",
                      {in, size}, {{"return_indices", Arg(true)}});
    Node* at = call(g, one_d ? "aten.adaptive_max_pool1d.default" : "aten.adaptive_max_pool3d.default", {in, size});
    ArgList outs;  // (values, indices) pairs, then f's values
    for (Node* pair : {with, at}) outs.push_back(call(g, "operator.getitem", {pair, 0})), outs.push_back(call(g, "operator.getitem", {pair, 1}));
    if (one_d) {
      Node* t = call(g, "torch.adaptive_max_pool1d", {in, size});  // torch's own form returns both
      outs.push_back(call(g, "operator.getitem", {t, 0}));
      outs.push_back(call(g, "operator.getitem", {t, 1}));
    }
    outs.push_back(f);
    g.output(outs);
    const auto got = CompiledGraph::compile(g, {}).run({x});
    for (std::size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      if (k % 2 == 0) {
        CHECK(worst_abs(want, got[k]) == 0);
        continue;
      }
      REQUIRE(got[k].numel() == static_cast<std::int64_t>(idx.size()));
      std::int64_t wrong = 0;
      for (std::size_t i = 0; i < idx.size(); ++i) wrong += index_at(got[k], static_cast<std::int64_t>(i)) != idx[i];
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("max_pool3d_with_indices and return_indices give PyTorch's flat indices, also on a strided input") {
  const PoolSpec spec{{3, 2, 3}, {2, 2, 1}, {1, 1, 0}, {1, 2, 1}, true};
  const Dims shape{2, 3, 7, 6, 5};
  const Tensor x = random_tensor(shape, 52);
  std::vector<double> vals;
  std::vector<std::int64_t> idx;
  naive_pool(x, spec, vals, idx);
  for (int form = 0; form < 3; ++form) {
    for (bool strided : {false, true}) {
      CAPTURE(form);
      CAPTURE(strided);
      // The graph's input holds dims 1 and 2 swapped; a transpose gives back [N, C, D, H, W].
      const Tensor given = strided ? Tensor::wrap(x.raw(), runtime::transposed(x.layout(), 1, 2)).contiguous() : x;
      Graph g;
      Node* in = g.placeholder("x", meta(dims_of(given.shape())));
      if (strided) in = g.call_function(aten::transpose_int, {in, 1, 2});
      Node* pool = nullptr;
      if (form == 0)
        pool = call(g, "aten.max_pool3d_with_indices.default", {in, ints(spec.kernel), ints(spec.stride), ints(spec.padding), ints(spec.dilation)});
      else if (form == 1)
        pool = call(g, "torch.nn.functional.max_pool3d", {in, ints(spec.kernel)},
                    {{"stride", Arg(ints(spec.stride))}, {"padding", Arg(ints(spec.padding))}, {"dilation", Arg(ints(spec.dilation))},
                     {"return_indices", Arg(true)}});
      else {
        g.modules().set(ModuleInfo{"pool", "torch.nn.modules.pooling.MaxPool3d",
                                   {{"attrs", R"({"kernel_size":[3,2,3],"stride":[2,2,1],"padding":[1,1,0],"dilation":[1,2,1],)"
                                              R"("return_indices":true,"ceil_mode":false})"}}});
        pool = g.call_module("pool", {Arg(in)});
      }
      Node* v = g.call_function(OpRef("operator.getitem"), {pool, 0});
      Node* i = g.call_function(OpRef("operator.getitem"), {pool, 1});
      g.output(ArgList{Arg(v), Arg(i)});
      auto cg = CompiledGraph::compile(g, {});
      const auto out = cg.run({given});
      REQUIRE(out.size() == 2);
      CHECK(out[1].dtype() == DType::int64);
      CHECK(worst_abs(vals, out[0]) < 1e-6);
      REQUIRE(out[1].numel() == static_cast<std::int64_t>(idx.size()));
      std::int64_t wrong = 0;
      for (std::size_t k = 0; k < idx.size(); ++k) wrong += index_at(out[1], static_cast<std::int64_t>(k)) != idx[k];
      CHECK(wrong == 0);
    }
  }
  // 1-d indices count along L.
  const PoolSpec spec1{{4}, {3}, {2}, {1}, true};
  const Tensor x1 = random_tensor({2, 3, 19}, 53);
  std::vector<double> vals1;
  std::vector<std::int64_t> idx1;
  naive_pool(x1, spec1, vals1, idx1);
  Graph g;
  Node* in = g.placeholder("x", meta({2, 3, 19}));
  Node* pool = call(g, "torch.nn.functional.max_pool1d_with_indices", {in, 4, 3, 2});
  g.output(ArgList{Arg(g.call_function(OpRef("operator.getitem"), {pool, 0})), Arg(g.call_function(OpRef("operator.getitem"), {pool, 1}))});
  const auto out = CompiledGraph::compile(g, {}).run({x1});
  CHECK(worst_abs(vals1, out[0]) < 1e-6);
  std::int64_t wrong = 0;
  for (std::size_t k = 0; k < idx1.size(); ++k) wrong += index_at(out[1], static_cast<std::int64_t>(k)) != idx1[k];
  CHECK(wrong == 0);
}

TEST_CASE("unbatched convolution inputs run as a batch of one and drop the batch dim") {
  struct Case {
    const char* fn;
    Dims x, w;
    ArgDict kw;
  };
  const Case cases[] = {
      {"torch.nn.functional.conv1d", {3, 17}, {5, 3, 3}, {{"stride", Arg(2)}, {"padding", Arg(1)}}},
      {"torch.nn.functional.conv2d", {4, 9, 7}, {6, 2, 3, 3}, {{"padding", Arg("same")}, {"groups", Arg(2)}}},
      {"torch.conv2d", {3, 8, 5}, {4, 3, 1, 2}, {}},
      {"torch.nn.functional.conv3d", {2, 5, 6, 7}, {3, 2, 2, 3, 3}, {{"dilation", Arg(ints({1, 1, 2}))}}},
      {"torch.nn.functional.conv_transpose2d", {3, 5, 4}, {3, 2, 3, 3}, {{"stride", Arg(2)}, {"output_padding", Arg(1)}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.fn);
    const Tensor x = random_tensor(c.x, 60), w = random_tensor(c.w, 61);
    const std::int64_t oc = std::string(c.fn).find("transpose") != std::string::npos ? c.w[1] : c.w[0];
    const Tensor b = random_tensor({oc}, 62);
    runtime::Weights weights{{"w", w}, {"b", b}};
    // With a relu after it (taken into the primitive as a post-op).
    auto graph = [&](const Dims& xs) {
      Graph g;
      Node* in = g.placeholder("x", meta(dims_of(xs)));
      Node* conv = g.call_function(OpRef(c.fn), {in, g.get_attr("w", meta(dims_of(c.w))), g.get_attr("b", meta({oc}))}, c.kw);
      g.output(ArgList{Arg(g.call_function(OpRef("torch.relu"), {conv}))});
      return g;
    };
    Dims batched{1};
    batched.insert(batched.end(), c.x.begin(), c.x.end());
    const Tensor xb = Tensor::wrap(x.raw(), runtime::Layout::contiguous(runtime::Shape(batched.begin(), batched.end())));
    for (auto layout : {runtime::CompileOptions::ConvLayout::channels_last, runtime::CompileOptions::ConvLayout::contiguous}) {
      const Tensor got = run_one(graph(c.x), weights, x, layout);
      const Tensor want = run_one(graph(batched), weights, xb, layout);
      REQUIRE(want.shape()[0] == 1);
      REQUIRE(got.shape() == runtime::Shape(want.shape().begin() + 1, want.shape().end()));
      double err = 0;
      for (std::int64_t i = 0; i < got.numel(); ++i) err = std::max(err, double(std::abs(test::element(got, i) - test::element(want, i))));
      CHECK(err == 0);
    }
  }
  // A Conv2d module on an unbatched input.
  const ModuleCase m{"conv.Conv2d", R"({"stride":[1,1],"padding":[1,1],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})",
                     {{"weight", random_tensor({4, 3, 3, 3}, 63)}}, random_tensor({3, 6, 5}, 64), nullptr};
  const Tensor got = run_one(module_graph(m), module_weights(m), m.input);
  const Tensor xb = Tensor::wrap(m.input.raw(), runtime::Layout::contiguous({1, 3, 6, 5}));
  const ModuleCase mb{m.cls, m.attrs, m.params, xb, nullptr};
  const Tensor want = run_one(module_graph(mb), module_weights(mb), xb);
  REQUIRE(got.shape() == runtime::Shape{4, 6, 5});
  double err = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) err = std::max(err, double(std::abs(test::element(got, i) - test::element(want, i))));
  CHECK(err == 0);
}

TEST_CASE("call_module errors name the node and the missing or unsupported field") {
  const Tensor x = random_tensor({1, 3, 6, 5}, 70);
  const std::vector<std::pair<std::string, Tensor>> conv_params{{"weight", random_tensor({4, 3, 3, 3}, 71)}};
  auto message = [&](const ModuleCase& c, runtime::Weights w) {
    return error_of([&] { CompiledGraph::compile(module_graph(c), w); });
  };
  SUBCASE("padding_mode other than zeros with 'same' padding") {
    const ModuleCase c{"conv.Conv2d", R"({"stride":[1,1],"padding":"same","dilation":[1,1],"groups":1,"padding_mode":"reflect"})",
                       conv_params, x, nullptr};
    const std::string e = message(c, module_weights(c));
    CHECK(e.find("node blk_m") != std::string::npos);
    CHECK(e.find("padding_mode 'reflect' needs attribute 'padding' as 2 ints") != std::string::npos);
  }
  SUBCASE("an attribute the table lacks") {
    const ModuleCase c{"conv.Conv2d", R"({"padding":[1,1],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})", conv_params, x, nullptr};
    const std::string e = message(c, module_weights(c));
    CHECK(e.find("blk.m") != std::string::npos);
    CHECK(e.find("attribute 'stride' is missing") != std::string::npos);
  }
  SUBCASE("an attribute the functional form refuses: named as that form's argument") {
    const ModuleCase c{"conv.Conv2d", R"({"stride":[1,1,1],"padding":[1,1],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})",
                       conv_params, x, nullptr};
    const std::string e = message(c, module_weights(c));
    CHECK(e.find("node blk_m (blk.m): lowered as torch.nn.functional.conv2d: stride must have") != std::string::npos);
  }
  SUBCASE("a parameter that was not given") {
    const ModuleCase c{"conv.Conv2d", R"({"stride":[1,1],"padding":[1,1],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})",
                       conv_params, x, nullptr};
    const std::string e = message(c, {});
    CHECK(e.find("weight 'blk.m.weight'") != std::string::npos);
  }
  SUBCASE("batch statistics") {
    const ModuleCase c{"batchnorm.BatchNorm2d", R"({"track_running_stats":false,"momentum":0.1,"eps":1e-05,"affine":false})", {}, x, nullptr};
    CHECK(message(c, {}).find("track_running_stats") != std::string::npos);
  }
  SUBCASE("attrs that are not JSON the reader takes") {
    const ModuleCase c{"activation.Softmax", R"({"dim":{"x":1}})", {}, x, nullptr};
    const std::string e = message(c, {});
    CHECK(e.find("attrs.dim") != std::string::npos);
  }
  SUBCASE("no modules table entry, and a module class with no kernel") {
    Graph g;
    Node* in = g.placeholder("x", meta({1, 3, 6, 5}));
    g.output(ArgList{Arg(g.call_module("nowhere", {Arg(in)}))});
    CHECK(error_of([&] { CompiledGraph::compile(g, {}); }).find("module:nowhere") != std::string::npos);
    const ModuleCase c{"my.Block", "{}", {}, x, nullptr};
    CHECK(message(c, {}).find("module:torch.nn.modules.my.Block: blk_m") != std::string::npos);
  }
}

TEST_CASE("a call_function with a bare target and no kernel is reported under its own target") {
  Graph g;
  Node* in = g.placeholder("x", meta({3}));
  Node* a = g.call_function(OpRef("my_custom_op"), {in});
  Node* b = g.call_function(OpRef("torch.Tensor.no_such_method"), {a});
  Node* c = g.call_method("also_missing", {b});
  g.output(ArgList{Arg(c)});
  const std::string e = error_of([&] { CompiledGraph::compile(g, {}); });
  CHECK(e.find("3 nodes have no kernel") != std::string::npos);
  CHECK(e.find("\n  my_custom_op: ") != std::string::npos);
  CHECK(e.find("Tensor.my_custom_op") == std::string::npos);
  CHECK(e.find("torch.Tensor.no_such_method: ") != std::string::npos);
  CHECK(e.find("Tensor.also_missing: ") != std::string::npos);
  // The Tensor-method lookup of a bare target still finds a method's kernel.
  Graph h;
  Node* y = h.placeholder("x", meta({2, 3}));
  h.output(ArgList{Arg(h.call_function(OpRef("relu"), {y}))});
  const Tensor x = random_tensor({2, 3}, 80);
  const Tensor r = CompiledGraph::compile(h, {}).run({x})[0];
  for (std::int64_t i = 0; i < 6; ++i) CHECK(r.data<float>()[i] == std::max(0.0f, x.data<float>()[i]));
}

TEST_CASE("module Conv2d -> BatchNorm2d -> ReLU runs as one primitive, and module convolutions take part in the layout decision") {
  const std::int64_t C = 3, OC = 16;
  const Tensor x = random_tensor({2, C, 9, 7}, 90);
  runtime::Weights w{{"conv.weight", random_tensor({OC, C, 3, 3}, 91)}, {"conv.bias", random_tensor({OC}, 92)},
                     {"bn.weight", random_tensor({OC}, 93)},           {"bn.bias", random_tensor({OC}, 94)},
                     {"bn.running_mean", random_tensor({OC}, 95)},     {"bn.running_var", positive_tensor({OC}, 96)}};
  for (const char* act : {"activation.ReLU", "activation.GELU", "activation.Hardswish"}) {
    CAPTURE(act);
    Graph g;
    g.modules().set(ModuleInfo{"conv", "torch.nn.modules.conv.Conv2d",
                               {{"attrs", R"({"stride":[1,1],"padding":[1,1],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})"}}});
    g.modules().set(ModuleInfo{"bn", "torch.nn.modules.batchnorm.BatchNorm2d",
                               {{"attrs", R"({"eps":0.001,"momentum":0.1,"affine":true,"track_running_stats":true})"}}});
    g.modules().set(ModuleInfo{"act", std::string("torch.nn.modules.") + act, {{"attrs", R"({"inplace":false,"approximate":"none"})"}}});
    Node* in = g.placeholder("x", meta({2, C, 9, 7}));
    g.output(ArgList{Arg(g.call_module("act", {Arg(g.call_module("bn", {Arg(g.call_module("conv", {Arg(in)}))}))}))});
    // The functional twin, every op its own step.
    Graph f;
    Node* fx = f.placeholder("x", meta({2, C, 9, 7}));
    auto attr = [&](const char* n, Dims s) { return Arg(f.get_attr(n, meta(dims_of(s)))); };
    Node* conv = call(f, "torch.nn.functional.conv2d", {fx, attr("conv.weight", {OC, C, 3, 3}), attr("conv.bias", {OC})},
                      {{"padding", Arg(1)}});
    Node* bn = call(f, "torch.nn.functional.batch_norm", {conv, attr("bn.running_mean", {OC}), attr("bn.running_var", {OC})},
                    {{"weight", attr("bn.weight", {OC})}, {"bias", attr("bn.bias", {OC})}, {"eps", Arg(0.001)}});
    const std::string a(act);
    Node* y = a == "activation.ReLU"   ? call(f, "torch.relu", {bn})
              : a == "activation.GELU" ? call(f, "torch.nn.functional.gelu", {bn})
                                       : call(f, "torch.nn.functional.hardswish", {bn});
    f.output(ArgList{Arg(y)});
    CHECK(runtime::decide_channels_last(g, w) == runtime::decide_channels_last(f, w));
    CHECK(runtime::decide_channels_last(g, w));
    const auto cg = CompiledGraph::compile(g, w);
    // The activation (ReLU, GELU, Hardswish) is a post-op of the conv with the batch-norm folded in.
    CHECK(cg.num_steps() == 1u);
    const Tensor got = cg.run({x})[0];
    const Tensor want = run_one(f, w, x);
    REQUIRE(got.shape() == want.shape());
    CHECK(test::max_abs_diff(got, want) < 1e-4);
  }
  // A grouped module convolution (groups > 1, more than one channel per group): NCHW, as for the functional form.
  Graph g;
  g.modules().set(ModuleInfo{"dw", "torch.nn.modules.conv.Conv2d",
                             {{"attrs", R"({"stride":[1,1],"padding":[1,1],"dilation":[1,1],"groups":2,"padding_mode":"zeros"})"}}});
  Node* in = g.placeholder("x", meta({1, 8, 9, 9}));
  Node* dw = g.call_module("dw", {Arg(in)});
  dw->meta.val = meta({1, 8, 9, 9});
  g.output(ArgList{Arg(dw)});
  Graph f;
  Node* fx = f.placeholder("x", meta({1, 8, 9, 9}));
  Node* fc = call(f, "torch.nn.functional.conv2d", {fx, Arg(f.get_attr("dw.weight", meta({8, 4, 3, 3})))}, {{"padding", Arg(1)}, {"groups", Arg(2)}});
  fc->meta.val = meta({1, 8, 9, 9});
  f.output(ArgList{Arg(fc)});
  const runtime::Weights dw_w{{"dw.weight", random_tensor({8, 4, 3, 3}, 97)}};
  CHECK_FALSE(runtime::decide_channels_last(f, dw_w));
  CHECK(runtime::decide_channels_last(g, dw_w) == runtime::decide_channels_last(f, dw_w));
}
