// fuse_conv_bn's fold split over threads gives the one-thread fold's bits, the
// same counters and the same graph; run_shares hands a worker's error to the
// caller; a small model starts no thread.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/parallel_shares.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/pre_grad/fuse_conv_bn.hpp"
#include "kiln/passes/pre_grad_pipeline.hpp"
#include "tool_test_support.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

TensorMeta meta(std::vector<Dim> shape) {
  TensorMeta m;
  m.dtype = DType::float32;
  m.shape = std::move(shape);
  return m;
}

std::vector<float> values(std::size_t n, float base, bool positive = false) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = base * std::sin(0.37f * static_cast<float>(i) + base) * (1.0f + 0.29f * static_cast<float>(i % 7));
    v[i] = positive ? 0.05f + std::abs(x) : x;
  }
  return v;
}

// A chain of conv + batch-norm pairs with odd channel counts, alternately as
// call_module pairs and as torch.conv2d + F.batch_norm, so a module pair's
// input is the batch-norm of the pair before it; weights in .npy files.
struct Chain {
  static constexpr std::int64_t kChannels[] = {3, 5, 7, 3, 6, 11};  // in of pair 0, then each pair's out
  static constexpr int kPairs = 5;
  fs::path dir;
  io::GraphFile file;

  explicit Chain(const std::string& tag) : dir(test::scratch_dir("kiln_conv_bn_threads_" + tag)) {
    file.base_dir = dir;
    for (int i = 0; i < kPairs; ++i) {
      const std::int64_t in = kChannels[i], out = kChannels[i + 1];
      const std::string c = conv_path(i), b = bn_path(i);
      const float f = 0.3f + 0.1f * static_cast<float>(i);
      add(c + ".weight", io::make_weight<float>({out, in, 3, 3}, values(static_cast<std::size_t>(out * in * 9), f)));
      add(c + ".bias", io::make_weight<float>({out}, values(static_cast<std::size_t>(out), f + 0.2f)));
      add(b + ".running_mean", io::make_weight<float>({out}, values(static_cast<std::size_t>(out), f + 0.5f)));
      add(b + ".running_var", io::make_weight<float>({out}, values(static_cast<std::size_t>(out), f + 1.7f, true)));
      add(b + ".weight", io::make_weight<float>({out}, values(static_cast<std::size_t>(out), f + 1.1f)));
      add(b + ".bias", io::make_weight<float>({out}, values(static_cast<std::size_t>(out), f + 0.9f)));
    }
  }
  ~Chain() { fs::remove_all(dir); }
  static std::string conv_path(int i) { return "conv" + std::to_string(i); }
  static std::string bn_path(int i) { return "bn" + std::to_string(i); }
  void add(const std::string& name, const io::WeightTensor& t) {
    io::write_npy(dir / (name + ".npy"), t);
    file.weights.emplace_back(name, name + ".npy");
  }
  // A store over the files with every weight read, as a caller that loaded the model.
  io::WeightStore store() const {
    io::WeightStore s(file);
    for (const auto& [name, rel] : file.weights) s.find(name);
    return s;
  }

  Graph graph() const {
    Graph g;
    Node* x = g.placeholder("x", meta({1, kChannels[0], 20, 20}));
    for (int i = 0; i < kPairs; ++i) {
      const std::int64_t in = kChannels[i], out = kChannels[i + 1];
      const std::string c = conv_path(i), b = bn_path(i);
      const std::int64_t side = 20 - 2 * (i + 1);
      Node* conv;
      Node* bn;
      if (i % 2 == 0) {
        g.modules().set(ModuleInfo{c, "torch.nn.modules.conv.Conv2d",
                                   {{"attrs", R"({"stride":[1,1],"padding":[0,0],"dilation":[1,1],"groups":1,"padding_mode":"zeros"})"}}});
        g.modules().set(ModuleInfo{b, "torch.nn.modules.batchnorm.BatchNorm2d",
                                   {{"attrs", R"({"eps":0.001,"momentum":0.1,"affine":true,"track_running_stats":true})"}}});
        conv = g.call_module(c, {Arg(x)});
        conv->meta.val = meta({1, out, side, side});
        bn = g.call_module(b, {Arg(conv)});
      } else {
        auto attr = [&](const std::string& name, std::vector<Dim> shape) {
          return Arg(g.get_attr(name, meta(std::move(shape))));
        };
        conv = g.call_function(OpRef("torch.conv2d"),
                               {Arg(x), attr(c + ".weight", {out, in, 3, 3}), attr(c + ".bias", {out})});
        conv->meta.val = meta({1, out, side, side});
        bn = g.call_function(OpRef("torch.nn.functional.batch_norm"),
                             {Arg(conv), attr(b + ".running_mean", {out}), attr(b + ".running_var", {out}),
                              attr(b + ".weight", {out}), attr(b + ".bias", {out}), Arg(false), Arg(0.1), Arg(1e-5)});
      }
      bn->meta.val = meta({1, out, side, side});
      x = bn;
    }
    g.output(Arg(x));
    return g;
  }
};

struct Folded {
  Graph graph;
  Counters counters;
  std::vector<std::pair<std::string, io::WeightTensor>> created;
};

Folded fold(const Chain& chain, const nlohmann::json& options) {
  static const PassRegistry registry = default_pass_registry();
  Folded out{chain.graph(), {}, {}};
  io::WeightStore store = chain.store();
  PassManager pm(registry);
  pm.set_weights(&store);
  pm.set_options({{"fuse_conv_bn", options}});
  pm.run(out.graph, {"fuse_conv_bn"});
  out.counters = pm.counters();
  for (const std::string& name : store.created()) out.created.emplace_back(name, store.created_value(name));
  return out;
}

// Bit for bit: the bytes, not the values (a NaN or -0 would compare wrongly as floats).
bool same_bits(const std::vector<std::pair<std::string, io::WeightTensor>>& a,
               const std::vector<std::pair<std::string, io::WeightTensor>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.dtype != b[i].second.dtype || a[i].second.shape != b[i].second.shape ||
        a[i].second.bytes != b[i].second.bytes)
      return false;
  return true;
}

}  // namespace

TEST_CASE("fuse_conv_bn over 2, 3, 4 and 7 threads gives the one-thread fold's bits, counters and graph") {
  Chain chain("bits");
  const Folded one = fold(chain, {{"threads", 1}});
  REQUIRE(one.counters.get("fuse_conv_bn") == Chain::kPairs);
  REQUIRE(one.created.size() == 2u * Chain::kPairs);
  lint(one.graph);
  // The folded weights differ from the originals (the fold did something to compare).
  CHECK(one.created[0].second.bytes != io::WeightStore(chain.file).find("conv0.weight")->bytes);
  // min_bytes_per_thread 1: every share gets a thread, cutting weights mid-row
  // and shares across weights (the whole chain is ~7 KB).
  for (const int threads : {2, 3, 4, 7}) {
    INFO(threads << " threads");
    const Folded many = fold(chain, {{"threads", threads}, {"min_bytes_per_thread", 1}});
    CHECK(same_bits(many.created, one.created));
    CHECK(many.counters.to_json() == one.counters.to_json());
    CHECK(to_string(many.graph) == to_string(one.graph));
    lint(many.graph);
  }
}

TEST_CASE("fuse_conv_bn on module pairs in a chain gives each functional conv the previous pair's output") {
  Chain chain("chain");
  const Folded f = fold(chain, {{"threads", 3}, {"min_bytes_per_thread", 1}});
  lint(f.graph);
  CHECK(f.graph.find_nodes(OpKind::call_module).empty());
  const auto convs = f.graph.find_nodes(OpKind::call_function, OpRef("torch.nn.functional.conv2d"));
  const auto functional = f.graph.find_nodes(OpKind::call_function, OpRef("torch.conv2d"));
  REQUIRE(convs.size() == 3);
  REQUIRE(functional.size() == 2);
  // pair 2 (a module pair) reads pair 1's folded torch.conv2d, pair 4 reads pair 3's.
  CHECK(convs[1]->args()[0].node() == functional[0]);
  CHECK(convs[2]->args()[0].node() == functional[1]);
}

TEST_CASE("fuse_conv_bn options: threads and min_bytes_per_thread must be integers >= 1") {
  Chain chain("options");
  for (const nlohmann::json& bad : {nlohmann::json{{"threads", 0}}, nlohmann::json{{"threads", "2"}},
                                    nlohmann::json{{"min_bytes_per_thread", -1}}}) {
    INFO(bad.dump());
    CHECK_THROWS_WITH_AS(fold(chain, bad), doctest::Contains("fuse_conv_bn"), Error);
  }
  CHECK_THROWS_AS(fold(chain, {{"thread", 2}}), Error);  // unknown key
}

TEST_CASE("the pre_grad pipeline hands its fuse_conv_bn options to the pass") {
  const auto steps = pre_grad_steps({{"freezing", true}, {"fuse_conv_bn", {{"threads", 2}}}});
  bool found = false;
  for (const PipelineStep& s : steps)
    if (s.pass == "fuse_conv_bn") {
      found = true;
      CHECK(s.options == nlohmann::json{{"threads", 2}});
    }
  CHECK(found);
  CHECK_THROWS_AS(pre_grad_steps({{"freezing", true}, {"fuse_conv_bn", 2}}), Error);
}

TEST_CASE("fuse_conv_bn's fold starts a thread only for min_bytes_per_thread of weights per thread") {
  namespace d = pre_grad::conv_bn_detail;
  const d::FoldThreads t{8, 1 << 20};
  CHECK(d::share_count(7000, t) == 1);             // a small model: no thread
  CHECK(d::share_count((1 << 20) * 2 - 1, t) == 1);
  CHECK(d::share_count((1 << 20) * 3, t) == 3);
  CHECK(d::share_count(94'000'000, t) == 8);       // ResNet-50's conv weights
  CHECK(d::share_count(94'000'000, d::FoldThreads{1, 1}) == 1);
  CHECK(d::share_count(0, t) == 1);
  // The default is the CPUs this process may run on.
  CHECK(d::fold_threads(nlohmann::json::object()).threads == available_cpus());
  CHECK(available_cpus() >= 1);
}

TEST_CASE("run_shares runs every share and hands the lowest failing share's error to the caller") {
  std::atomic<int> ran{0};
  std::vector<int> seen(6, 0);
  CHECK_THROWS_WITH_AS(run_shares(6,
                                  [&](std::size_t i) {
                                    seen[i] = 1;
                                    ++ran;
                                    if (i == 4) throw std::runtime_error("share 4");
                                    if (i == 2) throw std::runtime_error("share 2");
                                  }),
                       "share 2", std::runtime_error);
  CHECK(ran == 6);
  CHECK(seen == std::vector<int>(6, 1));
  // One share runs on the caller.
  const auto caller = std::this_thread::get_id();
  std::thread::id where;
  run_shares(1, [&](std::size_t) { where = std::this_thread::get_id(); });
  CHECK(where == caller);
}
