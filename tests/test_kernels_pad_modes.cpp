// Reflect, replicate and circular padding (kernels/shape/pad_modes.hpp) at the
// torch-function and aten levels against a naive index mapping, over 1 to 3
// padded dims, asymmetric pads and transposed inputs; the size errors. flip
// (kernels/shape/flip.hpp), which gathers the same way.
#include <doctest/doctest.h>

#include <string>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::Dims;
using test::dims_of;
using test::ints;
using test::random_tensor;

namespace {

std::int64_t naive_source(const std::string& mode, std::int64_t i, std::int64_t s) {
  if (mode == "replicate") return std::min(std::max<std::int64_t>(i, 0), s - 1);
  if (mode == "circular") return (i % s + s) % s;
  if (i < 0) return -i;  // reflect: mirrored without repeating the edge
  return i >= s ? 2 * (s - 1) - i : i;
}

Tensor run(const Tensor& x, const char* target, ArgList extra, ArgDict kw = {}) {
  Graph g;
  Node* xn = g.placeholder("x", meta(dims_of(x.shape())));
  ArgList args{xn};
  for (const Arg& a : extra) args.push_back(a);
  g.output(ArgList{g.call_function(OpRef(target), args, std::move(kw), "pad")});
  return CompiledGraph::compile(g, {}).run({x})[0];
}

void check_pad(const Tensor& x, const Dims& pad, const std::string& mode, const char* aten = nullptr) {
  CAPTURE(mode);
  CAPTURE(runtime::shape_str(x.shape()));
  CAPTURE(runtime::shape_str(pad));
  const std::size_t rank = x.rank();
  Dims out_shape(x.shape().begin(), x.shape().end()), before(rank, 0);
  for (std::size_t i = 0; i < pad.size() / 2; ++i) {
    before[rank - 1 - i] = pad[2 * i];
    out_shape[rank - 1 - i] += pad[2 * i] + pad[2 * i + 1];
  }
  std::vector<Tensor> got{run(x, "torch.nn.functional.pad", {ints(pad)}, {{"mode", Arg(mode)}})};
  if (aten) got.push_back(run(x, aten, {ints(pad)}));
  for (const Tensor& t : got) {
    REQUIRE(t.shape() == runtime::Shape(out_shape.begin(), out_shape.end()));
    for (std::int64_t o = 0; o < t.numel(); ++o) {
      std::int64_t r = o, src = 0, mul = 1;
      for (std::size_t d = rank; d-- > 0;) {
        src += naive_source(mode, r % out_shape[d] - before[d], x.shape()[d]) * mul;
        mul *= x.shape()[d];
        r /= out_shape[d];
      }
      REQUIRE(test::element(t, o) == test::element(x, src));
    }
  }
}

}  // namespace

TEST_CASE("reflect, replicate and circular padding against a naive mapping") {
  const Tensor x3 = random_tensor({2, 3, 7}, 1), x4 = random_tensor({2, 3, 5, 6}, 2).transpose(2, 3),
               x5 = random_tensor({1, 2, 3, 4, 5}, 3);
  check_pad(x3, {2, 3}, "reflect", "aten.reflection_pad1d.default");
  check_pad(x3, {4, 0}, "replicate", "aten.replication_pad1d.default");
  check_pad(x3, {7, 2}, "circular");
  check_pad(x4, {1, 2, 3, 0}, "reflect", "aten.reflection_pad2d.default");
  check_pad(x4, {2, 2, 1, 1}, "replicate", "aten.replication_pad2d.default");
  check_pad(x4, {2, 1, 0, 3}, "circular");
  check_pad(x5, {1, 1, 2, 0, 1, 2}, "replicate", "aten.replication_pad3d.default");
  check_pad(x5, {1, 2, 1, 1, 2, 1}, "reflect", "aten.reflection_pad3d.default");
  check_pad(x5, {1, 1, 1, 1, 1, 1}, "circular");
}

TEST_CASE("padding modes refuse pads too large and values") {
  auto error = [](const Tensor& x, const char* target, ArgList extra, ArgDict kw = {}) {
    try {
      run(x, target, std::move(extra), std::move(kw));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const Tensor x = random_tensor({1, 2, 3}, 1);
  CHECK(error(x, "aten.reflection_pad1d.default", {ints({3, 0})})
            .find("node pad (aten.reflection_pad1d.default): reflect padding [3, 0] is too large for dim 2 of [1, 2, 3] (each pad must "
                  "be < the size)") != std::string::npos);
  CHECK(error(x, "torch.nn.functional.pad", {ints({0, 4})}, {{"mode", Arg("circular")}}).find("circular padding [0, 4] is too large") !=
        std::string::npos);
  CHECK(error(x, "torch.nn.functional.pad", {ints({1, 1})}, {{"mode", Arg("wrap")}})
            .find("pad mode 'wrap' is not one of constant, reflect, replicate, circular") != std::string::npos);
  CHECK(error(x, "torch.nn.functional.pad", {ints({1, 1}), Arg("reflect"), Arg(2.0)}).find("pad mode 'reflect' takes no value") !=
        std::string::npos);
  CHECK(error(x, "torch.nn.functional.pad", {ints({1, 1, 1})}, {{"mode", Arg("replicate")}})
            .find("replicate padding [1, 1, 1] must hold a (before, after) pair") != std::string::npos);
}

TEST_CASE("flip along one or several dims, negative dims, strided input") {
  const Tensor x = random_tensor({2, 3, 4, 5}, 4).transpose(1, 3);  // [2, 5, 4, 3]
  for (const Dims& dims : {Dims{1}, Dims{0, -1}, Dims{1, 2, 3}}) {
    CAPTURE(runtime::shape_str(dims));
    for (const char* t : {"aten.flip.default", "torch.flip"}) {
      const Tensor y = run(x, t, {ints(dims)});
      REQUIRE(y.shape() == x.shape());
      std::vector<bool> f(4, false);
      for (std::int64_t d : dims) f[d < 0 ? d + 4 : d] = true;
      for (std::int64_t i = 0; i < y.numel(); ++i) {
        std::int64_t r = i, src = 0, mul = 1;
        for (std::size_t d = 4; d-- > 0;) {
          const std::int64_t s = x.shape()[d], o = r % s;
          src += (f[d] ? s - 1 - o : o) * mul;
          mul *= s;
          r /= s;
        }
        REQUIRE(test::element(y, i) == test::element(x, src));
      }
    }
  }
  CHECK_THROWS_WITH_AS(run(x, "aten.flip.default", {ints({1, -3})}), doctest::Contains("node pad (aten.flip.default): flip: dim -3 appears twice"), Error);
}
