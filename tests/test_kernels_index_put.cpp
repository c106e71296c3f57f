// aten.index_put (kernels/shape/index_put.hpp) against naive loops: one index
// tensor with and without accumulate (repeated indices adding up), None
// entries keeping dims whole, indices on dims apart (their shape leading),
// negative indices, broadcast values from an input and a constant index, and
// the errors.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::compile_error;
using test::error_of;
using test::meta;
using test::random_tensor;

namespace {

using Ints = std::vector<std::int64_t>;
Tensor index_tensor(runtime::Shape shape, const Ints& v) { return Tensor::from_values<std::int64_t>(std::move(shape), v); }
std::int64_t wrap(std::int64_t i, std::int64_t n) { return i < 0 ? i + n : i; }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// index_put(x, [idx], v, accumulate) on rows of a [5, 4] x, idx an input of `n` entries, v [n, 4].
Tensor put_rows(const Tensor& x, const Ints& idx, const Tensor& v, bool accumulate) {
  const auto n = static_cast<std::int64_t>(idx.size());
  Graph g;
  Node* xn = g.placeholder("x", meta({5, 4}));
  Node* in = g.placeholder("idx", meta({n}, DType::int64));
  Node* vn = g.placeholder("v", meta({n, 4}));
  g.output(ArgList{g.call_function(OpRef("aten.index_put.default"), {xn, ArgList{in}, vn, accumulate}, {}, "put")});
  return CompiledGraph::compile(g, {}).run({x, index_tensor({n}, idx), v})[0];
}

}  // namespace

TEST_CASE("index_put writes or adds rows, repeated indices adding up with accumulate, negatives wrapping") {
  const Tensor x = random_tensor({5, 4}, 21);
  const Ints idx{3, -1, 0};
  const Tensor v = random_tensor({3, 4}, 22);
  const Tensor got = put_rows(x, idx, v, false);
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 4; ++j) {
      float want = test::at(x, {i, j});
      for (std::size_t k = 0; k < idx.size(); ++k)
        if (wrap(idx[k], 5) == i) want = test::at(v, {static_cast<std::int64_t>(k), j});
      CHECK(test::at(got, {i, j}) == want);
    }
  const Ints rep{2, 2, -3, 4};
  const Tensor v4 = random_tensor({4, 4}, 23);
  const Tensor sum = put_rows(x, rep, v4, true);
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 4; ++j) {
      float want = test::at(x, {i, j});
      for (std::size_t k = 0; k < rep.size(); ++k)
        if (wrap(rep[k], 5) == i) want += test::at(v4, {static_cast<std::int64_t>(k), j});
      CHECK(test::at(sum, {i, j}) == doctest::Approx(want).epsilon(1e-6));
    }
}

TEST_CASE("index_put with None entries and with indexed dims apart, values broadcast, a constant index") {
  // x[:, idx] += v: idx [2, 2] on dim 1 of [3, 6, 2]; self[indices] is [3, 2, 2, 2], v [2, 1, 2] broadcasts to it.
  {
    Graph g;
    Node* x = g.placeholder("x", meta({3, 6, 2}));
    Node* idx = g.get_attr("idx", meta({2, 2}, DType::int64));
    Node* v = g.placeholder("v", meta({2, 1, 2}));
    g.output(ArgList{g.call_function(OpRef("aten.index_put.default"), {x, ArgList{Arg(), idx}, v, true})});
    const Ints iv{5, 1, 1, -6};
    const Tensor tx = random_tensor({3, 6, 2}, 24), tv = random_tensor({2, 1, 2}, 25);
    const Tensor got = CompiledGraph::compile(g, {{"idx", index_tensor({2, 2}, iv)}}).run({tx, tv})[0];
    for (std::int64_t a = 0; a < 3; ++a)
      for (std::int64_t b = 0; b < 6; ++b)
        for (std::int64_t c = 0; c < 2; ++c) {
          float want = test::at(tx, {a, b, c});
          for (std::int64_t p = 0; p < 2; ++p)
            for (std::int64_t q = 0; q < 2; ++q)
              if (wrap(iv[p * 2 + q], 6) == b) want += test::at(tv, {q, 0, c});
          CHECK(test::at(got, {a, b, c}) == doctest::Approx(want).epsilon(1e-6));
        }
  }
  // x[i0, :, i2] = v: dims 0 and 2 apart, so their shape [2] leads: self[indices] is [2, 3], v [2, 3].
  {
    Graph g;
    Node* x = g.placeholder("x", meta({4, 3, 5}));
    Node* i0 = g.placeholder("i0", meta({2}, DType::int64));
    Node* i2 = g.placeholder("i2", meta({2}, DType::int64));
    Node* v = g.placeholder("v", meta({2, 3}));
    g.output(ArgList{g.call_function(OpRef("aten.index_put.default"), {x, ArgList{i0, Arg(), i2}, v})});
    const Ints a0{1, 3}, a2{4, -5};
    const Tensor tx = random_tensor({4, 3, 5}, 26), tv = random_tensor({2, 3}, 27);
    const Tensor got = CompiledGraph::compile(g, {}).run({tx, index_tensor({2}, a0), index_tensor({2}, a2), tv})[0];
    for (std::int64_t a = 0; a < 4; ++a)
      for (std::int64_t b = 0; b < 3; ++b)
        for (std::int64_t c = 0; c < 5; ++c) {
          float want = test::at(tx, {a, b, c});
          for (std::int64_t k = 0; k < 2; ++k)
            if (a0[k] == a && wrap(a2[k], 5) == c) want = test::at(tv, {k, b});
          CHECK(test::at(got, {a, b, c}) == want);
        }
  }
}

TEST_CASE("index_put refuses values that do not broadcast, accumulate of bool, and reports an index out of range") {
  {
    Graph g;
    Node* x = g.placeholder("x", meta({5, 4}));
    Node* idx = g.placeholder("idx", meta({3}, DType::int64));
    g.output(ArgList{g.call_function(OpRef("aten.index_put.default"), {x, ArgList{idx}, g.placeholder("v", meta({2, 4}))}, {}, "put")});
    CHECK(contains(compile_error(g), "node put (aten.index_put.default): values of shape [2, 4] do not broadcast to self[indices]'s shape [3, 4]"));
  }
  {
    Graph g;
    Node* x = g.placeholder("x", meta({5}, DType::bool_));
    Node* idx = g.placeholder("idx", meta({3}, DType::int64));
    g.output(ArgList{g.call_function(OpRef("aten.index_put.default"), {x, ArgList{idx}, g.placeholder("v", meta({3}, DType::bool_)), true}, {}, "put")});
    CHECK(contains(compile_error(g), "node put (aten.index_put.default): index_put with accumulate=True of a bool tensor is not supported"));
  }
  const std::string err = error_of([] { put_rows(random_tensor({5, 4}, 28), {1, 5, 0}, random_tensor({3, 4}, 29), false); });
  CHECK(contains(err, "node put (aten.index_put.default): index 5 is out of bounds for dim 0 with size 5"));
}
