// torch 2.11's forms of clamp, rrelu and empty (kernels/pointwise/binary.hpp,
// activations.hpp, shape/like_factories.hpp) against naive loops:
// aten.clamp.Tensor with either bound or both (broadcasting, min above max),
// aten.rrelu_with_noise_functional in eval, aten.empty_permuted's shape, dtype
// and dim order, and their errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using runtime::CompiledGraph;
using runtime::Tensor;

TEST_CASE("aten.clamp.Tensor with a min, a max or both, bounds broadcasting, min above max giving max") {
  const Tensor x = random_tensor({3, 4}, 31), lo = random_tensor({1, 4}, 32), hi = random_tensor({3, 1}, 33);
  for (int form = 0; form < 3; ++form) {
    CAPTURE(form);
    Graph g;
    Node* xn = g.placeholder("x", meta({3, 4}));
    // form 0: min only, 1: max only (min None), 2: both; only the bounds given are inputs.
    std::vector<Tensor> inputs{x};
    ArgList args{xn, Arg()};
    if (form != 1) {
      args[1] = g.placeholder("lo", meta({1, 4}));
      inputs.push_back(lo);
    }
    if (form != 0) {
      args.push_back(g.placeholder("hi", meta({3, 1})));
      inputs.push_back(hi);
    }
    g.output(ArgList{g.call_function(OpRef("aten.clamp.Tensor"), args)});
    const Tensor got = CompiledGraph::compile(g, {}).run(std::span<const Tensor>(inputs))[0];
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 4; ++j) {
        float want = test::at(x, {i, j});
        if (form != 1) want = std::max(want, test::at(lo, {0, j}));
        if (form != 0) want = std::min(want, test::at(hi, {i, 0}));
        CHECK(test::at(got, {i, j}) == want);
      }
  }
  Graph g;
  Node* xn = g.placeholder("x", meta({3}));
  g.output(ArgList{g.call_function(OpRef("aten.clamp.Tensor"), {xn, Arg(), Arg()}, {}, "cl")});
  CHECK(contains(compile_error(g), "node cl (aten.clamp.Tensor): clamp needs min or max; both are None"));
}

TEST_CASE("aten.rrelu_with_noise_functional in eval is a leaky relu of slope (lower + upper) / 2 and gives noise back") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 5}));
  Node* noise = g.placeholder("noise", meta({2, 5}));
  Node* r = g.call_function(OpRef("aten.rrelu_with_noise_functional.default"), {x, noise, 0.1, 0.3, false});
  g.output(ArgList{g.call_function(OpRef("operator.getitem"), {r, std::int64_t{0}}),
                   g.call_function(OpRef("operator.getitem"), {r, std::int64_t{1}})});
  const Tensor tx = random_tensor({2, 5}, 34), tn = random_tensor({2, 5}, 35);
  const auto out = CompiledGraph::compile(g, {}).run({tx, tn});
  for (std::int64_t i = 0; i < 10; ++i) {
    const float v = test::element(tx, i);
    CHECK(test::element(out[0], i) == doctest::Approx(v > 0 ? v : v * 0.2f).epsilon(1e-6));
    CHECK(test::element(out[1], i) == test::element(tn, i));
  }
  Graph t;
  Node* tx2 = t.placeholder("x", meta({3}));
  Node* r2 = t.call_function(OpRef("aten.rrelu_with_noise_functional.default"), {tx2, t.placeholder("noise", meta({3})), 0.1, 0.3, true}, {}, "rr");
  t.output(ArgList{t.call_function(OpRef("operator.getitem"), {r2, std::int64_t{0}})});
  CHECK(contains(compile_error(t), "node rr (aten.rrelu_with_noise_functional.default): rrelu in training mode draws random slopes"));
}

TEST_CASE("aten.empty_permuted gives size's shape with dims in physical_layout's memory order, and refuses a bad layout") {
  // [2, 3, 4, 5] laid out as (0, 2, 3, 1): channels-last. Written through a fill, read back by a contiguous copy.
  Graph g;
  Node* e = g.call_function(OpRef("aten.empty_permuted.default"), {ints({2, 3, 4, 5}), ints({0, 2, 3, 1})}, {}, "ep");
  Node* x = g.placeholder("x", meta({2, 3, 4, 5}));
  Node* cp = g.call_function(OpRef("aten.copy_.default"), {e, x});
  Node* view = g.call_function(OpRef("aten.as_strided.default"), {cp, ints({2, 60}), ints({60, 1})});
  g.output(ArgList{view});
  const Tensor tx = random_tensor({2, 3, 4, 5}, 36);
  const Tensor got = CompiledGraph::compile(g, {}).run({tx})[0];
  // Memory order n, h, w, c: element (n, h*5*3 + w*3 + c) of the raw view is x[n, c, h, w].
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t h = 0; h < 4; ++h)
        for (std::int64_t w = 0; w < 5; ++w) CHECK(test::at(got, {n, h * 15 + w * 3 + c}) == test::at(tx, {n, c, h, w}));
  Graph bad;
  bad.output(ArgList{bad.call_function(OpRef("aten.empty_permuted.default"), {ints({2, 3}), ints({0, 0})}, {}, "ep")});
  CHECK(contains(compile_error(bad), "node ep (aten.empty_permuted.default): physical_layout [0, 0] is not a permutation of the dims of size [2, 3]"));
  Graph rank;
  rank.output(ArgList{rank.call_function(OpRef("aten.empty_permuted.default"), {ints({2, 3}), ints({0})}, {}, "ep")});
  CHECK(contains(compile_error(rank), "node ep (aten.empty_permuted.default): physical_layout [0] has 1 dims, size [2, 3] has 2"));
}
