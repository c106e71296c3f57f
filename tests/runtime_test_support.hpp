#pragma once
// Helpers for the executor's suites: random tensors (never all zeros), meta
// for placeholders, naive strided reads, and closeness checks.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <random>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"
#include "kiln/executor/compiled_graph.hpp"

namespace kiln::test {

// Shapes written as integer lists in the tests, and the two forms a graph takes them in.
using Dims = std::vector<std::int64_t>;

inline std::vector<Dim> dims_of(const Dims& v) { return std::vector<Dim>(v.begin(), v.end()); }

inline ArgList ints(const Dims& v) {
  ArgList l;
  for (std::int64_t x : v) l.push_back(Arg(x));
  return l;
}

inline TensorMeta meta(std::vector<Dim> shape, DType dtype = DType::float32) {
  return TensorMeta{std::move(shape), dtype, std::nullopt};
}

// Normal(0, 1) values (or integers in [lo, hi] for integer dtypes), seeded.
inline runtime::Tensor random_tensor(runtime::Shape shape, unsigned seed, DType dtype = DType::float32) {
  runtime::Tensor t = runtime::Tensor::empty(std::move(shape), dtype);
  std::mt19937 rng(seed);
  if (dtype == DType::float32) {
    std::normal_distribution<float> d;
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  } else if (dtype == DType::int64) {
    std::uniform_int_distribution<std::int64_t> d(-5, 5);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<std::int64_t>()[i] = d(rng);
  } else {
    FAIL("random_tensor: unsupported dtype");
  }
  return t;
}

// Element i (in row-major order of its shape) of a strided float tensor.
inline float element(const runtime::Tensor& t, std::int64_t flat) {
  std::int64_t off = 0;
  for (std::size_t k = t.rank(); k-- > 0;) {
    const std::int64_t n = t.shape()[k];
    off += (flat % n) * t.strides()[k];
    flat /= n;
  }
  return t.data<float>()[off];
}

// The float at a multi-index of a tensor of any strides.
inline float at(const runtime::Tensor& t, std::initializer_list<std::int64_t> idx) {
  std::int64_t off = 0, k = 0;
  for (auto i : idx) off += i * t.strides()[k++];
  return t.data<float>()[off];
}

// Largest |a - b| over all elements; shapes must match.
inline double max_abs_diff(const runtime::Tensor& a, const runtime::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(double(element(a, i)) - element(b, i)));
  return m;
}

// max_abs_diff over the largest |b|: the error relative to the reference's scale.
inline double max_rel_diff(const runtime::Tensor& a, const runtime::Tensor& b) {
  double scale = 0;
  for (std::int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, std::abs(double(element(b, i))));
  return max_abs_diff(a, b) / (scale > 0 ? scale : 1.0);
}

// The largest |got - want| over the largest |want|: a naive loop's result as the reference.
inline double max_rel(const runtime::Tensor& got, const std::vector<double>& want) {
  REQUIRE(got.numel() == static_cast<std::int64_t>(want.size()));
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    err = std::max(err, std::abs(element(got, static_cast<std::int64_t>(i)) - want[i]));
  }
  return err / std::max(scale, 1e-30);
}

// The message of what `f` throws, or "no error".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// The message of compiling `g`, or "" when it compiles.
inline std::string compile_error(const Graph& g, const runtime::Weights& w = {}) {
  try {
    runtime::CompiledGraph::compile(g, w);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Whether `s` holds `part`, as the suites check a piece of an error message.
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace kiln::test
