// The one translation unit of the test programs that compiles every kernel
// (kiln/kernels/registry.hpp); the executor's suites link it.
#define KILN_KERNELS_IMPLEMENTATION
#include "kiln/kernels/registry.hpp"
