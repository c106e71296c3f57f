#pragma once
// The factories that take their shape from a tensor: zeros_like, ones_like,
// full_like and empty_like (aten and torch level), and the checks that the
// factory keywords (layout, device, pin_memory, memory_format) ask for nothing
// but what kiln makes, which new_zeros and its kin share. dtype is honoured;
// the input's values are never read.
#include <optional>
#include <string>

#include "kiln/core/print.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/copies.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace shape_detail {

// The keyword-only argument `kw` (None when absent).
inline Arg factory_kwarg(const runtime::LowerContext& ctx, std::string_view kw) { return ctx.value(1000, kw); }

// Refuses a factory keyword that asks for something other than a dense CPU
// tensor in ordinary memory: kiln has no other kind, and running one as if it
// had would hide the difference.
inline void check_factory_kwargs(const runtime::LowerContext& ctx) {
  const Arg layout = factory_kwarg(ctx, "layout");
  if (const auto* e = layout.get_if<EnumConst>(); !layout.is_none() && (!e || e->name != "torch.strided"))
    ctx.fail("layout " + format_arg(layout) + " is not supported (only torch.strided)");
  const Arg device = factory_kwarg(ctx, "device");
  if (const auto* d = device.get_if<Device>(); !device.is_none() && (!d || (d->name != "cpu" && !d->name.starts_with("cpu:"))))
    ctx.fail("device " + format_arg(device) + " is not supported (only cpu)");
  const Arg pin = factory_kwarg(ctx, "pin_memory");
  if (const auto* b = pin.get_if<bool>(); !pin.is_none() && (!b || *b))
    ctx.fail("pin_memory=" + format_arg(pin) + " is not supported (only False)");
}

// The result's layout for memory_format: preserve_format (the default) keeps
// the input's dim order, as PyTorch keeps a dense input's strides;
// contiguous_format is row-major.
inline runtime::Layout like_layout(const runtime::LowerContext& ctx, const runtime::Layout& like, DType dt) {
  const Arg fmt = factory_kwarg(ctx, "memory_format");
  const auto* e = fmt.get_if<EnumConst>();
  if (fmt.is_none() || (e && e->name == "torch.preserve_format")) return runtime::dense_like(like, dt);
  if (e && e->name == "torch.contiguous_format") return runtime::Layout::contiguous(like.shape, dt);
  ctx.fail("memory_format " + format_arg(fmt) + " is not supported (preserve_format or contiguous_format)");
}

// The tensor the factory copies its shape from: `self` at aten level, `input` at torch level.
inline runtime::ValueId like_source(const runtime::LowerContext& ctx) {
  return ctx.node().kwargs().find("input") ? ctx.tensor(0, "input") : ctx.tensor(0, "self");
}

// A tensor shaped like the input, of its dtype unless dtype is given, filled
// with `value` each run (left unset without one).
inline void lower_like(runtime::LowerContext& ctx, std::optional<double> value) {
  check_factory_kwargs(ctx);
  const runtime::Layout like = ctx.layout(like_source(ctx));
  fill(ctx, like_layout(ctx, like, dtype_kwarg(ctx, like.dtype)), value);
}

// zeros_like (0), ones_like (1) and empty_like (-1: no fill).
template <int Value>
struct FilledLike {
  static void lower(runtime::LowerContext& ctx) { lower_like(ctx, Value < 0 ? std::nullopt : std::optional<double>(Value)); }
};
// full_like(self, fill_value): the input's dtype unless dtype is given, as PyTorch's (a float value in an int64 tensor truncates).
struct FullLike {
  static void lower(runtime::LowerContext& ctx) { lower_like(ctx, ctx.scalar_arg(1, "fill_value")); }
};

// new_zeros(self, size, dtype=None, ...) and its kin: a filled tensor of
// `size` with self's dtype unless dtype is given.
template <int Value>
struct NewFilled {
  static void lower(runtime::LowerContext& ctx) {
    check_factory_kwargs(ctx);
    const DType self_dtype = ctx.layout(ctx.tensor(0, "self")).dtype;
    fill(ctx, sizes_arg(ctx, 1, "size"), Value < 0 ? std::nullopt : std::optional<double>(Value), self_dtype);
  }
};
struct NewFull {
  static void lower(runtime::LowerContext& ctx) {
    check_factory_kwargs(ctx);
    const DType self_dtype = ctx.layout(ctx.tensor(0, "self")).dtype;
    fill(ctx, ctx.ints_arg(1, "size"), ctx.scalar_arg(2, "fill_value"), self_dtype);
  }
};

// empty_permuted(size, physical_layout): shape `size`, its dims laid out in
// memory in physical_layout's order (outermost first); contents undefined.
struct EmptyPermuted {
  static void lower(runtime::LowerContext& ctx) {
    check_factory_kwargs(ctx);
    const auto size = ctx.ints_arg(0, "size");
    const auto order = ctx.ints_arg(1, "physical_layout");
    if (order.size() != size.size())
      ctx.fail("physical_layout " + runtime::shape_str(order) + " has " + std::to_string(order.size()) +
               " dims, size " + runtime::shape_str(size) + " has " + std::to_string(size.size()));
    std::vector<bool> seen(size.size(), false);
    for (std::int64_t d : order) {
      if (d < 0 || d >= static_cast<std::int64_t>(size.size()) || seen[d])
        ctx.fail("physical_layout " + runtime::shape_str(order) + " is not a permutation of the dims of size " + runtime::shape_str(size));
      seen[d] = true;
    }
    runtime::Shape strides(size.size());
    std::int64_t step = 1;
    for (std::size_t k = order.size(); k-- > 0;) {
      strides[order[k]] = step;
      step *= std::max<std::int64_t>(size[order[k]], 1);
    }
    ctx.set_result(ctx.buffer(runtime::Layout{dtype_kwarg(ctx, DType::float32), runtime::Shape(size.begin(), size.end()), strides}));
  }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
