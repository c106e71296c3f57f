// runtime::plan_copy and run_copy against an element-by-element copy: layouts
// that merge into one long run (split over threads in 64 KiB pieces), a few
// long rows, and a transposing copy, on one thread and on four.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "kiln/runtime/strided_copy.hpp"

using namespace kiln;
using namespace kiln::runtime;

namespace {

// Element i of the source (a logical index walk) checked at its place in the destination.
void check_copy(const Layout& from, const Layout& to, int threads) {
  CAPTURE(threads);
  const auto span = [](const Layout& l) {
    std::int64_t last = 0;
    for (std::size_t k = 0; k < l.rank(); ++k) last += (l.shape[k] - 1) * l.strides[k];
    return static_cast<std::size_t>(last + 1);
  };
  std::vector<std::uint8_t> src(span(from)), dst(span(to), 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>((i * 7 + i / 251) % 256);
  run_copy(plan_copy(from, to), reinterpret_cast<const std::byte*>(src.data()), reinterpret_cast<std::byte*>(dst.data()), threads);
  std::vector<std::int64_t> idx(from.rank(), 0);
  std::size_t wrong = 0;
  for (std::int64_t n = 0; n < from.numel(); ++n) {
    std::int64_t so = 0, d_o = 0;
    for (std::size_t k = 0; k < idx.size(); ++k) so += idx[k] * from.strides[k], d_o += idx[k] * to.strides[k];
    wrong += src[static_cast<std::size_t>(so)] != dst[static_cast<std::size_t>(d_o)];
    for (std::size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < from.shape[k]) break;
      idx[k] = 0;
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("run_copy: one long run, a few long rows and a transposing copy equal an element-by-element copy") {
  const Shape big{4, 24, 56, 57};  // 306432 bytes: one run of several 64 KiB pieces and a short last one
  for (const int threads : {1, 4}) {
    // Two channels-last layouts: one run.
    check_copy(channels_last(big, DType::uint8), channels_last(big, DType::uint8), threads);
    // Contiguous into contiguous: one run too.
    check_copy(Layout::contiguous(big, DType::uint8), Layout::contiguous(big, DType::uint8), threads);
    // Two long rows: a source whose batch dim is padded apart.
    Layout padded = Layout::contiguous({2, 3, 200, 300}, DType::uint8);
    padded.strides[0] = 3 * 200 * 300 + 64;
    check_copy(padded, Layout::contiguous(padded.shape, DType::uint8), threads);
    // Channels-last into contiguous: a transposing copy, row by row.
    check_copy(channels_last(big, DType::uint8), Layout::contiguous(big, DType::uint8), threads);
  }
  const CopyPlan one_run = plan_copy(channels_last(big, DType::uint8), channels_last(big, DType::uint8));
  CHECK(one_run.rows == 1);
  CHECK(one_run.inner == 4 * 24 * 56 * 57);
}
