// aten.copy_ into a view of a buffer the graph made (kernels/shape/copy_in_place.hpp):
// Conv's circular padding as torch 1.13 writes it at aten level (new_empty,
// then copies into its slices, some from other slices of it), readers before
// and after the write, broadcasting, a constant written into a folded zeros(),
// and the forms refused.
#include <doctest/doctest.h>

#include <string>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {

Node* slice(Graph& g, Node* x, std::int64_t dim, std::int64_t start, std::int64_t end) {
  return g.call_function(OpRef("aten.slice.Tensor"), {x, dim, start, end});
}
Node* copy(Graph& g, Node* dst, Node* src, const char* name = "cp") {
  return g.call_function(OpRef("aten.copy_.default"), {dst, src}, {}, name);
}

}  // namespace

TEST_CASE("copy_ into slices of new_empty pads circularly, as torch 1.13 writes a circular Conv at aten level") {
  const std::int64_t N = 2, C = 3, H = 4, W = 5, P = 1;
  Graph g;
  Node* x = g.placeholder("x", meta({N, C, H, W}));
  Node* buf = g.call_function(OpRef("aten.new_empty.default"), {x, ints({N, C, H + 2 * P, W + 2 * P})});
  copy(g, slice(g, slice(g, buf, 3, P, W + P), 2, P, H + P), x);
  // Columns first (over the middle rows), then whole rows, each from the buffer itself.
  copy(g, slice(g, slice(g, buf, 3, 0, P), 2, P, H + P), slice(g, slice(g, buf, 3, W, W + P), 2, P, H + P));
  copy(g, slice(g, slice(g, buf, 3, W + P, W + 2 * P), 2, P, H + P), slice(g, slice(g, buf, 3, P, 2 * P), 2, P, H + P));
  copy(g, slice(g, buf, 2, 0, P), slice(g, buf, 2, H, H + P));
  copy(g, slice(g, buf, 2, H + P, H + 2 * P), slice(g, buf, 2, P, 2 * P));
  g.output(ArgList{g.call_function(OpRef("aten.mul.Scalar"), {buf, 1.0})});
  const Tensor xs = random_tensor({N, C, H, W}, 11);
  const Tensor got = CompiledGraph::compile(g, {}).run({xs})[0];
  REQUIRE(got.shape() == runtime::Shape{N, C, H + 2 * P, W + 2 * P});
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < H + 2 * P; ++i)
        for (std::int64_t j = 0; j < W + 2 * P; ++j) {
          const std::int64_t si = (i - P + H) % H, sj = (j - P + W) % W;
          REQUIRE(test::at(got, {n, c, i, j}) == test::at(xs, {n, c, si, sj}));
        }
}

TEST_CASE("copy_ into a clone: readers before see old values, readers after and of its result the new, src broadcasts") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 4}));
  Node* y = g.placeholder("y", meta({1, 2}));
  Node* c = g.call_function(OpRef("aten.clone.default"), {x});
  Node* before = g.call_function(OpRef("aten.mul.Scalar"), {c, 2.0});
  Node* cp = copy(g, slice(g, c, 1, 1, 3), y);
  Node* after = g.call_function(OpRef("aten.mul.Scalar"), {c, 3.0});
  Node* result = g.call_function(OpRef("aten.neg.default"), {cp});
  g.output(ArgList{before, after, result});
  const Tensor xs = random_tensor({3, 4}, 12), ys = random_tensor({1, 2}, 13);
  const auto out = CompiledGraph::compile(g, {}).run({xs, ys});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) {
      const float old = test::at(xs, {i, j});
      const float now = j >= 1 && j < 3 ? test::at(ys, {0, j - 1}) : old;
      CHECK(test::at(out[0], {i, j}) == 2 * old);
      CHECK(test::at(out[1], {i, j}) == 3 * now);
      if (j >= 1 && j < 3) CHECK(test::at(out[2], {i, j - 1}) == -now);
    }
}

TEST_CASE("copy_ of a weight into a slice of a folded zeros is written once, when lowering") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 4}));
  Node* z = g.call_function(OpRef("aten.zeros.default"), {ints({3, 4})});
  copy(g, slice(g, z, 1, 2, 4), g.get_attr("w", meta({3, 2})));
  g.output(ArgList{g.call_function(OpRef("aten.add.Tensor"), {x, z})});
  const Tensor xs = random_tensor({3, 4}, 14), w = random_tensor({3, 2}, 15);
  const Tensor got = CompiledGraph::compile(g, {{"w", w}}).run({xs})[0];
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      CHECK(test::at(got, {i, j}) == test::at(xs, {i, j}) + (j >= 2 ? test::at(w, {i, j - 2}) : 0.0f));
}

TEST_CASE("copy_ into an input, of run-time data into a folded constant, or of a src that does not broadcast is refused") {
  {
    Graph g;
    Node* x = g.placeholder("x", meta({4}));
    copy(g, x, g.placeholder("y", meta({4})));
    g.output(ArgList{x});
    CHECK(contains(compile_error(g), "node cp (aten.copy_.default): copy_ writes in place into the graph's input x"));
  }
  {
    Graph g;
    Node* x = g.placeholder("x", meta({3, 2}));
    Node* z = g.call_function(OpRef("aten.zeros.default"), {ints({3, 4})}, {}, "z");
    copy(g, slice(g, z, 1, 0, 2), x);
    g.output(ArgList{z});
    CHECK(contains(compile_error(g), "node cp (aten.copy_.default): copy_ writes a value known only when the graph runs into"));
  }
  {
    Graph g;
    Node* x = g.placeholder("x", meta({3, 4}));
    Node* c = g.call_function(OpRef("aten.clone.default"), {x});
    copy(g, slice(g, c, 1, 0, 2), g.placeholder("y", meta({3, 3})));
    g.output(ArgList{c});
    CHECK(contains(compile_error(g), "node cp (aten.copy_.default): copy_: src of shape [3, 3] does not broadcast to self's shape [3, 2]"));
  }
}
