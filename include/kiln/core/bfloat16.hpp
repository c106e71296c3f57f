#pragma once
// bfloat16 held as its 16 bits (the top half of a float32), with PyTorch's
// conversions: widening is exact, narrowing rounds to nearest, ties to even,
// and any NaN becomes the quiet NaN 0x7fc0.
#include <bit>
#include <cstdint>

namespace kiln {

constexpr float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

constexpr std::uint16_t float_to_bf16(float f) {
  if (f != f) return 0x7fc0;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  // Adding 0x7fff plus the lowest kept bit carries into the kept half exactly
  // when the dropped half is above one half, or equal to it with the kept half odd.
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// f rounded to the nearest bfloat16, as a float.
constexpr float round_to_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace kiln
