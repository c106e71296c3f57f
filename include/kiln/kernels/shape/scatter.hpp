#pragma once
// The functional forms of in-place writes that torch.export's functionalization
// writes: copy(self, src) (self's shape and dtype, src's values broadcast into
// it), fill(self, value) (the same with one value) and slice_scatter(self, src,
// dim, start, end, step) (self with one slice replaced by src). Each makes a
// new buffer; inputs are never written.
#include <optional>
#include <string>

#include "kiln/runtime/strided_copy.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/copies.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace shape_detail {

// `src` in dtype `dt`, through the cast kernel when it differs (float to int truncates, as PyTorch's copy_ does).
inline runtime::ValueId in_dtype(runtime::LowerContext& ctx, runtime::ValueId src, DType dt) {
  if (ctx.layout(src).dtype == dt) return src;
  const runtime::Lowered r =
      ctx.lower_piece("aten._to_copy.default", {runtime::CallArg::of_tensor(src), runtime::CallArg::of(Arg(dt))});
  if (!r.is_tensor() || ctx.layout(r.id).dtype != dt)
    ctx.fail("src is " + std::string(dtype_name(ctx.layout(src).dtype)) + " and could not be cast to self's " +
             std::string(dtype_name(dt)));
  return r.id;
}

// aten.copy(self, src, non_blocking=False): self's values are not read.
struct CopyFrom {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::Layout self = ctx.layout(ctx.tensor(0, "self"));
    const runtime::ValueId src = in_dtype(ctx, ctx.tensor(1, "src"), self.dtype);
    const runtime::Layout& sl = ctx.layout(src);
    runtime::Layout seen;
    try {
      seen = runtime::expanded(sl, self.shape);
    } catch (const runtime::ShapeError&) {
      ctx.fail("src of shape " + runtime::shape_str(sl.shape) + " does not broadcast to self's shape " +
               runtime::shape_str(self.shape));
    }
    ctx.set_result(copy_into_new(ctx, ctx.view(src, seen), runtime::dense_like(self, self.dtype)));
  }
};

// aten.fill.Scalar(self, value) and fill.Tensor(self, value): a copy of a
// number, or of a 0-d tensor, into self's shape and dtype.
struct FillFunctional {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::Layout self = ctx.layout(ctx.tensor(0, "self"));
    if (ctx.value(1, "value").node()) {
      const runtime::ValueId v = ctx.tensor(1, "value");
      if (ctx.layout(v).rank() != 0) ctx.fail("fill takes a 0-d value tensor, got " + runtime::shape_str(ctx.layout(v).shape));
      return CopyFrom::lower(ctx);
    }
    const double v = ctx.scalar_arg(1, "value");
    const runtime::ValueId out = ctx.buffer(runtime::dense_like(self, self.dtype));
    const DType dt = self.dtype;
    ctx.add_step(runtime::make_step([out, v, dt](runtime::Frame& f) { fill_elements(f.data(out), f.layout(out).numel(), dt, v); }),
                 {}, {out});
    ctx.set_result(out);
  }
};

// aten.slice_scatter(self, src, dim=0, start=None, end=None, step=1): the
// slice clamps as slice does, and src must have the slice's exact shape.
struct SliceScatter {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::ValueId self = ctx.tensor(0, "self");
    const runtime::Layout sl = ctx.layout(self);
    const std::int64_t dim = ctx.int_arg(2, "dim", 0);
    const auto start = ctx.optional_int(3, "start");
    const auto end = ctx.optional_int(4, "end");
    const std::int64_t step = ctx.int_arg(5, "step", 1);
    const runtime::ValueId out = ctx.buffer(runtime::dense_like(sl, sl.dtype));
    const runtime::ViewOf slice = checked(ctx, [&] { return runtime::sliced(ctx.layout(out), dim, start, end, step); });
    const runtime::ValueId src0 = ctx.tensor(1, "src");
    if (ctx.layout(src0).shape != slice.layout.shape)
      ctx.fail("src has shape " + runtime::shape_str(ctx.layout(src0).shape) + " but the slice of self " +
               runtime::shape_str(sl.shape) + " along dim " + std::to_string(dim) + " has shape " +
               runtime::shape_str(slice.layout.shape));
    const runtime::ValueId src = in_dtype(ctx, src0, sl.dtype);
    const bool any_self = sl.numel() > 0, any_src = slice.layout.numel() > 0;
    const runtime::CopyPlan whole = any_self ? runtime::plan_copy(sl, ctx.layout(out)) : runtime::CopyPlan{};
    const runtime::CopyPlan part = any_src ? runtime::plan_copy(ctx.layout(src), slice.layout) : runtime::CopyPlan{};
    const std::int64_t at = slice.offset * static_cast<std::int64_t>(sl.itemsize());
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   if (any_self) runtime::run_copy(whole, f.data(self), f.data(out), f.threads());
                   if (any_src) runtime::run_copy(part, f.data(src), f.data(out) + at, f.threads());
                 }),
                 {self, src}, {out});
    ctx.set_result(out);
  }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
