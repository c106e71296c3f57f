#pragma once
// FixedString: a string literal usable as a template argument (C++20 class-type
// non-type parameter), for names known at compile time: a pattern's capture
// names (`kw<"x">`), a kernel's op key (`Kernel<"aten.mm.default">`).
#include <cstddef>
#include <string_view>

namespace kiln {

template <std::size_t N>
struct FixedString {
  char data[N]{};
  constexpr FixedString(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) data[i] = s[i];
  }
  constexpr std::string_view view() const { return {data, N - 1}; }
  static constexpr std::size_t length() { return N - 1; }
};

}  // namespace kiln
