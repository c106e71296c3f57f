// repeat (kernels/shape/repeat.hpp) against a naive tiling loop, with leading
// repeats, transposed inputs and both levels; pixel_shuffle, pixel_unshuffle and
// channel_shuffle (kernels/shape/shuffles.hpp) against naive index maps, as
// functions and modules; copy_ of a weight's own values back into it
// (kernels/shape/dead_copy.hpp), as torch 1.13's aten instance norm writes its
// running statistics, and the copy_ forms that are refused.
#include <doctest/doctest.h>

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

void check_repeat(const char* target, const Tensor& x, const Dims& reps, bool varargs = false) {
  CAPTURE(target);
  CAPTURE(runtime::shape_str(x.shape()));
  CAPTURE(runtime::shape_str(reps));
  Graph g;
  Node* xn = g.placeholder("x", meta(dims_of(x.shape())));
  ArgList args{xn};
  if (varargs) for (std::int64_t r : reps) args.push_back(Arg(r));
  else args.push_back(ints(reps));
  g.output(ArgList{varargs ? g.call_method(target, args) : g.call_function(OpRef(target), args)});
  const Tensor got = CompiledGraph::compile(g, {}).run({x})[0];
  // Naive: output index i_d maps to input index i_d mod s_d (input padded with leading 1s).
  const std::size_t lead = reps.size() - x.rank();
  Dims in_shape(lead, 1), out_shape;
  in_shape.insert(in_shape.end(), x.shape().begin(), x.shape().end());
  for (std::size_t d = 0; d < reps.size(); ++d) out_shape.push_back(reps[d] * in_shape[d]);
  REQUIRE(got.shape() == runtime::Shape(out_shape.begin(), out_shape.end()));
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    std::int64_t r = i, src = 0, mul = 1;
    for (std::size_t d = reps.size(); d-- > 0;) {
      src += (r % out_shape[d]) % in_shape[d] * mul;
      mul *= in_shape[d];
      r /= out_shape[d];
    }
    REQUIRE(test::element(got, i) == test::element(x, src));
  }
}

}  // namespace

TEST_CASE("repeat tiles its input, with leading repeats and strided inputs") {
  check_repeat("aten.repeat.default", random_tensor({6}, 1), {2});
  check_repeat("aten.repeat.default", random_tensor({2, 3}, 2), {3, 1, 2});
  check_repeat("aten.repeat.default", random_tensor({4, 3}, 3).transpose(0, 1), {2, 2});
  check_repeat("repeat", random_tensor({2, 1, 3}, 4), {1, 4, 2}, true);
  check_repeat("aten.repeat.default", random_tensor({2, 3}, 5), {0, 2});
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3}));
  g.output(ArgList{g.call_function(OpRef("aten.repeat.default"), {x, ints({2})}, {}, "rep")});
  CHECK(compile_error(g, {}).find("node rep (aten.repeat.default): repeat gives 1 repeats for an input of rank 2") != std::string::npos);
}

TEST_CASE("copy_ of a weight's repeated mean back into it is no step, other copy_ forms are refused") {
  // copy_(alias(stats), mean(view(repeat(stats)))) as torch 1.13's aten instance norm writes it
  enum class Variant { ok, result_read, other_source };
  auto build = [](Variant v) {
    Graph g;
    Node* x = g.placeholder("x", meta({2, 4}));
    Node* k = g.get_attr("stats", meta({4}));
    Node* rep = g.call_function(OpRef("aten.repeat.default"), {k, ints({2})});
    Node* view = g.call_function(OpRef("aten.view.default"), {v == Variant::other_source ? x : rep, ints({2, 4})});
    Node* m = g.call_function(OpRef("aten.mean.dim"), {view, ints({0})});
    Node* al = g.call_function(OpRef("aten.alias.default"), {g.get_attr("stats", meta({4}))});
    Node* cp = g.call_function(OpRef("aten.copy_.default"), {al, m}, {}, "cp");
    Node* y = g.call_function(OpRef("aten.add.Tensor"), {x, v == Variant::result_read ? cp : k});
    g.output(ArgList{y});
    return g;
  };
  const Tensor stats = random_tensor({4}, 6), x = random_tensor({2, 4}, 7);
  const runtime::Weights w{{"stats", stats}};
  const Tensor got = CompiledGraph::compile(build(Variant::ok), w).run({x})[0];
  for (std::int64_t i = 0; i < 8; ++i) CHECK(got.data<float>()[i] == x.data<float>()[i] + stats.data<float>()[i % 4]);
  const std::string prefix = "node cp (aten.copy_.default): copy_ is supported only as instance norm's write of a weight's own values back into it";
  CHECK(compile_error(build(Variant::result_read), w).find(prefix + " (its result is read)") != std::string::npos);
  CHECK(compile_error(build(Variant::other_source), w).find("(its source is not mean(view(repeat(stats))))") != std::string::npos);
  Graph g;
  Node* x0 = g.placeholder("x", meta({4}));
  Node* x1 = g.placeholder("y", meta({4}));
  g.call_function(OpRef("aten.copy_.default"), {x0, x1}, {}, "cp");
  g.output(ArgList{x0});
  CHECK(compile_error(g, {}).find("copy_ writes in place into the graph's input x") != std::string::npos);
}

namespace {

Tensor run_shuffle(const char* target, const Tensor& x, std::int64_t factor) {
  Graph g;
  Node* xn = g.placeholder("x", meta(dims_of(x.shape())));
  g.output(ArgList{g.call_function(OpRef(target), {xn, factor}, {}, "shuf")});
  return CompiledGraph::compile(g, {}).run({x})[0];
}

}  // namespace

TEST_CASE("pixel_shuffle and pixel_unshuffle against naive index maps, with leading dims") {
  const std::int64_t r = 2, B = 3, C = 2, H = 3, W = 4;
  const Tensor x = random_tensor({1, B, C * r * r, H, W}, 11);
  for (const char* t : {"torch.pixel_shuffle", "aten.pixel_shuffle.default"}) {
    const Tensor y = run_shuffle(t, x, r);
    REQUIRE(y.shape() == runtime::Shape{1, B, C, H * r, W * r});
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t h = 0; h < H * r; ++h)
          for (std::int64_t w = 0; w < W * r; ++w)
            REQUIRE(test::at(y, {0, b, c, h, w}) == test::at(x, {0, b, c * r * r + (h % r) * r + w % r, h / r, w / r}));
    // unshuffle undoes it
    for (const char* u : {"torch.pixel_unshuffle", "aten.pixel_unshuffle.default"})
      CHECK(test::max_abs_diff(run_shuffle(u, y, r), x) == 0);
  }
  const Tensor odd = random_tensor({1, 3, 4, 4}, 12);
  CHECK_THROWS_WITH_AS(run_shuffle("torch.pixel_shuffle", odd, 2), doctest::Contains("node shuf (torch.pixel_shuffle): pixel_shuffle: 3 channels do not divide by 4"), Error);
  CHECK_THROWS_WITH_AS(run_shuffle("torch.pixel_unshuffle", odd, 3), doctest::Contains("pixel_unshuffle: [1, 3, 4, 4]'s height and width do not divide by 3"), Error);
}

TEST_CASE("channel_shuffle against a naive index map, as a function and as a module") {
  const Tensor x = random_tensor({2, 6, 3, 2}, 13).transpose(2, 3);
  for (const char* t : {"torch.channel_shuffle", "aten.channel_shuffle.default"}) {
    const Tensor y = run_shuffle(t, x, 3);
    REQUIRE(y.shape() == x.shape());
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      const std::int64_t n = i / 36, c = (i / 6) % 6, s = i % 6;  // out channel c = (c / 3, c % 3) read from (c % 3) * 2 + c / 3
      REQUIRE(test::element(y, i) == test::element(x, n * 36 + ((c % 3) * 2 + c / 3) * 6 + s));
    }
  }
  Graph g;
  g.modules().set(ModuleInfo{"m", "torch.nn.modules.channelshuffle.ChannelShuffle", {{"attrs", R"({"groups": 3})"}}});
  Node* xn = g.placeholder("x", meta({2, 6, 2, 3}));
  g.output(ArgList{g.call_module("m", {Arg(xn)})});
  CHECK(test::max_abs_diff(CompiledGraph::compile(g, {}).run({x})[0], run_shuffle("torch.channel_shuffle", x, 3)) == 0);
  CHECK_THROWS_WITH_AS(run_shuffle("torch.channel_shuffle", x, 4), doctest::Contains("channel_shuffle: the channels of [2, 6, 2, 3] do not split into 4 groups"), Error);
}

TEST_CASE("repeat_interleave.Tensor of counts known when lowering writes each index its count of times, against a loop") {
  // As mvit_v1_b's aten graph writes it: counts from empty + fill_, expanded, then index_select.
  Graph g;
  Node* e = g.call_function(OpRef("aten.empty.memory_format"), {ints({1})}, {{"dtype", Arg(DType::int64)}});
  Node* f = g.call_function(OpRef("aten.fill_.Scalar"), {e, std::int64_t{3}});
  Node* ex = g.call_function(OpRef("aten.expand.default"), {f, ints({4})});
  Node* w = g.get_attr("w", meta({4}, DType::int64));
  Node* ri = g.call_function(OpRef("aten.repeat_interleave.Tensor"), {ex});
  Node* rw = g.call_function(OpRef("aten.repeat_interleave.Tensor"), {w}, {{"output_size", Arg(std::int64_t{6})}});
  Node* x = g.placeholder("x", meta({4, 2}));
  g.output(ArgList{g.call_function(OpRef("aten.index_select.default"), {x, std::int64_t{0}, ri}),
                   g.call_function(OpRef("aten.add.Tensor"), {rw, std::int64_t{0}})});
  const std::vector<std::int64_t> counts{2, 0, 3, 1};
  const Tensor xs = random_tensor({4, 2}, 41);
  const auto out = CompiledGraph::compile(g, {{"w", Tensor::from_values<std::int64_t>({4}, counts)}}).run({xs});
  REQUIRE(out[0].shape() == runtime::Shape{12, 2});
  for (std::int64_t r = 0; r < 12; ++r)
    for (std::int64_t c = 0; c < 2; ++c) CHECK(test::at(out[0], {r, c}) == test::at(xs, {r / 3, c}));
  std::vector<std::int64_t> want;
  for (std::size_t k = 0; k < counts.size(); ++k)
    for (std::int64_t n = 0; n < counts[k]; ++n) want.push_back(static_cast<std::int64_t>(k));
  REQUIRE(out[1].numel() == 6);
  for (std::int64_t i = 0; i < 6; ++i) CHECK(out[1].data<std::int64_t>()[i] == want[static_cast<std::size_t>(i)]);
  Graph bad;
  Node* r = bad.placeholder("r", meta({3}, DType::int64));
  bad.output(ArgList{bad.call_function(OpRef("aten.repeat_interleave.Tensor"), {r}, {}, "ri")});
  CHECK(compile_error(bad).find("node ri (aten.repeat_interleave.Tensor): repeats is known only when the graph runs") != std::string::npos);
  Graph size;
  Node* ws = size.get_attr("w", meta({4}, DType::int64));
  size.output(ArgList{size.call_function(OpRef("aten.repeat_interleave.Tensor"), {ws}, {{"output_size", Arg(std::int64_t{5})}}, "ri")});
  CHECK(compile_error(size, {{"w", Tensor::from_values<std::int64_t>({4}, counts)}}).find("output_size 5 is not the repeats' sum 6") != std::string::npos);
}
