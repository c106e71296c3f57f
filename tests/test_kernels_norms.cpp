// Norms by the input's own statistics (kernels/group_norm.hpp,
// kernels/instance_norm.hpp): group norm, instance norm and batch norm in
// training mode at every level against a naive loop, with the aten tuple
// forms' mean and rstd, transposed inputs, several threads; instance norm by
// running statistics; the GroupNorm and InstanceNormNd modules; local response
// norm (kernels/local_response_norm.hpp); the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::compile_error;
using test::Dims;
using test::dims_of;
using test::ints;
using test::random_tensor;

namespace {

Node* call(Graph& g, const char* target, ArgList args, ArgDict kw = {}, std::string name = "") {
  return g.call_function(OpRef(target), std::move(args), std::move(kw), std::move(name));
}

// The naive normalization of x [N, C, ...]: groups > 0 normalizes each (n, group) by its
// statistics; groups == 0 each channel over the batch. Mean and rstd per unit, row-major.
struct Naive {
  std::vector<double> out, mean, rstd;
};
Naive naive_norm(const Tensor& x, std::int64_t groups, const Tensor* w, const Tensor* b, double eps) {
  const std::int64_t N = x.shape()[0], C = x.shape()[1], S = x.numel() / (N * C);
  const std::int64_t units = groups ? N * groups : C;
  auto unit_of = [&](std::int64_t n, std::int64_t c) { return groups ? n * groups + c / (C / groups) : c; };
  Naive r;
  std::vector<double> cnt(units, 0);
  r.mean.assign(units, 0);
  r.rstd.assign(units, 0);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t u = unit_of(i / (C * S), (i / S) % C);
    r.mean[u] += test::element(x, i);
    ++cnt[u];
  }
  for (std::int64_t u = 0; u < units; ++u) r.mean[u] /= cnt[u];
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t u = unit_of(i / (C * S), (i / S) % C);
    const double d = test::element(x, i) - r.mean[u];
    r.rstd[u] += d * d;
  }
  for (std::int64_t u = 0; u < units; ++u) r.rstd[u] = 1.0 / std::sqrt(r.rstd[u] / cnt[u] + eps);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t c = (i / S) % C, u = unit_of(i / (C * S), c);
    const double y = (test::element(x, i) - r.mean[u]) * r.rstd[u];
    r.out.push_back(y * (w ? w->data<float>()[c] : 1.0) + (b ? b->data<float>()[c] : 0.0));
  }
  return r;
}

void check_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-4) {
  REQUIRE(got.numel() == static_cast<std::int64_t>(want.size()));
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = test::element(got, static_cast<std::int64_t>(i));
    if (std::abs(g - want[i]) > tol * (1 + std::abs(want[i]))) {
      if (bad < 3) MESSAGE("element " << i << ": got " << g << ", want " << want[i]);
      ++bad;
    }
  }
  CHECK(bad == 0);
}

// The input: random, or (transposed) the last two dims swapped in memory.
Tensor input_of(const Dims& shape, bool transposed, unsigned seed = 3) {
  if (!transposed || shape.size() < 3) return random_tensor(shape, seed);
  Dims swapped = shape;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  const auto r = static_cast<std::int64_t>(shape.size());
  return random_tensor(swapped, seed).transpose(r - 1, r - 2);
}

// A graph of one norm op on placeholder x with constant weight and bias (when `affine`);
// `build` makes the node from x, w, b (nullptr when not affine). Returns the outputs.
std::vector<Tensor> run_norm(const Tensor& x, std::int64_t C, bool affine,
                             const std::function<ArgList(Graph&, Node* x, Node* w, Node* b)>& build, int threads = 1) {
  Graph g;
  Node* xn = g.placeholder("x", meta(dims_of(x.shape())));
  Node* w = affine ? g.get_attr("w", meta({C})) : nullptr;
  Node* b = affine ? g.get_attr("b", meta({C})) : nullptr;
  g.output(build(g, xn, w, b));
  runtime::Weights ws;
  if (affine) {
    ws.emplace("w", random_tensor({C}, 11));
    ws.emplace("b", random_tensor({C}, 12));
  }
  runtime::CompileOptions o;
  o.threads = threads;
  return CompiledGraph::compile(g, ws, o).run({x});
}

Tensor param(std::int64_t C, unsigned seed) { return random_tensor({C}, seed); }

Arg maybe(Node* n) { return n ? Arg(n) : Arg(); }

}  // namespace

TEST_CASE("group_norm against a naive loop at every level") {
  const Tensor w = param(6, 11), b = param(6, 12);
  for (bool transposed : {false, true})
    for (std::int64_t groups : {1, 3, 6})
      for (bool affine : {false, true}) {
        CAPTURE(transposed);
        CAPTURE(groups);
        CAPTURE(affine);
        const Tensor x = input_of({2, 6, 5, 7}, transposed);
        const Naive want = naive_norm(x, groups, affine ? &w : nullptr, affine ? &b : nullptr, 1e-3);
        auto out = run_norm(x, 6, affine, [&](Graph& g, Node* xn, Node* wn, Node* bn) {
          return ArgList{call(g, "torch.nn.functional.group_norm", {xn, groups},
                              {{"weight", maybe(wn)}, {"bias", maybe(bn)}, {"eps", Arg(1e-3)}}),
                         call(g, "aten.group_norm.default", {xn, groups, maybe(wn), maybe(bn), 1e-3, true})};
        });
        check_close(out[0], want.out);
        check_close(out[1], want.out);
      }
}

TEST_CASE("native_group_norm gives its mean and rstd, on 1-d and 3-d inputs and over threads") {
  const Tensor w = param(8, 11), b = param(8, 12);
  for (const Dims& shape : {Dims{3, 8, 9}, Dims{2, 8, 3, 4, 5}, Dims{4, 8, 40, 40}}) {
    CAPTURE(runtime::shape_str(shape));
    const Tensor x = input_of(shape, false);
    const std::int64_t S = x.numel() / (shape[0] * 8);
    const Naive want = naive_norm(x, 4, &w, &b, 1e-5);
    auto out = run_norm(
        x, 8, true,
        [&](Graph& g, Node* xn, Node* wn, Node* bn) {
          Node* t = call(g, "aten.native_group_norm.default", {xn, wn, bn, shape[0], 8, S, 4, 1e-5});
          ArgList outs;
          for (std::int64_t i = 0; i < 3; ++i) outs.push_back(call(g, "operator.getitem", {t, i}));
          return outs;
        },
        4);
    check_close(out[0], want.out);
    CHECK(out[1].shape() == runtime::Shape{shape[0], 4});
    check_close(out[1], want.mean);
    check_close(out[2], want.rstd);
  }
}

TEST_CASE("instance_norm by the input's statistics and by running statistics") {
  const Tensor w = param(5, 11), b = param(5, 12);
  for (bool affine : {false, true}) {
    CAPTURE(affine);
    const Tensor x = input_of({2, 5, 4, 6}, true);
    const Naive want = naive_norm(x, 5, affine ? &w : nullptr, affine ? &b : nullptr, 1e-5);
    auto out = run_norm(x, 5, affine, [&](Graph& g, Node* xn, Node* wn, Node* bn) {
      return ArgList{call(g, "torch.nn.functional.instance_norm", {xn}, {{"weight", maybe(wn)}, {"bias", maybe(bn)}}),
                     call(g, "aten.instance_norm.default", {xn, maybe(wn), maybe(bn), Arg(), Arg(), true, 0.1, 1e-5, false})};
    });
    check_close(out[0], want.out);
    check_close(out[1], want.out);
  }
  // use_input_stats=False: (x - running_mean) / sqrt(running_var + eps) * w + b per channel.
  Graph g;
  Node* xn = g.placeholder("x", meta({2, 5, 7}));
  Node* m = g.get_attr("m", meta({5}));
  Node* v = g.get_attr("v", meta({5}));
  Node* wn = g.get_attr("w", meta({5}));
  g.output(ArgList{call(g, "torch.nn.functional.instance_norm", {xn, m, v, wn},
                        {{"use_input_stats", Arg(false)}, {"eps", Arg(1e-3)}})});
  Tensor var = random_tensor({5}, 21);
  for (std::int64_t i = 0; i < 5; ++i) var.data<float>()[i] = std::abs(var.data<float>()[i]) + 0.5f;
  const Tensor mean = random_tensor({5}, 22), x = random_tensor({2, 5, 7}, 23);
  auto out = CompiledGraph::compile(g, {{"m", mean}, {"v", var}, {"w", w}}).run({x});
  std::vector<double> want;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t c = (i / 7) % 5;
    want.push_back((x.data<float>()[i] - mean.data<float>()[c]) / std::sqrt(var.data<float>()[c] + 1e-3) * w.data<float>()[c]);
  }
  check_close(out[0], want);
}

TEST_CASE("batch_norm in training mode normalizes by the batch's statistics") {
  const Tensor w = param(4, 11), b = param(4, 12);
  for (bool affine : {false, true}) {
    CAPTURE(affine);
    const Tensor x = input_of({3, 4, 5, 6}, true);
    const Naive want = naive_norm(x, 0, affine ? &w : nullptr, affine ? &b : nullptr, 1e-5);
    auto out = run_norm(x, 4, affine, [&](Graph& g, Node* xn, Node* wn, Node* bn) {
      Node* t = call(g, "aten.native_batch_norm.default", {xn, maybe(wn), maybe(bn), Arg(), Arg(), true, 0.1, 1e-5});
      Node* legit = call(g, "aten._native_batch_norm_legit.no_stats", {xn, maybe(wn), maybe(bn), true, 0.1, 1e-5});
      return ArgList{call(g, "operator.getitem", {t, std::int64_t{0}}), call(g, "operator.getitem", {t, std::int64_t{1}}),
                     call(g, "operator.getitem", {t, std::int64_t{2}}), call(g, "operator.getitem", {legit, std::int64_t{0}}),
                     call(g, "torch.nn.functional.batch_norm", {xn, Arg(), Arg(), maybe(wn), maybe(bn), true})};
    });
    check_close(out[0], want.out);
    CHECK(out[1].shape() == runtime::Shape{4});
    check_close(out[1], want.mean);
    check_close(out[2], want.rstd);
    check_close(out[3], want.out);
    check_close(out[4], want.out);
  }
}

TEST_CASE("GroupNorm and InstanceNormNd modules against naive loops") {
  auto run_module = [](const std::string& cls, const std::string& attrs, const Tensor& x, runtime::Weights w) {
    Graph g;
    g.modules().set(ModuleInfo{"m", "torch.nn.modules." + cls, {{"attrs", attrs}}});
    Node* xn = g.placeholder("x", meta(dims_of(x.shape())));
    g.output(ArgList{g.call_module("m", {Arg(xn)})});
    return CompiledGraph::compile(g, w).run({x})[0];
  };
  const Tensor w = param(6, 11), b = param(6, 12), x = input_of({2, 6, 4, 5}, false);
  check_close(run_module("normalization.GroupNorm", R"({"num_groups": 2, "num_channels": 6, "eps": 1e-05, "affine": true})", x,
                         {{"m.weight", w}, {"m.bias", b}}),
              naive_norm(x, 2, &w, &b, 1e-5).out);
  check_close(run_module("normalization.GroupNorm", R"({"num_groups": 3, "num_channels": 6, "eps": 0.01, "affine": false})", x, {}),
              naive_norm(x, 3, nullptr, nullptr, 1e-2).out);
  const char* in_attrs = R"({"num_features": 6, "eps": 1e-05, "momentum": 0.1, "affine": true, "track_running_stats": false})";
  check_close(run_module("instancenorm.InstanceNorm2d", in_attrs, x, {{"m.weight", w}, {"m.bias", b}}),
              naive_norm(x, 6, &w, &b, 1e-5).out);
  const Tensor x1 = input_of({2, 6, 9}, false);
  check_close(run_module("instancenorm.InstanceNorm1d", in_attrs, x1, {{"m.weight", w}, {"m.bias", b}}),
              naive_norm(x1, 6, &w, &b, 1e-5).out);
  // Tracked running statistics are what eval mode normalizes by.
  const Tensor x3 = input_of({1, 6, 2, 3, 4}, false), mean = param(6, 13);
  Tensor var = param(6, 14);
  for (std::int64_t i = 0; i < 6; ++i) var.data<float>()[i] = std::abs(var.data<float>()[i]) + 0.5f;
  const Tensor got = run_module("instancenorm.InstanceNorm3d",
                                R"({"num_features": 6, "eps": 1e-05, "momentum": 0.1, "affine": false, "track_running_stats": true})",
                                x3, {{"m.running_mean", mean}, {"m.running_var", var}});
  std::vector<double> want;
  for (std::int64_t i = 0; i < x3.numel(); ++i) {
    const std::int64_t c = i / 24;
    want.push_back((x3.data<float>()[i] - mean.data<float>()[c]) / std::sqrt(var.data<float>()[c] + 1e-5));
  }
  check_close(got, want);
  // An unbatched input is refused, not normalized over the wrong dims.
  CHECK_THROWS_WITH_AS(run_module("instancenorm.InstanceNorm1d", in_attrs, random_tensor({6, 9}, 1), {{"m.weight", w}, {"m.bias", b}}),
                       doctest::Contains("InstanceNorm1d 'm': an input of rank 2 (unbatched) is not supported"), Error);
}

TEST_CASE("local_response_norm against a naive loop, and as a module") {
  for (const Dims& shape : {Dims{2, 7, 3, 5}, Dims{1, 4, 6}, Dims{1, 5, 2, 3, 2}}) {
    for (std::int64_t size : {1, 2, 3, 4}) {
      CAPTURE(runtime::shape_str(shape));
      CAPTURE(size);
      const Tensor x = input_of(shape, true);
      const std::int64_t C = shape[1], S = x.numel() / (shape[0] * C);
      std::vector<double> want;
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        const std::int64_t n = i / (C * S), c = (i / S) % C, s = i % S;
        double sum = 0;
        for (std::int64_t j = c - size / 2; j <= c + (size - 1) / 2; ++j)
          if (j >= 0 && j < C) sum += std::pow(test::element(x, (n * C + j) * S + s), 2);
        want.push_back(test::element(x, i) / std::pow(1.5 + 0.1 * sum / double(size), 0.7));
      }
      auto out = run_norm(x, C, false, [&](Graph& g, Node* xn, Node*, Node*) {
        return ArgList{call(g, "torch.nn.functional.local_response_norm", {xn, size}, {{"alpha", Arg(0.1)}, {"beta", Arg(0.7)}, {"k", Arg(1.5)}})};
      });
      check_close(out[0], want);
      Graph g;
      g.modules().set(ModuleInfo{"m", "torch.nn.modules.normalization.LocalResponseNorm",
                                 {{"attrs", R"({"size": )" + std::to_string(size) + R"(, "alpha": 0.1, "beta": 0.7, "k": 1.5})"}}});
      Node* xn = g.placeholder("x", meta(dims_of(shape)));
      g.output(ArgList{g.call_module("m", {Arg(xn)})});
      check_close(CompiledGraph::compile(g, {}).run({x})[0], want);
    }
  }
}

TEST_CASE("norm errors name the node and what is unsupported") {
  auto one = [](const Dims& shape, const std::function<Node*(Graph&, Node*)>& f) {
    Graph g;
    Node* x = g.placeholder("x", meta(dims_of(shape)));
    g.output(ArgList{f(g, x)});
    return compile_error(g);
  };
  CHECK(one({2, 6, 4}, [](Graph& g, Node* x) { return call(g, "torch.nn.functional.group_norm", {x, 4}, {}, "gn"); })
            .find("node gn (torch.nn.functional.group_norm): the input's 6 channels do not split into 4 groups") != std::string::npos);
  CHECK(one({2, 6, 4}, [](Graph& g, Node* x) {
          return call(g, "torch.nn.functional.group_norm", {x, 2}, {{"weight", Arg(g.placeholder("w", meta({5})))}}, "gn");
        }).find("weight must hold 6 float32 values") != std::string::npos);
  CHECK(one({2, 6, 4}, [](Graph& g, Node* x) {
          return call(g, "aten.native_group_norm.default", {x, Arg(), Arg(), 2, 6, 5, 2, 1e-5}, {}, "ngn");
        }).find("node ngn (aten.native_group_norm.default): N, C, HxW = 2, 6, 5 do not describe the input [2, 6, 4]") !=
        std::string::npos);
  CHECK(one({2, 6, 1}, [](Graph& g, Node* x) { return call(g, "torch.nn.functional.instance_norm", {x}, {}, "in"); })
            .find("node in (torch.nn.functional.instance_norm): instance_norm needs more than 1 spatial element") != std::string::npos);
  CHECK(one({2, 6, 3}, [](Graph& g, Node* x) {
          Node* m = g.placeholder("m", meta({6}));
          return call(g, "torch.nn.functional.instance_norm", {x, m, m}, {}, "in");
        }).find("instance_norm with use_input_stats and running statistics (which it would update) is not supported") !=
        std::string::npos);
  CHECK(one({2, 6, 3}, [](Graph& g, Node* x) {
          return call(g, "torch.nn.functional.instance_norm", {x}, {{"use_input_stats", Arg(false)}}, "in");
        }).find("use_input_stats=False needs running_mean and running_var") != std::string::npos);
  CHECK(one({2, 6, 3}, [](Graph& g, Node* x) {
          Node* m = g.placeholder("m", meta({6}));
          return call(g, "aten.native_batch_norm.default", {x, Arg(), Arg(), m, m, true, 0.1, 1e-5}, {}, "bn");
        }).find("node bn (aten.native_batch_norm.default): batch_norm in training mode with running statistics") != std::string::npos);
  CHECK(one({1, 6}, [](Graph& g, Node* x) {
          return call(g, "aten.native_batch_norm.default", {x, Arg(), Arg(), Arg(), Arg(), true, 0.1, 1e-5}, {}, "bn");
        }).find("batch statistics need more than 1 value per channel") != std::string::npos);
  CHECK(one({2, 6, 3}, [](Graph& g, Node* x) {
          return call(g, "aten._native_batch_norm_legit.no_stats", {x, Arg(), Arg(), false, 0.1, 1e-5}, {}, "bn");
        }).find("batch_norm without running statistics needs training=True") != std::string::npos);
  CHECK(one({2, 6}, [](Graph& g, Node* x) { return call(g, "torch.nn.functional.local_response_norm", {x, 2}, {}, "lrn"); })
            .find("node lrn (torch.nn.functional.local_response_norm): local_response_norm needs an input of rank >= 3") !=
        std::string::npos);
  CHECK(one({2, 6, 3}, [](Graph& g, Node* x) { return call(g, "torch.nn.functional.local_response_norm", {x, 0}, {}, "lrn"); })
            .find("local_response_norm: size must be >= 1, got 0") != std::string::npos);
}
