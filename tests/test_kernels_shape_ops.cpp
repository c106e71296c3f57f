// Shape and view kernels: results read element by element and compared with
// index arithmetic written out here; views must cost no step.
#include <doctest/doctest.h>

#include <memory>
#include <tuple>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::at;
using test::random_tensor;

namespace {
// x[i, j, k] of a row-major [A, B, C] tensor.
float at3(const Tensor& x, std::int64_t i, std::int64_t j, std::int64_t k) {
  return x.data<float>()[(i * x.shape()[1] + j) * x.shape()[2] + k];
}
}  // namespace

TEST_CASE("aten.permute, transpose and t are views with no step") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 7, 33}));
  Node* p = g.call_function(aten::permute, {x, ArgList{2, 0, 1}});
  Node* tr = g.call_function(aten::transpose_int, {x, -1, 0});
  Node* m = g.placeholder("m", meta({7, 1}));
  Node* tt = g.call_function(aten::t, {m});
  g.output(ArgList{p, tr, tt});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  Tensor tx = random_tensor({2, 7, 33}, 1), tm = random_tensor({7, 1}, 2);
  auto out = cg.run({tx, tm});
  CHECK(out[0].shape() == runtime::Shape{33, 2, 7});
  CHECK(out[1].shape() == runtime::Shape{33, 7, 2});
  CHECK(out[2].shape() == runtime::Shape{1, 7});
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 7; ++j)
      for (std::int64_t k = 0; k < 33; ++k) {
        bad += at(out[0], {k, i, j}) != at3(tx, i, j, k);
        bad += at(out[1], {k, j, i}) != at3(tx, i, j, k);
      }
  for (std::int64_t j = 0; j < 7; ++j) bad += at(out[2], {0, j}) != tm.data<float>()[j];
  CHECK(bad == 0);
}

TEST_CASE("swapaxes and swapdims, as functions with named axes and as methods, are transposes") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 7, 33}));
  Node* a = g.call_function(OpRef("torch.swapaxes"), {x}, {{"axis0", Arg(-2)}, {"axis1", Arg(-1)}});
  Node* d = g.call_method("swapdims", {x, 0, 1});
  Node* m = g.call_method("swapaxes", {x, 2, 0});
  g.output(ArgList{a, d, m});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  Tensor tx = random_tensor({2, 7, 33}, 3);
  auto out = cg.run({tx});
  CHECK(out[0].shape() == runtime::Shape{2, 33, 7});
  CHECK(out[1].shape() == runtime::Shape{7, 2, 33});
  CHECK(out[2].shape() == runtime::Shape{33, 7, 2});
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 7; ++j)
      for (std::int64_t k = 0; k < 33; ++k) {
        bad += at(out[0], {i, k, j}) != at3(tx, i, j, k);
        bad += at(out[1], {j, i, k}) != at3(tx, i, j, k);
        bad += at(out[2], {k, j, i}) != at3(tx, i, j, k);
      }
  CHECK(bad == 0);
  Graph h;
  Node* y = h.placeholder("y", meta({2, 3}));
  h.output(ArgList{h.call_function(OpRef("torch.swapaxes"), {y}, {{"axis0", Arg(0)}}, "sw")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("axis1"), kiln::Error);
}

TEST_CASE("view of a contiguous tensor is a view, reshape of a transposed one copies, view of it fails") {
  Graph g;
  Node* x = g.placeholder("x", meta({6, 4}));
  Node* v = g.call_function(aten::view, {x, ArgList{3, -1, 2}});
  Node* tr = g.call_function(aten::t, {x});
  Node* r = g.call_function(aten::reshape, {tr, ArgList{24}});
  g.output(ArgList{v, r});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 1);  // the reshape's copy
  Tensor tx = random_tensor({6, 4}, 3);
  auto out = cg.run({tx});
  CHECK(out[0].shape() == runtime::Shape{3, 4, 2});
  int bad = 0;
  for (std::int64_t i = 0; i < 24; ++i) bad += test::element(out[0], i) != tx.data<float>()[i];
  // reshape(t(x)) reads x column by column.
  for (std::int64_t i = 0; i < 24; ++i) bad += test::element(out[1], i) != tx.data<float>()[(i % 6) * 4 + i / 6];
  CHECK(bad == 0);

  Graph h;
  Node* y = h.placeholder("y", meta({6, 4}));
  h.output(ArgList{h.call_function(aten::view, {h.call_function(aten::t, {y}), ArgList{24}}, {}, "flat")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("node flat (aten.view.default): a tensor of shape [4, 6]"),
                       runtime::CompileError);
  Graph k;
  Node* z = k.placeholder("z", meta({6, 4}));
  k.output(ArgList{k.call_function(aten::view, {z, ArgList{5, -1}}, {}, "bad")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(k, {}), doctest::Contains("shape [5, -1] is invalid for 24 elements"),
                       runtime::CompileError);
  // Sizes whose product overflows 64 bits (found by fuzz_compile_run) are refused, not multiplied past the end.
  Graph o;
  Node* u = o.placeholder("u", meta({6, 4}));
  o.output(ArgList{o.call_function(aten::view, {u, ArgList{6, std::int64_t{4222222222222222292}, -1}}, {}, "huge")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(o, {}),
                       doctest::Contains("node huge (aten.view.default): shape [6, 4222222222222222292, -1] has more elements than a 64-bit count holds"),
                       runtime::CompileError);
}

TEST_CASE("select, slice with negative and out-of-range bounds, unsqueeze, squeeze, expand") {
  Graph g;
  Node* x = g.placeholder("x", meta({5, 7}));
  Node* sel = g.call_function(aten::select_int, {x, -1, 2});
  Node* sl = g.call_function(aten::slice_Tensor, {x, 1, -5, 100, 2});
  Node* un = g.call_function(aten::unsqueeze, {x, -1});
  Node* sq = g.call_function(aten::squeeze_dim, {un, 2});
  Node* one = g.placeholder("one", meta({1, 7}));
  Node* ex = g.call_function(aten::expand, {one, ArgList{3, -1}});
  g.output(ArgList{sel, sl, sq, ex});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  Tensor tx = random_tensor({5, 7}, 4), t1 = random_tensor({1, 7}, 5);
  auto out = cg.run({tx, t1});
  CHECK(out[0].shape() == runtime::Shape{5});
  CHECK(out[1].shape() == runtime::Shape{5, 3});  // columns 2, 4, 6
  CHECK(out[2].shape() == runtime::Shape{5, 7});
  CHECK(out[3].shape() == runtime::Shape{3, 7});
  int bad = 0;
  for (std::int64_t i = 0; i < 5; ++i) {
    bad += at(out[0], {i}) != tx.data<float>()[i * 7 + 2];
    for (std::int64_t j = 0; j < 3; ++j) bad += at(out[1], {i, j}) != tx.data<float>()[i * 7 + 2 + 2 * j];
    for (std::int64_t j = 0; j < 7; ++j) bad += at(out[2], {i, j}) != tx.data<float>()[i * 7 + j];
  }
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 7; ++j) bad += at(out[3], {i, j}) != t1.data<float>()[j];
  CHECK(bad == 0);
}

TEST_CASE("split, split_with_sizes, unbind and chunk give tuples of views read through getitem") {
  Graph g;
  Node* x = g.placeholder("x", meta({7, 4}));
  Node* sp = g.call_function(aten::split_Tensor, {x, 3});  // 3, 3, 1 rows
  Node* s2 = g.call_function(OpRef("torch.split"), {x, ArgList{1, 3}}, {{"dim", Arg(1)}});
  Node* ub = g.call_function(aten::unbind_int, {x, 1});
  Node* ch = g.call_function(OpRef("torch.chunk"), {x, 3});  // ceil(7 / 3) = 3: 3, 3, 1
  auto get = [&](Node* n, int i) { return g.call_function(OpRef("operator.getitem"), {n, i}); };
  g.output(ArgList{get(sp, 2), get(s2, 1), get(ub, 3), get(ch, 1)});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  Tensor tx = random_tensor({7, 4}, 6);
  auto out = cg.run({tx});
  CHECK(out[0].shape() == runtime::Shape{1, 4});
  CHECK(out[1].shape() == runtime::Shape{7, 3});
  CHECK(out[2].shape() == runtime::Shape{7});
  CHECK(out[3].shape() == runtime::Shape{3, 4});
  int bad = 0;
  for (std::int64_t j = 0; j < 4; ++j) bad += at(out[0], {0, j}) != tx.data<float>()[6 * 4 + j];
  for (std::int64_t i = 0; i < 7; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) bad += at(out[1], {i, j}) != tx.data<float>()[i * 4 + 1 + j];
    bad += at(out[2], {i}) != tx.data<float>()[i * 4 + 3];
  }
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) bad += at(out[3], {i, j}) != tx.data<float>()[(3 + i) * 4 + j];
  CHECK(bad == 0);

  Graph h;
  Node* y = h.placeholder("y", meta({7, 4}));
  h.output(ArgList{h.call_function(aten::split_with_sizes, {y, ArgList{3, 3}}, {}, "sp")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("split sizes add up to 6 but dim 0 has 7"),
                       runtime::CompileError);
}

TEST_CASE("cat and stack copy strided inputs into place, along negative dims") {
  Graph g;
  Node* a = g.placeholder("a", meta({3, 5}));
  Node* b = g.placeholder("b", meta({3, 2}));
  Node* c = g.call_function(aten::cat, {ArgList{a, b, a}, -1});
  Node* at_ = g.call_function(aten::t, {a});
  Node* st = g.call_function(aten::stack, {ArgList{at_, at_}, -1});  // [5, 3, 2]
  g.output(ArgList{c, st});
  auto cg = CompiledGraph::compile(g, {});
  Tensor ta = random_tensor({3, 5}, 7), tb0 = random_tensor({2, 3}, 8);
  Tensor tb = tb0.transpose(0, 1);  // a non-contiguous input
  auto out = cg.run({ta, tb});
  CHECK(out[0].shape() == runtime::Shape{3, 12});
  CHECK(out[1].shape() == runtime::Shape{5, 3, 2});
  int bad = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 12; ++j) {
      const float want = j < 5 ? ta.data<float>()[i * 5 + j] : j < 7 ? tb0.data<float>()[(j - 5) * 3 + i] : ta.data<float>()[i * 5 + j - 7];
      bad += at(out[0], {i, j}) != want;
    }
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 2; ++k) bad += at(out[1], {i, j, k}) != ta.data<float>()[j * 5 + i];
  CHECK(bad == 0);

  Graph h;
  Node* x = h.placeholder("x", meta({3, 5}));
  Node* y = h.placeholder("y", meta({4, 2}));
  h.output(ArgList{h.call_function(aten::cat, {ArgList{x, y}, 1}, {}, "cat")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}), doctest::Contains("node cat (aten.cat.default): cat: input 1 has shape [4, 2]"),
                       runtime::CompileError);
}

TEST_CASE("cat and stack of pieces lying one after another in one buffer are views with no step") {
  Graph g;
  Node* x = g.placeholder("x", meta({4, 6, 5}));
  auto get = [&](Node* n, int i) { return g.call_function(OpRef("operator.getitem"), {n, i}); };
  Node* sp = g.call_function(aten::split_Tensor, {x, 2, 1});  // three [4, 2, 5] pieces
  Node* ub = g.call_function(aten::unbind_int, {x, 0});        // four [6, 5] pieces
  Node* s2 = g.call_function(aten::split_with_sizes, {x, ArgList{2, 3}, 2});  // [4, 6, 2] and [4, 6, 3]
  g.output(ArgList{
      g.call_function(aten::cat, {ArgList{get(sp, 0), get(sp, 1), get(sp, 2)}, 1}),                    // x itself
      g.call_function(aten::stack, {ArgList{get(ub, 0), get(ub, 1), get(ub, 2), get(ub, 3)}, 1}),      // [6, 4, 5]
      g.call_function(aten::cat, {ArgList{get(s2, 0), get(s2, 1)}, -1}),                                // pieces of two sizes
      g.call_function(aten::stack, {ArgList{get(ub, 1), get(ub, 2)}}),                                   // a run from the middle
  });
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  const Tensor tx = random_tensor({4, 6, 5}, 9);
  const auto out = cg.run({tx});
  REQUIRE(out[1].shape() == runtime::Shape{6, 4, 5});
  REQUIRE(out[3].shape() == runtime::Shape{2, 6, 5});
  int bad = 0;
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 6; ++j)
      for (std::int64_t k = 0; k < 5; ++k) {
        bad += at(out[0], {i, j, k}) != at3(tx, i, j, k);
        bad += at(out[1], {j, i, k}) != at3(tx, i, j, k);
        bad += at(out[2], {i, j, k}) != at3(tx, i, j, k);
        if (i == 1 || i == 2) bad += at(out[3], {i - 1, j, k}) != at3(tx, i, j, k);
      }
  CHECK(bad == 0);

  // Out of order or from two buffers: copied; every other piece: a view with twice the stride.
  Graph h;
  Node* y = h.placeholder("y", meta({4, 6, 5}));
  Node* z = h.placeholder("z", meta({4, 6, 5}));
  auto hget = [&](Node* n, int i) { return h.call_function(OpRef("operator.getitem"), {n, i}); };
  Node* yu = h.call_function(aten::unbind_int, {y, 0});
  Node* zu = h.call_function(aten::unbind_int, {z, 0});
  h.output(ArgList{h.call_function(aten::stack, {ArgList{hget(yu, 1), hget(yu, 0)}}),
                   h.call_function(aten::stack, {ArgList{hget(yu, 0), hget(yu, 2)}}),
                   h.call_function(aten::stack, {ArgList{hget(yu, 0), hget(zu, 1)}})});
  auto copies = CompiledGraph::compile(h, {});
  CHECK(copies.num_steps() == 2);
  const Tensor ty = random_tensor({4, 6, 5}, 10), tz = random_tensor({4, 6, 5}, 11);
  const auto o = copies.run({ty, tz});
  bad = 0;
  for (std::int64_t j = 0; j < 6; ++j)
    for (std::int64_t k = 0; k < 5; ++k) {
      bad += at(o[0], {0, j, k}) != at3(ty, 1, j, k) || at(o[0], {1, j, k}) != at3(ty, 0, j, k);
      bad += at(o[1], {0, j, k}) != at3(ty, 0, j, k) || at(o[1], {1, j, k}) != at3(ty, 2, j, k);
      bad += at(o[2], {0, j, k}) != at3(ty, 0, j, k) || at(o[2], {1, j, k}) != at3(tz, 1, j, k);
    }
  CHECK(bad == 0);
}

TEST_CASE("a stack of a split's pieces feeds a batched product as a strided view, against a loop") {
  // Batch fusion's stacked linear inputs: x [3, 4 * 5] split into four [3, 5] towers, stacked to [4, 3, 5].
  Graph g;
  Node* x = g.placeholder("x", meta({3, 20}));
  Node* sp = g.call_function(aten::split_Tensor, {x, 5, 1});
  ArgList pieces;
  for (int i = 0; i < 4; ++i) pieces.push_back(g.call_function(OpRef("operator.getitem"), {sp, i}));
  Node* st = g.call_function(aten::stack, {pieces});
  g.output(ArgList{g.call_function(OpRef("aten.bmm.default"), {st, g.get_attr("w", meta({4, 5, 2}))})});
  const Tensor tx = random_tensor({3, 20}, 12), tw = random_tensor({4, 5, 2}, 13);
  auto cg = CompiledGraph::compile(g, runtime::Weights{{"w", tw}});
  CHECK(cg.num_steps() == 1);  // the product alone
  const auto out = cg.run({tx});
  REQUIRE(out[0].shape() == runtime::Shape{4, 3, 2});
  double worst = 0;
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i < 3; ++i)
      for (int o = 0; o < 2; ++o) {
        double acc = 0;
        for (int k = 0; k < 5; ++k) acc += double(tx.data<float>()[i * 20 + b * 5 + k]) * tw.data<float>()[(b * 5 + k) * 2 + o];
        worst = std::max(worst, std::abs(acc - at(out[0], {b, i, o})));
      }
  CHECK(worst < 1e-5);
}

TEST_CASE("shapes are static values: getattr shape, getitem, size and a view sized by them") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 6, 4}));
  Node* shape = g.call_function(OpRef("builtins.getattr"), {x, "shape"});
  Node* d0 = g.call_function(OpRef("operator.getitem"), {shape, 0});
  Node* d2 = g.call_method("size", {x, -1});
  Node* v = g.call_method("view", {x, d0, -1, d2});
  Node* f = g.call_method("flatten", {v, 1});
  g.output(ArgList{f});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  Tensor tx = random_tensor({2, 6, 4}, 9);
  auto out = cg.run({tx});
  CHECK(out[0].shape() == runtime::Shape{2, 24});
  CHECK(test::max_abs_diff(out[0], tx.view({2, 24})) == 0);
}

TEST_CASE("a slice of a static shape is a static list, sliced as Python slices a list") {
  // x.shape[-2:], as a segmentation head sizes its up-sampling; then steps, negative and out-of-range bounds.
  const std::vector<std::int64_t> dims{2, 3, 4, 5};
  struct Cut {
    Arg start, stop, step;
  };
  const Cut cuts[] = {{-2, Arg(), Arg()}, {Arg(), Arg(), -1}, {1, 100, 2}, {-100, -1, Arg()}, {Arg(), 0, -2}, {3, 1, Arg()}};
  for (const Cut& c : cuts) {
    // The same slice of a Python list, written out: range(start, stop, step) after clamping.
    const auto n = static_cast<std::int64_t>(dims.size());
    const std::int64_t step = c.step.is_none() ? 1 : *c.step.get_if<std::int64_t>();
    auto norm = [&](const Arg& b, std::int64_t dflt) {
      if (b.is_none()) return dflt;
      std::int64_t v = *b.get_if<std::int64_t>();
      if (v < 0) v += n;
      return step > 0 ? std::clamp<std::int64_t>(v, 0, n) : std::clamp<std::int64_t>(v, -1, n - 1);
    };
    const std::int64_t start = norm(c.start, step > 0 ? 0 : n - 1), stop = norm(c.stop, step > 0 ? n : -1);
    ArgList want;
    for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) want.push_back(dims[static_cast<std::size_t>(k)]);

    Graph g;
    Node* x = g.placeholder("x", meta({2, 3, 4, 5}));
    Node* shape = g.call_function(OpRef("builtins.getattr"), {x, "shape"});
    Node* cut = g.call_function(OpRef("operator.getitem"), {shape, Slice{{c.start, c.stop, c.step}}});
    // Compared with the expected list by a static comparison: a true torch._assert compiles to nothing.
    g.call_function(OpRef("torch._assert"), {g.call_function(OpRef("operator.eq"), {cut, want}), "cut"});
    g.output(ArgList{x});
    CHECK_NOTHROW((void)CompiledGraph::compile(g, {}));
  }
  // The check can fail: x.shape[-2:] is not [3, 4].
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3, 4, 5}));
  Node* cut = g.call_function(OpRef("operator.getitem"), {g.call_function(OpRef("builtins.getattr"), {x, "shape"}),
                                                          Slice{{-2, Arg(), Arg()}}});
  g.call_function(OpRef("torch._assert"), {g.call_function(OpRef("operator.eq"), {cut, ArgList{3, 4}}), "cut"});
  g.output(ArgList{x});
  CHECK_THROWS_WITH_AS((void)CompiledGraph::compile(g, {}), doctest::Contains("does not hold"), runtime::CompileError);
}

TEST_CASE("indexing a tensor: ints, slices, None and an ellipsis") {
  Graph g;
  Node* x = g.placeholder("x", meta({4, 5, 6}));
  Node* i1 = g.call_function(OpRef("operator.getitem"), {x, ArgList{Arg(1), Slice{{Arg(1), Arg(), Arg(2)}}}});
  Node* i2 = g.call_function(OpRef("operator.getitem"), {x, ArgList{EnumConst{"Ellipsis"}, Arg(-1), Arg()}});
  g.output(ArgList{i1, i2});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({4, 5, 6}, 10);
  auto out = cg.run({tx});
  CHECK(out[0].shape() == runtime::Shape{2, 6});   // x[1, 1::2]
  CHECK(out[1].shape() == runtime::Shape{4, 5, 1});  // x[..., -1, None]
  int bad = 0;
  for (std::int64_t j = 0; j < 2; ++j)
    for (std::int64_t k = 0; k < 6; ++k) bad += at(out[0], {j, k}) != at3(tx, 1, 1 + 2 * j, k);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 5; ++j) bad += at(out[1], {i, j, 0}) != at3(tx, i, j, 5);
  CHECK(bad == 0);
}

TEST_CASE("factories fill, clone and contiguous copy, embedding gathers rows") {
  Graph g;
  Node* ids = g.placeholder("ids", meta({2, 3}, DType::int64));
  Node* table = g.get_attr("table", meta({10, 4}));
  Node* emb = g.call_function(aten::embedding, {table, ids});
  Node* full = g.call_function(aten::full, {ArgList{2, 2}, 1.5});
  Node* ones = g.call_function(aten::ones, {ArgList{3}});
  Node* x = g.placeholder("x", meta({3, 4}));
  Node* cl = g.call_function(aten::clone, {g.call_function(aten::t, {x})});
  g.output(ArgList{emb, full, ones, cl});
  Tensor tt = random_tensor({10, 4}, 11);
  auto cg = CompiledGraph::compile(g, {{"table", tt}});
  const std::vector<std::int64_t> idv{3, 0, 9, -1, 5, 3};
  Tensor tids = Tensor::from_values<std::int64_t>({2, 3}, idv);
  Tensor tx = random_tensor({3, 4}, 12);
  auto out = cg.run({tids, tx});
  CHECK(out[0].shape() == runtime::Shape{2, 3, 4});
  int bad = 0;
  for (int k = 0; k < 6; ++k)
    for (int c = 0; c < 4; ++c) bad += out[0].data<float>()[k * 4 + c] != tt.data<float>()[((idv[k] + 10) % 10) * 4 + c];
  for (int k = 0; k < 4; ++k) bad += out[1].data<float>()[k] != 1.5f;
  for (int k = 0; k < 3; ++k) bad += out[2].data<float>()[k] != 1.0f;
  CHECK(out[3].shape() == runtime::Shape{4, 3});
  // clone keeps the transposed dim order (dense, strides [1, 4]); seen through a
  // context, whose outputs are the arena's views (CompiledGraph::run copies them).
  auto rc = cg.make_context();
  CHECK(rc.run({tids, tx})[3].strides() == runtime::Shape{1, 4});
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) bad += at(out[3], {i, j}) != tx.data<float>()[j * 4 + i];
  CHECK(bad == 0);
  CHECK(out[1].dtype() == DType::float32);
}

namespace {
// x [1, 4, 6, 6] -> 3x3 convolution to 8 channels -> adaptive average pool to
// 3x3, the pool then seen as [1, 72] by _reshape_alias, view and as_strided
// (each in PyTorch's row-major terms), as torchvision's AlexNet ends at aten level.
Graph pool_then_flatten(bool record_strides) {
  Graph g;
  Node* x = g.placeholder("x", meta({1, 4, 6, 6}));
  Node* w = g.get_attr("w", meta({8, 4, 3, 3}));
  Node* conv = g.call_function(aten::convolution, {x, w, nullptr, ArgList{1, 1}, ArgList{1, 1}, ArgList{1, 1}, false,
                                                   ArgList{0, 0}, 1});
  conv->meta.val = meta({1, 8, 6, 6});
  Node* pool = g.call_function(aten::adaptive_avg_pool2d_, {conv, ArgList{3, 3}}, {}, "pool");
  TensorMeta pm = meta({1, 8, 3, 3});
  if (record_strides) pm.stride = std::vector<Dim>{72, 9, 3, 1};
  pool->meta.val = pm;
  Node* alias = g.call_function(aten::reshape_alias, {pool, ArgList{1, 72}, ArgList{72, 1}});
  Node* view = g.call_function(aten::view, {pool, ArgList{1, 72}});
  Node* strided = g.call_function(aten::as_strided, {pool, ArgList{8, 9}, ArgList{9, 1}});
  Node* tail = g.call_function(aten::as_strided, {pool, ArgList{2, 2}, ArgList{9, 1}, 4});  // channels 0-1, items 4-5
  g.output(ArgList{pool, alias, view, strided, tail});
  return g;
}
}  // namespace

TEST_CASE("_reshape_alias, view and as_strided read PyTorch's layout of a channels-last result") {
  for (const bool record_strides : {true, false}) {
    CAPTURE(record_strides);
    runtime::CompileOptions options;
    options.conv_layout = runtime::CompileOptions::ConvLayout::channels_last;
    auto cg = CompiledGraph::compile(pool_then_flatten(record_strides), {{"w", random_tensor({8, 4, 3, 3}, 21)}}, options);
    auto ctx = cg.make_context();
    const auto& out = ctx.run({random_tensor({1, 4, 6, 6}, 22)});
    // The case in question: the executor keeps the pool channels-last, PyTorch row-major.
    REQUIRE(out[0].strides() == runtime::channels_last({1, 8, 3, 3}).strides);
    int bad = 0;
    for (std::int64_t i = 0; i < 72; ++i) {
      const float want = test::element(out[0], i);  // the pool in row-major order
      bad += test::element(out[1], i) != want;
      bad += test::element(out[2], i) != want;
      bad += test::element(out[3], i) != want;
    }
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t k = 0; k < 2; ++k) bad += at(out[4], {c, k}) != test::element(out[0], 4 + c * 9 + k);
    CHECK(bad == 0);
  }
}

TEST_CASE("as_strided over a layout the executor shares with PyTorch is a view, and bad ones are refused") {
  Graph g;
  Node* x = g.placeholder("x", meta({4, 6}));
  Node* a = g.call_function(aten::as_strided, {x, ArgList{3, 3}, ArgList{6, 2}, 1});
  Node* t = g.call_function(aten::t, {x});
  TensorMeta tm = meta({6, 4});
  tm.stride = std::vector<Dim>{1, 6};
  t->meta.val = tm;
  Node* b = g.call_function(aten::as_strided, {t, ArgList{2, 2}, ArgList{1, 6}});
  Node* c = g.call_function(aten::reshape_alias, {x, ArgList{2, 12}, ArgList{12, 1}});
  g.output(ArgList{a, b, c});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  Tensor tx = random_tensor({4, 6}, 23);
  auto out = cg.run({tx});
  const float* xf = tx.data<float>();
  int bad = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 3; ++j) bad += at(out[0], {i, j}) != xf[1 + 6 * i + 2 * j];
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 2; ++j) bad += at(out[1], {i, j}) != xf[i + 6 * j];
  for (std::int64_t i = 0; i < 24; ++i) bad += test::element(out[2], i) != xf[i];
  CHECK(bad == 0);

  auto refused = [](ArgList size, ArgList stride, Arg offset, bool of_view) {
    Graph h;
    Node* y = h.placeholder("y", meta({4, 6}));
    Node* src = of_view ? h.call_function(aten::slice_Tensor, {y, 0, 1, 3}) : y;
    h.output(ArgList{h.call_function(aten::as_strided, {src, std::move(size), std::move(stride), std::move(offset)}, {}, "bad")});
    try {
      (void)CompiledGraph::compile(h, {});
    } catch (const runtime::CompileError& e) {
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  CHECK(refused({5, 6}, {6, 1}, 0, false).find("node bad (aten.as_strided.default): a view of shape [5, 6], strides [6, 1] and offset 0 reaches beyond its input's 24 elements") != std::string::npos);
  CHECK(refused({2, 2}, {6, 1, 1}, 0, false).find("size [2, 2] and stride [6, 1, 1] have different lengths") != std::string::npos);
  CHECK(refused({2, 2}, {6, 1}, 2, true).find("a storage_offset on a view of another tensor") != std::string::npos);
  CHECK(refused({2, 2}, {6, 1}, Arg(), true) == "compiled");
}

TEST_CASE("as_strided_ restrides its input for its users, and only as the input's sole user") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 6}));
  Node* m = g.call_function(aten::relu, {x}, {}, "m");
  Node* r = g.call_function(OpRef("aten.as_strided_.default"), {m, ArgList{3, 2}, ArgList{1, 3}}, {}, "restrided");
  g.output(ArgList{r});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({2, 6}, 31);
  auto out = cg.run({tx});
  int bad = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j) bad += at(out[0], {i, j}) != std::max(tx.data<float>()[i + 3 * j], 0.0f);
  CHECK(bad == 0);

  Graph h;
  Node* y = h.placeholder("y", meta({2, 6}));
  Node* n = h.call_function(aten::relu, {y}, {}, "n");
  Node* s = h.call_function(OpRef("aten.as_strided_.default"), {n, ArgList{3, 2}, ArgList{1, 3}}, {}, "restrided");
  h.output(ArgList{s, h.call_function(aten::relu, {n})});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}),
                       doctest::Contains("node restrided (aten.as_strided_.default): as_strided_ changes the strides of n, "
                                         "which 1 other node(s) read"),
                       runtime::CompileError);
}

TEST_CASE("transpose_, t_, unsqueeze_ and squeeze_ view their input as its sole user") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3}));
  Node* a = g.call_function(aten::relu, {x});
  Node* ta = g.call_function(OpRef("aten.transpose_.default"), {a, 0, 1});
  Node* b = g.call_function(aten::relu, {x});
  Node* tb = g.call_function(OpRef("aten.t_.default"), {b});
  Node* c = g.call_function(aten::relu, {x});
  Node* uc = g.call_function(OpRef("aten.unsqueeze_.default"), {c, 1});
  Node* sc = g.call_function(OpRef("aten.squeeze_.dim"), {uc, 1});
  g.output(ArgList{ta, tb, sc});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({2, 3}, 41);
  auto out = cg.run({tx});
  REQUIRE(out[0].shape() == runtime::Shape{3, 2});
  REQUIRE(out[1].shape() == runtime::Shape{3, 2});
  REQUIRE(out[2].shape() == runtime::Shape{2, 3});
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      const float r = std::max(tx.data<float>()[i * 3 + j], 0.0f);
      bad += at(out[0], {j, i}) != r;
      bad += at(out[1], {j, i}) != r;
      bad += at(out[2], {i, j}) != r;
    }
  CHECK(bad == 0);

  Graph h;
  Node* y = h.placeholder("y", meta({2, 3}));
  Node* n = h.call_function(aten::relu, {y}, {}, "n");
  Node* t = h.call_function(OpRef("aten.transpose_.default"), {n, 0, 1}, {}, "flipped");
  h.output(ArgList{t, h.call_function(aten::relu, {n})});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}),
                       doctest::Contains("node flipped (aten.transpose_.default): transpose_ changes the strides of n, "
                                         "which 1 other node(s) read"),
                       runtime::CompileError);
}

TEST_CASE("unsafe_split, unsafe_split_with_sizes and unsafe_chunk split as split and chunk do") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 10}));
  Node* s = g.call_function(OpRef("aten.unsafe_split.Tensor"), {x, 4, 1});
  Node* w = g.call_function(OpRef("aten.unsafe_split_with_sizes.default"), {x, ArgList{3, 7}, 1});
  Node* c = g.call_function(OpRef("aten.unsafe_chunk.default"), {x, 2, 0});
  auto item = [&](Node* n, int i) { return g.call_function(OpRef("operator.getitem"), {n, i}); };
  g.output(ArgList{item(s, 2), item(w, 1), item(c, 1)});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({2, 10}, 42);
  auto out = cg.run({tx});
  REQUIRE(out[0].shape() == runtime::Shape{2, 2});  // 10 = 4 + 4 + 2
  REQUIRE(out[1].shape() == runtime::Shape{2, 7});
  REQUIRE(out[2].shape() == runtime::Shape{1, 10});
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 2; ++j) bad += at(out[0], {i, j}) != tx.data<float>()[i * 10 + 8 + j];
    for (std::int64_t j = 0; j < 7; ++j) bad += at(out[1], {i, j}) != tx.data<float>()[i * 10 + 3 + j];
  }
  for (std::int64_t j = 0; j < 10; ++j) bad += at(out[2], {0, j}) != tx.data<float>()[10 + j];
  CHECK(bad == 0);
}

TEST_CASE("stochastic_depth in eval is its input, with no step, and in training it is refused") {
  const OpRef sd("torchvision.ops.stochastic_depth.stochastic_depth");
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3}));
  g.output(ArgList{g.call_function(sd, {x, 0.2, "row", false}), g.call_function(sd, {x, 0.0, "batch", true})});
  auto cg = CompiledGraph::compile(g, {});
  CHECK(cg.num_steps() == 0);
  Tensor tx = random_tensor({2, 3}, 32);
  auto out = cg.run({tx});
  int bad = 0;
  for (int i = 0; i < 6; ++i) bad += (out[0].data<float>()[i] != tx.data<float>()[i]) + (out[1].data<float>()[i] != tx.data<float>()[i]);
  CHECK(bad == 0);
  Graph h;
  Node* y = h.placeholder("y", meta({2, 3}));
  h.output(ArgList{h.call_function(sd, {y, 0.2, "row"}, {}, "drop")});  // training defaults to True
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(h, {}),
                       doctest::Contains("node drop (torchvision.ops.stochastic_depth.stochastic_depth): stochastic_depth with "
                                         "training=True and p=0.200000 drops rows at random"),
                       runtime::CompileError);
}

TEST_CASE("comparisons of static sizes are static bools, a true torch._assert vanishes and a false one is a compile error") {
  // h == 6 and the other comparisons, as a traced model writes them about x.shape.
  auto graph = [](std::int64_t expected, const char* cmp) {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x", meta({2, 6}));
    Node* h = g->call_method("size", {x, 1});
    Node* ok = g->call_function(OpRef(std::string("operator.") + cmp), {h, expected}, {}, "ok");
    g->call_function(OpRef("torch._assert"), {ok, "Wrong image height!"}, {}, "check");
    g->output(ArgList{g->call_function(aten::relu, {x})});
    return g;
  };
  // Which comparisons hold for h = 6 against 6 and against 7.
  const std::vector<std::tuple<const char*, bool, bool>> cases{
      {"eq", true, false}, {"ne", false, true}, {"lt", false, true}, {"le", true, true}, {"gt", false, false}, {"ge", true, false}};
  for (const auto& [cmp, holds_6, holds_7] : cases) {
    for (const auto& [expected, holds] : {std::pair<std::int64_t, bool>{6, holds_6}, {7, holds_7}}) {
      CAPTURE(cmp);
      CAPTURE(expected);
      auto g = graph(expected, cmp);
      if (holds) {
        const auto cg = CompiledGraph::compile(*g, {});
        CHECK(cg.num_steps() == 1);  // the relu alone: the facts cost nothing
      } else {
        CHECK_THROWS_WITH_AS(CompiledGraph::compile(*g, {}),
                             doctest::Contains("node check (torch._assert): the assertion does not hold for these shapes: "
                                               "Wrong image height!"),
                             runtime::CompileError);
      }
    }
  }
  // Shapes compare as Python lists; a tensor cannot be compared or asserted on before a run.
  Graph g;
  Node* x = g.placeholder("x", meta({2, 6}));
  Node* same = g.call_function(OpRef("operator.eq"), {g.call_function(OpRef("builtins.getattr"), {x, "shape"}), ArgList{2, 6}});
  g.call_function(OpRef("torch._assert"), {same, "shape"});
  g.output(ArgList{x});
  CHECK_NOTHROW((void)CompiledGraph::compile(g, {}));
  Graph t;
  Node* y = t.placeholder("y", meta({2}));
  t.output(ArgList{t.call_function(OpRef("operator.eq"), {y, 0}, {}, "mask")});
  CHECK_THROWS_WITH_AS(CompiledGraph::compile(t, {}), doctest::Contains("node mask (operator.eq): compares a tensor"),
                       runtime::CompileError);
}

TEST_CASE("constant_pad_nd and F.pad pad and crop the last dims, against a loop, and refuse what they cannot do") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3, 4}));
  // Last dim: 1 before, 2 after; dim 1: crop 1 before, pad 1 after. Then F.pad of a transposed view.
  Node* p = g.call_function(OpRef("aten.constant_pad_nd.default"), {x, ArgList{1, 2, -1, 1}, 0.5});
  Node* t = g.call_function(aten::transpose_int, {x, 1, 2});  // [2, 4, 3], strided
  Node* q = g.call_function(OpRef("torch.nn.functional.pad"), {t, ArgList{0, 1}});
  Node* all = g.call_function(OpRef("aten.constant_pad_nd.default"), {x, ArgList{-4, 1}, -2.0});  // nothing of x kept
  g.output(ArgList{p, q, all});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({2, 3, 4}, 41);
  auto out = cg.run({tx});
  REQUIRE(out[0].shape() == runtime::Shape{2, 3, 7});
  REQUIRE(out[1].shape() == runtime::Shape{2, 4, 4});
  REQUIRE(out[2].shape() == runtime::Shape{2, 3, 1});
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 7; ++k) {
        const std::int64_t sj = j + 1, sk = k - 1;  // the source element, if inside x
        const float want = (sj < 3 && sk >= 0 && sk < 4) ? at3(tx, i, sj, sk) : 0.5f;
        bad += at(out[0], {i, j, k}) != want;
      }
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 4; ++k) bad += at(out[1], {i, j, k}) != (k < 3 ? at3(tx, i, k, j) : 0.0f);
  for (std::int64_t i = 0; i < 6; ++i) bad += test::element(out[2], i) != -2.0f;
  CHECK(bad == 0);

  auto refused = [](Arg pad, const char* target, ArgDict kw) {
    Graph h;
    Node* y = h.placeholder("y", meta({2, 3}));
    h.output(ArgList{h.call_function(OpRef(target), {y, std::move(pad)}, std::move(kw), "bad")});
    try {
      (void)CompiledGraph::compile(h, {});
    } catch (const runtime::CompileError& e) {
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  CHECK(refused(ArgList{1, 2, 3}, "aten.constant_pad_nd.default", {}).find("must hold a (before, after) pair for each of at most 2 dims") != std::string::npos);
  CHECK(refused(ArgList{-3, -1}, "aten.constant_pad_nd.default", {}).find("leaves dim 1 of [2, 3] with a negative size") != std::string::npos);
  CHECK(refused(ArgList{1, 1}, "torch.nn.functional.pad", {{"mode", Arg("wrap")}}).find("node bad (torch.nn.functional.pad): pad mode 'wrap' is not one of constant, reflect, replicate, circular") != std::string::npos);
}

namespace {
// The compile error of a graph holding one node "bad", or "compiled".
std::string compile_error(const Graph& g) {
  try {
    (void)CompiledGraph::compile(g, {});
  } catch (const runtime::CompileError& e) {
    return std::string(e.what());
  }
  return std::string("compiled");
}
// Element i of a row-major tensor as a double, whatever its dtype.
double value_at(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::float32: return t.data<float>()[i];
    case DType::int64: return static_cast<double>(t.data<std::int64_t>()[i]);
    case DType::int32: return t.data<std::int32_t>()[i];
    default: return t.data<double>()[i];
  }
}
}  // namespace

TEST_CASE("arange at the aten and torch levels is a constant with no step, against a loop") {
  struct Case {
    const char* target;
    ArgList args;
    ArgDict kwargs;
    double start, end, step;
    DType dtype;
  };
  const std::vector<Case> cases{
      {"aten.arange.start_step", {2, 11, 3}, {}, 2, 11, 3, DType::int64},
      {"aten.arange.start_step", {5, -2, -2}, {}, 5, -2, -2, DType::int64},
      {"aten.arange.start_step", {0, 1, 0.25}, {}, 0, 1, 0.25, DType::float32},
      {"aten.arange.start_step", {0, 7, 2}, {{"dtype", Arg(DType::int32)}}, 0, 7, 2, DType::int32},
      {"aten.arange.start_step", {3, 3}, {}, 3, 3, 1, DType::int64},
      {"aten.arange.start", {1, 4}, {}, 1, 4, 1, DType::int64},
      {"aten.arange.default", {4}, {{"dtype", Arg(DType::float32)}}, 0, 4, 1, DType::float32},
      {"aten.arange.default", {2.5}, {}, 0, 2.5, 1, DType::float32},
      {"torch.arange", {5}, {}, 0, 5, 1, DType::int64},
      {"torch.arange", {1, 2.5, 0.5}, {}, 1, 2.5, 0.5, DType::float32},
      {"torch.arange", {-1}, {{"end", Arg(2)}, {"dtype", Arg(DType::float64)}}, -1, 2, 1, DType::float64},
  };
  for (const Case& c : cases) {
    CAPTURE(c.target);
    CAPTURE(c.start);
    Graph g;
    g.output(ArgList{g.call_function(OpRef(c.target), c.args, c.kwargs)});
    auto cg = CompiledGraph::compile(g, {});
    CHECK(cg.num_steps() == 0);
    const Tensor out = cg.run({})[0];
    std::vector<double> want;  // counted the long way: every start + k * step short of end
    for (double v = c.start; c.step > 0 ? v < c.end : v > c.end; v = c.start + static_cast<double>(want.size()) * c.step)
      want.push_back(v);
    CHECK(out.dtype() == c.dtype);
    REQUIRE(out.shape() == runtime::Shape{static_cast<std::int64_t>(want.size())});
    for (std::size_t k = 0; k < want.size(); ++k) CHECK(value_at(out, static_cast<std::int64_t>(k)) == want[k]);
  }
}

TEST_CASE("arange refuses a zero step, bounds against the step's sign, a dtype it cannot make and a tensor bound") {
  auto refused = [](ArgList args, ArgDict kwargs = {}) {
    Graph g;
    Node* x = g.placeholder("x", meta({2}));
    for (Arg& a : args)
      if (a.get_if<std::string>()) a = Arg(x);
    g.output(ArgList{g.call_function(OpRef("aten.arange.start_step"), std::move(args), std::move(kwargs), "bad")});
    return compile_error(g);
  };
  CHECK(refused({0, 5, 0}).find("node bad (aten.arange.start_step): arange: step must be nonzero") != std::string::npos);
  CHECK(refused({0, 5, -1}).find("are inconsistent with the sign of step") != std::string::npos);
  CHECK(refused({0.0, 1.0, 0.0}).find("step must be nonzero") != std::string::npos);
  CHECK(refused({0, 5, 1}, {{"dtype", Arg(DType::bool_)}}).find("arange to bool is not supported") != std::string::npos);
  CHECK(refused({0, Arg(std::string("x")), 1}).find("argument 'end' must be a number known when compiling") !=
        std::string::npos);
}

TEST_CASE("scalar_tensor is a 0-d constant that where takes as its value, against a loop") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 4}));
  Node* s = g.call_function(OpRef("aten.scalar_tensor.default"), {-100.0});
  Node* i = g.call_function(OpRef("aten.scalar_tensor.default"), {7}, {{"dtype", Arg(DType::int64)}});
  Node* b = g.call_function(OpRef("aten.scalar_tensor.default"), {1}, {{"dtype", Arg(DType::bool_)}});
  Node* mask = g.call_function(OpRef("aten.gt.Scalar"), {x, 0.25});
  Node* w = g.call_function(OpRef("aten.where.self"), {mask, s, x});
  g.output(ArgList{s, i, b, w});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tx = random_tensor({3, 4}, 61);
  const auto out = cg.run({tx});
  CHECK(out[0].rank() == 0);
  CHECK(out[0].dtype() == DType::float32);
  CHECK(*out[0].data<float>() == -100.0f);
  CHECK(out[1].dtype() == DType::int64);
  CHECK(*out[1].data<std::int64_t>() == 7);
  CHECK(out[2].dtype() == DType::bool_);
  CHECK(*out[2].data<bool>());
  REQUIRE(out[3].shape() == runtime::Shape{3, 4});
  int bad = 0;
  for (std::int64_t k = 0; k < 12; ++k) {
    const float v = tx.data<float>()[k];
    bad += out[3].data<float>()[k] != (v > 0.25f ? -100.0f : v);
  }
  CHECK(bad == 0);

  Graph h;
  h.output(ArgList{h.call_function(OpRef("aten.scalar_tensor.default"), {1.0}, {{"dtype", Arg(DType::float16)}}, "bad")});
  CHECK(compile_error(h).find("node bad (aten.scalar_tensor.default): scalar_tensor of dtype float16 is not supported") !=
        std::string::npos);
}

TEST_CASE("copy gives self's shape and dtype with src broadcast and cast into it, against a loop") {
  Graph g;
  Node* self = g.placeholder("self", meta({2, 3, 4}));
  Node* col = g.placeholder("col", meta({3, 1}));
  Node* ints = g.placeholder("ints", meta({4}, DType::int64));
  Node* full = g.placeholder("full", meta({4, 3, 2}));
  Node* floats = g.placeholder("floats", meta({4}));
  Node* c1 = g.call_function(OpRef("aten.copy.default"), {self, col});
  Node* c2 = g.call_function(OpRef("aten.copy.default"), {self, ints});
  Node* c3 = g.call_function(OpRef("aten.copy.default"), {self, g.call_function(aten::permute, {full, ArgList{2, 1, 0}})});
  Node* c4 = g.call_function(OpRef("aten.copy.default"), {ints, floats});  // float into int64 truncates
  g.output(ArgList{c1, c2, c3, c4});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor ts = random_tensor({2, 3, 4}, 71), tc = random_tensor({3, 1}, 72), tf = random_tensor({4, 3, 2}, 74);
  const Tensor ti = random_tensor({4}, 73, DType::int64), tfl = random_tensor({4}, 75);
  const auto out = cg.run({ts, tc, ti, tf, tfl});
  REQUIRE(out[0].shape() == runtime::Shape{2, 3, 4});
  REQUIRE(out[1].shape() == runtime::Shape{2, 3, 4});
  REQUIRE(out[2].shape() == runtime::Shape{2, 3, 4});
  CHECK(out[1].dtype() == DType::float32);
  CHECK(out[3].dtype() == DType::int64);
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) {
        bad += at(out[0], {i, j, k}) != tc.data<float>()[j];
        bad += at(out[1], {i, j, k}) != static_cast<float>(ti.data<std::int64_t>()[k]);
        bad += at(out[2], {i, j, k}) != at3(tf, k, j, i);
      }
  REQUIRE(out[3].shape() == runtime::Shape{4});
  for (std::int64_t k = 0; k < 4; ++k) bad += out[3].data<std::int64_t>()[k] != static_cast<std::int64_t>(tfl.data<float>()[k]);
  CHECK(bad == 0);

  Graph h;
  Node* a = h.placeholder("a", meta({2, 3, 4}));
  Node* b = h.placeholder("b", meta({5}));
  h.output(ArgList{h.call_function(OpRef("aten.copy.default"), {a, b}, {}, "bad")});
  CHECK(compile_error(h).find("node bad (aten.copy.default): src of shape [5] does not broadcast to self's shape [2, 3, 4]") !=
        std::string::npos);
}

TEST_CASE("slice_scatter replaces a clamped slice of self with src, against a loop, and refuses a src of another shape") {
  struct Case {
    std::int64_t dim;
    Arg start, end;
    std::int64_t step;
    std::int64_t lo, hi;  // the slice's bounds after clamping, written out
  };
  const std::vector<Case> cases{{1, Arg(1), Arg(), 2, 1, 6},  {0, Arg(-3), Arg(100), 1, 1, 4}, {-1, Arg(), Arg(-2), 1, 0, 4},
                                {0, Arg(-100), Arg(2), 1, 0, 2}, {1, Arg(4), Arg(2), 1, 4, 4}, {0, Arg(), Arg(), 3, 0, 4}};
  for (const Case& c : cases) {
    CAPTURE(c.dim);
    CAPTURE(c.lo);
    const std::int64_t d = c.dim < 0 ? c.dim + 2 : c.dim;
    const std::int64_t n = (c.hi - c.lo + c.step - 1) / c.step;
    runtime::Shape src_shape{4, 6};
    src_shape[d] = n;
    Graph g;
    Node* self = g.placeholder("self", meta({6, 4}));
    Node* src = g.placeholder("src", meta({src_shape.begin(), src_shape.end()}));
    // self is read transposed: [4, 6] with strides [1, 4].
    Node* st = g.call_function(aten::t, {self});
    g.output(ArgList{g.call_function(OpRef("aten.slice_scatter.default"), {st, src, c.dim, c.start, c.end, c.step})});
    auto cg = CompiledGraph::compile(g, {});
    const Tensor ts = random_tensor({6, 4}, 81), tsrc = random_tensor(src_shape, 82);
    const Tensor out = cg.run({ts, tsrc})[0];
    REQUIRE(out.shape() == runtime::Shape{4, 6});
    int bad = 0;
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t j = 0; j < 6; ++j) {
        const std::int64_t p = d == 0 ? i : j;  // the position along dim
        const bool in_slice = p >= c.lo && p < c.hi && (p - c.lo) % c.step == 0;
        const std::int64_t q = (p - c.lo) / c.step;
        const float want = !in_slice ? ts.data<float>()[j * 4 + i] : d == 0 ? at(tsrc, {q, j}) : at(tsrc, {i, q});
        bad += at(out, {i, j}) != want;
      }
    CHECK(bad == 0);
  }

  // An int64 self takes a float src truncated, as copy_ casts.
  Graph g;
  Node* self = g.placeholder("self", meta({3, 2}, DType::int64));
  Node* src = g.placeholder("src", meta({1, 2}));
  g.output(ArgList{g.call_function(OpRef("aten.slice_scatter.default"), {self, src, 0, 1, 2})});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor ts = random_tensor({3, 2}, 83, DType::int64), tsrc = random_tensor({1, 2}, 84);
  const Tensor out = cg.run({ts, tsrc})[0];
  CHECK(out.dtype() == DType::int64);
  for (std::int64_t k = 0; k < 6; ++k)
    CHECK(out.data<std::int64_t>()[k] ==
          (k / 2 == 1 ? static_cast<std::int64_t>(tsrc.data<float>()[k % 2]) : ts.data<std::int64_t>()[k]));

  auto refused = [](runtime::Shape src_shape, ArgList rest) {
    Graph h;
    Node* a = h.placeholder("a", meta({4, 6}));
    Node* b = h.placeholder("b", meta({src_shape.begin(), src_shape.end()}));
    ArgList args{a, b};
    args.insert(args.end(), rest.begin(), rest.end());
    h.output(ArgList{h.call_function(OpRef("aten.slice_scatter.default"), std::move(args), {}, "bad")});
    return compile_error(h);
  };
  CHECK(refused({2, 6}, {0, -3}).find("node bad (aten.slice_scatter.default): src has shape [2, 6] but the slice of self [4, 6] along dim 0 has shape [3, 6]") !=
        std::string::npos);
  CHECK(refused({4, 3}, {1, 0, 6, 0}).find("slice: step must be positive, got 0") != std::string::npos);
  CHECK(refused({4, 3}, {2}).find("slice dim 2 is out of range") != std::string::npos);
}

TEST_CASE("torch.export's decomposed roll (arange, sub, fmod, index) matches a roll, against a loop") {
  // roll(x, shift, dim=1) as index arithmetic: x[:, fmod(arange(n) - shift, n)], a negative index counting from the end.
  for (const std::int64_t shift : {2, -1, 7}) {
    CAPTURE(shift);
    const std::int64_t n = 5;
    Graph g;
    Node* x = g.placeholder("x", meta({2, n, 3}));
    Node* idx = g.call_function(OpRef("aten.arange.start_step"), {0, n, 1}, {{"dtype", Arg(DType::int64)}});
    Node* moved = g.call_function(OpRef("aten.sub.Tensor"), {idx, shift});
    Node* wrapped = g.call_function(OpRef("aten.fmod.Scalar"), {moved, n});
    g.output(ArgList{g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{Arg(), wrapped}})});
    auto cg = CompiledGraph::compile(g, {});
    CHECK(cg.num_steps() == 1);  // the index math folds to constant offsets: only the gather runs
    const Tensor tx = random_tensor({2, n, 3}, 91);
    const Tensor out = cg.run({tx})[0];
    REQUIRE(out.shape() == runtime::Shape{2, n, 3});
    int bad = 0;
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t k = 0; k < 3; ++k) bad += at(out, {i, j, k}) != at3(tx, i, ((j - shift) % n + n) % n, k);
    CHECK(bad == 0);
  }
}

TEST_CASE("torch.export's decomposed shifted-window mask (new_zeros, slice_scatter, copy, where) against a loop") {
  // Swin's mask: block (a, b) of the 3 x 3 grid cut at -window and -shift gets a * 3 + b, written
  // functionally; then where(mask != 0, scalar_tensor(-100), x), as masked_fill decomposes.
  const std::int64_t size = 6, window = 3, shift = 1;
  const std::vector<std::pair<Arg, Arg>> cuts{{Arg(0), Arg(-window)}, {Arg(-window), Arg(-shift)}, {Arg(-shift), Arg()}};
  Graph g;
  Node* x = g.placeholder("x", meta({size, size}));
  Node* mask = g.call_function(OpRef("aten.new_zeros.default"), {x, ArgList{size, size}});
  std::int64_t count = 0;
  for (const auto& [h0, h1] : cuts)
    for (const auto& [w0, w1] : cuts) {
      Node* rows = g.call_function(OpRef("aten.slice.Tensor"), {mask, 0, h0, h1});
      Node* block = g.call_function(OpRef("aten.slice.Tensor"), {rows, 1, w0, w1});
      Node* value = g.call_function(OpRef("aten.scalar_tensor.default"), {count++});
      Node* filled = g.call_function(OpRef("aten.copy.default"), {block, value});
      Node* new_rows = g.call_function(OpRef("aten.slice_scatter.default"), {rows, filled, 1, w0, w1});
      mask = g.call_function(OpRef("aten.slice_scatter.default"), {mask, new_rows, 0, h0, h1});
    }
  Node* nonzero = g.call_function(OpRef("aten.ne.Scalar"), {mask, 0});
  Node* fill = g.call_function(OpRef("aten.scalar_tensor.default"), {-100.0});
  g.output(ArgList{mask, g.call_function(OpRef("aten.where.self"), {nonzero, fill, x})});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tx = random_tensor({size, size}, 92);
  const auto out = cg.run({tx});
  REQUIRE(out[0].shape() == runtime::Shape{size, size});
  REQUIRE(out[1].shape() == runtime::Shape{size, size});
  auto region = [&](std::int64_t p) { return p < size - window ? 0 : p < size - shift ? 1 : 2; };
  int bad = 0;
  for (std::int64_t i = 0; i < size; ++i)
    for (std::int64_t j = 0; j < size; ++j) {
      const float want = static_cast<float>(region(i) * 3 + region(j));
      bad += at(out[0], {i, j}) != want;
      bad += at(out[1], {i, j}) != (want != 0 ? -100.0f : at(tx, {i, j}));
    }
  CHECK(bad == 0);
}

TEST_CASE("functional fill gives self's shape and dtype filled with a number or a 0-d tensor, and refuses a larger value") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 2}));
  Node* xt = g.call_function(aten::t, {x});  // [2, 3], strided: the result is dense in the same order
  Node* ints = g.placeholder("ints", meta({4}, DType::int64));
  Node* v = g.placeholder("v", meta({}));
  Node* f1 = g.call_function(OpRef("aten.fill.Scalar"), {xt, 2.5});
  Node* f2 = g.call_function(OpRef("aten.fill.Scalar"), {ints, -2.7});  // truncated into int64
  Node* f3 = g.call_function(OpRef("aten.fill.Tensor"), {xt, v});
  g.output(ArgList{f1, f2, f3});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tx = random_tensor({3, 2}, 95), ti = random_tensor({4}, 96, DType::int64), tv = random_tensor({}, 97);
  const auto out = cg.run({tx, ti, tv});
  REQUIRE(out[0].shape() == runtime::Shape{2, 3});
  REQUIRE(out[2].shape() == runtime::Shape{2, 3});
  CHECK(out[1].dtype() == DType::int64);
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      bad += at(out[0], {i, j}) != 2.5f;
      bad += at(out[2], {i, j}) != *tv.data<float>();
    }
  for (std::int64_t k = 0; k < 4; ++k) bad += out[1].data<std::int64_t>()[k] != -2;
  CHECK(bad == 0);

  Graph h;
  Node* a = h.placeholder("a", meta({2, 3}));
  Node* b = h.placeholder("b", meta({3}));
  h.output(ArgList{h.call_function(OpRef("aten.fill.Tensor"), {a, b}, {}, "bad")});
  CHECK(compile_error(h).find("node bad (aten.fill.Tensor): fill takes a 0-d value tensor, got [3]") != std::string::npos);
}

TEST_CASE("zeros_like, ones_like, full_like and empty_like take the input's shape, dim order and dtype, at both levels") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3, 4}));
  Node* ids = g.placeholder("ids", meta({3, 2}, DType::int64));
  Node* t = g.call_function(aten::transpose_int, {x, 0, 2});  // [4, 3, 2], strides [1, 4, 12]
  const ArgDict cpu{{"dtype", Arg(DType::float32)}, {"layout", Arg(EnumConst{"torch.strided"})},
                    {"device", Arg(Device{"cpu"})}, {"pin_memory", Arg(false)}};
  Node* z = g.call_function(OpRef("aten.zeros_like.default"), {t}, cpu);
  Node* o = g.call_function(OpRef("aten.ones_like.default"), {x}, {{"dtype", Arg(DType::float64)}});
  Node* f = g.call_function(OpRef("aten.full_like.default"), {ids, 2.75});  // int64: truncates, as PyTorch's
  Node* e = g.call_function(OpRef("aten.fill_.Scalar"), {g.call_function(OpRef("aten.empty_like.default"), {x}, cpu), -1.5});
  Node* tz = g.call_function(OpRef("torch.zeros_like"), {t}, {{"memory_format", Arg(EnumConst{"torch.contiguous_format"})}});
  Node* to = g.call_function(OpRef("torch.ones_like"), {ids}, {{"dtype", Arg(DType::float32)}, {"requires_grad", Arg(false)}});
  Node* tf = g.call_function(OpRef("torch.full_like"), {}, {{"input", Arg(x)}, {"fill_value", Arg(0.25)},
                                                            {"memory_format", Arg(EnumConst{"torch.preserve_format"})}});
  Node* te = g.call_function(OpRef("torch.empty_like"), {ids});
  g.output(ArgList{z, o, f, e, tz, to, tf, te});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({2, 3, 4}, 61), tids = random_tensor({3, 2}, 62, DType::int64);
  auto rc = cg.make_context();
  const auto out = rc.run({tx, tids});
  CHECK(out[0].shape() == runtime::Shape{4, 3, 2});
  CHECK(out[0].strides() == runtime::Shape{1, 4, 12});  // the input's dim order, as preserve_format keeps it
  CHECK(out[4].strides() == runtime::Shape{6, 2, 1});   // contiguous_format asked for
  CHECK(out[1].dtype() == DType::float64);
  CHECK(out[2].dtype() == DType::int64);
  CHECK(out[5].dtype() == DType::float32);
  CHECK(out[5].shape() == runtime::Shape{3, 2});
  CHECK(out[7].dtype() == DType::int64);
  CHECK(out[7].shape() == runtime::Shape{3, 2});
  int bad = 0;
  for (std::int64_t i = 0; i < 24; ++i) {
    bad += test::element(out[0], i) != 0.0f;
    bad += out[1].data<double>()[i] != 1.0;
    bad += test::element(out[3], i) != -1.5f;
    bad += test::element(out[4], i) != 0.0f;
    bad += test::element(out[6], i) != 0.25f;
  }
  for (std::int64_t i = 0; i < 6; ++i) {
    bad += out[2].data<std::int64_t>()[i] != 2;
    bad += out[5].data<float>()[i] != 1.0f;
  }
  CHECK(bad == 0);
}

TEST_CASE("the like factories and new_zeros refuse a layout, device, pin_memory or memory_format kiln does not make") {
  auto refused = [](const char* target, ArgList args, ArgDict kw) {
    Graph h;
    Node* y = h.placeholder("y", meta({2, 3}));
    args.insert(args.begin(), Arg(y));
    h.output(ArgList{h.call_function(OpRef(target), std::move(args), std::move(kw), "bad")});
    try {
      (void)CompiledGraph::compile(h, {});
    } catch (const runtime::CompileError& e) {
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  CHECK(refused("aten.zeros_like.default", {}, {{"layout", Arg(EnumConst{"torch.sparse_coo"})}}) ==
        "node bad (aten.zeros_like.default): layout torch.sparse_coo is not supported (only torch.strided)");
  CHECK(refused("torch.ones_like", {}, {{"device", Arg(Device{"cuda:0"})}}) ==
        "node bad (torch.ones_like): device cuda:0 is not supported (only cpu)");
  CHECK(refused("aten.full_like.default", {1.0}, {{"pin_memory", Arg(true)}}) ==
        "node bad (aten.full_like.default): pin_memory=True is not supported (only False)");
  CHECK(refused("aten.empty_like.default", {}, {{"memory_format", Arg(EnumConst{"torch.channels_last"})}}) ==
        "node bad (aten.empty_like.default): memory_format torch.channels_last is not supported (preserve_format or "
        "contiguous_format)");
  CHECK(refused("aten.new_zeros.default", {ArgList{4}}, {{"device", Arg(Device{"cuda"})}}) ==
        "node bad (aten.new_zeros.default): device cuda is not supported (only cpu)");
  CHECK(refused("Tensor.new_full", {ArgList{4}, 2.0}, {{"device", Arg(Device{"cpu"})}}) == "compiled");
}
