#pragma once
// kiln's own int8 depthwise 2-d convolution: uint8 channels-last source, int8
// weights, uint8/int8 channels-last output, AVX-512 VNNI. Its source may be the
// result of a 1x1 convolution (MobileNet's expand) computed row by row into the
// kernel's buffer, never written to memory (Int8PointwiseSource).
//
// VNNI's vpdpbusd sums 4 adjacent u8*s8 products into each int32 lane; with one
// input channel per output a depthwise convolution has no 4 channels to sum, so
// the 4 are taken from the kernel's rows. Each thread keeps the source rows it
// is reading interleaved in one buffer, 4 bytes per channel and column, input
// row ih in byte ih % 4: a new row is written once into its byte (one vpermb
// and a masked store per 16 channels), and the rows an output row reads,
// consecutive, are always in 4 distinct bytes. Each kernel column kw is then
// one vpdpbusd per 16 channels, against weights whose 4 bytes hold the kernel
// rows rotated as the rows are (4 rotations, packed once). With 3 kernel rows
// or fewer, two output rows are computed from one load of each column.
//
// The 1x1 convolution's rows: each output channel's int32 sum is one lane of a
// vpdpbusd over 4 input channels at a time (a pixel's bytes broadcast once for
// all channels); its epilogue is the depthwise one (below) and the byte lands in
// its row's slot of the interleaved buffer by a shift and a masked store.
//
// The zero point: the accumulator starts at -x_zp * sum(w[c]) and padding reads
// x_zp, so the sum is exactly sum((x - x_zp) * w). The epilogue is one multiply
// and add per channel (scale and bias folded with the output quantization),
// round half to even, a clamp for relu/hardtanh and the output's range, narrowed.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__AVX512VBMI__)
#include <immintrin.h>
#define KILN_INT8_DEPTHWISE 1
#else
#define KILN_INT8_DEPTHWISE 0
#endif

namespace kiln::kernels::detail {

// Whether this build has the kernel (AVX-512 BW, VL, VNNI and VBMI at compile time).
inline constexpr bool kInt8DepthwiseBuilt = KILN_INT8_DEPTHWISE != 0;
// The widest 1x1 convolution a plan computes its source from (8 broadcasts a pixel).
inline constexpr std::int64_t kInt8PointwiseMaxChannels = 32;
// Kernel rows one vpdpbusd covers.
inline constexpr std::int64_t kInt8DepthwiseMaxRows = 4;

// A 1x1 convolution (stride 1, no padding, one group) whose uint8 result is the
// depthwise convolution's source: its input [N, H, W, C] uint8 channels-last.
struct Int8PointwiseSource {
  std::int64_t C = 0;  // input channels, a multiple of 4, at most kInt8PointwiseMaxChannels
  // [C / 4][group][16 output channels][4 input channels], zero past the depthwise's channels.
  std::vector<std::int8_t> weight;
  // [group * 16]: x_scale * w_scale / output_scale, and the bias (x_zp folded in) / output_scale + output_zp.
  std::vector<float> scale, bias;
  std::int32_t q_lo = 0, q_hi = 255;  // relu/hardtanh's clamp and uint8's range, in output units
};

struct Int8DepthwisePlan {
  std::int64_t N = 0, H = 0, W = 0, C = 0, OH = 0, OW = 0;
  std::int64_t KH = 1, KW = 1, PH = 0, PW = 0, DW = 1;  // kernel rows undilated, KH <= 4
  std::int64_t SH = 1, SW = 1;                         // strides
  std::uint8_t source_zero_point = 0;
  bool signed_output = false;  // int8, else uint8
  // Per group of 16 channels (zero past C):
  std::vector<std::int8_t> weight;         // [rotation][group][KW][16 channels][4 bytes]: kernel row kh in byte (rotation + kh) % 4
  std::vector<std::int32_t> compensation;  // [group * 16]: -x_zp * sum of the channel's weights
  std::vector<float> scale, bias;          // [group * 16]: x_scale * w_scale / out_scale, bias / out_scale + out_zp
  std::int32_t q_lo = 0, q_hi = 255;       // relu/hardtanh's clamp and the output's range, in output units
  std::optional<Int8PointwiseSource> pointwise;  // where the source is computed from the 1x1 convolution's input

  std::int64_t groups() const { return (C + 15) / 16; }
  std::int64_t padded_channels() const { return groups() * 16; }
  // Columns of an interleaved row: the left padding, the row, and whatever the last window reaches past it.
  std::int64_t padded_width() const { return std::max(PW + W, (OW - 1) * SW + (KW - 1) * DW + 1); }
};

// A value in output units rounded as the kernel's epilogue rounds (half to even), for the plan's clamp bounds.
inline std::int32_t int8_depthwise_quantize(float y) { return static_cast<std::int32_t>(std::nearbyint(y)); }

#if KILN_INT8_DEPTHWISE

namespace int8_depthwise {

inline std::uint8_t* thread_buffer(std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buffer;
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);  // grows once per thread; later runs reuse it
  const auto addr = reinterpret_cast<std::uintptr_t>(buffer.data());
  return buffer.data() + (64 - addr % 64) % 64;
}

inline __mmask16 group_mask(std::int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

// The rows a thread holds: the interleaved buffer [padded column][padded channel][4 bytes]
// and, per byte, the input row it holds (image * H + ih; -2 a padding row, -1 none yet).
struct Rows {
  std::uint8_t* buffer;
  std::array<std::int64_t, 4> held{-1, -1, -1, -1};
};

// P pixels of the 1x1 convolution's row `src` from column iw, every output channel, into byte
// `slot` of their columns: each pixel's K4 * 4 input bytes are broadcast once for all groups.
template <int P, int K4>
inline void pointwise_pixels(const Int8DepthwisePlan& p, const Int8PointwiseSource& e, const std::uint8_t* src, std::int64_t iw,
                             std::int64_t slot, std::uint8_t* dst) {
  const std::int64_t groups = p.groups(), col_bytes = p.padded_channels() * 4;
  __m512i xb[P][K4];
  for (int i = 0; i < P; ++i)
    for (int k = 0; k < K4; ++k) {
      std::int32_t four;
      std::memcpy(&four, src + (iw + i) * K4 * 4 + k * 4, 4);
      xb[i][k] = _mm512_set1_epi32(four);
    }
  const __m512i lo = _mm512_set1_epi32(e.q_lo), hi = _mm512_set1_epi32(e.q_hi);
  const __mmask64 bytes = 0x1111111111111111ULL << slot;
  const __mmask16 all = 0xFFFF;  // zero-masked forms: see pixels()
  const auto shift = static_cast<unsigned>(8 * slot);
  for (std::int64_t g = 0; g < groups; ++g) {
    __m512i acc[P];
    for (int i = 0; i < P; ++i) acc[i] = _mm512_setzero_si512();
    for (int k = 0; k < K4; ++k) {
      const __m512i wv = _mm512_loadu_si512(e.weight.data() + (k * groups + g) * 64);
      for (int i = 0; i < P; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], xb[i][k], wv);
    }
    const __m512 sc = _mm512_loadu_ps(e.scale.data() + g * 16), bi = _mm512_loadu_ps(e.bias.data() + g * 16);
    for (int i = 0; i < P; ++i) {
      __m512i q = _mm512_maskz_cvtps_epi32(all, _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(all, acc[i]), sc, bi));
      q = _mm512_maskz_min_epi32(all, _mm512_maskz_max_epi32(all, q, lo), hi);
      _mm512_mask_storeu_epi8(dst + (iw + i) * col_bytes + g * 64, bytes, _mm512_maskz_slli_epi32(all, q, shift));
    }
  }
}

template <int K4>
inline void write_pointwise_row(const Int8DepthwisePlan& p, const Int8PointwiseSource& e, const std::uint8_t* src, std::int64_t slot,
                                std::uint8_t* dst) {
  constexpr int P = K4 <= 4 ? 4 : 2;  // broadcasts and accumulators within the 32 registers
  std::int64_t iw = 0;
  for (; iw + P <= p.W; iw += P) pointwise_pixels<P, K4>(p, e, src, iw, slot, dst);
  for (; iw < p.W; ++iw) pointwise_pixels<1, K4>(p, e, src, iw, slot, dst);
}

// The 1x1 convolution of input row `src` ([W][e.C]) into byte `slot` of the interleaved row at `dst`.
inline void write_pointwise_row(const Int8DepthwisePlan& p, const Int8PointwiseSource& e, const std::uint8_t* src, std::int64_t slot,
                                std::uint8_t* dst) {
  switch (e.C / 4) {
    case 1: return write_pointwise_row<1>(p, e, src, slot, dst);
    case 2: return write_pointwise_row<2>(p, e, src, slot, dst);
    case 3: return write_pointwise_row<3>(p, e, src, slot, dst);
    case 4: return write_pointwise_row<4>(p, e, src, slot, dst);
    case 5: return write_pointwise_row<5>(p, e, src, slot, dst);
    case 6: return write_pointwise_row<6>(p, e, src, slot, dst);
    case 7: return write_pointwise_row<7>(p, e, src, slot, dst);
    default: return write_pointwise_row<8>(p, e, src, slot, dst);
  }
}

// Input row ih of image n (the zero point where ih is outside the image) into byte ih % 4 of every column it covers.
inline void write_row(const Int8DepthwisePlan& p, const std::uint8_t* x, std::int64_t n, std::int64_t ih, Rows& rows) {
  // Every padding row is the same row of zero points: one tag (-2) serves them all.
  const std::int64_t slot = ((ih % 4) + 4) % 4, tag = ih >= 0 && ih < p.H ? n * p.H + ih : -2;
  if (rows.held[slot] == tag) return;
  rows.held[slot] = tag;
  const std::int64_t C = p.C, Cp = p.padded_channels();
  // Byte 4j + slot of the 64 takes source byte j.
  alignas(64) static constexpr std::array<std::uint8_t, 64> index = [] {
    std::array<std::uint8_t, 64> a{};
    for (int i = 0; i < 64; ++i) a[i] = static_cast<std::uint8_t>(i / 4);
    return a;
  }();
  const __m512i idx = _mm512_load_si512(index.data());
  const __mmask64 bytes = 0x1111111111111111ULL << slot;
  std::uint8_t* dst = rows.buffer + p.PW * Cp * 4;
  if (ih < 0 || ih >= p.H) {
    const __m512i zp = _mm512_set1_epi8(static_cast<char>(p.source_zero_point));
    for (std::int64_t i = 0; i < p.W * Cp * 4; i += 64) _mm512_mask_storeu_epi8(dst + i, bytes, zp);
    return;
  }
  if (p.pointwise) return write_pointwise_row(p, *p.pointwise, x + (n * p.H + ih) * p.W * p.pointwise->C, slot, dst);
  const std::uint8_t* src = x + (n * p.H + ih) * p.W * C;
  for (std::int64_t iw = 0; iw < p.W; ++iw, src += C)
    for (std::int64_t c = 0; c < Cp; c += 16, dst += 64) {
      const __m512i v = _mm512_zextsi128_si512(_mm_maskz_loadu_epi8(group_mask(C - c), src + c));
      _mm512_mask_storeu_epi8(dst, bytes, _mm512_maskz_permutexvar_epi8(~__mmask64(0), idx, v));  // zero-masked: see pixels()
    }
}

// B output pixels from ow of group g, in R output rows (1 or 2). Two rows
// oh and oh + 1 read source rows top .. top + 3, all four bytes of a column:
// one load of a column serves both rows, each with its own rotation of the
// weights (the byte of the row it does not read has a zero weight), which
// halves the column loads (the kernel alone in 0.70-0.96 of the time, bench/README).
// KWc fixed at compile time (0: KW and DW from the plan).
// SWc: the stride across columns at compile time (0: the plan's).
template <int B, int KWc, int R, int SWc>
inline void pixels(const Int8DepthwisePlan& p, const std::uint8_t* inter, const std::array<const std::int8_t*, R>& w, std::int64_t g,
                   std::int64_t ow, std::uint8_t* out_row) {
  const std::int64_t KW = KWc ? KWc : p.KW, DW = KWc ? 1 : p.DW, SW = SWc ? SWc : p.SW, col_bytes = p.padded_channels() * 4;
  const __m512i comp = _mm512_loadu_si512(p.compensation.data() + g * 16);
  __m512i acc[R][B];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < B; ++i) acc[r][i] = comp;
  const std::uint8_t* base = inter + g * 64;
  for (std::int64_t kw = 0; kw < KW; ++kw) {
    __m512i wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_si512(w[r] + kw * 64);
    const std::uint8_t* col = base + (ow * SW + kw * DW) * col_bytes;
    for (int i = 0; i < B; ++i) {
      const __m512i column = _mm512_load_si512(col + i * SW * col_bytes);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_dpbusd_epi32(acc[r][i], column, wv[r]);
    }
  }
  const __mmask16 m = group_mask(p.C - g * 16);
  const __m512 sc = _mm512_loadu_ps(p.scale.data() + g * 16), bi = _mm512_loadu_ps(p.bias.data() + g * 16);
  const __m512i lo = _mm512_set1_epi32(p.q_lo), hi = _mm512_set1_epi32(p.q_hi);
  // Zero-masked forms with every lane set: GCC 12 warns inside its own headers
  // when it inlines the plain ones (PR 105593, fixed in 13).
  const __mmask16 all = 0xFFFF;
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < B; ++i) {
      // Rounded to nearest even (the default rounding mode), as oneDNN and PyTorch round.
      __m512i q = _mm512_maskz_cvtps_epi32(all, _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(all, acc[r][i]), sc, bi));
      q = _mm512_maskz_min_epi32(all, _mm512_maskz_max_epi32(all, q, lo), hi);
      _mm512_mask_cvtepi32_storeu_epi8(out_row + (r * p.OW + ow + i) * p.C + g * 16, m, q);
    }
}

// R output rows from out_row on (consecutive rows of one image); w[r]: the weights in row r's rotation.
template <int KWc, int R, int SWc>
inline void output_rows(const Int8DepthwisePlan& p, const std::uint8_t* inter, const std::array<const std::int8_t*, R>& w,
                        std::uint8_t* out_row) {
  const std::int64_t KW = KWc ? KWc : p.KW;
  for (std::int64_t g = 0; g < p.groups(); ++g) {
    std::array<const std::int8_t*, R> wg;
    for (int r = 0; r < R; ++r) wg[r] = w[r] + g * KW * 64;
    std::int64_t ow = 0;
    for (; ow + 8 <= p.OW; ow += 8) pixels<8, KWc, R, SWc>(p, inter, wg, g, ow, out_row);
    // The last 1-7 pixels as one block: rows of 7 and 14 (MobileNet's last stages) were all or
    // half single pixels, each reloading the weights; as a block they ran 16-26% faster on the device.
    switch (p.OW - ow) {
      case 7: pixels<7, KWc, R, SWc>(p, inter, wg, g, ow, out_row); break;
      case 6: pixels<6, KWc, R, SWc>(p, inter, wg, g, ow, out_row); break;
      case 5: pixels<5, KWc, R, SWc>(p, inter, wg, g, ow, out_row); break;
      case 4: pixels<4, KWc, R, SWc>(p, inter, wg, g, ow, out_row); break;
      case 3: pixels<3, KWc, R, SWc>(p, inter, wg, g, ow, out_row); break;
      case 2: pixels<2, KWc, R, SWc>(p, inter, wg, g, ow, out_row); break;
      case 1: pixels<1, KWc, R, SWc>(p, inter, wg, g, ow, out_row); break;
      default: break;
    }
  }
}

template <int R>
inline void output_rows(const Int8DepthwisePlan& p, const std::uint8_t* inter, const std::array<const std::int8_t*, R>& w,
                        std::uint8_t* out_row) {
  if (p.KW == 3 && p.DW == 1 && p.SW == 1) output_rows<3, R, 1>(p, inter, w, out_row);
  else if (p.KW == 3 && p.DW == 1 && p.SW == 2) output_rows<3, R, 2>(p, inter, w, out_row);
  else output_rows<0, R, 0>(p, inter, w, out_row);
}

// Output rows [r0, r1) of the N * OH rows, on this thread: two at a time where both are
// in one image, the stride is 1 and the kernel has at most 3 rows (the 4 row slots hold
// both rows' sources).
inline void rows_range(const Int8DepthwisePlan& p, const std::uint8_t* x, std::uint8_t* out, std::int64_t r0, std::int64_t r1) {
  const std::int64_t Cp = p.padded_channels(), bytes = p.padded_width() * Cp * 4;
  Rows rows{thread_buffer(static_cast<std::size_t>(bytes))};
  // Padding columns hold the zero point in every byte; rows are written over the others.
  std::fill(rows.buffer, rows.buffer + bytes, p.source_zero_point);
  const std::int64_t rotation_bytes = p.groups() * p.KW * 64;
  const auto weights = [&](std::int64_t top) { return p.weight.data() + ((top % 4) + 4) % 4 * rotation_bytes; };
  for (std::int64_t r = r0; r < r1;) {
    const std::int64_t n = r / p.OH, oh = r % p.OH, top = oh * p.SH - p.PH;
    const bool two = p.SH == 1 && p.KH < kInt8DepthwiseMaxRows && r + 1 < r1 && oh + 1 < p.OH;
    for (std::int64_t kh = 0; kh < p.KH + (two ? 1 : 0); ++kh) write_row(p, x, n, top + kh, rows);
    std::uint8_t* out_row = out + r * p.OW * p.C;
    if (two) output_rows<2>(p, rows.buffer, {weights(top), weights(top + 1)}, out_row);
    else output_rows<1>(p, rows.buffer, {weights(top)}, out_row);
    r += two ? 2 : 1;
  }
}

}  // namespace int8_depthwise

// x: [N, H, W, C] uint8, dense channels-last (with a pointwise source, its input [N, H, W, Cin]);
// out: [N, OH, OW, C] uint8 or int8, dense channels-last.
// The team is always the run's whole thread count, as oneDNN's is, even where there
// are fewer rows than threads: a smaller team lets the others fall asleep, and waking
// them for the next oneDNN step cost more than the convolution (MobileNetV2 at batch 1,
// 16 threads: 2.9 ms a run against 0.9).
inline void run_int8_depthwise(const Int8DepthwisePlan& p, const std::uint8_t* x, std::uint8_t* out, int threads) {
  const std::int64_t rows = p.N * p.OH, parts = std::max(threads, 1);
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static) if (parts > 1)
  for (std::int64_t t = 0; t < parts; ++t)
    if (rows * t / parts < rows * (t + 1) / parts) int8_depthwise::rows_range(p, x, out, rows * t / parts, rows * (t + 1) / parts);
}

#else

inline void run_int8_depthwise(const Int8DepthwisePlan&, const std::uint8_t*, std::uint8_t*, int) {}

#endif

}  // namespace kiln::kernels::detail
