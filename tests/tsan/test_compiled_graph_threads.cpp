// The executor's threading contract (docs/ARCHITECTURE.md): one CompiledGraph
// is immutable, so several threads may run it at once, each with its own
// RunContext. Four threads run the bundled example (convolution and linear on
// oneDNN, batch and layer norm, split and cat) on inputs of their own, under
// ThreadSanitizer, and each checks every run against the answer the model
// gave for that input on one thread alone.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "kiln/io.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.is_contiguous() && b.is_contiguous() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The input scaled by `factor`, so each thread's answer is its own.
Tensor scaled(const Tensor& x, float factor) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  for (std::int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] * factor;
  return y;
}

}  // namespace

TEST_CASE("one compiled model runs on 4 threads at once, each thread getting its own input's answer") {
  const std::string dir = KILN_EXAMPLE_DIR;
  const io::GraphFile file = io::read_fx_json(dir + "/graph.json");
  // One thread per context: the point is threads sharing one CompiledGraph,
  // not the kernels' own parallel loops.
  runtime::CompileOptions options;
  options.threads = 1;
  const CompiledGraph cg = CompiledGraph::compile(file, options);
  const Tensor x = Tensor::from_weight(io::read_npy(dir + "/inputs/x.npy"));
  const Tensor pytorch = Tensor::from_weight(io::read_npy(dir + "/outputs/output_0.npy"));

  constexpr int kThreads = 4;
  std::vector<Tensor> inputs, expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(scaled(x, 1.0f + 0.5f * static_cast<float>(t)));
    expected.push_back(cg.run({inputs.back()})[0].clone());
  }
  // The model itself is right: thread 0's input is the one PyTorch ran.
  double worst = 0;
  for (std::int64_t i = 0; i < pytorch.numel(); ++i)
    worst = std::max(worst, std::abs(double(expected[0].data<float>()[i]) - pytorch.data<float>()[i]));
  CHECK(worst < 1e-4);
  CHECK_FALSE(same_bytes(expected[0], expected[1]));

  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto ctx = cg.make_context(1);
      for (int r = 0; r < 20; ++r)
        if (!same_bytes(ctx.run({inputs[t]})[0].contiguous(), expected[t])) ++wrong[t];
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(wrong[t] == 0);
}
