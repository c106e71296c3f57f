#pragma once
// A run of floats quantized as quantized_decomposed.quantize_per_tensor does
// (pointwise/quantize.hpp): clamp(round(x * inv_scale) + zero_point, lo, hi),
// rounding half to even, narrowed to Q. Shared by the quantize kernel and the
// copies that quantize as they move data (onednn/qconv.hpp's widened source).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kiln/kernels/detail/xtensor.hpp"

namespace kiln::kernels::detail {

// With xsimd (GCC keeps scalar code for the float clamps, which may trap): round
// half to even, add the zero point, clamp, then narrow.
template <class Q>
inline void quantize_run(const float* x, Q* y, std::int64_t n, float inv_scale, float zero_point, float lo, float hi) {
  using B = xsimd::batch<float>;
  constexpr auto W = static_cast<std::int64_t>(B::size);
  alignas(64) std::int32_t ints[W];
  const B inv(inv_scale), z(zero_point), low(lo), high(hi);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    const B v = xsimd::min(xsimd::max(xsimd::nearbyint(B::load_unaligned(x + i) * inv) + z, low), high);
#if defined(__AVX512F__)
    // 16 lanes narrowed by one vpmovdb (each value already lies in Q's range): the
    // loop below stores them byte by byte, a third of the time of a run (2.4M floats).
    if constexpr (W == 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtepi32_epi8(xsimd::batch_cast<std::int32_t>(v)));
      continue;
    }
#endif
    xsimd::batch_cast<std::int32_t>(v).store_aligned(ints);
    for (std::int64_t k = 0; k < W; ++k) y[i + k] = static_cast<Q>(ints[k]);
  }
  for (; i < n; ++i) y[i] = static_cast<Q>(std::min(std::max(std::nearbyint(x[i] * inv_scale) + zero_point, lo), hi));
}

}  // namespace kiln::kernels::detail
