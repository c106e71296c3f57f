#pragma once
// Advanced indexing by integer tensors (aten.index.Tensor, x[idx] with tensor
// indices, index_select) and roll: kernels that move whole sub-blocks of their
// input to new places, one strided copy per block.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/copies.hpp"
#include "kiln/kernels/shape/views.hpp"
#include "kiln/runtime/strided_copy.hpp"

namespace kiln::kernels {

namespace shape_detail {

// The most dims walk_broadcast takes (its counters live on the stack: a step allocates nothing).
inline constexpr std::size_t kMaxWalkRank = 16;

// Calls f(flat, offsets) for every element of `shape` in row-major order,
// offsets[i] being the element's offset under strides[i].
template <std::size_t N, class F>
void walk_broadcast(const runtime::Shape& shape, const std::array<runtime::Shape, N>& strides, F f) {
  if (shape.size() > kMaxWalkRank) throw runtime::ShapeError("more than 16 dims");
  const std::int64_t n = runtime::shape_numel(shape);
  std::array<std::int64_t, kMaxWalkRank> at{};
  std::array<std::int64_t, N> off{};
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(flat, off);
    for (std::size_t k = shape.size(); k-- > 0;) {
      for (std::size_t i = 0; i < N; ++i) off[i] += strides[i][k];
      if (++at[k] < shape[k]) break;
      for (std::size_t i = 0; i < N; ++i) off[i] -= strides[i][k] * shape[k];
      at[k] = 0;
    }
  }
}

// One index tensor of aten.index: the dim of self it picks along, its value and
// its strides once broadcast to the shape all index tensors broadcast to.
struct IndexOperand {
  std::size_t dim = 0;
  std::int64_t size = 0;    // self's size along dim
  std::int64_t stride = 0;  // self's stride along dim
  runtime::ValueId value = 0;
  bool i64 = true;
  runtime::Shape strides;
};

inline std::string index_bounds_message(std::int64_t v, const IndexOperand& op) {
  return "index " + std::to_string(v) + " is out of bounds for dim " + std::to_string(op.dim) + " with size " +
         std::to_string(op.size);
}

// The element offsets into self that the index tensors pick, one per element of
// their broadcast shape, into `offsets`; an index out of range is reported through `fail`.
template <class Read, class Fail>
void index_offsets(const std::vector<IndexOperand>& ops, const runtime::Shape& shape, std::int64_t* offsets, Read read,
                   Fail fail) {
  std::fill_n(offsets, runtime::shape_numel(shape), std::int64_t{0});
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const IndexOperand& op = ops[i];
    walk_broadcast<1>(shape, {op.strides}, [&](std::int64_t flat, const std::array<std::int64_t, 1>& off) {
      std::int64_t v = read(i, off[0]);
      if (v < -op.size || v >= op.size) fail(index_bounds_message(v, op));
      if (v < 0) v += op.size;
      offsets[flat] += v * op.stride;
    });
  }
}

// An index element: int64 or int32 at element offset `off` of `p`.
inline std::int64_t read_index(const std::byte* p, bool i64, std::int64_t off) {
  return i64 ? reinterpret_cast<const std::int64_t*>(p)[off] : reinterpret_cast<const std::int32_t*>(p)[off];
}

// index_offsets as a step runs it: the index tensors read from the frame, and
// a bad index thrown as an Error naming the node that `ctx` lowers.
inline auto step_index_offsets(runtime::LowerContext& ctx, std::vector<IndexOperand> ops, runtime::Shape shape) {
  const std::string who = "node " + ctx.node().name() + " (" + std::string(ctx.node().target_name()) + "): ";
  return [who, ops = std::move(ops), shape = std::move(shape)](runtime::Frame& f, std::int64_t* offsets) {
    index_offsets(
        ops, shape, offsets, [&](std::size_t i, std::int64_t off) { return read_index(f.data(ops[i].value), ops[i].i64, off); },
        [&](const std::string& m) { throw Error(who + m); });
  };
}

// aten.index.Tensor(self, indices): indices holds one optional integer tensor
// per leading dim of self (None keeps the dim whole). The index tensors
// broadcast together to a shape B; where they are adjacent B takes their place
// in the result, else it leads it (NumPy's rule); the other dims follow in
// order. Indices known when lowering (Swin's relative-position table) become
// element offsets then; others are read and checked on each run.
struct IndexTensor {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const Arg indices = ctx.value(1, "indices");
    const ArgList* list = indices.list();
    if (!list) ctx.fail("indices is not a list of tensors");
    lower_indices(ctx, in, list);
  }

  // `list`: per leading dim of `in`, a tensor node or None.
  static void lower_indices(runtime::LowerContext& ctx, runtime::ValueId in, const ArgList* list) {
    std::vector<IndexOperand> ops;
    runtime::Shape shape;
    operands(ctx, ctx.layout(in), list, ops, shape);
    lower_gather(ctx, in, ops, shape);
  }

  // The index tensors of `list` (per leading dim of a tensor of layout `l`) and
  // the shape they broadcast to, each operand's strides expanded to it.
  static void operands(runtime::LowerContext& ctx, const runtime::Layout& l, const ArgList* list,
                       std::vector<IndexOperand>& ops, runtime::Shape& shape) {
    if (list->size() > l.rank())
      ctx.fail(std::to_string(list->size()) + " indices for a tensor of " + std::to_string(l.rank()) + " dims");
    for (std::size_t k = 0; k < list->size(); ++k) {
      const Node* n = (*list)[k].node();
      if (!n) {
        if (!(*list)[k].is_none()) ctx.fail("indices[" + std::to_string(k) + "] is neither a tensor nor None");
        continue;
      }
      const runtime::Lowered& lw = ctx.lowered(n);
      if (!lw.is_tensor()) ctx.fail("indices[" + std::to_string(k) + "] (" + n->name() + ") is not a tensor");
      const runtime::Layout& il = ctx.layout(lw.id);
      if (il.dtype == DType::bool_ || il.dtype == DType::uint8)
        ctx.fail("indices[" + std::to_string(k) + "] is a " + std::string(dtype_name(il.dtype)) +
                 " mask, whose result's shape depends on its values; only integer indices are supported");
      if (il.dtype != DType::int64 && il.dtype != DType::int32)
        ctx.fail("indices[" + std::to_string(k) + "] is " + std::string(dtype_name(il.dtype)) + "; indices must be int64 or int32");
      try {
        shape = ops.empty() ? il.shape : runtime::broadcast_shapes(shape, il.shape);
      } catch (const runtime::ShapeError&) {
        ctx.fail("index tensors of shapes " + runtime::shape_str(shape) + " and " + runtime::shape_str(il.shape) +
                 " do not broadcast together");
      }
      ops.push_back({k, l.shape[k], l.strides[k], lw.id, il.dtype == DType::int64, {}});
    }
    if (ops.empty()) ctx.fail("indices holds no tensor");
    if (shape.size() > kMaxWalkRank) ctx.fail("index tensors of more than 16 dims");
    for (IndexOperand& op : ops) op.strides = runtime::expanded(ctx.layout(op.value), shape).strides;
  }

  // The shape of self[indices]: the dims not indexed, with `bshape` at the
  // first index's place when the indexed dims are adjacent, else in front;
  // `bpos` is where it starts and rest_dims the result's dim of each dim not indexed.
  static runtime::Shape result_shape(const runtime::Layout& l, const std::vector<IndexOperand>& ops,
                                     const runtime::Shape& bshape, std::size_t& bpos, std::vector<std::size_t>& rest_dims) {
    bool adjacent = true;
    for (std::size_t i = 1; i < ops.size(); ++i) adjacent = adjacent && ops[i].dim == ops[i - 1].dim + 1;
    std::vector<bool> indexed(l.rank(), false);
    for (const IndexOperand& op : ops) indexed[op.dim] = true;
    bpos = adjacent ? ops[0].dim : 0;
    runtime::Shape out;
    std::size_t j = 0;
    for (std::size_t k = 0; k < l.rank(); ++k) {
      if (indexed[k]) continue;
      if (j++ == bpos) out.insert(out.end(), bshape.begin(), bshape.end());
      rest_dims.push_back(out.size());
      out.push_back(l.shape[k]);
    }
    if (bpos >= j) out.insert(out.end(), bshape.begin(), bshape.end());
    return out;
  }

  static void lower_gather(runtime::LowerContext& ctx, runtime::ValueId in, const std::vector<IndexOperand>& ops,
                           const runtime::Shape& bshape) {
    const runtime::Layout& l = ctx.layout(in);
    bool adjacent = true;
    for (std::size_t i = 1; i < ops.size(); ++i) adjacent = adjacent && ops[i].dim == ops[i - 1].dim + 1;
    // The result: the kept dims, with B at the first index's place or in front.
    std::vector<bool> indexed(l.rank(), false);
    for (const IndexOperand& op : ops) indexed[op.dim] = true;
    const std::size_t bpos = adjacent ? ops[0].dim : 0;
    runtime::Shape out_shape, rest_shape, rest_src;
    std::vector<std::size_t> rest_out_dims;
    for (std::size_t k = 0; k < l.rank(); ++k) {
      if (indexed[k]) continue;
      rest_shape.push_back(l.shape[k]);
      rest_src.push_back(l.strides[k]);
    }
    // Out dims: rest dims before bpos, then B, then the remaining rest dims.
    for (std::size_t j = 0; j < rest_shape.size(); ++j) {
      if (j == bpos) out_shape.insert(out_shape.end(), bshape.begin(), bshape.end());
      rest_out_dims.push_back(out_shape.size());
      out_shape.push_back(rest_shape[j]);
    }
    if (bpos >= rest_shape.size()) out_shape.insert(out_shape.end(), bshape.begin(), bshape.end());
    const runtime::ValueId out = ctx.buffer(out_shape, l.dtype);
    const runtime::Layout& ol = ctx.layout(out);
    runtime::Shape rest_dst;
    for (std::size_t d : rest_out_dims) rest_dst.push_back(ol.strides[d]);
    const runtime::Shape bstrides(ol.strides.begin() + static_cast<std::ptrdiff_t>(bpos),
                                  ol.strides.begin() + static_cast<std::ptrdiff_t>(bpos + bshape.size()));
    std::vector<std::int64_t> dst_offsets;
    walk_broadcast<1>(bshape, {bstrides}, [&](std::int64_t, const std::array<std::int64_t, 1>& off) { dst_offsets.push_back(off[0]); });
    if (ol.numel() == 0) {
      ctx.set_result(out);
      return;
    }
    const runtime::CopyPlan block = runtime::plan_copy(runtime::Layout{l.dtype, rest_shape, rest_src},
                                                       runtime::Layout{l.dtype, rest_shape, rest_dst});
    const auto item = static_cast<std::int64_t>(l.itemsize());
    // Indices known now: their offsets are checked and computed once.
    bool known = true;
    std::vector<std::optional<runtime::Tensor>> consts;
    for (const IndexOperand& op : ops) {
      consts.push_back(ctx.constant(op.value));
      known = known && consts.back().has_value();
    }
    if (known) {
      std::vector<std::int64_t> src_offsets(dst_offsets.size());
      index_offsets(
          ops, bshape, src_offsets.data(),
          [&](std::size_t i, std::int64_t off) { return read_index(static_cast<const std::byte*>(consts[i]->raw()), ops[i].i64, off); },
          [&](const std::string& m) { ctx.fail(m); });
      ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                     for (std::size_t b = 0; b < src_offsets.size(); ++b)
                       runtime::run_copy(block, f.data(in) + src_offsets[b] * item, f.data(out) + dst_offsets[b] * item, 1);
                   }),
                   {in}, {out});
      ctx.set_result(out);
      return;
    }
    std::vector<runtime::ValueId> reads{in};
    for (const IndexOperand& op : ops) reads.push_back(op.value);
    const auto offsets_of = step_index_offsets(ctx, ops, bshape);
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   // The offsets are computed first (in the scratch), so a bad index throws before anything is written.
                   auto* src_offsets = reinterpret_cast<std::int64_t*>(f.scratch());
                   offsets_of(f, src_offsets);
                   for (std::size_t b = 0; b < dst_offsets.size(); ++b)
                     runtime::run_copy(block, f.data(in) + src_offsets[b] * item, f.data(out) + dst_offsets[b] * item, 1);
                 }),
                 reads, {out}, dst_offsets.size() * sizeof(std::int64_t));
    ctx.set_result(out);
  }
};

// The blocks a roll moves: per rolled dim, the part that wraps around and the
// part that moves on. Each block is one copy from `src` to `dst` (same shape).
struct RollBlock {
  runtime::CopyPlan plan;
  std::int64_t src_offset = 0;  // elements
  std::int64_t dst_offset = 0;
};
inline std::vector<RollBlock> roll_blocks(const runtime::Layout& src, const runtime::Layout& dst,
                                          const std::vector<std::int64_t>& shift_of_dim) {
  std::vector<RollBlock> out;
  runtime::Shape shape = src.shape;
  // Odometer over the two segments of every dim (a dim that does not move has one).
  std::vector<int> seg(src.rank(), 0);
  while (true) {
    RollBlock b;
    bool empty = false;
    for (std::size_t d = 0; d < src.rank(); ++d) {
      const std::int64_t n = src.shape[d], s = shift_of_dim[d];
      // Segment 0: src [0, n - s) lands at [s, n); segment 1: src [n - s, n) lands at [0, s).
      const std::int64_t src_start = seg[d] == 0 ? 0 : n - s, dst_start = seg[d] == 0 ? s : 0;
      shape[d] = seg[d] == 0 ? n - s : s;
      empty = empty || shape[d] == 0;
      b.src_offset += src_start * src.strides[d];
      b.dst_offset += dst_start * dst.strides[d];
    }
    if (!empty) {
      b.plan = runtime::plan_copy(runtime::Layout{src.dtype, shape, src.strides}, runtime::Layout{dst.dtype, shape, dst.strides});
      out.push_back(b);
    }
    std::size_t d = src.rank();
    while (d-- > 0) {
      if (shift_of_dim[d] != 0 && seg[d] == 0) {
        seg[d] = 1;
        break;
      }
      seg[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) break;
  }
  return out;
}

// roll(x, shifts, dims=[]): each element moves `shift` places along its dim,
// wrapping around; with no dims, along the flattened tensor (shape kept).
struct Roll {
  static void lower(runtime::LowerContext& ctx) {
    const bool is_aten = ctx.node().target_name().starts_with("aten.");
    runtime::ValueId in = ctx.tensor(0, is_aten ? "self" : "input");
    const auto shifts = ctx.ints_arg(1, "shifts");
    const auto dims = ctx.ints_arg(2, "dims", std::vector<std::int64_t>{});
    runtime::Layout src = ctx.layout(in);
    const runtime::Shape shape = src.shape;
    if (dims.empty()) {
      if (shifts.size() != 1) ctx.fail("roll with no dims takes one shift, got " + std::to_string(shifts.size()));
      // The flattened tensor: a view where the strides allow, else a row-major copy.
      if (auto flat = runtime::viewed(src, std::vector<std::int64_t>{src.numel()})) {
        src = *flat;
      } else {
        in = copy_into_new(ctx, in, runtime::Layout::contiguous(shape, src.dtype));
        src = runtime::Layout::contiguous({runtime::shape_numel(shape)}, src.dtype);
      }
      const runtime::ValueId out = ctx.buffer(shape, src.dtype);
      emit(ctx, in, src, out, runtime::Layout::contiguous({src.numel()}, src.dtype), {normalized(shifts[0], src.numel())});
      return;
    }
    if (shifts.size() != dims.size())
      ctx.fail("shifts " + runtime::shape_str(shifts) + " and dims " + runtime::shape_str(dims) + " must have the same length");
    std::vector<std::int64_t> total(src.rank(), 0);
    for (std::size_t i = 0; i < dims.size(); ++i)
      total[checked(ctx, [&] { return runtime::normalize_dim(dims[i], static_cast<std::int64_t>(src.rank())); })] += shifts[i];
    for (std::size_t d = 0; d < src.rank(); ++d) total[d] = normalized(total[d], src.shape[d]);
    const runtime::ValueId out = ctx.buffer(runtime::dense_like(src, src.dtype));
    emit(ctx, in, src, out, ctx.layout(out), total);
  }
  static std::int64_t normalized(std::int64_t shift, std::int64_t n) { return n == 0 ? 0 : ((shift % n) + n) % n; }
  static void emit(runtime::LowerContext& ctx, runtime::ValueId in, const runtime::Layout& src, runtime::ValueId out,
                   const runtime::Layout& dst, const std::vector<std::int64_t>& shift_of_dim) {
    const auto blocks = src.numel() == 0 ? std::vector<RollBlock>{} : roll_blocks(src, dst, shift_of_dim);
    const auto item = static_cast<std::int64_t>(src.itemsize());
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   for (const RollBlock& b : blocks)
                     runtime::run_copy(b.plan, f.data(in) + b.src_offset * item, f.data(out) + b.dst_offset * item, f.threads());
                 }),
                 {in}, {out});
    ctx.set_result(out);
  }
};

// index_select(x, dim, index): x's dim replaced by the picked entries, index 1-d
// (or 0-d, one entry). Rows of a 2-d table are embedding's gather; any other
// dim is aten.index with the index at `dim` (torch.export writes roll as an
// index_select of a folded index).
struct IndexSelect {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    auto index = ctx.tensor(2, "index");
    const runtime::Layout l = ctx.layout(in);  // a copy: ctx.view below adds a value, which may move the table
    const auto d = static_cast<std::size_t>(
        checked(ctx, [&] { return runtime::normalize_dim(ctx.int_arg(1, "dim"), static_cast<std::int64_t>(l.rank())); }));
    const runtime::Layout il = ctx.layout(index);
    if (il.rank() > 1) ctx.fail("index must be 1-d or 0-d, got " + runtime::shape_str(il.shape));
    if (il.dtype != DType::int64 && il.dtype != DType::int32)
      ctx.fail("index is " + std::string(dtype_name(il.dtype)) + "; it must be int64 or int32");
    if (l.rank() == 2 && d == 0 && il.rank() == 1) return gather_rows(ctx, in, index);
    if (il.rank() == 0) index = ctx.view(index, runtime::Layout{il.dtype, {1}, {1}});
    const runtime::Shape bshape{ctx.layout(index).shape[0]};
    IndexOperand op{d, l.shape[d], l.strides[d], index, il.dtype == DType::int64, ctx.layout(index).strides};
    IndexTensor::lower_gather(ctx, in, {op}, bshape);
  }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
