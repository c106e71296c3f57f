#pragma once
// Copies a strided tensor into another layout of the same shape and dtype,
// a contiguous inner run at a time (memcpy) where both sides allow: what
// reshape-with-copy, contiguous, clone and cat do, and Tensor's own copies.
#include <algorithm>
#include <cstddef>
#include <vector>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kiln/runtime/layout.hpp"

namespace kiln::runtime {

struct CopyPlan {
  static constexpr std::size_t kMaxRank = 8;
  std::size_t item = 4;
  std::size_t rank = 0;  // outer dims walked by index
  std::int64_t shape[kMaxRank]{};
  std::int64_t src_strides[kMaxRank]{};
  std::int64_t dst_strides[kMaxRank]{};
  std::int64_t inner = 1;      // elements in the inner run
  std::int64_t src_inner = 1;  // the run's stride in src and dst (1 and 1: one memcpy)
  std::int64_t dst_inner = 1;
  std::int64_t rows = 1;
};

// The plan for copying `src` into `dst` (same shape): size-1 dims dropped and
// neighbouring dims merged where both layouts are contiguous across them.
inline CopyPlan plan_copy(const Layout& src, const Layout& dst) {
  CopyPlan p;
  p.item = src.itemsize();
  Shape shape, ss, ds;
  // Dims in the destination's memory order (outermost first): two channels-last
  // tensors then merge into one run, whatever their logical dim order.
  std::vector<std::size_t> order(src.rank());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return dst.strides[a] > dst.strides[b]; });
  for (std::size_t k : order) {
    if (src.shape[k] == 1) continue;
    if (!shape.empty() && ss.back() == src.shape[k] * src.strides[k] && ds.back() == src.shape[k] * dst.strides[k]) {
      shape.back() *= src.shape[k];
      ss.back() = src.strides[k];
      ds.back() = dst.strides[k];
      continue;
    }
    shape.push_back(src.shape[k]);
    ss.push_back(src.strides[k]);
    ds.push_back(dst.strides[k]);
  }
  if (shape.empty()) shape = {1}, ss = {1}, ds = {1};
  if (shape.size() > CopyPlan::kMaxRank + 1) throw ShapeError("copy: more than 9 dims that cannot merge");
  p.inner = shape.back();
  p.src_inner = ss.back();
  p.dst_inner = ds.back();
  p.rank = shape.size() - 1;
  for (std::size_t k = 0; k < p.rank; ++k) {
    p.shape[k] = shape[k];
    p.src_strides[k] = ss[k];
    p.dst_strides[k] = ds[k];
    p.rows *= shape[k];
  }
  return p;
}

// Runs the copy; rows, or the pieces of a few long rows, may be split over OpenMP threads.
inline void run_copy(const CopyPlan& p, const std::byte* src, std::byte* dst, int threads) {
  const auto item = static_cast<std::int64_t>(p.item);
  // Where row r starts in src and dst, in elements.
  auto start = [&](std::int64_t r) {
    std::int64_t so = 0, d_o = 0;
    for (std::size_t k = p.rank; k-- > 0;) {
      const std::int64_t i = r % p.shape[k];
      r /= p.shape[k];
      so += i * p.src_strides[k];
      d_o += i * p.dst_strides[k];
    }
    return std::pair{so, d_o};
  };
  auto row = [&](std::int64_t r) {
    const auto [so, d_o] = start(r);
    const std::byte* s = src + so * item;
    std::byte* d = dst + d_o * item;
    if (p.src_inner == 1 && p.dst_inner == 1) {
      std::memcpy(d, s, static_cast<std::size_t>(p.inner * item));
    } else if (item == 4) {
      const auto* s4 = reinterpret_cast<const std::uint32_t*>(s);
      auto* d4 = reinterpret_cast<std::uint32_t*>(d);
      for (std::int64_t i = 0; i < p.inner; ++i) d4[i * p.dst_inner] = s4[i * p.src_inner];
    } else {
      for (std::int64_t i = 0; i < p.inner; ++i) std::memcpy(d + i * p.dst_inner * item, s + i * p.src_inner * item, p.item);
    }
  };
  const bool parallel = threads > 1 && p.rows * p.inner >= 32768;
  if (parallel && p.rows < threads && p.src_inner == 1 && p.dst_inner == 1) {
    // Fewer rows than threads (two tensors of one layout merge into one run):
    // the threads split the memcpy of each row into 64 KiB pieces.
    const std::int64_t bytes = p.inner * item, piece = std::int64_t{1} << 16, pieces = (bytes + piece - 1) / piece;
    for (std::int64_t r = 0; r < p.rows; ++r) {
      const auto [so, d_o] = start(r);
      const std::byte* s = src + so * item;
      std::byte* d = dst + d_o * item;
#pragma omp parallel for num_threads(threads) schedule(static)
      for (std::int64_t c = 0; c < pieces; ++c)
        std::memcpy(d + c * piece, s + c * piece, static_cast<std::size_t>(std::min(piece, bytes - c * piece)));
    }
  } else if (parallel && p.rows > 1) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < p.rows; ++r) row(r);
  } else {
    for (std::int64_t r = 0; r < p.rows; ++r) row(r);
  }
}

// A strided tensor's elements into a contiguous buffer of its shape, on this thread.
inline void copy_to_contiguous(const std::byte* src, const Layout& l, std::byte* dst) {
  if (l.numel() == 0) return;
  run_copy(plan_copy(l, Layout::contiguous(l.shape, l.dtype)), src, dst, 1);
}

}  // namespace kiln::runtime
