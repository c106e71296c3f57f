// One of the three parts of the kernels that kiln's own programs link (kiln/kernels/registry.hpp):
// compiled apart so that no translation unit holds them all.
#define KILN_KERNELS_PART_ONEDNN
#include "kiln/kernels/registry.hpp"
