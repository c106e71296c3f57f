#pragma once
// What the int8 suites share to check a kernel or a lowered graph against its
// q/dq reference: random integer operands and the largest error of an output,
// read as uint8 steps or float values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"

namespace kiln::test {

// Values drawn uniformly from [lo, hi] into a uint8, int8 or int64 tensor.
inline runtime::Tensor random_ints(runtime::Shape shape, DType d, int lo, int hi, unsigned seed) {
  runtime::Tensor t = runtime::Tensor::empty(std::move(shape), d);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (d == DType::uint8) t.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(u(rng));
    else if (d == DType::int8) t.data<std::int8_t>()[i] = static_cast<std::int8_t>(u(rng));
    else t.data<std::int64_t>()[i] = u(rng);
  }
  return t;
}

// max |out - ref| over a uint8, int8 or float32 output of ref's size.
inline double max_abs_error(const std::vector<double>& ref, const runtime::Tensor& out) {
  REQUIRE(static_cast<std::int64_t>(ref.size()) == out.numel());
  double err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const auto f = static_cast<std::int64_t>(i);
    const double v = out.dtype() == DType::uint8  ? double(out.data<std::uint8_t>()[f])
                     : out.dtype() == DType::int8 ? double(out.data<std::int8_t>()[f])
                                                  : double(out.data<float>()[f]);
    err = std::max(err, std::abs(v - ref[i]));
  }
  return err;
}

}  // namespace kiln::test
