#pragma once
// Compile-time names for captures: `KeywordArg<"x">`, `match.get<"x">()`.
// A FixedString (core/fixed_string.hpp) is a string literal usable as a template argument; a NameList
// is the (possibly repeating) list of capture names a pattern binds, and
// NameIndex maps a name to its slot among the distinct names at compile time.
#include <array>
#include <cstddef>
#include <string_view>
#include <utility>

#include "kiln/core/fixed_string.hpp"

namespace kiln::pattern {

using kiln::FixedString;

// A name as a pack of characters, for diagnostics: clang prints a FixedString
// template argument as character codes ({{110, 111, 0}}) but this type as
// capture_name<'n', 'o'>, so an error that names a capture reads as the name.
template <char... Cs>
struct capture_name {};
namespace detail {
template <FixedString Name, std::size_t... I>
capture_name<Name.data[I]...> spell(std::index_sequence<I...>);
}  // namespace detail
template <FixedString Name>
using spelled_name_t = decltype(detail::spell<Name>(std::make_index_sequence<Name.length()>{}));

template <FixedString... Names>
struct NameList {
  static constexpr std::size_t size = sizeof...(Names);
  static constexpr std::array<std::string_view, sizeof...(Names)> names{Names.view()...};
};

template <class... Lists>
struct ConcatNames;
template <>
struct ConcatNames<> {
  using type = NameList<>;
};
template <FixedString... A>
struct ConcatNames<NameList<A...>> {
  using type = NameList<A...>;
};
template <FixedString... A, FixedString... B, class... Rest>
struct ConcatNames<NameList<A...>, NameList<B...>, Rest...> {
  using type = typename ConcatNames<NameList<A..., B...>, Rest...>::type;
};
template <class... Lists>
using concat_names_t = typename ConcatNames<Lists...>::type;

inline constexpr std::size_t kNoName = static_cast<std::size_t>(-1);

// A NameList's names spelled out for diagnostics: captures<capture_name<'a'>, ...>.
template <class... Spelled>
struct captures {};
template <class List>
struct spelled_names;
template <FixedString... Names>
struct spelled_names<NameList<Names...>> {
  using type = captures<spelled_name_t<Names>...>;
};

// Slots for the distinct names of a NameList, in order of first appearance.
template <class List>
struct NameIndex {
  using list = List;
  static constexpr std::size_t distinct() {
    std::size_t n = 0;
    for (std::size_t i = 0; i < List::size; ++i) {
      bool seen = false;
      for (std::size_t j = 0; j < i; ++j) seen |= List::names[j] == List::names[i];
      n += !seen;
    }
    return n;
  }
  static constexpr std::size_t of(std::string_view name) {
    std::size_t slot = 0;
    for (std::size_t i = 0; i < List::size; ++i) {
      bool seen = false;
      for (std::size_t j = 0; j < i; ++j) seen |= List::names[j] == List::names[i];
      if (seen) continue;
      if (List::names[i] == name) return slot;
      ++slot;
    }
    return kNoName;
  }
  static constexpr std::array<std::string_view, distinct()> distinct_names() {
    std::array<std::string_view, distinct()> out{};
    std::size_t slot = 0;
    for (std::size_t i = 0; i < List::size; ++i) {
      bool seen = false;
      for (std::size_t j = 0; j < i; ++j) seen |= List::names[j] == List::names[i];
      if (!seen) out[slot++] = List::names[i];
    }
    return out;
  }
};

}  // namespace kiln::pattern
