#pragma once
// Tensor element types, named exactly as fx-graph-json (and `torch.<name>`) names them.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : std::uint8_t {
  float32,
  float64,
  float16,
  bfloat16,
  int8,
  uint8,
  int16,
  int32,
  int64,
  bool_,  // `bool` is a keyword; the JSON name is still "bool"
  float8_e4m3fn,
  complex64,
};

namespace detail {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t itemsize;
  bool is_floating;
};
inline constexpr std::array<DTypeInfo, 12> kDTypeTable{{
    {DType::float32, "float32", 4, true},
    {DType::float64, "float64", 8, true},
    {DType::float16, "float16", 2, true},
    {DType::bfloat16, "bfloat16", 2, true},
    {DType::int8, "int8", 1, false},
    {DType::uint8, "uint8", 1, false},
    {DType::int16, "int16", 2, false},
    {DType::int32, "int32", 4, false},
    {DType::int64, "int64", 8, false},
    {DType::bool_, "bool", 1, false},
    {DType::float8_e4m3fn, "float8_e4m3fn", 1, true},
    {DType::complex64, "complex64", 8, false},
}};
constexpr const DTypeInfo& dtype_info(DType d) { return kDTypeTable[static_cast<std::size_t>(d)]; }
}  // namespace detail

constexpr std::string_view dtype_name(DType d) { return detail::dtype_info(d).name; }
constexpr std::size_t dtype_itemsize(DType d) { return detail::dtype_info(d).itemsize; }
constexpr bool is_floating_point(DType d) { return detail::dtype_info(d).is_floating; }

// The dtype called `name` in fx-graph-json, or nullopt for a name it does not define.
constexpr std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : detail::kDTypeTable)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

}  // namespace kiln
