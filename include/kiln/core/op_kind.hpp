#pragma once
// The six node kinds of torch.fx.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class OpKind : std::uint8_t { placeholder, get_attr, call_function, call_method, call_module, output };

inline constexpr std::array<std::string_view, 6> kOpKindNames{"placeholder", "get_attr",    "call_function",
                                                              "call_method", "call_module", "output"};

constexpr std::string_view op_kind_name(OpKind k) { return kOpKindNames[static_cast<std::size_t>(k)]; }

constexpr std::optional<OpKind> op_kind_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kOpKindNames.size(); ++i)
    if (kOpKindNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

}  // namespace kiln
