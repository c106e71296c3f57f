// The one translation unit of kiln's own programs (kiln-opt, kiln-run, the test
// suites) that compiles every kernel (kiln/kernels/registry.hpp); they link it.
// The kernels are the executor's compile cost: compiled once, not per program.
#define KILN_KERNELS_IMPLEMENTATION
#include "kiln/kernels/registry.hpp"
