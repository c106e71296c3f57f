// fuse_conv_bn and efficient_conv_bn_eval_pass (kiln/passes/pre_grad/): each
// form folds, near-misses stay, and the result computes what the original did.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/io/fx_json_write.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/executor/numeric_check.hpp"
#include "runtime_test_support.hpp"
#include "tool_test_support.hpp"

using namespace kiln;
using runtime::Tensor;
using test::meta;

namespace {

constexpr std::int64_t kIn = 3, kOut = 4, kSide = 6;

// The same weights as the executor takes them and as a pass reads them.
struct Params {
  runtime::Weights weights;
  io::WeightStore store;
  void add(const std::string& name, runtime::Shape shape, unsigned seed, bool positive = false) {
    Tensor t = test::random_tensor(std::move(shape), seed);
    if (positive)
      for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.5f + std::abs(t.data<float>()[i]);
    weights.insert_or_assign(name, t);
    store.add(name, t.to_weight());
  }
};

// A conv2d's and a batch-norm's parameters under the names `conv.weight`, `bn.running_mean`, ...
Params conv_bn_params(bool conv_bias = true, bool affine = true) {
  Params p;
  p.add("conv.weight", {kOut, kIn, 3, 3}, 1);
  if (conv_bias) p.add("conv.bias", {kOut}, 2);
  p.add("bn.running_mean", {kOut}, 3);
  p.add("bn.running_var", {kOut}, 4, true);
  if (affine) {
    p.add("bn.weight", {kOut}, 5);
    p.add("bn.bias", {kOut}, 6);
  }
  return p;
}

TensorMeta image(std::int64_t c) { return meta({2, c, kSide, kSide}); }

enum class Level { torch, aten_legit, aten_native, aten_batch_norm };

struct Built {
  Graph g;
  Node* conv = nullptr;
  Node* bn = nullptr;
};

// x -> conv2d (padding 1) -> inference batch-norm -> output, with every
// parameter a get_attr (or, `lifted`, a placeholder of the same name).
Built conv_bn_graph(Level level, bool conv_bias = true, bool affine = true, bool lifted = false) {
  Built b;
  Graph& g = b.g;
  Node* x = g.placeholder("x", image(kIn));
  auto param = [&](const char* name, std::vector<Dim> shape) -> Arg {
    return Arg(lifted ? g.placeholder(name, meta(std::move(shape))) : g.get_attr(name, meta(std::move(shape))));
  };
  const Arg w = param("conv.weight", {kOut, kIn, 3, 3});
  const Arg bias = conv_bias ? param("conv.bias", {kOut}) : Arg();
  const Arg mean = param("bn.running_mean", {kOut}), var = param("bn.running_var", {kOut});
  const Arg gamma = affine ? param("bn.weight", {kOut}) : Arg(), beta = affine ? param("bn.bias", {kOut}) : Arg();
  Node* out;
  if (level == Level::torch) {
    b.conv = g.call_function(OpRef("torch.nn.functional.conv2d"),
                             {Arg(x), w, bias, Arg(ArgList{1, 1}), Arg(ArgList{1, 1}), Arg(ArgList{1, 1}), Arg(1)});
    b.bn = g.call_function(OpRef("torch.nn.functional.batch_norm"),
                           {Arg(b.conv), mean, var, gamma, beta, Arg(false), Arg(0.1), Arg(1e-5)});
    out = b.bn;
  } else {
    b.conv = g.call_function(OpRef("aten.convolution.default"), {Arg(x), w, bias, Arg(ArgList{1, 1}), Arg(ArgList{1, 1}),
                                                                 Arg(ArgList{1, 1}), Arg(false), Arg(ArgList{0, 0}), Arg(1)});
    if (level == Level::aten_legit || level == Level::aten_native) {
      // torch 2's make_fx traces an eval batch-norm to the first, torch 1.13's to the second.
      b.bn = level == Level::aten_legit
                 ? g.call_function(OpRef("aten._native_batch_norm_legit_no_training.default"),
                                   {Arg(b.conv), gamma, beta, mean, var, Arg(0.1), Arg(1e-5)})
                 : g.call_function(OpRef("aten.native_batch_norm.default"),
                                   {Arg(b.conv), gamma, beta, mean, var, Arg(false), Arg(0.1), Arg(1e-5)});
      b.bn->meta.val = MetaVal(MetaVal::List{MetaVal(image(kOut)), MetaVal(meta({0})), MetaVal(meta({0}))});
      out = g.call_function(OpRef("operator.getitem"), {Arg(b.bn), Arg(0)});
      // make_fx also leaves a getitem of each statistic, which nothing reads.
      for (std::int64_t i : {1, 2}) g.call_function(OpRef("operator.getitem"), {Arg(b.bn), Arg(i)});
    } else {
      b.bn = g.call_function(OpRef("aten.batch_norm.default"),
                             {Arg(b.conv), gamma, beta, mean, var, Arg(false), Arg(0.1), Arg(1e-5), Arg(true)});
      out = b.bn;
    }
  }
  b.conv->meta.val = image(kOut);
  if (!b.bn->meta.val.list()) b.bn->meta.val = image(kOut);
  out->meta.val = image(kOut);
  g.output(ArgList{Arg(out)});
  return b;
}

// The modules table of the module form: Conv2d (padding 1) and BatchNorm2d.
void add_module_table(Graph& g, const char* conv_class = "torch.nn.modules.conv.Conv2d") {
  g.modules().set(ModuleInfo{"conv", conv_class,
                             {{"attrs", R"({"stride":[1,1],"padding":[1,1],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})"}}});
  g.modules().set(ModuleInfo{"bn", "torch.nn.modules.batchnorm.BatchNorm2d",
                             {{"attrs", R"({"eps":1e-05,"momentum":0.1,"affine":true,"track_running_stats":true})"}}});
}

Built module_graph() {
  Built b;
  Graph& g = b.g;
  add_module_table(g);
  Node* x = g.placeholder("x", image(kIn));
  b.conv = g.call_module("conv", {Arg(x)});
  b.conv->meta.val = image(kOut);
  b.bn = g.call_module("bn", {Arg(b.conv)});
  b.bn->meta.val = image(kOut);
  g.output(ArgList{Arg(b.bn)});
  return b;
}

Counters run_pass(Graph& g, const std::string& pass, io::WeightStore* weights, std::ostream* log = nullptr) {
  static const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.set_weights(weights);
  pm.set_log(log);
  pm.run(g, {pass});
  return pm.counters();
}

std::size_t count_batch_norms(const Graph& g) {
  std::size_t n = 0;
  for (const Node* node : g.nodes()) {
    const std::string_view t = node->target_name();
    if (t.find("batch_norm") != std::string_view::npos || t == "bn") ++n;
  }
  return n;
}

bool same_graph(const Graph& a, const Graph& b) { return to_string(a) == to_string(b); }

}  // namespace

TEST_CASE("fuse_conv_bn folds F.conv2d + F.batch_norm into new weights that give the same outputs") {
  for (const bool conv_bias : {true, false})
    for (const bool affine : {true, false}) {
      INFO("conv bias " << conv_bias << ", affine " << affine);
      Params p = conv_bn_params(conv_bias, affine);
      Built b = conv_bn_graph(Level::torch, conv_bias, affine);
      const Graph original = b.g.clone();
      const Counters c = run_pass(b.g, "fuse_conv_bn", &p.store);
      CHECK(c.get("fuse_conv_bn") == 1);
      CHECK(count_batch_norms(b.g) == 0);
      REQUIRE(p.store.created().size() == 2);
      // The conv now reads the two new weights; the batch-norm's constants are gone.
      CHECK(b.conv->args()[1].node()->target_name() == p.store.created()[0]);
      CHECK(b.conv->args()[2].node()->target_name() == p.store.created()[1]);
      CHECK(b.g.find_nodes(OpKind::get_attr).size() == 2);
      lint(b.g);
      runtime::NumericCheck check(original, p.weights);
      runtime::Weights folded = runtime::with_created_weights(p.weights, p.store);
      const auto report = check.compare(b.g, folded);
      CHECK_MESSAGE(report.ok, report.summary());
      // The same check sees a fold that is slightly off.
      Tensor& bias = folded.at(p.store.created()[1]);
      for (std::int64_t i = 0; i < bias.numel(); ++i) bias.data<float>()[i] += 0.01f;
      CHECK_FALSE(check.compare(b.g, folded).ok);
    }
}

TEST_CASE("fuse_conv_bn folds aten.convolution + _native_batch_norm_legit_no_training, native_batch_norm, batch_norm") {
  for (const Level level : {Level::aten_legit, Level::aten_native, Level::aten_batch_norm}) {
    INFO("aten form " << int(level));
    Params p = conv_bn_params(false, true);
    Built b = conv_bn_graph(level, false, true);
    const Graph original = b.g.clone();
    const Counters c = run_pass(b.g, "fuse_conv_bn", &p.store);
    CHECK(c.get("fuse_conv_bn") == 1);
    CHECK(count_batch_norms(b.g) == 0);
    CHECK(b.g.find_nodes(OpKind::call_function, OpRef("operator.getitem")).empty());
    CHECK(b.g.output_node()->args()[0].list()->at(0).node() == b.conv);
    CHECK(b.conv->args()[2].node() != nullptr);  // the None bias became the folded one
    lint(b.g);
    runtime::NumericCheck check(original, p.weights);
    const auto report = check.compare(b.g, runtime::with_created_weights(p.weights, p.store));
    CHECK_MESSAGE(report.ok, report.summary());
  }
}

TEST_CASE("fuse_conv_bn folds parameters lifted to placeholders bound to weights, and drops those placeholders") {
  Params p = conv_bn_params();
  Built b = conv_bn_graph(Level::torch, true, true, /*lifted=*/true);
  CHECK(b.g.placeholders().size() == 7);
  const Counters c = run_pass(b.g, "fuse_conv_bn", &p.store);
  CHECK(c.get("fuse_conv_bn") == 1);
  CHECK(count_batch_norms(b.g) == 0);
  REQUIRE(b.g.placeholders().size() == 1);  // the input is left, every parameter folded
  CHECK(b.g.placeholders()[0]->name() == "x");
  lint(b.g);
  // The original's twin with get_attr parameters is what the executor can run.
  runtime::NumericCheck check(conv_bn_graph(Level::torch).g, p.weights);
  const auto report = check.compare(b.g, runtime::with_created_weights(p.weights, p.store));
  CHECK_MESSAGE(report.ok, report.summary());
}

TEST_CASE("fuse_conv_bn folds call_module Conv2d + BatchNorm2d into a functional conv on new weights") {
  Params p = conv_bn_params();
  Built b = module_graph();
  const Counters c = run_pass(b.g, "fuse_conv_bn", &p.store);
  CHECK(c.get("fuse_conv_bn") == 1);
  CHECK(b.g.find_nodes(OpKind::call_module).empty());
  const auto convs = b.g.find_nodes(OpKind::call_function, OpRef("torch.nn.functional.conv2d"));
  REQUIRE(convs.size() == 1);
  CHECK(format_arg(convs[0]->args()[4]) == "[1, 1]");  // padding from the module's attrs
  CHECK(convs[0]->meta.val.tensor()->shape == image(kOut).shape);
  lint(b.g);
  // Against the module form itself, run through its call_module kernels.
  runtime::NumericCheck check(module_graph().g, p.weights);
  const auto report = check.compare(b.g, runtime::with_created_weights(p.weights, p.store));
  CHECK_MESSAGE(report.ok, report.summary());
}

TEST_CASE("fuse_conv_bn folds conv1d by W * gamma / sqrt(var + eps) and (b - mean) * scale + beta") {
  Graph g;
  Node* x = g.placeholder("x", meta({1, 1, 5}));
  io::WeightStore store;
  store.add("w", io::make_weight<float>({2, 1, 1}, {2, 3}));
  store.add("b", io::make_weight<float>({2}, {1, -1}));
  store.add("mean", io::make_weight<float>({2}, {0.5f, 1}));
  store.add("var", io::make_weight<float>({2}, {3, 0}));
  store.add("gamma", io::make_weight<float>({2}, {1, 2}));
  store.add("beta", io::make_weight<float>({2}, {0, 10}));
  auto attr = [&](const char* n, std::vector<Dim> s) { return Arg(g.get_attr(n, meta(std::move(s)))); };
  Node* conv = g.call_function(OpRef("torch.conv1d"), {Arg(x), attr("w", {2, 1, 1}), attr("b", {2})});
  conv->meta.val = meta({1, 2, 5});
  Node* bn = g.call_function(OpRef("torch.nn.functional.batch_norm"), {Arg(conv), attr("mean", {2}), attr("var", {2})},
                             ArgDict{{"weight", attr("gamma", {2})}, {"bias", attr("beta", {2})}, {"eps", Arg(1.0)}});
  bn->meta.val = meta({1, 2, 5});
  g.output(ArgList{Arg(bn)});
  CHECK(run_pass(g, "fuse_conv_bn", &store).get("fuse_conv_bn") == 1);
  REQUIRE(store.created().size() == 2);
  // scale = gamma / sqrt(var + 1) = {0.5, 2}
  CHECK(store.created_value(store.created()[0]).values<float>() == std::vector<float>{1, 6});
  CHECK(store.created_value(store.created()[1]).values<float>() == std::vector<float>{0.25f, 6});
  CHECK(store.created_value(store.created()[0]).shape == std::vector<std::int64_t>{2, 1, 1});
  CHECK(conv->args()[1].node()->meta.val.tensor()->shape == std::vector<Dim>{2, 1, 1});
  lint(g);
}

TEST_CASE("fuse_conv_bn folds conv1d + batch-norm and conv3d + batch-norm into weights that compute what the pair did") {
  for (const std::size_t nd : {1u, 3u})
    for (const bool aten : {false, true}) {
      INFO(nd << "-d, " << (aten ? "aten" : "torch") << " level");
      const std::vector<std::int64_t> sides{5, 7, 6};
      runtime::Shape wshape{kOut, kIn}, xshape{2, kIn}, yshape{2, kOut};
      for (std::size_t k = 0; k < nd; ++k) {
        wshape.push_back(3);
        xshape.push_back(sides[k]);
        yshape.push_back(sides[k]);  // padding 1 keeps the size
      }
      Params p;
      p.add("conv.weight", wshape, 11);
      p.add("conv.bias", {kOut}, 12);
      p.add("bn.running_mean", {kOut}, 13);
      p.add("bn.running_var", {kOut}, 14, true);
      p.add("bn.weight", {kOut}, 15);
      p.add("bn.bias", {kOut}, 16);
      Graph g;
      auto shape_meta = [](const runtime::Shape& s) { return meta(std::vector<Dim>(s.begin(), s.end())); };
      auto attr = [&](const char* n, const runtime::Shape& s) { return Arg(g.get_attr(n, shape_meta(s))); };
      Node* x = g.placeholder("x", shape_meta(xshape));
      const Arg w = attr("conv.weight", wshape), b = attr("conv.bias", {kOut}), mean = attr("bn.running_mean", {kOut}),
                var = attr("bn.running_var", {kOut}), gamma = attr("bn.weight", {kOut}), beta = attr("bn.bias", {kOut});
      const ArgList ones(nd, Arg(1)), zeros(nd, Arg(0));
      Node* conv = aten ? g.call_function(OpRef("aten.convolution.default"),
                                          {Arg(x), w, b, Arg(ones), Arg(ones), Arg(ones), Arg(false), Arg(zeros), Arg(1)})
                        : g.call_function(OpRef(nd == 1 ? "torch.conv1d" : "torch.conv3d"), {Arg(x), w, b, Arg(1), Arg(1)});
      conv->meta.val = shape_meta(yshape);
      Node* out = nullptr;
      if (aten) {
        Node* bn = g.call_function(OpRef("aten._native_batch_norm_legit_no_training.default"),
                                   {Arg(conv), gamma, beta, mean, var, Arg(0.1), Arg(1e-5)});
        bn->meta.val = MetaVal(MetaVal::List{MetaVal(shape_meta(yshape)), MetaVal(meta({0})), MetaVal(meta({0}))});
        out = g.call_function(OpRef("operator.getitem"), {Arg(bn), Arg(0)});
      } else {
        out = g.call_function(OpRef("torch.nn.functional.batch_norm"),
                              {Arg(conv), mean, var, gamma, beta, Arg(false), Arg(0.1), Arg(1e-5)});
      }
      out->meta.val = shape_meta(yshape);
      g.output(ArgList{Arg(out)});
      const Graph original = g.clone();
      CHECK(run_pass(g, "fuse_conv_bn", &p.store).get("fuse_conv_bn") == 1);
      CHECK(count_batch_norms(g) == 0);
      lint(g);
      runtime::NumericCheck check(original, p.weights);
      runtime::Weights folded = runtime::with_created_weights(p.weights, p.store);
      const auto report = check.compare(g, folded);
      CHECK_MESSAGE(report.ok, report.summary());
      // The same check sees a fold that is slightly off.
      Tensor& bias = folded.at(p.store.created()[1]);
      for (std::int64_t i = 0; i < bias.numel(); ++i) bias.data<float>()[i] += 0.01f;
      CHECK_FALSE(check.compare(g, folded).ok);
    }
}

TEST_CASE("fuse_conv_bn leaves near-misses: a conv read elsewhere, non-constant or training statistics, a read statistic") {
  SUBCASE("the conv's output has another user") {
    Params p = conv_bn_params();
    Built b = conv_bn_graph(Level::torch);
    ArgList outs = *b.g.output_node()->args()[0].list();
    outs.push_back(Arg(b.conv));
    b.g.output_node()->set_arg(0, Arg(outs));
    const Graph before = b.g.clone();
    std::ostringstream log;
    CHECK(run_pass(b.g, "fuse_conv_bn", &p.store, &log).get("fuse_conv_bn") == 0);
    CHECK(same_graph(b.g, before));
    CHECK(p.store.created().empty());
    CHECK(log.str().find("has other users") != std::string::npos);
  }
  SUBCASE("a running statistic is a graph input, not a weight") {
    Params p = conv_bn_params();
    Built b = conv_bn_graph(Level::torch);
    Node* input_mean = b.g.placeholder("mean_input", meta({kOut}));
    b.g.move_before(b.g.find_node("x"), input_mean);
    b.bn->set_arg(1, Arg(input_mean));
    const Graph before = b.g.clone();
    std::ostringstream log;
    CHECK(run_pass(b.g, "fuse_conv_bn", &p.store, &log).get("fuse_conv_bn") == 0);
    CHECK(same_graph(b.g, before));
    CHECK(log.str().find("mean_input is not a constant") != std::string::npos);
  }
  SUBCASE("training=True") {
    Params p = conv_bn_params();
    Built b = conv_bn_graph(Level::torch);
    b.bn->set_arg(5, Arg(true));
    CHECK(run_pass(b.g, "fuse_conv_bn", &p.store).get("fuse_conv_bn") == 0);
    CHECK(count_batch_norms(b.g) == 1);
  }
  SUBCASE("the saved statistics of a tuple batch-norm are read") {
    Params p = conv_bn_params();
    Built b = conv_bn_graph(Level::aten_legit);
    Node* stat = b.g.call_function(OpRef("operator.getitem"), {Arg(b.bn), Arg(1)});
    stat->meta.val = meta({0});
    b.g.move_before(b.g.output_node(), stat);
    b.g.output_node()->set_arg(0, Arg(ArgList{b.g.output_node()->args()[0].list()->at(0), Arg(stat)}));
    CHECK(run_pass(b.g, "fuse_conv_bn", &p.store).get("fuse_conv_bn") == 0);
    CHECK(count_batch_norms(b.g) == 1);
  }
  SUBCASE("a transposed aten.convolution") {
    Params p = conv_bn_params();
    Built b = conv_bn_graph(Level::aten_batch_norm);
    b.conv->set_arg(6, Arg(true));
    CHECK(run_pass(b.g, "fuse_conv_bn", &p.store).get("fuse_conv_bn") == 0);
    CHECK(count_batch_norms(b.g) == 1);
  }
  SUBCASE("module pair: a ConvTranspose2d, or a conv module whose table entry lacks attrs") {
    Params p = conv_bn_params();
    Built b = module_graph();
    add_module_table(b.g, "torch.nn.modules.conv.ConvTranspose2d");
    CHECK(run_pass(b.g, "fuse_conv_bn", &p.store).get("fuse_conv_bn") == 0);
    Built m = module_graph();
    m.g.modules().set("conv", "torch.nn.modules.conv.Conv2d");
    std::ostringstream log;
    CHECK(run_pass(m.g, "fuse_conv_bn", &p.store, &log).get("fuse_conv_bn") == 0);
    CHECK(log.str().find("has no 'stride'") != std::string::npos);
  }
}

TEST_CASE("fuse_conv_bn without weights folds nothing and counts and logs why") {
  Built b = conv_bn_graph(Level::torch);
  const Graph before = b.g.clone();
  std::ostringstream log;
  const Counters c = run_pass(b.g, "fuse_conv_bn", nullptr, &log);
  CHECK(c.get("fuse_conv_bn") == 0);
  CHECK(c.get("fuse_conv_bn_no_weights") == 1);
  CHECK(same_graph(b.g, before));
  CHECK(log.str().find("no weights") != std::string::npos);
}

TEST_CASE("fuse_conv_bn on a shared conv weight folds each pair into weights of its own") {
  // Two convolutions read one weight, each followed by its own batch-norm statistics.
  Params p = conv_bn_params();
  p.add("bn2.running_mean", {kOut}, 7);
  p.add("bn2.running_var", {kOut}, 8, true);
  Graph g;
  Node* x = g.placeholder("x", image(kIn));
  Node* w = g.get_attr("conv.weight", meta({kOut, kIn, 3, 3}));
  auto conv_bn = [&](const char* mean, const char* var) {
    Node* c = g.call_function(OpRef("torch.conv2d"), {Arg(x), Arg(w), Arg(), Arg(ArgList{1, 1}), Arg(ArgList{1, 1})});
    c->meta.val = image(kOut);
    Node* bn = g.call_function(OpRef("torch.nn.functional.batch_norm"),
                               {Arg(c), Arg(g.get_attr(mean, meta({kOut}))), Arg(g.get_attr(var, meta({kOut})))});
    bn->meta.val = image(kOut);
    return bn;
  };
  Node* a = conv_bn("bn.running_mean", "bn.running_var");
  Node* b2 = conv_bn("bn2.running_mean", "bn2.running_var");
  Node* sum = g.call_function(OpRef("torch.add"), {Arg(a), Arg(b2)});
  sum->meta.val = image(kOut);
  g.output(ArgList{Arg(sum)});
  const Graph original = g.clone();
  CHECK(run_pass(g, "fuse_conv_bn", &p.store).get("fuse_conv_bn") == 2);
  CHECK(p.store.created().size() == 4);
  CHECK(g.find_nodes(OpKind::get_attr).size() == 4);  // the shared weight lost both users
  lint(g);
  runtime::NumericCheck check(original, p.weights);
  const auto report = check.compare(g, runtime::with_created_weights(p.weights, p.store));
  CHECK_MESSAGE(report.ok, report.summary());
}

TEST_CASE("efficient_conv_bn_eval_pass: conv + batch-norm become one conv on weights scaled in the graph") {
  for (const Level level : {Level::torch, Level::aten_legit, Level::aten_native, Level::aten_batch_norm})
    for (const bool conv_bias : {true, false})
      for (const bool affine : {true, false}) {
        INFO("level " << int(level) << ", conv bias " << conv_bias << ", affine " << affine);
        Params p = conv_bn_params(conv_bias, affine);
        Built b = conv_bn_graph(level, conv_bias, affine);
        const Graph original = b.g.clone();
        const Counters c = run_pass(b.g, "efficient_conv_bn_eval_pass", nullptr);
        CHECK(c.get("efficient_conv_bn_eval") == 1);
        CHECK(c.get("pattern_matcher_count") == 1);
        CHECK(count_batch_norms(b.g) == 0);
        const char* conv_op = level == Level::torch ? "torch.nn.functional.conv2d" : "aten.convolution.default";
        REQUIRE(b.g.find_nodes(OpKind::call_function, OpRef(conv_op)).size() == 1);
        const char* rsqrt = level == Level::torch ? "torch.rsqrt" : "aten.rsqrt.default";
        CHECK(b.g.find_nodes(OpKind::call_function, OpRef(rsqrt)).size() == 1);
        for (const Node* n : b.g.nodes())
          if (n->op() == OpKind::call_function) CHECK_MESSAGE(n->meta.val.tensor() != nullptr, n->name());
        lint(b.g);
        runtime::NumericCheck check(original, p.weights);
        const auto report = check.compare(b.g);  // no new weights: the scaling runs in the graph
        CHECK_MESSAGE(report.ok, report.summary());
      }
}

TEST_CASE("efficient_conv_bn_eval_pass rewrites with parameters that are inputs, and leaves a conv read elsewhere") {
  Built lifted = conv_bn_graph(Level::torch, true, true, /*lifted=*/true);
  CHECK(run_pass(lifted.g, "efficient_conv_bn_eval_pass", nullptr).get("efficient_conv_bn_eval") == 1);
  CHECK(count_batch_norms(lifted.g) == 0);
  CHECK(lifted.g.placeholders().size() == 7);  // still inputs, read on every run
  lint(lifted.g);

  Built shared = conv_bn_graph(Level::aten_legit);
  ArgList outs = *shared.g.output_node()->args()[0].list();
  outs.push_back(Arg(shared.conv));
  shared.g.output_node()->set_arg(0, Arg(outs));
  const Graph before = shared.g.clone();
  const Counters c = run_pass(shared.g, "efficient_conv_bn_eval_pass", nullptr);
  CHECK(c.get("efficient_conv_bn_eval") == 0);
  CHECK(c.get("pattern_matcher_count") == 1);  // the batch-norm matched; the handler declined
  CHECK(same_graph(shared.g, before));
}

TEST_CASE("efficient_conv_bn_eval_pass on call_module Conv2d + BatchNorm2d reads the module parameters as get_attr") {
  Params p = conv_bn_params();
  Built b = module_graph();
  CHECK(run_pass(b.g, "efficient_conv_bn_eval_pass", &p.store).get("efficient_conv_bn_eval") == 1);
  CHECK(b.g.find_nodes(OpKind::call_module).empty());
  CHECK(b.g.find_nodes(OpKind::get_attr).size() == 6);
  CHECK(p.store.created().empty());
  lint(b.g);
  runtime::NumericCheck check(module_graph().g, p.weights);  // the module form, through its call_module kernels
  const auto report = check.compare(b.g);
  CHECK_MESSAGE(report.ok, report.summary());
  // Without weights it cannot tell whether the conv module has a bias: left.
  Built m = module_graph();
  CHECK(run_pass(m.g, "efficient_conv_bn_eval_pass", nullptr).get("efficient_conv_bn_eval") == 0);
}

TEST_CASE("io::WeightStore reads a file's weights on first use and names the weights passes create apart") {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_dir("kiln_weight_store_");
  io::write_npy(dir / "w.npy", io::make_weight<float>({2}, {1, 2}));
  io::GraphFile file;
  file.weights = {{"w", "w.npy"}, {"missing", "missing.npy"}};
  file.base_dir = dir;
  io::WeightStore store(file);
  CHECK(store.contains("w"));
  CHECK_FALSE(store.contains("v"));
  CHECK(store.find("v") == nullptr);
  REQUIRE(store.find("w") != nullptr);
  CHECK(store.find("w")->values<float>() == std::vector<float>{1, 2});
  CHECK_THROWS_WITH_AS(store.find("missing"), doctest::Contains("weights['missing']"), io::IoError);
  // A created weight never takes a name the store already has.
  CHECK(store.create("w", io::make_weight<float>({1}, {3})) == "w_1");
  CHECK(store.create("w", io::make_weight<float>({1}, {4})) == "w_2");
  CHECK(store.created() == std::vector<std::string>{"w_1", "w_2"});
  CHECK(store.created_value("w_2").values<float>() == std::vector<float>{4});
  CHECK(store.find("w")->values<float>() == std::vector<float>{1, 2});
  fs::remove_all(dir);
}

#ifdef KILN_OPT_EXE
TEST_CASE("kiln-opt --passes fuse_conv_bn writes the folded weights beside the graph and checks them numerically") {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_dir("kiln_conv_bn_");
  Params p = conv_bn_params();
  Built b = conv_bn_graph(Level::torch);
  io::WeightsTable table;
  fs::create_directories(dir / "in" / "weights");
  for (const auto& [name, t] : p.weights) {
    io::write_npy(dir / "in" / "weights" / (name + ".npy"), t.to_weight());
    table.emplace_back(name, "weights/" + name + ".npy");
  }
  io::write_fx_json(b.g, (dir / "in" / "graph.json").string(), table);
  const std::string in = "'" + (dir / "in" / "graph.json").string() + "'";
  const std::string out = (dir / "out" / "folded.json").string();
  fs::create_directories(dir / "out");
  const test::ToolRun r = test::run_tool(KILN_OPT_EXE, in + " --passes fuse_conv_bn --numeric-check --counters -o '" + out + "'", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("\"fuse_conv_bn\":1") != std::string::npos);
  const io::GraphFile folded = io::read_fx_json(out);
  CHECK(count_batch_norms(folded.graph) == 0);
  const std::string conv_name = b.conv->name();
  const std::string* rel = io::find_weight(folded.weights, conv_name + "_folded_weight");
  REQUIRE(rel != nullptr);
  CHECK(*rel == "folded_weights/" + conv_name + "_folded_weight.npy");
  CHECK(fs::exists(dir / "out" / *rel));
  CHECK(io::find_weight(folded.weights, conv_name + "_folded_bias") != nullptr);
  // The written file runs as the original did.
  runtime::NumericCheck check(b.g, p.weights);
  const auto report = check.compare(folded.graph, runtime::weights_of(folded));
  CHECK_MESSAGE(report.ok, report.summary());
  // With the graph going to stdout there is nowhere to put the new weights: said, not lost.
  const test::ToolRun to_stdout = test::run_tool(KILN_OPT_EXE, in + " --passes fuse_conv_bn", dir);
  CHECK(to_stdout.status == 2);
  CHECK(to_stdout.err.find("give -o FILE") != std::string::npos);
  fs::remove_all(dir);
}
#endif
