// CompiledGraph: lowering, the buffer plan, running, inputs checked, errors that name nodes.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <thread>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {
TensorMeta f32(std::vector<Dim> shape) { return test::meta(std::move(shape)); }
using test::random_tensor;
}  // namespace

TEST_CASE("a chain of relus runs and gives max(x, 0)") {
  Graph g;
  Node* x = g.placeholder("x", f32({3, 5}));
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::relu, {a});
  g.output(ArgList{b});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_inputs() == 1);
  CHECK(cg.num_outputs() == 1);
  CHECK(cg.num_steps() == 2);
  Tensor in = random_tensor({3, 5}, 1);
  auto out = cg.run({in});
  REQUIRE(out.size() == 1);
  CHECK(out[0].shape() == runtime::Shape{3, 5});
  for (std::int64_t i = 0; i < 15; ++i) CHECK(out[0].data<float>()[i] == std::max(in.data<float>()[i], 0.0f));
}

TEST_CASE("a non-contiguous input is read through its strides") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 3}));
  g.output(ArgList{g.call_function(aten::relu, {x})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor base = random_tensor({3, 4}, 2);
  Tensor xt = base.transpose(0, 1);
  REQUIRE_FALSE(xt.is_contiguous());
  auto out = cg.run({xt});
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      const std::int64_t idx[2] = {i, j};
      CHECK(out[0].at<float>(idx) == std::max(base.data<float>()[j * 4 + i], 0.0f));
    }
}

TEST_CASE("buffers whose lifetimes do not overlap share the arena") {
  Graph g;
  Node* x = g.placeholder("x", f32({256}));
  Node* cur = x;
  for (int i = 0; i < 10; ++i) cur = g.call_function(aten::relu, {cur});
  g.output(ArgList{cur});
  auto cg = CompiledGraph::compile(g, {});
  // 10 buffers of 1 KiB; at most two are alive at once.
  CHECK(cg.arena_bytes() == 2048);
  CHECK(cg.peak_live_bytes() == 2048);
}

TEST_CASE("wrong inputs are reported naming the input") {
  Graph g;
  Node* x = g.placeholder("x", f32({2, 2}));
  g.output(ArgList{g.call_function(aten::relu, {x})});
  auto cg = CompiledGraph::compile(g, {});
  CHECK_THROWS_WITH_AS(cg.run({}), "the graph takes 1 input (x), 0 given", runtime::InputError);
  CHECK_THROWS_WITH_AS(cg.run({Tensor::empty({2, 3})}), "input x: expected float32 [2, 2], got float32 [2, 3]",
                       runtime::InputError);
  CHECK_THROWS_WITH_AS(cg.run({Tensor::empty({2, 2}, DType::int64)}),
                       "input x: expected float32 [2, 2], got int64 [2, 2]", runtime::InputError);
}

TEST_CASE("every node with no kernel is reported at once") {
  Graph g;
  Node* x = g.placeholder("x", f32({2, 2}));
  Node* a = g.call_function(OpRef("myns.frob.default"), {x}, {}, "frob");
  Node* b = g.call_method("frobnicate", {a}, {}, "fr2");
  Node* c = g.call_function(OpRef("myns.frob.default"), {b}, {}, "frob2");
  g.output(ArgList{c});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       "3 nodes have no kernel:\n  myns.frob.default: frob, frob2\n  Tensor.frobnicate: fr2",
                       runtime::CompileError);
}

TEST_CASE("an input without a static shape in its meta is refused naming it") {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(ArgList{g.call_function(aten::relu, {x})});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                       doctest::Contains("node x (x): the input needs meta.val"), runtime::CompileError);
}

TEST_CASE("a missing weight is refused naming the attribute") {
  Graph g;
  Node* w = g.get_attr("fc.weight", f32({2}));
  g.output(ArgList{g.call_function(aten::relu, {w})});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}), doctest::Contains("no weight named 'fc.weight'"),
                       runtime::CompileError);
}

TEST_CASE("a placeholder bound to a weight is that weight: a constant, not an input") {
  // torch.export's form: lifted parameters first, then the model's input.
  Graph g;
  Node* w = g.placeholder("p_fc_weight", f32({3, 4}));
  Node* b = g.placeholder("p_fc_bias", f32({3}));
  Node* x = g.placeholder("x", f32({2, 4}));
  Node* wt = g.call_function(aten::t, {w});
  g.output(ArgList{g.call_function(aten::addmm, {b, x, wt})});
  const Tensor tw = random_tensor({3, 4}, 11), tb = random_tensor({3}, 12), tx = random_tensor({2, 4}, 13);
  const auto cg = CompiledGraph::compile(g, {{"p_fc_weight", tw}, {"p_fc_bias", tb}});
  REQUIRE(cg.num_inputs() == 1);
  CHECK(cg.input_name(0) == "x");
  const auto out = cg.run({tx});
  double worst = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double ref = tb.data<float>()[j];
      for (int k = 0; k < 4; ++k) ref += double(tx.data<float>()[i * 4 + k]) * tw.data<float>()[j * 4 + k];
      worst = std::max(worst, std::abs(ref - out[0].data<float>()[i * 3 + j]));
    }
  CHECK(worst < 1e-5);
  // Passing the weights as inputs too is a count error that says what the inputs are.
  CHECK_THROWS_WITH_AS(cg.run({tw, tb, tx}), doctest::Contains("the graph takes 1 input (x), 3 given"),
                       runtime::InputError);
  // Unbound, the same placeholders are inputs again.
  CHECK(CompiledGraph::compile(g, {}).num_inputs() == 3);
}

TEST_CASE("a weight bound to a placeholder must have the placeholder's shape") {
  Graph g;
  Node* w = g.placeholder("p_w", f32({3}));
  g.output(ArgList{g.call_function(aten::relu, {w})});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {{"p_w", random_tensor({4}, 1)}}),
                       doctest::Contains("the weight bound to it is float32 [4], but meta.val says float32 [3]"),
                       runtime::CompileError);
}

TEST_CASE("a kernel's result and a bound weight are checked against meta.val, a symbolic dim matching any size") {
  SUBCASE("a kernel's result of another shape") {
    Graph g;
    Node* x = g.placeholder("x", f32({2, 3}));
    Node* r = g.call_function(aten::relu, {x}, {}, "r");
    r->meta.val = f32({2, 4});
    g.output(ArgList{r});
    CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {}),
                         doctest::Contains("node r (aten.relu.default): the kernel makes float32 [2, 3], but meta.val says "
                                           "float32 [2, 4]"),
                         runtime::CompileError);
    r->meta.val = f32({2, Dim(SymInt{"s0"})});
    CHECK(CompiledGraph::compile(g, {}).num_steps() == 1);
  }
  SUBCASE("a bound weight of another rank, or matching a symbolic dim") {
    Graph g;
    Node* w = g.placeholder("p_w", f32({3}));
    g.output(ArgList{g.call_function(aten::relu, {w})});
    CHECK_THROWS_WITH_AS(CompiledGraph::compile(g, {{"p_w", random_tensor({3, 1}, 1)}}),
                         doctest::Contains("node p_w (p_w): the weight bound to it is float32 [3, 1], but meta.val says "
                                           "float32 [3]"),
                         runtime::CompileError);
    w->meta.val = f32({Dim(SymInt{"s0"})});
    CHECK(CompiledGraph::compile(g, {{"p_w", random_tensor({4}, 1)}}).num_inputs() == 0);
  }
}

TEST_CASE("two threads run one compiled graph at once with the same results") {
  Graph g;
  Node* x = g.placeholder("x", f32({64, 64}));
  Node* cur = x;
  for (int i = 0; i < 4; ++i) cur = g.call_function(aten::relu, {cur});
  g.output(ArgList{cur});
  const auto cg = CompiledGraph::compile(g, {});
  Tensor in = random_tensor({64, 64}, 3);
  const auto expect = cg.run({in});
  std::vector<int> bad(2, 0);
  auto work = [&](int k) {
    auto ctx = cg.make_context(1);
    for (int r = 0; r < 50; ++r) {
      const auto& out = ctx.run({in});
      for (std::int64_t i = 0; i < out[0].numel(); ++i) bad[k] += out[0].data<float>()[i] != expect[0].data<float>()[i];
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  CHECK(bad[0] == 0);
  CHECK(bad[1] == 0);
}

TEST_CASE("a oneDNN step: mm of a transposed view against a naive loop") {
  Graph g;
  Node* a = g.placeholder("a", f32({7, 33}));
  Node* b = g.placeholder("b", f32({33, 5}));
  g.output(ArgList{g.call_function(aten::mm, {a, b})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor ta = random_tensor({7, 33}, 4);
  Tensor tb = random_tensor({5, 33}, 5).transpose(0, 1);
  auto out = cg.run({ta, tb});
  double worst = 0;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) {
      double ref = 0;
      for (int k = 0; k < 33; ++k) ref += double(ta.data<float>()[i * 33 + k]) * tb.data<float>()[j * 33 + k];
      worst = std::max(worst, std::abs(ref - out[0].data<float>()[i * 5 + j]));
    }
  CHECK(worst < 1e-4);
}

TEST_CASE("equal weights under different names are one constant") {
  Graph g;
  Node* x = g.placeholder("x", f32({4}));
  Node* w1 = g.get_attr("a.weight", f32({4}));
  Node* w2 = g.get_attr("b.weight", f32({4}));
  Node* w3 = g.get_attr("c.weight", f32({4}));
  auto add = [&](Node* w) { return g.call_function(aten::add_Tensor, {x, w}); };
  g.output(ArgList{add(w1), add(w2), add(w3)});
  const std::vector<float> v{1, -2, 3, -4}, u{1, -2, 3, 5}, zero{0, 0, 0, 0};
  runtime::Weights w{{"a.weight", Tensor::from_values<float>({4}, v)},
                     {"b.weight", Tensor::from_values<float>({4}, v)},
                     {"c.weight", Tensor::from_values<float>({4}, u)}};
  auto cg = CompiledGraph::compile(g, w);
  CHECK(cg.constant_bytes() == 32);  // two distinct weights of 16 bytes
  auto out = cg.run({Tensor::from_values<float>({4}, zero)});
  CHECK(out[1].data<float>()[3] == -4.0f);
  CHECK(out[2].data<float>()[3] == 5.0f);
}

TEST_CASE("channels-last is chosen as Inductor's decide_layout_opt rules say") {
  // One convolution of weight `weight` on a [1, C, 8, 8] input (output meta given, so flops are known).
  auto conv_graph = [](std::vector<Dim> weight, std::int64_t groups, int extra_nodes) {
    Graph g;
    const std::int64_t c = std::get<std::int64_t>(weight[1]) * groups;
    Node* x = g.placeholder("x", f32({1, c, 8, 8}));
    Node* w = g.get_attr("w", f32(weight));
    Node* conv = g.call_function(aten::convolution, {x, w, nullptr, ArgList{1, 1}, ArgList{1, 1}, ArgList{1, 1}, false,
                                                     ArgList{0, 0}, groups});
    conv->meta.val = f32({1, weight[0], 8, 8});
    Node* cur = conv;
    for (int i = 0; i < extra_nodes; ++i) cur = g.call_function(aten::relu, {cur});
    g.output(ArgList{cur});
    return g;
  };
  using runtime::decide_channels_last;
  // Inference: flops weighted by Inductor's measured cost of each class.
  CHECK(decide_channels_last(conv_graph({128, 128, 3, 3}, 1, 0)));        // default: 0.823
  CHECK_FALSE(decide_channels_last(conv_graph({128, 64, 3, 3}, 2, 0)));   // grouped: 1.358
  CHECK(decide_channels_last(conv_graph({128, 1, 3, 3}, 128, 0)));        // depthwise is small, not grouped
  CHECK(decide_channels_last(conv_graph({64, 128, 3, 3}, 1, 0)));         // in-out: 0.725
  CHECK(decide_channels_last(conv_graph({64, 64, 3, 3}, 1, 0)));          // small: 0.783
  CHECK_FALSE(decide_channels_last(conv_graph({128, 128, 3, 3}, 1, 300)));  // >= 300 nodes per conv
  // Training: any grouped or in-out convolution, or only small ones, say no.
  CHECK(decide_channels_last(conv_graph({128, 128, 3, 3}, 1, 0), {}, false));
  CHECK_FALSE(decide_channels_last(conv_graph({64, 128, 3, 3}, 1, 0), {}, false));
  CHECK(decide_channels_last(conv_graph({64, 128, 1, 1}, 1, 0), {}, false));  // in-out but 1x1
  CHECK_FALSE(decide_channels_last(conv_graph({64, 64, 3, 3}, 1, 0), {}, false));
  Graph none;
  none.output(ArgList{none.call_function(aten::relu, {none.placeholder("x", f32({2}))})});
  CHECK_FALSE(decide_channels_last(none));
  // A graph of mostly grouped flops stays row-major; mostly default ones go channels-last.
  Graph mix;
  Node* x = mix.placeholder("x", f32({1, 128, 8, 8}));
  Node* a = mix.call_function(aten::convolution, {x, mix.get_attr("wa", f32({128, 64, 3, 3})), nullptr, ArgList{1, 1}, ArgList{1, 1},
                                                  ArgList{1, 1}, false, ArgList{0, 0}, 2});
  a->meta.val = f32({1, 128, 8, 8});
  Node* b = mix.call_function(aten::convolution, {a, mix.get_attr("wb", f32({128, 128, 1, 1})), nullptr, ArgList{1, 1}, ArgList{0, 0},
                                                  ArgList{1, 1}, false, ArgList{0, 0}, 1});
  b->meta.val = f32({1, 128, 8, 8});
  mix.output(ArgList{b});
  // grouped 128*64*9 = 73728 per pixel at 1.358, default 128*128 = 16384 at 0.823: weighted > total.
  CHECK_FALSE(decide_channels_last(mix));
}

TEST_CASE("dense_like keeps a channels-last order and falls back to row-major") {
  const auto cl = runtime::channels_last({2, 3, 4, 5});
  CHECK(cl.strides == runtime::Shape{60, 1, 15, 3});
  CHECK(runtime::dense_like(cl, DType::float32).strides == cl.strides);
  auto sliced = runtime::sliced(runtime::Layout::contiguous({4, 6}), 1, 0, 3).layout;  // gaps: row-major
  CHECK(runtime::dense_like(sliced, DType::float32).strides == runtime::Shape{3, 1});
  auto t = runtime::transposed(runtime::Layout::contiguous({4, 6}), 0, 1);
  CHECK(runtime::dense_like(t, DType::float32).strides == runtime::Shape{1, 6});
}

TEST_CASE("two threads run one compiled graph with oneDNN steps, each with its own arena") {
  Graph g;
  Node* a = g.placeholder("a", f32({48, 64}));
  Node* b = g.placeholder("b", f32({64, 32}));
  Node* c = g.placeholder("c", f32({32, 16}));
  g.output(ArgList{g.call_function(aten::mm, {g.call_function(aten::relu, {g.call_function(aten::mm, {a, b})}), c})});
  const auto cg = CompiledGraph::compile(g, {});
  const Tensor ta = random_tensor({48, 64}, 11), tb = random_tensor({64, 32}, 12), tc = random_tensor({32, 16}, 13);
  const Tensor ua = random_tensor({48, 64}, 21);
  const auto expect_t = cg.run({ta, tb, tc});
  const auto expect_u = cg.run({ua, tb, tc});
  std::vector<int> bad(2, 0);
  auto work = [&](int k) {
    auto ctx = cg.make_context(1);
    const Tensor& x = k == 0 ? ta : ua;
    const auto& want = k == 0 ? expect_t : expect_u;
    for (int r = 0; r < 100; ++r) {
      const auto& out = ctx.run({x, tb, tc});
      for (std::int64_t i = 0; i < out[0].numel(); ++i) bad[k] += out[0].data<float>()[i] != want[0].data<float>()[i];
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  CHECK(bad[0] == 0);
  CHECK(bad[1] == 0);
}

TEST_CASE("steps that read only constants run once when lowering: stacked weights become a constant") {
  Graph g;
  Node* x = g.placeholder("x", f32({3, 4}));
  Node* w1 = g.get_attr("w1", f32({4, 4}));
  Node* w2 = g.get_attr("w2", f32({4, 4}));
  Node* stacked = g.call_function(aten::stack, {ArgList{w1, w2}});             // [2, 4, 4]: folded
  Node* first = g.call_function(aten::select_int, {stacked, 0, 1});             // a view of it: w2
  Node* y = g.call_function(aten::mm, {g.call_function(aten::relu, {x}), first});
  g.output(ArgList{y});
  const Tensor tw1 = random_tensor({4, 4}, 51), tw2 = random_tensor({4, 4}, 52), tx = random_tensor({3, 4}, 53);
  auto cg = CompiledGraph::compile(g, {{"w1", tw1}, {"w2", tw2}});
  CHECK(cg.num_steps() == 2);  // relu and mm; the stack ran when lowering
  auto out = cg.run({tx});
  double worst = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double ref = 0;
      for (int k = 0; k < 4; ++k) ref += std::max(0.0f, tx.data<float>()[i * 4 + k]) * double(tw2.data<float>()[k * 4 + j]);
      worst = std::max(worst, std::abs(ref - out[0].data<float>()[i * 4 + j]));
    }
  CHECK(worst < 1e-5);
}

TEST_CASE("thread counts beyond the CPUs this process may run on are capped, not started") {
  Graph g;
  Node* x = g.placeholder("x", f32({3, 5}));
  g.output(ArgList{g.call_function(aten::relu, {x})});
  runtime::CompileOptions options;
  options.threads = 100000;
  auto cg = CompiledGraph::compile(g, {}, options);
  const int cpus = static_cast<int>(available_cpus());
  auto ctx = cg.make_context();
  CHECK(ctx.threads() == cpus);
  auto big = cg.make_context(1 << 30);
  CHECK(big.threads() == cpus);
  big.set_threads(-3);
  CHECK(big.threads() == 1);
  big.set_threads(1 << 20);
  CHECK(big.threads() == cpus);
  const Tensor tx = random_tensor({3, 5}, 5);
  const auto& out = big.run({tx});
  int bad = 0;
  for (int i = 0; i < 15; ++i) bad += out[0].data<float>()[i] != std::max(tx.data<float>()[i], 0.0f);
  CHECK(bad == 0);
}

TEST_CASE("an arena too large for the machine is an OutOfMemory error naming the bytes and the largest node") {
  Graph g;
  Node* x = g.placeholder("x", f32({1, 1}));
  Node* wide = g.call_function(aten::expand, {x, ArgList{1 << 20, 1 << 20}});
  g.output(ArgList{g.call_function(aten::sum_dim_IntList, {g.call_function(aten::relu, {wide}, {}, "huge"), ArgList{1}})});
  const auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.arena_bytes() >= (std::size_t{1} << 42));
  const std::string want = "cannot allocate the arena: " + std::to_string(cg.arena_bytes()) +
                           " bytes; the largest buffer in the arena is node huge's float32 [1048576, 1048576] (4398046511104 bytes)";
  CHECK_THROWS_WITH_AS(cg.make_context(), doctest::Contains(want.c_str()), runtime::OutOfMemory);
}

TEST_CASE("take_weights reads each weight once: what passes read comes from memory, created ones come along") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_take_weights_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  io::write_npy(dir / "a.npy", io::make_weight<float>({2}, {1.5f, -2.0f}));
  io::write_npy(dir / "b.npy", io::make_weight<float>({3}, {4.0f, 5.0f, 6.0f}));
  io::GraphFile file;
  file.weights = {{"a", "a.npy"}, {"b", "b.npy"}};
  file.base_dir = dir;
  io::WeightStore store(file);
  REQUIRE(store.find("a") != nullptr);  // a pass read "a"
  std::filesystem::remove(dir / "a.npy");  // so reading it again would fail
  const std::string c = store.create("a", io::make_weight<float>({1}, {7.0f}));  // and made one
  CHECK(c == "a_1");
  const runtime::Weights w = runtime::take_weights(store);
  REQUIRE(w.size() == 3);
  CHECK(w.at("a").data<float>()[1] == -2.0f);
  CHECK(w.at("b").data<float>()[2] == 6.0f);
  CHECK(w.at("a_1").data<float>()[0] == 7.0f);
  CHECK_THROWS_WITH_AS(store.find("a"), doctest::Contains("a.npy"), Error);  // taken: the store would read the file again
  std::filesystem::remove_all(dir);
}
