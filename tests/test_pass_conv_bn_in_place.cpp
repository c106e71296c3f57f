// fuse_conv_bn folds a conv weight that only its conv reads in that weight's
// own storage (io::WeightStore::take), computes in float32 as PyTorch's
// fuse_conv_bn_weights does, and copies a weight something else still reads.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "tool_test_support.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kIn = 3, kOut = 8;  // 27 weights per output channel: blocks of 16 and a tail

TensorMeta meta(std::vector<Dim> shape) {
  TensorMeta m;
  m.dtype = DType::float32;
  m.shape = std::move(shape);
  return m;
}

// Values spread over a few orders of magnitude, so float and double folds differ.
std::vector<float> values(std::size_t n, float base, bool positive = false) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = base * std::sin(0.7f * static_cast<float>(i) + base) * (1.0f + 0.37f * static_cast<float>(i % 5));
    v[i] = positive ? 0.1f + std::abs(x) : x;
  }
  return v;
}

struct Model {
  fs::path dir;
  io::GraphFile file;  // the weights table of the .npy files in `dir`
  std::vector<std::pair<std::string, io::WeightTensor>> weights;

  explicit Model(const std::string& tag) : dir(test::scratch_dir("kiln_conv_bn_in_place_" + tag)) {
    add("conv.weight", io::make_weight<float>({kOut, kIn, 3, 3}, values(kOut * kIn * 9, 0.3f)));
    add("conv.bias", io::make_weight<float>({kOut}, values(kOut, 0.2f)));
    add("bn.running_mean", io::make_weight<float>({kOut}, values(kOut, 0.5f)));
    add("bn.running_var", io::make_weight<float>({kOut}, values(kOut, 1.7f, true)));
    add("bn.weight", io::make_weight<float>({kOut}, values(kOut, 1.1f)));
    add("bn.bias", io::make_weight<float>({kOut}, values(kOut, 0.9f)));
    file.base_dir = dir;
  }
  ~Model() { fs::remove_all(dir); }
  void add(const std::string& name, io::WeightTensor t) {
    io::write_npy(dir / (name + ".npy"), t);
    file.weights.emplace_back(name, name + ".npy");
    weights.emplace_back(name, std::move(t));
  }
  const io::WeightTensor& original(const std::string& name) const {
    for (const auto& [n, t] : weights)
      if (n == name) return t;
    FAIL("no weight " << name);
    return weights.front().second;
  }
  // The same weights held in memory only: the store cannot take them.
  io::WeightStore in_memory() const {
    io::WeightStore s;
    for (const auto& [n, t] : weights) s.add(n, t);
    return s;
  }
};

// x -> torch.conv2d -> F.batch_norm (eps 1e-3) -> output; `conv_weight_readers`
// get_attrs of conv.weight (one: only the conv reads it; two: the output reads it too).
Graph function_graph(int conv_weight_readers = 1) {
  Graph g;
  Node* x = g.placeholder("x", meta({1, kIn, 5, 5}));
  auto attr = [&](const char* name, std::vector<Dim> shape) { return Arg(g.get_attr(name, meta(std::move(shape)))); };
  const Arg w = attr("conv.weight", {kOut, kIn, 3, 3});
  Node* conv = g.call_function(OpRef("torch.conv2d"), {Arg(x), w, attr("conv.bias", {kOut})});
  conv->meta.val = meta({1, kOut, 3, 3});
  Node* bn = g.call_function(OpRef("torch.nn.functional.batch_norm"),
                             {Arg(conv), attr("bn.running_mean", {kOut}), attr("bn.running_var", {kOut}),
                              attr("bn.weight", {kOut}), attr("bn.bias", {kOut}), Arg(false), Arg(0.1), Arg(1e-3)});
  bn->meta.val = meta({1, kOut, 3, 3});
  ArgList outs{Arg(bn)};
  if (conv_weight_readers == 2) outs.push_back(attr("conv.weight", {kOut, kIn, 3, 3}));
  g.output(outs.size() == 1 ? outs[0] : Arg(outs));
  return g;
}

// The module form: call_module conv (Conv2d) -> call_module bn (BatchNorm2d), `calls` times on one x.
Graph module_graph(int calls = 1) {
  Graph g;
  g.modules().set(ModuleInfo{"conv", "torch.nn.modules.conv.Conv2d",
                             {{"attrs", R"({"stride":[1,1],"padding":[0,0],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})"}}});
  g.modules().set(ModuleInfo{"bn", "torch.nn.modules.batchnorm.BatchNorm2d",
                             {{"attrs", R"({"eps":0.001,"momentum":0.1,"affine":true,"track_running_stats":true})"}}});
  Node* x = g.placeholder("x", meta({1, kIn, 5, 5}));
  ArgList outs;
  for (int i = 0; i < calls; ++i) {
    Node* conv = g.call_module("conv", {Arg(x)});
    conv->meta.val = meta({1, kOut, 3, 3});
    Node* bn = g.call_module("bn", {Arg(conv)});
    bn->meta.val = meta({1, kOut, 3, 3});
    outs.push_back(Arg(bn));
  }
  g.output(outs.size() == 1 ? outs[0] : Arg(outs));
  return g;
}

Counters fuse(Graph& g, io::WeightStore& store) {
  static const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.set_weights(&store);
  pm.run(g, {"fuse_conv_bn"});
  return pm.counters();
}

// PyTorch's fuse_conv_bn_weights on float32 tensors, element by element in its order.
struct Reference {
  std::vector<float> weight, bias;
};
Reference reference(const Model& m, float eps) {
  const auto w = m.original("conv.weight").values<float>(), b = m.original("conv.bias").values<float>();
  const auto mean = m.original("bn.running_mean").values<float>(), var = m.original("bn.running_var").values<float>();
  const auto gamma = m.original("bn.weight").values<float>(), beta = m.original("bn.bias").values<float>();
  Reference r{w, b};
  const std::size_t per_channel = w.size() / kOut;
  for (std::size_t o = 0; o < kOut; ++o) {
    const float rsqrt = 1.0f / std::sqrt(var[o] + eps);
    const float scale = gamma[o] * rsqrt;
    for (std::size_t k = 0; k < per_channel; ++k) r.weight[o * per_channel + k] = w[o * per_channel + k] * scale;
    r.bias[o] = (b[o] - mean[o]) * rsqrt * gamma[o] + beta[o];
  }
  return r;
}

// The folded bias against the reference: (b - mean) * rsqrt * gamma + beta ends
// in a multiply-add the compiler may fuse (GNU mode contracts), one rounding apart.
bool same_bias(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != doctest::Approx(want[i]).epsilon(1e-6)) return false;
  return true;
}

}  // namespace

TEST_CASE("io::WeightStore::take hands out a weight read from its file, which find() reads again") {
  Model m("take");
  io::WeightStore store(m.file);
  const io::WeightTensor* w = store.find("conv.weight");
  REQUIRE(w != nullptr);
  const std::byte* storage = w->bytes.data();
  std::optional<io::WeightTensor> taken = store.take("conv.weight");
  REQUIRE(taken.has_value());
  CHECK(taken->bytes.data() == storage);  // moved, not copied
  CHECK(*taken == m.original("conv.weight"));
  CHECK(store.contains("conv.weight"));
  REQUIRE(store.find("conv.weight") != nullptr);
  CHECK(*store.find("conv.weight") == m.original("conv.weight"));  // from the file again
  // One not read yet comes straight from its file.
  const auto mean = store.take("bn.running_mean");
  REQUIRE(mean.has_value());
  CHECK(*mean == m.original("bn.running_mean"));
  // Weights held only in memory stay: added (also over a file's), created, and unknown names give nullopt.
  store.add("bn.bias", io::make_weight<float>({1}, {5}));
  CHECK_FALSE(store.take("bn.bias").has_value());
  CHECK(store.find("bn.bias")->values<float>() == std::vector<float>{5});
  const std::string made = store.create("made", io::make_weight<float>({1}, {6}));
  CHECK_FALSE(store.take(made).has_value());
  CHECK(store.created_value(made).values<float>() == std::vector<float>{6});
  CHECK_FALSE(store.take("nothing").has_value());
  io::WeightStore memory = m.in_memory();
  CHECK_FALSE(memory.take("conv.weight").has_value());
}

TEST_CASE("fuse_conv_bn scales a conv weight only its conv reads in place, in float32 as PyTorch does") {
  Model m("function");
  const Reference ref = reference(m, 1e-3f);
  io::WeightStore store(m.file);
  for (const auto& [name, rel] : m.file.weights) store.find(name);  // read, as a caller that loaded them
  const std::byte* storage = store.find("conv.weight")->bytes.data();
  Graph g = function_graph();
  CHECK(fuse(g, store).get("fuse_conv_bn") == 1);
  REQUIRE(store.created().size() == 2);
  const io::WeightTensor& weight = store.created_value(store.created()[0]);
  CHECK(weight.bytes.data() == storage);  // the conv weight's own storage, scaled
  CHECK(weight.shape == m.original("conv.weight").shape);
  // Bit for bit PyTorch's float32 fold of the weight (one multiply by a float scale).
  CHECK(weight.values<float>() == ref.weight);
  CHECK(same_bias(store.created_value(store.created()[1]).values<float>(), ref.bias));
  CHECK(g.find_nodes(OpKind::get_attr, OpRef("conv.weight")).empty());
  CHECK(*store.find("conv.weight") == m.original("conv.weight"));  // its file still gives the original

  // Held in memory only, the weight is copied and the fold is the same.
  io::WeightStore memory = m.in_memory();
  const std::byte* kept = memory.find("conv.weight")->bytes.data();
  Graph g2 = function_graph();
  CHECK(fuse(g2, memory).get("fuse_conv_bn") == 1);
  CHECK(memory.created_value(memory.created()[0]).bytes.data() != kept);
  CHECK(memory.created_value(memory.created()[0]).values<float>() == ref.weight);
  CHECK(memory.find("conv.weight")->bytes.data() == kept);
  CHECK(*memory.find("conv.weight") == m.original("conv.weight"));
}

TEST_CASE("fuse_conv_bn copies a conv weight another node still reads") {
  Model m("shared");
  const Reference ref = reference(m, 1e-3f);
  io::WeightStore store(m.file);
  const io::WeightTensor* w = store.find("conv.weight");
  Graph g = function_graph(/*conv_weight_readers=*/2);
  CHECK(fuse(g, store).get("fuse_conv_bn") == 1);
  CHECK(g.find_nodes(OpKind::get_attr, OpRef("conv.weight")).size() == 1);  // the output's
  CHECK(store.find("conv.weight") == w);  // still the same value in memory, untouched
  CHECK(*w == m.original("conv.weight"));
  CHECK(store.created_value(store.created()[0]).values<float>() == ref.weight);
}

TEST_CASE("fuse_conv_bn on modules takes a module's weight when one call reads it, copies it for two") {
  for (const int calls : {1, 2}) {
    INFO(calls << " call(s) of the conv module");
    Model m("module" + std::to_string(calls));
    const Reference ref = reference(m, 1e-3f);
    io::WeightStore store(m.file);
    const io::WeightTensor* w = store.find("conv.weight");
    const std::byte* storage = w->bytes.data();
    Graph g = module_graph(calls);
    CHECK(fuse(g, store).get("fuse_conv_bn") == calls);
    REQUIRE(store.created().size() == 2u * static_cast<std::size_t>(calls));
    for (int i = 0; i < calls; ++i) {
      CHECK(store.created_value(store.created()[2 * i]).values<float>() == ref.weight);
      CHECK(same_bias(store.created_value(store.created()[2 * i + 1]).values<float>(), ref.bias));
    }
    CHECK((store.created_value(store.created()[0]).bytes.data() == storage) == (calls == 1));
    if (calls == 2) CHECK(*w == m.original("conv.weight"));  // both calls read it while folding
    CHECK(*store.find("conv.weight") == m.original("conv.weight"));
  }
}

TEST_CASE("fuse_conv_bn folds float64 parameters in float64") {
  Model m("float64");
  io::WeightStore store;
  for (const auto& [name, t] : m.weights) {
    const auto v = t.values<float>();
    store.add(name, io::make_weight<double>(t.shape, std::vector<double>(v.begin(), v.end())));
  }
  Graph g = function_graph();
  CHECK(fuse(g, store).get("fuse_conv_bn") == 1);
  const io::WeightTensor& weight = store.created_value(store.created()[0]);
  const io::WeightTensor& bias = store.created_value(store.created()[1]);
  CHECK(weight.dtype == DType::float64);
  CHECK(bias.dtype == DType::float64);
  const auto w = store.find("conv.weight")->values<double>(), got = weight.values<double>();
  const auto var = store.find("bn.running_var")->values<double>(), gamma = store.find("bn.weight")->values<double>();
  const std::size_t per_channel = w.size() / kOut;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::size_t o = i / per_channel;
    CHECK(got[i] == w[i] * (gamma[o] * (1.0 / std::sqrt(var[o] + 1e-3))));
  }
}
