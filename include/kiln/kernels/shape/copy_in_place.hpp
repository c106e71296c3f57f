#pragma once
// aten.copy_(self, src): writes src (broadcast, cast to self's dtype) into
// self, a view of a buffer of the run (new_empty, empty, clone, ...). torch
// 1.13 writes Conv's circular padding_mode this way: new_empty, then copies
// into its slices, some read from other slices of the same buffer. Steps run
// in graph order and every view shares its base's bytes, so readers before
// see the old values and readers after (of the buffer, a view, or copy_'s
// result) the new ones. Into a constant lowering made (a folded zeros()) a
// constant src is written once, when lowering; a weight takes only instance
// norm's dead write (dead_copy.hpp); anything else is refused.
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/dead_copy.hpp"
#include "kiln/kernels/shape/fill_in_place.hpp"
#include "kiln/kernels/shape/scatter.hpp"
#include "kiln/runtime/strided_copy.hpp"

namespace kiln::kernels::shape_detail {

struct CopyInPlace {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::ValueId dst = ctx.tensor(0, "self");
    const runtime::ValueId root = root_of(ctx, dst);
    const Node* owner = FillInPlace::owner_of(ctx, root);
    const bool weight = !owner || owner->op() == OpKind::get_attr;
    if (ctx.info(root).storage == runtime::Storage::constant && weight) return DeadWeightCopy::lower(ctx);
    const runtime::Layout dl = ctx.layout(dst);
    const runtime::ValueId src = in_dtype(ctx, ctx.tensor(1, "src"), dl.dtype);
    runtime::Layout seen;
    try {
      seen = runtime::expanded(ctx.layout(src), dl.shape);
    } catch (const runtime::ShapeError&) {
      ctx.fail("copy_: src of shape " + runtime::shape_str(ctx.layout(src).shape) + " does not broadcast to self's shape " +
               runtime::shape_str(dl.shape));
    }
    switch (ctx.info(root).storage) {
      case runtime::Storage::arena: return in_run(ctx, dst, src, seen);
      case runtime::Storage::constant: return when_lowering(ctx, dst, root, src, seen);
      default:
        ctx.fail("copy_ writes in place into the graph's input " + ctx.info(root).name + ", which kiln does not change");
    }
  }

  static runtime::ValueId root_of(const runtime::LowerContext& ctx, runtime::ValueId v) {
    const runtime::ValueInfo& i = ctx.info(v);
    return i.storage == runtime::Storage::view ? i.base : v;
  }

  // A step copying `src` (seen through `seen`: broadcast strides) into `dst`.
  // When both look into one buffer, src goes through scratch first, so an
  // overlap reads only old values.
  static void in_run(runtime::LowerContext& ctx, runtime::ValueId dst, runtime::ValueId src, const runtime::Layout& seen) {
    const runtime::Layout dl = ctx.layout(dst);
    const bool staged = root_of(ctx, src) == root_of(ctx, dst);
    const runtime::Layout packed = runtime::Layout::contiguous(seen.shape, seen.dtype);
    const auto direct = runtime::plan_copy(seen, dl);
    const auto to_scratch = runtime::plan_copy(seen, packed);
    const auto from_scratch = runtime::plan_copy(packed, dl);
    const std::size_t scratch = staged ? static_cast<std::size_t>(packed.numel()) * packed.itemsize() : 0;
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   if (!staged) return runtime::run_copy(direct, f.data(src), f.data(dst), f.threads());
                   runtime::run_copy(to_scratch, f.data(src), f.scratch(), f.threads());
                   runtime::run_copy(from_scratch, f.scratch(), f.data(dst), f.threads());
                 }),
                 {dst, src}, {dst}, scratch);
    ctx.set_result(ctx.view(dst, dl));
  }

  // A constant lowering made (a folded zeros()): a constant src is written
  // now, once, if nothing that runs later has read the buffer already.
  static void when_lowering(runtime::LowerContext& ctx, runtime::ValueId dst, runtime::ValueId root, runtime::ValueId src,
                            const runtime::Layout& seen) {
    const auto s = ctx.constant(src);
    if (!s)
      ctx.fail("copy_ writes a value known only when the graph runs into " + ctx.info(root).name +
               ", which lowering made a constant");
    FillInPlace::refuse_earlier_readers(ctx, *FillInPlace::owner_of(ctx, root), root, "copy_");
    auto d = ctx.constant(dst);
    const runtime::Layout packed = runtime::Layout::contiguous(seen.shape, seen.dtype);
    std::vector<std::byte> staged(static_cast<std::size_t>(packed.numel()) * packed.itemsize());
    runtime::run_copy(runtime::plan_copy(seen, packed), static_cast<const std::byte*>(s->raw()), staged.data(), 1);
    runtime::run_copy(runtime::plan_copy(packed, d->layout()), staged.data(), static_cast<std::byte*>(d->raw()), 1);
    ctx.set_result(ctx.view(dst, ctx.layout(dst)));
  }
};

}  // namespace kiln::kernels::shape_detail
