#pragma once
// KernelGroup: a compile-time list (a Boost.Hana type list) of op keys and the
// kernels that lower them, each key written once, next to its kernel. A key
// given twice, in one group or across the groups a program puts together
// (kernels/registry.hpp), fails to compile with the key in the error's
// template arguments (kernel_key_given<"the key", times>).
#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>

#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "kiln/core/fixed_string.hpp"
#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels {

// The op `Key` runs kernel `K`.
template <FixedString Key, class K>
struct KernelEntry {
  static_assert(LowerableKernel<K>, "a kernel needs `static void lower(runtime::LowerContext&)`");
  static constexpr auto fixed_key = Key;
  static constexpr std::string_view key = Key.view();
  using kernel = K;
};

// Instantiated only for a key given more than once, so that the compiler names it.
template <FixedString Key, std::size_t Times>
struct kernel_key_given {
  static_assert(Times == 1, "an op key is bound to more than one kernel: it is the first template argument here");
  static constexpr bool once = true;
};

namespace detail {
template <class... Entries>
constexpr std::array<std::string_view, sizeof...(Entries)> sorted_keys() {
  std::array<std::string_view, sizeof...(Entries)> keys{Entries::key...};
  std::sort(keys.begin(), keys.end());
  return keys;
}
template <class... Entries>
constexpr std::size_t times_given(std::string_view key) {
  return ((Entries::key == key ? std::size_t{1} : std::size_t{0}) + ... + std::size_t{0});
}
// Sorting finds whether a key repeats; only then is each key counted, to name it.
template <class... Entries>
constexpr bool keys_distinct() {
  constexpr auto keys = sorted_keys<Entries...>();
  if constexpr (std::adjacent_find(keys.begin(), keys.end()) != keys.end())
    return (kernel_key_given<Entries::fixed_key, times_given<Entries...>(Entries::key)>::once && ...);
  return true;
}
}  // namespace detail

template <class... Entries>
struct KernelGroup {
  static_assert(detail::keys_distinct<Entries...>());
  static constexpr std::size_t size = sizeof...(Entries);
  static constexpr auto entries = boost::hana::tuple_t<Entries...>;
};

// The groups' entries in one group (their keys checked once more, together).
template <class... Groups>
struct concat_groups;
template <class... E>
struct concat_groups<KernelGroup<E...>> {
  using type = KernelGroup<E...>;
};
template <class... A, class... B, class... Rest>
struct concat_groups<KernelGroup<A...>, KernelGroup<B...>, Rest...> {
  using type = typename concat_groups<KernelGroup<A..., B...>, Rest...>::type;
};
template <class... Groups>
using concat_groups_t = typename concat_groups<Groups...>::type;

}  // namespace kiln::kernels
