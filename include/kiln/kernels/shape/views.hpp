#pragma once
// Kernels whose result is a view of their input: no step runs, the result is
// the input's memory seen with another layout (runtime/layout.hpp's algebra).
// Where a view is impossible (reshape of a transposed tensor), reshape-like
// ops copy; `view` itself refuses, as PyTorch does.
#include "kiln/runtime/strided_copy.hpp"
#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels {

namespace shape_detail {

// Sizes given as one list (`x.view([2, 3])`, aten's form) or as varargs from
// argument `first` on (`x.view(2, 3)`); each may be a static value.
inline std::vector<std::int64_t> sizes_arg(const runtime::LowerContext& ctx, std::size_t first, std::string_view kw) {
  const auto& args = ctx.node().args();
  if (args.size() == first + 1 || (args.size() <= first && !kw.empty())) {
    const Arg v = ctx.value(first, kw);
    if (v.is_list()) return ctx.ints_arg(first, kw);
    if (v.get_if<std::int64_t>()) return {*v.get_if<std::int64_t>()};
    ctx.fail("the sizes are not a list of ints");
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = first; i < args.size(); ++i) out.push_back(ctx.int_arg(i, ""));
  return out;
}

// A copy of `in` into a new buffer of layout `out`, as one step.
inline runtime::ValueId copy_into_new(runtime::LowerContext& ctx, runtime::ValueId in, runtime::Layout out) {
  const runtime::ValueId dst = ctx.buffer(out);
  // The source is seen with the destination's shape (a reshape copies in row-major order).
  const auto plan = runtime::plan_copy(ctx.layout(in), ctx.layout(dst));
  ctx.add_step(runtime::make_step([plan, in, dst](runtime::Frame& f) { runtime::run_copy(plan, f.data(in), f.data(dst), f.threads()); }),
               {in}, {dst});
  return dst;
}

// `in` reshaped to `sizes`: a view when the strides allow, else a copy (or a failure when `must_view`).
inline void reshape(runtime::LowerContext& ctx, runtime::ValueId in, const std::vector<std::int64_t>& sizes, bool must_view) {
  const runtime::Layout& l = ctx.layout(in);
  runtime::Shape shape;
  try {
    shape = runtime::infer_size(sizes, l.numel());
  } catch (const runtime::ShapeError& e) {
    ctx.fail(e.what());
  }
  if (auto v = runtime::viewed(l, shape)) {
    ctx.set_result(ctx.view(in, std::move(*v)));
    return;
  }
  if (must_view)
    ctx.fail("a tensor of shape " + runtime::shape_str(l.shape) + " and strides " + runtime::shape_str(l.strides) +
             " cannot be viewed as " + runtime::shape_str(shape) + " without a copy (use reshape)");
  // Copy in row-major order into a contiguous buffer of the input's shape, then view that.
  const runtime::ValueId dense = copy_into_new(ctx, in, runtime::Layout::contiguous(l.shape, l.dtype));
  ctx.set_result(ctx.view(dense, runtime::Layout::contiguous(shape, l.dtype)));
}

// Runs a layout function, turning its ShapeError into an error naming the node.
template <class F>
auto checked(const runtime::LowerContext& ctx, F f) {
  try {
    return f();
  } catch (const runtime::ShapeError& e) {
    ctx.fail(e.what());
  }
}

// The layout PyTorch gave argument `pos` (whose value is `in`): the strides the
// exporter recorded in its meta.val. Without them, the executor's own layout,
// except where the executor chose channels-last for a convolution graph (a
// layout PyTorch would not have had): there, row-major. Ops that take explicit
// strides speak of this layout, not of the one the executor chose.
inline runtime::Layout torch_layout(const runtime::LowerContext& ctx, std::size_t pos, std::string_view kw, runtime::ValueId in) {
  const runtime::Layout& l = ctx.layout(in);
  const Arg* a = ctx.find_arg(pos, kw);
  const Node* n = a ? a->node() : nullptr;
  const TensorMeta* m = n ? n->meta.val.tensor() : nullptr;
  if (m && m->stride && m->stride->size() == l.rank() &&
      std::all_of(m->stride->begin(), m->stride->end(), [](const Dim& d) { return is_static(d); })) {
    runtime::Layout t = l;
    for (std::size_t k = 0; k < l.rank(); ++k) t.strides[k] = std::get<std::int64_t>((*m->stride)[k]);
    return t;
  }
  if (ctx.channels_last() && l.rank() >= 4 && l.shape[1] > 1 && l == runtime::channels_last(l.shape, l.dtype))
    return runtime::Layout::contiguous(l.shape, l.dtype);
  return l;
}

// Whether two layouts of one shape address the same elements at the same
// places (strides of size-1 dims never count).
inline bool same_addressing(const runtime::Layout& a, const runtime::Layout& b) {
  if (a.shape != b.shape) return false;
  for (std::size_t k = 0; k < a.rank(); ++k)
    if (a.shape[k] != 1 && a.strides[k] != b.strides[k]) return false;
  return true;
}

// Every element at its own place, with no gaps, in some order of the dims.
inline bool is_dense(const runtime::Layout& l) {
  return same_addressing(runtime::dense_like(l, l.dtype), l);
}

// as_strided and _reshape_alias: the view of argument 0 with `size` and
// `stride` (and `offset` elements on), all in PyTorch's layout of that
// argument. Where the executor laid the argument out otherwise (channels-last
// after a convolution), the view reads a copy of it in PyTorch's layout; a
// row-major reshape of a row-major tensor becomes a reshape, which is a view
// wherever the executor's strides allow one.
inline void strided_view(runtime::LowerContext& ctx, std::string_view self, runtime::Shape size, runtime::Shape stride,
                         std::int64_t offset) {
  runtime::ValueId in = ctx.tensor(0, self);
  const runtime::Layout& l = ctx.layout(in);
  if (size.size() != stride.size())
    ctx.fail("size " + runtime::shape_str(size) + " and stride " + runtime::shape_str(stride) + " have different lengths");
  for (std::size_t k = 0; k < size.size(); ++k)
    if (size[k] < 0 || stride[k] < 0)
      ctx.fail("size " + runtime::shape_str(size) + " and stride " + runtime::shape_str(stride) + " must not be negative");
  runtime::Layout out{l.dtype, std::move(size), std::move(stride)};
  const runtime::Layout torch = torch_layout(ctx, 0, self, in);
  if (offset < 0 || (out.numel() > 0 && offset + out.span_elements() > torch.span_elements()))
    ctx.fail("a view of shape " + runtime::shape_str(out.shape) + ", strides " + runtime::shape_str(out.strides) +
             " and offset " + std::to_string(offset) + " reaches beyond its input's " + std::to_string(torch.span_elements()) +
             " elements");
  if (!same_addressing(l, torch)) {
    if (offset == 0 && out.numel() == l.numel() && torch.is_contiguous() && out.is_contiguous()) {
      reshape(ctx, in, out.shape, false);
      return;
    }
    if (!is_dense(torch))
      ctx.fail("the input is laid out with strides " + runtime::shape_str(l.strides) + " where PyTorch had " +
               runtime::shape_str(torch.strides) + ", which has gaps or overlaps, so the view cannot be taken from a copy");
    in = copy_into_new(ctx, in, torch);
  }
  ctx.set_result(ctx.view(in, std::move(out), offset));
}

// aten._reshape_alias(x, size, stride): x's storage seen with these strides.
struct ReshapeAlias {
  static void lower(runtime::LowerContext& ctx) { strided_view(ctx, "self", ctx.ints_arg(1, "size"), ctx.ints_arg(2, "stride"), 0); }
};
// aten.as_strided(x, size, stride, storage_offset=None). PyTorch's offset counts
// from the storage's start; kiln knows where that is only for a tensor that is
// no view, so an offset on a view is refused rather than guessed.
struct AsStrided {
  static void lower(runtime::LowerContext& ctx) {
    std::int64_t offset = 0;
    if (ctx.has(3, "storage_offset")) {
      offset = ctx.int_arg(3, "storage_offset");
      if (offset != 0 && ctx.info(ctx.tensor(0, "self")).storage == runtime::Storage::view)
        ctx.fail("a storage_offset on a view of another tensor (PyTorch counts it from the storage's start, "
                 "which the graph does not record)");
    }
    strided_view(ctx, "self", ctx.ints_arg(1, "size"), ctx.ints_arg(2, "stride"), offset);
  }
};
// An in-place view (as_strided_, transpose_, t_, unsqueeze_, squeeze_): x
// itself takes the new shape and strides. For the node's users it is the view;
// x's other users would see x change, which the executor does not follow, so
// the node must be x's only user (as after a mean in ConvNeXt's aten graph, or
// after the stacked outputs of an RNN's aten graph).
template <class View>
struct InPlaceView {
  static void lower(runtime::LowerContext& ctx) {
    const Arg* self = ctx.find_arg(0, "self");
    if (const Node* x = self ? self->node() : nullptr; x && x->num_users() > 1) {
      std::string_view op = ctx.node().target_name();
      op = op.substr(op.find('.') + 1);
      op = op.substr(0, op.find('.'));
      ctx.fail(std::string(op) + " changes the strides of " + x->name() + ", which " + std::to_string(x->num_users() - 1) +
               " other node(s) read; only its sole user may restride it");
    }
    View::lower(ctx);
  }
};
// torchvision.ops.stochastic_depth(input, p, mode, training): in eval
// (training=False) or with p = 0 it is the input itself; in training it
// drops rows at random, which an inference executor does not do.
struct StochasticDepth {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const double p = ctx.scalar_arg(1, "p");
    const bool training = ctx.bool_arg(3, "training", true);
    if (training && p > 0)
      ctx.fail("stochastic_depth with training=True and p=" + std::to_string(p) +
               " drops rows at random; export the model in eval mode (model.eval())");
    ctx.set_result(ctx.view(in, ctx.layout(in)));
  }
};

// view refuses only what PyTorch refuses: a view of the layout PyTorch had.
// Where the executor chose another layout (channels-last) it copies, as reshape does.
struct View {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto sizes = sizes_arg(ctx, 1, "size");
    const runtime::Layout torch = torch_layout(ctx, 0, "self", in);
    bool torch_can_view = true;
    try {
      torch_can_view = runtime::viewed(torch, runtime::infer_size(sizes, torch.numel())).has_value();
    } catch (const runtime::ShapeError&) {  // reshape names the bad size
    }
    reshape(ctx, in, sizes, !torch_can_view || same_addressing(torch, ctx.layout(in)));
  }
};
struct Reshape {
  static void lower(runtime::LowerContext& ctx) { reshape(ctx, ctx.tensor(0, "input"), sizes_arg(ctx, 1, "shape"), false); }
};
struct Permute {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto dims = sizes_arg(ctx, 1, "dims");
    ctx.set_result(ctx.view(in, checked(ctx, [&] { return runtime::permuted(ctx.layout(in), dims); })));
  }
};
struct Transpose {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    // swapaxes (numpy's name, as MaxViT calls it) names the dims axis0/axis1.
    const bool axes = ctx.node().target_name().find("swapaxes") != std::string_view::npos;
    const auto a = ctx.int_arg(1, axes ? "axis0" : "dim0"), b = ctx.int_arg(2, axes ? "axis1" : "dim1");
    ctx.set_result(ctx.view(in, checked(ctx, [&] { return runtime::transposed(ctx.layout(in), a, b); })));
  }
};
// t(): a 2-d transpose; 0-d and 1-d tensors are returned as they are.
struct T {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto& l = ctx.layout(in);
    if (l.rank() > 2) ctx.fail("t() expects a tensor of at most 2 dims, got " + runtime::shape_str(l.shape));
    ctx.set_result(ctx.view(in, l.rank() == 2 ? runtime::transposed(l, 0, 1) : l));
  }
};
struct Expand {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto sizes = sizes_arg(ctx, 1, "size");
    ctx.set_result(ctx.view(in, checked(ctx, [&] { return runtime::expanded(ctx.layout(in), sizes); })));
  }
};
// alias, detach, dropout-free identities: the same memory.
struct Alias {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    ctx.set_result(ctx.view(in, ctx.layout(in)));
  }
};
struct Unsqueeze {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto d = ctx.int_arg(1, "dim");
    ctx.set_result(ctx.view(in, checked(ctx, [&] { return runtime::unsqueezed(ctx.layout(in), d); })));
  }
};
// squeeze(), squeeze(dim), squeeze(dims).
struct Squeeze {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto& l = ctx.layout(in);
    if (!ctx.has(1, "dim")) {
      ctx.set_result(ctx.view(in, runtime::squeezed_all(l)));
      return;
    }
    const auto dims = ctx.ints_arg(1, "dim");
    ctx.set_result(ctx.view(in, checked(ctx, [&] { return runtime::squeezed(l, dims); })));
  }
};
struct Select {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto d = ctx.int_arg(1, "dim"), i = ctx.int_arg(2, "index");
    auto v = checked(ctx, [&] { return runtime::selected(ctx.layout(in), d, i); });
    ctx.set_result(ctx.view(in, std::move(v.layout), v.offset));
  }
};
// aten.slice.Tensor(x, dim=0, start=None, end=None, step=1).
struct SliceKernel {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto d = ctx.int_arg(1, "dim", 0);
    const auto start = ctx.optional_int(2, "start");
    const auto end = ctx.optional_int(3, "end");
    const auto step = ctx.int_arg(4, "step", 1);
    auto v = checked(ctx, [&] { return runtime::sliced(ctx.layout(in), d, start, end, step); });
    ctx.set_result(ctx.view(in, std::move(v.layout), v.offset));
  }
};
// narrow(x, dim, start, length).
struct Narrow {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto d = ctx.int_arg(1, "dim");
    const auto& l = ctx.layout(in);
    auto start = ctx.int_arg(2, "start");
    const auto length = ctx.int_arg(3, "length");
    const auto dd = checked(ctx, [&] { return runtime::normalize_dim(d, static_cast<std::int64_t>(l.rank())); });
    if (start < 0) start += l.shape[dd];
    if (start < 0 || length < 0 || start + length > l.shape[dd]) ctx.fail("narrow: start and length are out of range");
    auto v = runtime::sliced(l, dd, start, start + length, 1);
    ctx.set_result(ctx.view(in, std::move(v.layout), v.offset));
  }
};
// flatten(x, start_dim=0, end_dim=-1).
struct Flatten {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto& l = ctx.layout(in);
    const auto r = static_cast<std::int64_t>(l.rank());
    if (r == 0) {
      reshape(ctx, in, {1}, false);
      return;
    }
    const auto s = checked(ctx, [&] { return runtime::normalize_dim(ctx.int_arg(1, "start_dim", 0), r, "start_dim"); });
    const auto e = checked(ctx, [&] { return runtime::normalize_dim(ctx.int_arg(2, "end_dim", -1), r, "end_dim"); });
    if (s > e) ctx.fail("flatten: start_dim comes after end_dim");
    std::vector<std::int64_t> shape(l.shape.begin(), l.shape.begin() + s);
    std::int64_t m = 1;
    for (auto k = s; k <= e; ++k) m *= l.shape[k];
    shape.push_back(m);
    shape.insert(shape.end(), l.shape.begin() + e + 1, l.shape.end());
    reshape(ctx, in, shape, false);
  }
};
// unflatten(x, dim, sizes).
struct Unflatten {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto& l = ctx.layout(in);
    const auto d = checked(ctx, [&] { return runtime::normalize_dim(ctx.int_arg(1, "dim"), static_cast<std::int64_t>(l.rank())); });
    auto sizes = runtime::infer_size(ctx.ints_arg(2, "sizes"), l.shape[d]);
    std::vector<std::int64_t> shape(l.shape.begin(), l.shape.begin() + d);
    shape.insert(shape.end(), sizes.begin(), sizes.end());
    shape.insert(shape.end(), l.shape.begin() + d + 1, l.shape.end());
    reshape(ctx, in, shape, false);
  }
};

// The pieces of `in` along `dim` of the given sizes, as a tuple of views.
inline void split_into(runtime::LowerContext& ctx, runtime::ValueId in, std::int64_t dim, const std::vector<std::int64_t>& sizes) {
  const auto& l = ctx.layout(in);
  const auto d = checked(ctx, [&] { return runtime::normalize_dim(dim, static_cast<std::int64_t>(l.rank())); });
  std::int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) ctx.fail("split: a negative size");
    total += s;
  }
  if (total != l.shape[d])
    ctx.fail("split sizes add up to " + std::to_string(total) + " but dim " + std::to_string(dim) + " has " +
             std::to_string(l.shape[d]));
  std::vector<runtime::Lowered> items;
  std::int64_t at = 0;
  for (auto s : sizes) {
    auto v = runtime::sliced(l, d, at, at + s, 1);
    items.push_back(runtime::Lowered::tensor(ctx.view(in, std::move(v.layout), v.offset)));
    at += s;
  }
  ctx.set_result(runtime::Lowered::tuple(std::move(items)));
}
// split(x, split_size_or_sections, dim=0): an int gives equal pieces (the last smaller).
struct Split {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto dim = ctx.int_arg(2, "dim", 0);
    const auto& l = ctx.layout(in);
    const auto d = checked(ctx, [&] { return runtime::normalize_dim(dim, static_cast<std::int64_t>(l.rank())); });
    // Positional, or under the name each level gives it.
    std::string_view kw = "split_size_or_sections";
    for (std::string_view k : {"split_size_or_sections", "split_size", "split_sizes"})
      if (ctx.node().kwargs().find(k)) kw = k;
    const Arg how = ctx.value(1, kw);
    std::vector<std::int64_t> sizes;
    if (const auto* n = how.get_if<std::int64_t>()) {
      if (*n <= 0) ctx.fail("split size must be positive, got " + std::to_string(*n));
      for (std::int64_t at = 0; at < l.shape[d]; at += *n) sizes.push_back(std::min(*n, l.shape[d] - at));
      if (sizes.empty()) sizes.push_back(0);
    } else if (how.is_list()) {
      sizes = ctx.ints_arg(1, kw);
    } else {
      ctx.fail("split: the split size is neither an int nor a list of ints");
    }
    split_into(ctx, in, dim, sizes);
  }
};
// chunk(x, chunks, dim=0): ceil(n / chunks) per piece, as torch.chunk.
struct Chunk {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto chunks = ctx.int_arg(1, "chunks");
    const auto dim = ctx.int_arg(2, "dim", 0);
    if (chunks <= 0) ctx.fail("chunk: chunks must be positive");
    const auto& l = ctx.layout(in);
    const auto d = checked(ctx, [&] { return runtime::normalize_dim(dim, static_cast<std::int64_t>(l.rank())); });
    const std::int64_t n = l.shape[d], each = (n + chunks - 1) / chunks;
    std::vector<std::int64_t> sizes;
    for (std::int64_t at = 0; at < n; at += each) sizes.push_back(std::min(each, n - at));
    if (sizes.empty()) sizes.push_back(0);
    split_into(ctx, in, dim, sizes);
  }
};
// unbind(x, dim=0): a tuple of selects.
struct Unbind {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const auto dim = ctx.int_arg(1, "dim", 0);
    const auto& l = ctx.layout(in);
    const auto d = checked(ctx, [&] { return runtime::normalize_dim(dim, static_cast<std::int64_t>(l.rank())); });
    std::vector<runtime::Lowered> items;
    for (std::int64_t i = 0; i < l.shape[d]; ++i) {
      auto v = runtime::selected(l, d, i);
      items.push_back(runtime::Lowered::tensor(ctx.view(in, std::move(v.layout), v.offset)));
    }
    ctx.set_result(runtime::Lowered::tuple(std::move(items)));
  }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
