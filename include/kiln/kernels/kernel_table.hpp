#pragma once
// The runtime dispatch table that lowering consults: target key -> the
// kernel's lower function. Folded once from a compile-time Hana tuple of
// kernel types (kernels/registry.hpp), so that adding a kernel is one
// specialization and one entry in that tuple; a run never looks anything up.
#include <boost/hana/for_each.hpp>
#include <boost/hana/type.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels {

class KernelTable {
 public:
  // Adds `fn` under `target`; a target registered twice is a programming error.
  void add(std::string_view target, LowerFn fn) {
    auto [it, inserted] = table_.emplace(std::string(target), fn);
    if (!inserted) throw Error("kernel table: two kernels for '" + std::string(target) + "'");
  }
  LowerFn find(std::string_view key) const {
    auto it = table_.find(std::string(key));
    return it == table_.end() ? nullptr : it->second;
  }
  std::size_t size() const { return table_.size(); }
  std::vector<std::string> targets() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : table_) out.push_back(k);
    return out;
  }

 private:
  std::unordered_map<std::string, LowerFn> table_;
};

// Adds every kernel type in the Hana tuple `kernels` (hana::tuple_t<Kernel<"a">, ...>) to `table`.
template <class Kernels>
void add_kernels(KernelTable& table, Kernels kernels) {
  boost::hana::for_each(kernels, [&](auto k) {
    using K = typename decltype(k)::type;
    static_assert(LowerableKernel<K>, "a kernel in the table has no `static void lower(runtime::LowerContext&)`");
    table.add(kernel_traits<K>::target, &K::lower);
  });
}

// The table of every kernel type in the Hana tuple `kernels`.
template <class Kernels>
KernelTable make_kernel_table(Kernels kernels) {
  KernelTable table;
  add_kernels(table, kernels);
  return table;
}

}  // namespace kiln::kernels
