#pragma once
// Kernels that move data into a new buffer: contiguous and clone, cat and
// stack (each input copied into its slice of the result, unless the inputs
// already lie in place in one buffer: then a view), tensor factories
// (empty, zeros, ones, full) and the row gather of embedding.
#include <cstring>
#include <optional>
#include <utility>

#include "kiln/runtime/strided_copy.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/pad_modes.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace shape_detail {

// contiguous(): the input itself when it already is, else a row-major copy.
struct Contiguous {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto& l = ctx.layout(in);
    if (l.is_contiguous()) ctx.set_result(ctx.view(in, l));
    else ctx.set_result(copy_into_new(ctx, in, runtime::Layout::contiguous(l.shape, l.dtype)));
  }
};
// clone(x, memory_format=None): a copy, dense in the input's dim order unless
// torch.contiguous_format is asked for.
struct Clone {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto& l = ctx.layout(in);
    const Arg fmt = ctx.value(1, "memory_format");
    const auto* e = fmt.get_if<EnumConst>();
    const bool row_major = e && e->name == "torch.contiguous_format";
    ctx.set_result(copy_into_new(ctx, in, row_major ? runtime::Layout::contiguous(l.shape, l.dtype) : runtime::dense_like(l, l.dtype)));
  }
};

// The concatenation along `d` of pieces that already lie one after another in
// one buffer, with equal strides (the pieces of a split or unbind, stacked or
// cat again, as batch fusion writes them): a view of that buffer, or nothing.
inline std::optional<runtime::ValueId> concatenation_in_place(runtime::LowerContext& ctx,
                                                              const std::vector<runtime::ValueId>& parts,
                                                              const std::vector<runtime::Layout>& layouts, std::int64_t d,
                                                              const runtime::Shape& shape) {
  if (parts.size() < 2) return std::nullopt;
  auto place = [&](runtime::ValueId v) {
    const runtime::ValueInfo& i = ctx.info(v);
    return i.storage == runtime::Storage::view ? std::pair{i.base, i.offset} : std::pair{v, std::int64_t{0}};
  };
  const auto [base, start] = place(parts[0]);
  // A piece one long in `d` (each piece of a stack) says nothing of its stride there: the next piece's place does.
  bool unit = true;
  for (const auto& l : layouts) unit = unit && l.shape[d] == 1;
  const std::int64_t step = unit ? place(parts[1]).second - start : layouts[0].strides[d];
  if (step <= 0) return std::nullopt;
  std::int64_t at = start;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto [b, offset] = place(parts[i]);
    if (b != base || offset != at) return std::nullopt;
    for (std::size_t k = 0; k < layouts[i].rank(); ++k)
      if (layouts[i].shape[k] > 1 && layouts[i].strides[k] != (static_cast<std::int64_t>(k) == d ? step : layouts[0].strides[k]))
        return std::nullopt;
    at += layouts[i].shape[d] * step;
  }
  runtime::Layout whole = layouts[0];
  whole.shape = shape;
  whole.strides[d] = step;
  return ctx.view(base, whole, start);
}

// Copies each input into its place in `out` along `dim` (inputs already unsqueezed for stack).
inline void concatenate(runtime::LowerContext& ctx, const std::vector<runtime::ValueId>& ins,
                        const std::vector<runtime::Layout>& in_layouts, std::int64_t dim) {
  std::vector<runtime::ValueId> parts;
  std::vector<runtime::Layout> layouts;
  // PyTorch skips 1-d empty inputs in cat (legacy behaviour).
  for (std::size_t i = 0; i < ins.size(); ++i) {
    if (in_layouts[i].rank() == 1 && in_layouts[i].shape[0] == 0 && ins.size() > 1) continue;
    parts.push_back(ins[i]);
    layouts.push_back(in_layouts[i]);
  }
  if (parts.empty()) ctx.fail("cat of no tensors");
  const auto& first = layouts[0];
  const auto r = static_cast<std::int64_t>(first.rank());
  const auto d = checked(ctx, [&] { return runtime::normalize_dim(dim, r); });
  runtime::Shape shape = first.shape;
  shape[d] = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& l = layouts[i];
    if (l.rank() != first.rank() || l.dtype != first.dtype)
      ctx.fail("cat: input " + std::to_string(i) + " is " + std::string(dtype_name(l.dtype)) + " " +
               runtime::shape_str(l.shape) + ", input 0 is " + std::string(dtype_name(first.dtype)) + " " +
               runtime::shape_str(first.shape));
    for (std::int64_t k = 0; k < r; ++k)
      if (k != d && l.shape[k] != first.shape[k])
        ctx.fail("cat: input " + std::to_string(i) + " has shape " + runtime::shape_str(l.shape) + ", input 0 " +
                 runtime::shape_str(first.shape) + " (they may differ in dim " + std::to_string(dim) + " only)");
    shape[d] += l.shape[d];
  }
  if (const auto view = concatenation_in_place(ctx, parts, layouts, d, shape)) {
    ctx.set_result(*view);
    return;
  }
  // The result keeps the first input's dim order, as PyTorch's cat keeps a
  // shared memory format: a channels-last model stays channels-last through
  // its concatenations (DenseNet's) and each input is copied in whole rows.
  const auto out = ctx.buffer(runtime::dense_in_order_of(first, shape, first.dtype));
  std::vector<std::pair<runtime::CopyPlan, std::int64_t>> plans;  // plan, byte offset in out
  std::int64_t at = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    auto piece = runtime::sliced(ctx.layout(out), d, at, at + layouts[i].shape[d], 1);
    plans.emplace_back(runtime::plan_copy(layouts[i], piece.layout), piece.offset * static_cast<std::int64_t>(first.itemsize()));
    at += layouts[i].shape[d];
  }
  ctx.add_step(runtime::make_step([plans, parts, out](runtime::Frame& f) {
                 for (std::size_t i = 0; i < parts.size(); ++i)
                   runtime::run_copy(plans[i].first, f.data(parts[i]), f.data(out) + plans[i].second, f.threads());
               }),
               parts, {out});
  ctx.set_result(out);
}

struct Cat {
  static void lower(runtime::LowerContext& ctx) {
    const auto ins = ctx.tensors(0, "tensors");
    std::vector<runtime::Layout> ls;
    for (auto v : ins) ls.push_back(ctx.layout(v));
    concatenate(ctx, ins, ls, ctx.int_arg(1, "dim", 0));
  }
};
// stack: every input gets a new dim `dim`, then cat along it.
struct Stack {
  static void lower(runtime::LowerContext& ctx) {
    const auto ins = ctx.tensors(0, "tensors");
    if (ins.empty()) ctx.fail("stack of no tensors");
    const auto dim = ctx.int_arg(1, "dim", 0);
    std::vector<runtime::Layout> ls;
    for (auto v : ins) {
      if (ctx.layout(v).shape != ctx.layout(ins[0]).shape)
        ctx.fail("stack: inputs of shapes " + runtime::shape_str(ctx.layout(ins[0]).shape) + " and " +
                 runtime::shape_str(ctx.layout(v).shape));
      ls.push_back(checked(ctx, [&] { return runtime::unsqueezed(ctx.layout(v), dim); }));
    }
    concatenate(ctx, ins, ls, checked(ctx, [&] {
                  return runtime::normalize_dim(dim, static_cast<std::int64_t>(ctx.layout(ins[0]).rank()) + 1);
                }));
  }
};

inline DType dtype_kwarg(const runtime::LowerContext& ctx, DType dflt) {
  const Arg a = ctx.value(99, "dtype");
  if (const auto* d = a.get_if<DType>()) return *d;
  return dflt;
}

// `n` elements of dtype `dt` at `p` set to `v` (zero bytes for a dtype without a cast here).
inline void fill_elements(std::byte* p, std::int64_t n, DType dt, double v) {
  switch (dt) {
    case DType::float32: std::fill_n(reinterpret_cast<float*>(p), n, static_cast<float>(v)); break;
    case DType::float64: std::fill_n(reinterpret_cast<double*>(p), n, v); break;
    case DType::int64: std::fill_n(reinterpret_cast<std::int64_t*>(p), n, static_cast<std::int64_t>(v)); break;
    case DType::int32: std::fill_n(reinterpret_cast<std::int32_t*>(p), n, static_cast<std::int32_t>(v)); break;
    case DType::bool_: std::fill_n(reinterpret_cast<bool*>(p), n, v != 0); break;
    case DType::uint8: std::fill_n(reinterpret_cast<std::uint8_t*>(p), n, static_cast<std::uint8_t>(v)); break;
    case DType::int8: std::fill_n(reinterpret_cast<std::int8_t*>(p), n, static_cast<std::int8_t>(v)); break;
    default: std::memset(p, 0, static_cast<std::size_t>(n) * dtype_itemsize(dt)); break;
  }
}

// The element at `p` of dtype `dt` as a double.
inline double read_element(const std::byte* p, DType dt) {
  switch (dt) {
    case DType::float32: return *reinterpret_cast<const float*>(p);
    case DType::float64: return *reinterpret_cast<const double*>(p);
    case DType::int64: return static_cast<double>(*reinterpret_cast<const std::int64_t*>(p));
    case DType::int32: return *reinterpret_cast<const std::int32_t*>(p);
    case DType::bool_: return *reinterpret_cast<const bool*>(p) ? 1.0 : 0.0;
    case DType::uint8: return *reinterpret_cast<const std::uint8_t*>(p);
    case DType::int8: return *reinterpret_cast<const std::int8_t*>(p);
    default: throw Error("fill_: a value of dtype " + std::string(dtype_name(dt)) + " is not read");
  }
}

// A buffer of `layout` filled with `value` each run (or left unset for empty()).
inline void fill(runtime::LowerContext& ctx, runtime::Layout layout, std::optional<double> value) {
  const DType dt = layout.dtype;
  const auto out = ctx.buffer(std::move(layout));
  if (value) {
    const double v = *value;
    ctx.add_step(runtime::make_step([out, v, dt](runtime::Frame& f) { fill_elements(f.data(out), f.layout(out).numel(), dt, v); }),
                 {}, {out});
  }
  ctx.set_result(out);
}
// A row-major buffer of `size`, of the dtype keyword's dtype or `dflt`.
inline void fill(runtime::LowerContext& ctx, const std::vector<std::int64_t>& size, std::optional<double> value, DType dflt) {
  fill(ctx, runtime::Layout::contiguous(runtime::Shape(size.begin(), size.end()), dtype_kwarg(ctx, dflt)), value);
}

// aten.constant_pad_nd(self, pad, value=0) and F.pad(input, pad, mode="constant",
// value=None): pad holds (before, after) pairs from the last dim backwards; a
// negative one crops. The result keeps its input's dim order (channels-last
// stays so); each run fills it and copies the kept part of the input in.
inline void constant_pad(runtime::LowerContext& ctx, runtime::ValueId in, const std::vector<std::int64_t>& pad, double value) {
  const runtime::Layout& l = ctx.layout(in);
  const std::size_t rank = l.rank();
  if (pad.size() % 2 != 0 || pad.size() / 2 > rank)
    ctx.fail("pad " + runtime::shape_str(pad) + " must hold a (before, after) pair for each of at most " + std::to_string(rank) +
             " dims");
  runtime::Shape out_shape = l.shape, kept = l.shape;
  std::vector<std::int64_t> src_start(rank, 0), dst_start(rank, 0);
  for (std::size_t i = 0; i < pad.size() / 2; ++i) {
    const std::size_t d = rank - 1 - i;
    const std::int64_t before = pad[2 * i], after = pad[2 * i + 1];
    out_shape[d] = l.shape[d] + before + after;
    if (out_shape[d] < 0)
      ctx.fail("pad " + runtime::shape_str(pad) + " leaves dim " + std::to_string(d) + " of " + runtime::shape_str(l.shape) +
               " with a negative size");
    src_start[d] = std::max<std::int64_t>(0, -before);
    dst_start[d] = std::max<std::int64_t>(0, before);
    kept[d] = std::max<std::int64_t>(0, l.shape[d] - src_start[d] - std::max<std::int64_t>(0, -after));
  }
  const runtime::ValueId out = ctx.buffer(runtime::dense_in_order_of(l, out_shape, l.dtype));
  const runtime::Layout& ol = ctx.layout(out);
  std::int64_t src_off = 0, dst_off = 0;
  for (std::size_t d = 0; d < rank; ++d) {
    src_off += src_start[d] * l.strides[d];
    dst_off += dst_start[d] * ol.strides[d];
  }
  const bool any_kept = runtime::shape_numel(kept) > 0;
  const runtime::CopyPlan plan = any_kept ? runtime::plan_copy(runtime::Layout{l.dtype, kept, l.strides},
                                                               runtime::Layout{l.dtype, kept, ol.strides})
                                          : runtime::CopyPlan{};
  const auto item = static_cast<std::int64_t>(l.itemsize());
  const DType dt = l.dtype;
  ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                 fill_elements(f.data(out), f.layout(out).numel(), dt, value);
                 if (any_kept) runtime::run_copy(plan, f.data(in) + src_off * item, f.data(out) + dst_off * item, f.threads());
               }),
               {in}, {out});
  ctx.set_result(out);
}
struct ConstantPadNd {
  static void lower(runtime::LowerContext& ctx) {
    constant_pad(ctx, ctx.tensor(0, "self"), ctx.ints_arg(1, "pad"), ctx.scalar_arg(2, "value", 0.0));
  }
};
struct FunctionalPad {
  static void lower(runtime::LowerContext& ctx) {
    const std::string mode = ctx.has(2, "mode") ? ctx.string_arg(2, "mode") : "constant";
    if (mode != "constant") {
      if (ctx.has(3, "value") && ctx.scalar_arg(3, "value") != 0.0) ctx.fail("pad mode '" + mode + "' takes no value");
      return lower_pad_mode(ctx, ctx.tensor(0, "input"), ctx.ints_arg(1, "pad"), pad_mode(ctx, mode), mode);
    }
    constant_pad(ctx, ctx.tensor(0, "input"), ctx.ints_arg(1, "pad"), ctx.has(3, "value") ? ctx.scalar_arg(3, "value") : 0.0);
  }
};
template <int Value>
struct Filled {
  static void lower(runtime::LowerContext& ctx) {
    fill(ctx, sizes_arg(ctx, 0, "size"), Value < 0 ? std::nullopt : std::optional<double>(Value), DType::float32);
  }
};
// lift_fresh_copy(x): a copy of x (a tensor constant the trace made), which
// the graph may then write into without touching the constant.
struct LiftFreshCopy {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    ctx.set_result(copy_into_new(ctx, in, runtime::dense_like(ctx.layout(in), ctx.layout(in).dtype)));
  }
};
struct Full {
  static void lower(runtime::LowerContext& ctx) {
    const Arg v = ctx.value(1, "fill_value");
    const bool integral = v.get_if<std::int64_t>() || v.get_if<bool>();
    fill(ctx, ctx.ints_arg(0, "size"), ctx.scalar_arg(1, "fill_value"), integral ? DType::int64 : DType::float32);
  }
};

// Rows of a float32 table picked by int64 indices: out[..., :] = table[idx[...], :].
inline void gather_rows(runtime::LowerContext& ctx, runtime::ValueId table, runtime::ValueId index) {
  const auto& tl = ctx.layout(table);
  const auto& il = ctx.layout(index);
  if (tl.rank() != 2) ctx.fail("the table must be 2-d, got " + runtime::shape_str(tl.shape));
  if (il.dtype != DType::int64 && il.dtype != DType::int32) ctx.fail("indices must be int64 or int32");
  runtime::Shape shape = il.shape;
  shape.push_back(tl.shape[1]);
  const auto out = ctx.buffer(shape, tl.dtype);
  const auto idx_plan = runtime::plan_copy(il, runtime::Layout::contiguous(il.shape, il.dtype));
  const auto row_plan = runtime::plan_copy(runtime::Layout{tl.dtype, {tl.shape[1]}, {tl.strides[1]}},
                                          runtime::Layout::contiguous({tl.shape[1]}, tl.dtype));
  const std::int64_t rows = tl.shape[0], width = tl.shape[1], n = il.numel();
  const std::int64_t row_stride = tl.strides[0] * static_cast<std::int64_t>(tl.itemsize());
  const std::size_t item = tl.itemsize();
  const bool i64 = il.dtype == DType::int64;
  const std::string node = ctx.node().name();
  // The index tensor is read through a contiguous copy in the step's scratch.
  ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                 runtime::run_copy(idx_plan, f.data(index), f.scratch(), 1);
                 for (std::int64_t k = 0; k < n; ++k) {
                   std::int64_t r = i64 ? reinterpret_cast<const std::int64_t*>(f.scratch())[k]
                                        : reinterpret_cast<const std::int32_t*>(f.scratch())[k];
                   if (r < 0) r += rows;
                   if (r < 0 || r >= rows) r = 0;  // out of range: PyTorch raises; kiln reads row 0 rather than stray memory
                   runtime::run_copy(row_plan, f.data(table) + r * row_stride, f.data(out) + k * width * static_cast<std::int64_t>(item), 1);
                 }
               }),
               {table, index}, {out}, il.nbytes());
  ctx.set_result(out);
}
// aten.embedding(weight, indices, ...), F.embedding(input, weight, ...).
struct AtenEmbedding {
  static void lower(runtime::LowerContext& ctx) { gather_rows(ctx, ctx.tensor(0, "weight"), ctx.tensor(1, "indices")); }
};
struct FEmbedding {
  static void lower(runtime::LowerContext& ctx) { gather_rows(ctx, ctx.tensor(1, "weight"), ctx.tensor(0, "input")); }
};
}  // namespace shape_detail

}  // namespace kiln::kernels
