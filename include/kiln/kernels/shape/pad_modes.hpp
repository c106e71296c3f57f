#pragma once
// Reflect, replicate and circular padding (F.pad's other modes, the padding
// layers, Conv's padding_mode; aten.reflection_padNd / replication_padNd):
// each padded dim gets a table of the source index of every output index,
// and one loop gathers the output (contiguous) through the tables. pad holds
// (before, after) pairs from the last dim backwards, as for constant padding.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels::shape_detail {

enum class PadMode { reflect, replicate, circular };

inline std::int64_t pad_source(PadMode m, std::int64_t i, std::int64_t s) {
  switch (m) {
    case PadMode::reflect: return i < 0 ? -i : i >= s ? 2 * (s - 1) - i : i;
    case PadMode::replicate: return i < 0 ? 0 : i >= s ? s - 1 : i;
    case PadMode::circular: return ((i % s) + s) % s;
  }
  return i;
}

struct PadPlan {
  runtime::ValueId in = 0, out = 0;
  runtime::Shape out_shape, strides;
  std::vector<std::vector<std::int64_t>> source;  // per dim: output index -> source offset (stride included)
  std::size_t itemsize = 4;
};

inline void run_pad(const runtime::Frame& fr, const PadPlan& p) {
  const std::byte* x = fr.data(p.in);
  std::byte* y = fr.data(p.out);
  const std::size_t rank = p.out_shape.size();
  const std::int64_t inner = p.out_shape[rank - 1], rows = runtime::shape_numel(p.out_shape) / std::max<std::int64_t>(inner, 1);
  std::vector<std::int64_t> idx(rank, 0);
  const auto& last = p.source[rank - 1];
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t base = 0;
    for (std::size_t d = 0; d + 1 < rank; ++d) base += p.source[d][idx[d]];
    for (std::int64_t i = 0; i < inner; ++i)
      std::memcpy(y + (r * inner + i) * p.itemsize, x + (base + last[i]) * p.itemsize, p.itemsize);
    for (std::size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < p.out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

inline void lower_pad_mode(runtime::LowerContext& ctx, runtime::ValueId in, const std::vector<std::int64_t>& pad, PadMode mode,
                           const std::string& name) {
  const runtime::Layout& l = ctx.layout(in);
  const std::size_t rank = l.rank();
  if (pad.size() % 2 != 0 || pad.size() / 2 > rank || rank == 0)
    ctx.fail(name + " padding " + runtime::shape_str(pad) + " must hold a (before, after) pair for each of at most " +
             std::to_string(rank) + " dims");
  PadPlan p;
  p.in = in;
  p.itemsize = l.itemsize();
  p.out_shape = l.shape;
  p.source.resize(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::size_t i = rank - 1 - d;  // pair index of dim d, when padded
    const std::int64_t before = i < pad.size() / 2 ? pad[2 * i] : 0, after = i < pad.size() / 2 ? pad[2 * i + 1] : 0;
    const std::int64_t s = l.shape[d];
    if (before < 0 || after < 0) ctx.fail(name + " padding " + runtime::shape_str(pad) + " holds a negative size");
    if ((before || after) && (s == 0 || (mode == PadMode::reflect && std::max(before, after) >= s) ||
                              (mode == PadMode::circular && std::max(before, after) > s)))
      ctx.fail(name + " padding " + runtime::shape_str(pad) + " is too large for dim " + std::to_string(d) + " of " +
               runtime::shape_str(l.shape) + (mode == PadMode::reflect ? " (each pad must be < the size)" : ""));
    p.out_shape[d] = s + before + after;
    for (std::int64_t o = 0; o < p.out_shape[d]; ++o) p.source[d].push_back(pad_source(mode, o - before, s) * l.strides[d]);
  }
  p.out = ctx.buffer(runtime::Layout::contiguous(p.out_shape, l.dtype));
  ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_pad(fr, p); }), {in}, {p.out});
  ctx.set_result(p.out);
}

inline PadMode pad_mode(const runtime::LowerContext& ctx, const std::string& mode) {
  if (mode == "reflect") return PadMode::reflect;
  if (mode == "replicate") return PadMode::replicate;
  if (mode == "circular") return PadMode::circular;
  ctx.fail("pad mode '" + mode + "' is not one of constant, reflect, replicate, circular");
}

// aten.reflection_padNd(self, padding) / replication_padNd(self, padding).
template <PadMode M>
struct AtenPadMode {
  static void lower(runtime::LowerContext& ctx) {
    lower_pad_mode(ctx, ctx.tensor(0, "self"), ctx.ints_arg(1, "padding"), M, M == PadMode::reflect ? "reflect" : "replicate");
  }
};

}  // namespace kiln::kernels::shape_detail
