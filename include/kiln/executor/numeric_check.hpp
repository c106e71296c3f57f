#pragma once
// The numeric check (Inductor's numeric_utils): run a graph and a rewritten
// copy of it on the same random inputs and compare every output within a
// tolerance, reporting per output the largest absolute and relative error.
//
//   runtime::NumericCheck check(original, weights);      // runs the original once
//   runtime::NumericReport r = check.compare(rewritten);
//   if (!r.ok) std::cerr << r.summary() << "\n";
//
// PassManager runs it after every pass through set_after_each_pass(check.hook()),
// which names the first pass that changes an output.
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <type_traits>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core/bfloat16.hpp"
#include "kiln/executor/compiled_graph.hpp"

namespace kiln::runtime {

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};

struct OutputError {
  double max_abs = 0;
  // max_abs over the largest |expected| of the output: an error relative to the
  // output's scale, which near-zero elements cannot blow up.
  double max_rel = 0;
  std::int64_t mismatches = 0;  // elements outside atol + rtol * |b|
  std::string shape_mismatch;   // non-empty when shapes or dtypes differ
};

struct NumericReport {
  bool ok = true;
  std::vector<OutputError> outputs;
  std::string summary() const {
    std::ostringstream s;
    if (outputs.empty()) s << "no outputs";
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const OutputError& e = outputs[i];
      s << (i ? "; " : "") << "output " << i << ": ";
      if (!e.shape_mismatch.empty()) s << e.shape_mismatch;
      else s << "max abs err " << e.max_abs << ", max rel err " << e.max_rel << ", " << e.mismatches << " mismatched";
    }
    return s.str();
  }
};

// A NumericCheck found an output that changed; the message names the pass when run as a hook.
class NumericMismatch : public Error {
 public:
  using Error::Error;
};

// Integers in [0, 10); types narrower than int draw as int (the standard allows
// no char-sized distribution).
template <class T>
void fill_small_ints(Tensor& t, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::conditional_t<(sizeof(T) < sizeof(int)), int, T>> d(0, 9);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
}

// A tensor of `layout` filled from a seeded generator: normal(0, 1) for floats
// (bfloat16 included), integers in [0, 10) for integer types (valid indices for
// small tables), bools at random.
inline Tensor random_input(const Layout& layout, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(layout.shape, layout.dtype);
  const std::int64_t n = t.numel();
  switch (layout.dtype) {
    case DType::float32: {
      std::normal_distribution<float> d;
      for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = d(rng);
      break;
    }
    case DType::float64: {
      std::normal_distribution<double> d;
      for (std::int64_t i = 0; i < n; ++i) t.data<double>()[i] = d(rng);
      break;
    }
    case DType::bfloat16: {  // normal(0, 1) rounded to bfloat16, held as its bits
      std::normal_distribution<float> d;
      for (std::int64_t i = 0; i < n; ++i) t.data<std::uint16_t>()[i] = float_to_bf16(d(rng));
      break;
    }
    case DType::int64: fill_small_ints<std::int64_t>(t, rng); break;
    case DType::int32: fill_small_ints<std::int32_t>(t, rng); break;
    case DType::int16: fill_small_ints<std::int16_t>(t, rng); break;
    case DType::int8: fill_small_ints<std::int8_t>(t, rng); break;
    case DType::uint8: fill_small_ints<std::uint8_t>(t, rng); break;
    case DType::bool_: {
      std::bernoulli_distribution d;
      for (std::int64_t i = 0; i < n; ++i) t.data<bool>()[i] = d(rng);
      break;
    }
    default:
      throw InputError("random inputs of dtype " + std::string(dtype_name(layout.dtype)) + " are not supported");
  }
  return t;
}

inline std::vector<Tensor> random_inputs(const CompiledGraph& cg, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < cg.num_inputs(); ++i) out.push_back(random_input(cg.input_layout(i), rng));
  return out;
}

namespace detail {
inline double as_double(const Tensor& t, std::int64_t flat) {
  std::int64_t off = 0;
  for (std::size_t k = t.rank(); k-- > 0;) {
    const std::int64_t n = t.shape()[k];
    off += (flat % n) * t.strides()[k];
    flat /= n;
  }
  const auto* p = static_cast<const std::byte*>(t.raw());
  switch (t.dtype()) {
    case DType::float32: return reinterpret_cast<const float*>(p)[off];
    case DType::float64: return reinterpret_cast<const double*>(p)[off];
    case DType::bfloat16: return bf16_to_float(reinterpret_cast<const std::uint16_t*>(p)[off]);
    case DType::int64: return static_cast<double>(reinterpret_cast<const std::int64_t*>(p)[off]);
    case DType::int32: return reinterpret_cast<const std::int32_t*>(p)[off];
    case DType::int8: return reinterpret_cast<const std::int8_t*>(p)[off];
    case DType::uint8: return reinterpret_cast<const std::uint8_t*>(p)[off];
    case DType::bool_: return reinterpret_cast<const bool*>(p)[off] ? 1 : 0;
    default: throw Error("numeric check: dtype " + std::string(dtype_name(t.dtype())) + " is not compared");
  }
}
}  // namespace detail

// Compares `actual` with `expected` output by output.
inline NumericReport compare_outputs(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                                     Tolerance tol = {}) {
  NumericReport r;
  if (actual.size() != expected.size()) {
    r.ok = false;
    r.outputs.push_back({0, 0, 0, "the graph has " + std::to_string(actual.size()) + " outputs, " +
                                      std::to_string(expected.size()) + " expected"});
    return r;
  }
  for (std::size_t i = 0; i < actual.size(); ++i) {
    OutputError e;
    const Tensor& a = actual[i];
    const Tensor& b = expected[i];
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
      e.shape_mismatch = std::string(dtype_name(a.dtype())) + " " + shape_str(a.shape()) + " where " +
                         std::string(dtype_name(b.dtype())) + " " + shape_str(b.shape()) + " was expected";
      r.ok = false;
      r.outputs.push_back(e);
      continue;
    }
    double scale = 0;
    for (std::int64_t k = 0; k < a.numel(); ++k) {
      const double x = detail::as_double(a, k), y = detail::as_double(b, k);
      const double d = std::abs(x - y);
      const bool nan_mismatch = std::isnan(x) != std::isnan(y);
      if (nan_mismatch || d > tol.atol + tol.rtol * std::abs(y)) ++e.mismatches;
      // A NaN where the other has a number counts as an infinite error; NaN in both, as none.
      const double err = nan_mismatch ? INFINITY : std::isnan(d) ? 0.0 : d;
      e.max_abs = std::max(e.max_abs, err);
      if (!std::isnan(y)) scale = std::max(scale, std::abs(y));
    }
    e.max_rel = scale > 0 ? e.max_abs / scale : e.max_abs;
    if (e.mismatches) r.ok = false;
    r.outputs.push_back(e);
  }
  return r;
}

class NumericCheck {
 public:
  // Compiles and runs `original` on inputs drawn with `seed`; later graphs are compared with its outputs.
  NumericCheck(const Graph& original, Weights weights, Tolerance tol = {}, std::uint64_t seed = 0,
               CompileOptions options = {})
      : weights_(std::move(weights)), tol_(tol), options_(options) {
    const auto cg = CompiledGraph::compile(original, weights_, options_);
    inputs_ = random_inputs(cg, seed);
    expected_ = cg.run(inputs_);
  }

  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<Tensor>& expected() const { return expected_; }

  NumericReport compare(const Graph& rewritten) const { return compare(rewritten, weights_); }
  // With the rewritten graph's own weights: a pass that folds constants made
  // new ones (runtime::with_created_weights adds them to the original's).
  NumericReport compare(const Graph& rewritten, const Weights& weights) const {
    const auto cg = CompiledGraph::compile(rewritten, weights, options_);
    return compare_outputs(cg.run(inputs_), expected_, tol_);
  }
  const Weights& weights() const { return weights_; }

  // For PassManager::set_after_each_pass: throws NumericMismatch naming the pass.
  // With `store`, the weights passes create there are added to the original's.
  std::function<void(const Graph&, const std::string&)> hook(const io::WeightStore* store = nullptr) const {
    return [this, store](const Graph& g, const std::string& pass) {
      const NumericReport r = store ? compare(g, with_created_weights(weights_, *store)) : compare(g);
      if (!r.ok) throw NumericMismatch("numeric check after pass '" + pass + "': " + r.summary());
    };
  }

 private:
  Weights weights_;
  Tolerance tol_;
  CompileOptions options_;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> expected_;
};

}  // namespace kiln::runtime
