#pragma once
// aten.index_put(self, indices, values, accumulate=False): a copy of self with
// self[indices] = values, or += values with accumulate (repeated indices then
// add up; without it one of them wins). indices as in aten.index (None keeps a
// dim whole); values broadcast to the shape of self[indices]. torch 2.11's
// col2im decomposition writes it with accumulate=True.
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/indexing.hpp"
#include "kiln/kernels/shape/scatter.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels::shape_detail {

// dst[offsets] += src[offsets] over a block of `shape` (strides per side).
template <class T>
void add_block(std::byte* dst, const std::byte* src, const runtime::Shape& shape, const runtime::Shape& dst_strides,
               const runtime::Shape& src_strides) {
  auto* d = reinterpret_cast<T*>(dst);
  const auto* s = reinterpret_cast<const T*>(src);
  walk_broadcast<2>(shape, {dst_strides, src_strides},
                    [&](std::int64_t, const std::array<std::int64_t, 2>& off) { d[off[0]] += s[off[1]]; });
}

struct IndexPut {
  using Adder = void (*)(std::byte*, const std::byte*, const runtime::Shape&, const runtime::Shape&, const runtime::Shape&);

  static Adder adder(const runtime::LowerContext& ctx, DType dt) {
    switch (dt) {
      case DType::float32: return add_block<float>;
      case DType::float64: return add_block<double>;
      case DType::int64: return add_block<std::int64_t>;
      case DType::int32: return add_block<std::int32_t>;
      default: ctx.fail("index_put with accumulate=True of a " + std::string(dtype_name(dt)) + " tensor is not supported");
    }
  }

  static void lower(runtime::LowerContext& ctx) {
    const auto self = ctx.tensor(0, "self");
    const Arg indices = ctx.value(1, "indices");
    const ArgList* list = indices.list();
    if (!list) ctx.fail("indices is not a list of tensors");
    const bool accumulate = ctx.bool_arg(3, "accumulate", false);
    const runtime::Layout sl = ctx.layout(self);
    const Adder add = accumulate ? adder(ctx, sl.dtype) : nullptr;
    const auto out = copy_into_new(ctx, self, runtime::dense_like(sl, sl.dtype));
    const runtime::Layout ol = ctx.layout(out);
    std::vector<IndexOperand> ops;
    runtime::Shape bshape;
    IndexTensor::operands(ctx, ol, list, ops, bshape);
    std::size_t bpos = 0;
    std::vector<std::size_t> rest_dims;
    const runtime::Shape target = IndexTensor::result_shape(ol, ops, bshape, bpos, rest_dims);
    const auto values = in_dtype(ctx, ctx.tensor(2, "values"), ol.dtype);
    runtime::Layout vl;
    try {
      vl = runtime::expanded(ctx.layout(values), target);
    } catch (const runtime::ShapeError&) {
      ctx.fail("values of shape " + runtime::shape_str(ctx.layout(values).shape) + " do not broadcast to self[indices]'s shape " +
               runtime::shape_str(target));
    }
    ctx.set_result(out);
    if (runtime::shape_numel(target) == 0) return;
    emit(ctx, out, values, ops, bshape, block_of(ol, vl, ops, rest_dims, bpos, bshape), add);
  }

  // The part of self and of values that one index picks: the dims not indexed.
  struct Block {
    runtime::Shape shape, out_strides, val_strides;
    std::vector<std::int64_t> val_offsets;  // per element of the index shape
  };
  static Block block_of(const runtime::Layout& ol, const runtime::Layout& vl, const std::vector<IndexOperand>& ops,
                        const std::vector<std::size_t>& rest_dims, std::size_t bpos, const runtime::Shape& bshape) {
    Block b;
    std::vector<bool> indexed(ol.rank(), false);
    for (const IndexOperand& op : ops) indexed[op.dim] = true;
    for (std::size_t k = 0, j = 0; k < ol.rank(); ++k) {
      if (indexed[k]) continue;
      b.shape.push_back(ol.shape[k]);
      b.out_strides.push_back(ol.strides[k]);
      b.val_strides.push_back(vl.strides[rest_dims[j++]]);
    }
    const runtime::Shape bstrides(vl.strides.begin() + static_cast<std::ptrdiff_t>(bpos),
                                  vl.strides.begin() + static_cast<std::ptrdiff_t>(bpos + bshape.size()));
    walk_broadcast<1>(bshape, {bstrides}, [&](std::int64_t, const std::array<std::int64_t, 1>& off) { b.val_offsets.push_back(off[0]); });
    return b;
  }

  // One step: the indices read and checked into the scratch first (a bad one
  // throws before anything is written), then one block copied or added per index.
  static void emit(runtime::LowerContext& ctx, runtime::ValueId out, runtime::ValueId values,
                   const std::vector<IndexOperand>& ops, const runtime::Shape& bshape, const Block& blk, Adder add) {
    const runtime::Layout& ol = ctx.layout(out);
    const runtime::CopyPlan copy = runtime::plan_copy(runtime::Layout{ol.dtype, blk.shape, blk.val_strides},
                                                      runtime::Layout{ol.dtype, blk.shape, blk.out_strides});
    const auto item = static_cast<std::int64_t>(ol.itemsize());
    std::vector<runtime::ValueId> reads{out, values};
    for (const IndexOperand& op : ops) reads.push_back(op.value);
    const auto offsets_of = step_index_offsets(ctx, ops, bshape);
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   auto* offsets = reinterpret_cast<std::int64_t*>(f.scratch());
                   offsets_of(f, offsets);
                   for (std::size_t b = 0; b < blk.val_offsets.size(); ++b) {
                     std::byte* dst = f.data(out) + offsets[b] * item;
                     const std::byte* src = f.data(values) + blk.val_offsets[b] * item;
                     if (add) add(dst, src, blk.shape, blk.out_strides, blk.val_strides);
                     else runtime::run_copy(copy, src, dst, 1);
                   }
                 }),
                 reads, {out}, blk.val_offsets.size() * sizeof(std::int64_t));
  }
};

}  // namespace kiln::kernels::shape_detail
