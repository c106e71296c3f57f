// The one translation unit of kiln's own programs (kiln-opt, kiln-run, the test
// suites, the benchmarks) that compiles default_pass_registry(), every pass
// kiln ships; they link it and only declare the function
// (KILN_DEFAULT_REGISTRY_SEPARATE, set by the kiln_passes_impl target).
#define KILN_DEFAULT_REGISTRY_IMPLEMENTATION
#include "kiln/passes/default_registry.hpp"
