// Must NOT compile: one kernel group binds "aten.relu.default" twice, which
// KernelGroup refuses with a static_assert naming the key in its template
// arguments. distinct_kernel_keys_ok.cpp, the same group with distinct keys, compiles.
#include "kiln/kernels/kernel_table.hpp"

struct Relu {
  static void lower(kiln::runtime::LowerContext&) {}
};
using group = kiln::kernels::KernelGroup<kiln::kernels::KernelEntry<"aten.relu.default", Relu>,
                                         kiln::kernels::KernelEntry<"torch.relu", Relu>,
                                         kiln::kernels::KernelEntry<"aten.relu.default", Relu>>;

int main() {
  kiln::kernels::KernelTable table;
  kiln::kernels::add_kernels<group>(table);
  return static_cast<int>(table.size());
}
