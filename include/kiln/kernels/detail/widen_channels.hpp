#pragma once
// A uint8 source of 1 to 3 channels [N, C, H, W] (any strides) copied to
// [N, H + 2 PH, W + 2 PW, 4] (channels-last, 4 channels), every cell that is
// not a source value set to `fill`: the layout in which an image's first int8
// convolution runs on oneDNN's faster kernel (see onednn/qconv.hpp). The source
// may also be the float32 input of a quantize, quantized row by row as it is copied.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)
#include <immintrin.h>
#define KILN_WIDEN_CHANNELS_VBMI 1
#else
#define KILN_WIDEN_CHANNELS_VBMI 0
#endif

namespace kiln::kernels::detail {

namespace widen_channels_detail {

// Source row (n, ih) into the interior of one output row: pixel iw at out + 4 iw.
inline void row(const std::uint8_t* x, const std::array<std::int64_t, 4>& st, std::int64_t C, std::int64_t W, std::uint8_t fill,
                std::uint8_t* out) {
#if KILN_WIDEN_CHANNELS_VBMI
  if (st[3] == 1) {
    // 16 pixels at a time: channel c's 16 bytes in 128-bit lane c (the fill in the others),
    // then byte 4 j + c of the result takes lane c's byte j.
    alignas(64) static constexpr std::array<std::uint8_t, 64> index = [] {
      std::array<std::uint8_t, 64> a{};
      for (int i = 0; i < 64; ++i) a[i] = static_cast<std::uint8_t>(16 * (i % 4) + i / 4);
      return a;
    }();
    const __m512i idx = _mm512_load_si512(index.data());
    for (std::int64_t iw = 0; iw < W; iw += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, W - iw);
      const __mmask16 m = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      __m512i v = _mm512_set1_epi8(static_cast<char>(fill));
      const __m128i f = _mm512_castsi512_si128(v);
      v = _mm512_inserti32x4(v, _mm_mask_loadu_epi8(f, m, x + iw), 0);
      if (C > 1) v = _mm512_inserti32x4(v, _mm_mask_loadu_epi8(f, m, x + st[1] + iw), 1);
      if (C > 2) v = _mm512_inserti32x4(v, _mm_mask_loadu_epi8(f, m, x + 2 * st[1] + iw), 2);
      const __mmask64 bytes = n == 16 ? ~__mmask64(0) : (__mmask64(1) << (4 * n)) - 1;
      _mm512_mask_storeu_epi8(out + 4 * iw, bytes, _mm512_maskz_permutexvar_epi8(~__mmask64(0), idx, v));
    }
    return;
  }
#endif
  for (std::int64_t iw = 0; iw < W; ++iw)
    for (std::int64_t c = 0; c < 4; ++c) out[4 * iw + c] = c < C ? x[c * st[1] + iw * st[3]] : fill;
}

}  // namespace widen_channels_detail

// The copy's rows split over `threads`; copy_row(n, ih, out) writes source row
// (n, ih)'s pixels at out, and the padding is the fill.
template <class CopyRow>
inline void widen_rows(std::int64_t N, std::int64_t H, std::int64_t W, std::int64_t PH, std::int64_t PW, std::uint8_t fill, std::uint8_t* out,
                       int threads, const CopyRow& copy_row) {
  const std::int64_t OH = H + 2 * PH, OW = W + 2 * PW, rows = N * OH, parts = std::max(threads, 1);
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static) if (parts > 1)
  for (std::int64_t t = 0; t < parts; ++t)
    for (std::int64_t r = rows * t / parts; r < rows * (t + 1) / parts; ++r) {
      const std::int64_t n = r / OH, ih = r % OH - PH;
      std::uint8_t* o = out + r * OW * 4;
      if (ih < 0 || ih >= H) {
        std::memset(o, fill, static_cast<std::size_t>(OW * 4));
        continue;
      }
      std::memset(o, fill, static_cast<std::size_t>(PW * 4));
      std::memset(o + (PW + W) * 4, fill, static_cast<std::size_t>(PW * 4));
      copy_row(n, ih, o + PW * 4);
    }
}

// st: the source's strides in elements (bytes).
inline void widen_channels(const std::uint8_t* x, const std::array<std::int64_t, 4>& st, std::int64_t N, std::int64_t C, std::int64_t H,
                           std::int64_t W, std::int64_t PH, std::int64_t PW, std::uint8_t fill, std::uint8_t* out, int threads) {
  widen_rows(N, H, W, PH, PW, fill, out, threads, [&](std::int64_t n, std::int64_t ih, std::uint8_t* o) {
    widen_channels_detail::row(x + n * st[0] + ih * st[2], st, C, W, fill, o);
  });
}

// The same copy of a float32 source [N, C, H, W] whose rows are contiguous
// (st[3] == 1), each row quantized first by quantize(const float*, uint8_t*, n)
// into a buffer of the thread's: one pass over the floats instead of a
// quantized tensor written whole and read back.
template <class Quantize>
inline void widen_channels_quantized(const float* x, const std::array<std::int64_t, 4>& st, std::int64_t N, std::int64_t C, std::int64_t H,
                                     std::int64_t W, std::int64_t PH, std::int64_t PW, std::uint8_t fill, std::uint8_t* out, int threads,
                                     const Quantize& quantize) {
  const std::array<std::int64_t, 4> row_strides{0, W, 0, 1};  // the buffer: C rows of W
  widen_rows(N, H, W, PH, PW, fill, out, threads, [&](std::int64_t n, std::int64_t ih, std::uint8_t* o) {
    thread_local std::vector<std::uint8_t> rows;
    if (rows.size() < static_cast<std::size_t>(C * W)) rows.resize(static_cast<std::size_t>(C * W));
    for (std::int64_t c = 0; c < C; ++c) quantize(x + n * st[0] + c * st[1] + ih * st[2], rows.data() + c * W, W);
    widen_channels_detail::row(rows.data(), row_strides, C, W, fill, o);
  });
}

}  // namespace kiln::kernels::detail
