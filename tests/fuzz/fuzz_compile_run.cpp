// Any bytes read as an fx-graph-json document, compiled by the executor and
// run, give outputs or one of kiln's named errors (compile errors, input
// errors, reader errors, out of memory); never a crash, undefined behaviour or
// an exception of another kind. The seeds are small valid graphs
// (tests/fuzz/seeds/); weights come from no file: each get_attr node gets a
// tensor of its meta's shape with fixed values, and each input likewise.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/io.hpp"

namespace {

using kiln::runtime::Tensor;

// Bounds that keep one input's memory and time small whatever its shapes say.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 20;
constexpr std::size_t kMaxNodes = 64;
constexpr std::size_t kMaxRunBytes = std::size_t{256} << 20;

// Whether every tensor in `v` has static, non-negative dimensions and at most kMaxElements elements.
bool small(const kiln::MetaVal& v) {
  if (const kiln::MetaVal::List* l = v.list()) {
    for (const kiln::MetaVal& e : *l)
      if (!small(e)) return false;
    return true;
  }
  const kiln::TensorMeta* t = v.tensor();
  if (!t) return true;
  std::int64_t n = 1;
  for (const kiln::Dim& d : t->shape) {
    if (!kiln::is_static(d)) return false;
    const std::int64_t s = std::get<std::int64_t>(d);
    if (s < 0 || s > kMaxElements) return false;
    n *= s;
    if (n > kMaxElements) return false;
  }
  return true;
}

bool small(const kiln::Graph& g) {
  std::size_t count = 0;
  for (const kiln::Node* n : g.nodes())
    if (++count > kMaxNodes || !small(n->meta.val)) return false;
  return true;
}

// A tensor of `shape` and `dtype` with fixed values: small positive floats (so
// that variances and divisors are not zero) and integers 0 and 1.
Tensor filled(const kiln::runtime::Shape& shape, kiln::DType dtype) {
  Tensor t = Tensor::zeros(shape, dtype);
  const std::int64_t n = t.numel();
  auto fill = [&](auto* p, auto value_of) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = value_of(i);
  };
  switch (dtype) {
    case kiln::DType::float32: fill(t.data<float>(), [](std::int64_t i) { return float(1 + i % 13) / 16.0f; }); break;
    case kiln::DType::float64: fill(t.data<double>(), [](std::int64_t i) { return double(1 + i % 13) / 16.0; }); break;
    case kiln::DType::int64: fill(t.data<std::int64_t>(), [](std::int64_t i) { return i % 2; }); break;
    case kiln::DType::int32: fill(t.data<std::int32_t>(), [](std::int64_t i) { return std::int32_t(i % 2); }); break;
    case kiln::DType::bool_:
      fill(static_cast<std::uint8_t*>(t.raw()), [](std::int64_t i) { return std::uint8_t(i % 2); });
      break;
    default: break;  // zeros
  }
  return t;
}

kiln::runtime::Weights synthesized_weights(const kiln::Graph& g) {
  kiln::runtime::Weights w;
  for (const kiln::Node* n : g.nodes()) {
    if (n->op() != kiln::OpKind::get_attr) continue;
    if (const kiln::TensorMeta* t = n->meta.val.tensor()) {
      kiln::runtime::Shape shape;
      for (const kiln::Dim& d : t->shape) shape.push_back(std::get<std::int64_t>(d));
      w.insert_or_assign(std::string(n->target_name()), filled(shape, t->dtype));
    }
  }
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    kiln::io::GraphFile f = kiln::io::parse_fx_json(text, "<fuzz>");
    if (!small(f.graph)) return 0;
    kiln::lint(f.graph);
    kiln::runtime::CompileOptions options;
    options.threads = 1;
    const auto cg = kiln::runtime::CompiledGraph::compile(f.graph, synthesized_weights(f.graph), options);
    // Shapes the executor worked out itself (from arguments the meta does not
    // bound) may still be large: such a program is compiled but not run.
    if (cg.arena_bytes() > kMaxRunBytes) return 0;
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < cg.num_inputs(); ++i) {
      const kiln::runtime::Layout& l = cg.input_layout(i);
      if (l.numel() > kMaxElements) return 0;
      inputs.push_back(filled(l.shape, l.dtype));
    }
    for (int r = 0; r < 2; ++r) (void)cg.run(std::span<const Tensor>(inputs));  // a second run reuses the program
  } catch (const kiln::Error& e) {
    // A named error is the right answer to a graph kiln cannot or will not run.
    // KILN_FUZZ_VERBOSE shows it: a seed should compile and run.
    if (std::getenv("KILN_FUZZ_VERBOSE")) std::fprintf(stderr, "kiln error: %s\n", e.what());
  }
  return 0;
}
