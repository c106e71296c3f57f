// Compile the bundled example with kiln's executor and run it on its stored input.
#define KILN_KERNELS_IMPLEMENTATION  // exactly one file of a program compiles the kernels
#include <kiln/kernels/registry.hpp>

#include <iostream>
#include <kiln/io.hpp>
#include <kiln/executor/compiled_graph.hpp>
#include <kiln/executor/numeric_check.hpp>

int main() {
  using kiln::runtime::Tensor;
  kiln::io::GraphFile file = kiln::io::read_fx_json("small_cnn/graph.json");
  kiln::runtime::CompileOptions options;
  options.threads = 2;
  const auto model = kiln::runtime::CompiledGraph::compile(file, options);  // weights read from its table

  const Tensor x = Tensor::from_weight(kiln::io::read_npy("small_cnn/inputs/x.npy"));
  auto context = model.make_context();         // one per thread: its arena, nothing allocated per run
  const auto& outputs = context.run({x});      // views into the context's arena
  const Tensor expected = Tensor::from_weight(kiln::io::read_npy("small_cnn/outputs/output_0.npy"));
  const auto report = kiln::runtime::compare_outputs(outputs, {expected});
  std::cout << model.num_steps() << " steps, arena " << model.arena_bytes() << " bytes, "
            << (report.ok ? "same as PyTorch" : "different from PyTorch: " + report.summary()) << "\n";
  return report.ok ? 0 : 1;
}
