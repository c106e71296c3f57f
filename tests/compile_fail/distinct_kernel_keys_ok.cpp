// Must compile: the twin of duplicate_kernel_key.cpp with every key distinct.
#include "kiln/kernels/kernel_table.hpp"

struct Relu {
  static void lower(kiln::runtime::LowerContext&) {}
};
using first = kiln::kernels::KernelGroup<kiln::kernels::KernelEntry<"aten.relu.default", Relu>,
                                         kiln::kernels::KernelEntry<"torch.relu", Relu>>;
using second = kiln::kernels::KernelGroup<kiln::kernels::KernelEntry<"Tensor.relu", Relu>>;

int main() {
  kiln::kernels::KernelTable table;
  kiln::kernels::add_kernels<kiln::kernels::concat_groups_t<first, second>>(table);
  return table.size() == 3 ? 0 : 1;
}
