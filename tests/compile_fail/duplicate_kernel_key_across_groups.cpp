// Must NOT compile: two kernel groups, each fine alone, both bind "torch.relu";
// putting them together (as kernels/registry.hpp puts every group together where
// all kernels are compiled in one file) is refused at compile time.
#include "kiln/kernels/kernel_table.hpp"

struct Relu {
  static void lower(kiln::runtime::LowerContext&) {}
};
using first = kiln::kernels::KernelGroup<kiln::kernels::KernelEntry<"aten.relu.default", Relu>,
                                         kiln::kernels::KernelEntry<"torch.relu", Relu>>;
using second = kiln::kernels::KernelGroup<kiln::kernels::KernelEntry<"torch.relu", Relu>>;

int main() {
  kiln::kernels::KernelTable table;
  kiln::kernels::add_kernels<kiln::kernels::concat_groups_t<first, second>>(table);
  return static_cast<int>(table.size());
}
