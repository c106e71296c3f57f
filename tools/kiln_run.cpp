// kiln-run: compile a graph with kiln's executor, run it, time it, write or
// compare its outputs. All of it is kiln::run_main (kiln/run_main.hpp);
// `kiln-run --help` lists the options.
#include "kiln/kernels/registry.hpp"  // the kernels themselves: tools/kernels_*.cpp
#include "kiln/run_main.hpp"

int main(int argc, char** argv) {
  kiln::PassRegistry registry = kiln::default_pass_registry();
  return kiln::run_main(argc, argv, registry);
}
