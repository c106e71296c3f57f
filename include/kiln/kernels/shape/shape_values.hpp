#pragma once
// What a traced model asks of a tensor's shape (`x.shape`, `x.size(1)`,
// `x.dim()`) is known when lowering: these kernels give static values, which
// shape arithmetic (operator.mul on ints, ...) and view sizes then read.
// Also Python indexing of a tensor (`x[0]`, `x[:, 1:3]`, `x[None]`), as views,
// and with integer tensors (`table[index]`), as aten.index.Tensor's gather.
#include <algorithm>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/indexing.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace shape_detail {

inline Arg shape_value(const runtime::Layout& l) {
  ArgList dims;
  for (auto d : l.shape) dims.push_back(Arg(d));
  return Arg(std::move(dims));
}

// builtins.getattr(x, "shape" | "ndim" | "dtype").
struct GetAttr {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "");
    const std::string attr = ctx.string_arg(1, "");
    const auto& l = ctx.layout(in);
    if (attr == "shape") ctx.set_static_result(shape_value(l));
    else if (attr == "ndim") ctx.set_static_result(Arg(static_cast<std::int64_t>(l.rank())));
    else if (attr == "dtype") ctx.set_static_result(Arg(l.dtype));
    else ctx.fail("getattr of '" + attr + "' is not known when lowering (shape, ndim and dtype are)");
  }
};
// x.size() or x.size(dim).
struct Size {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto& l = ctx.layout(in);
    if (!ctx.has(1, "dim")) {
      ctx.set_static_result(shape_value(l));
      return;
    }
    const auto d = checked(ctx, [&] { return runtime::normalize_dim(ctx.int_arg(1, "dim"), static_cast<std::int64_t>(l.rank())); });
    ctx.set_static_result(Arg(l.shape[d]));
  }
};
struct Dim {
  static void lower(runtime::LowerContext& ctx) {
    ctx.set_static_result(Arg(static_cast<std::int64_t>(ctx.layout(ctx.tensor(0, "self")).rank())));
  }
};

// x[index] for a tensor x: ints select, slices slice, None adds a dim, one
// Ellipsis stands for the dims not named; a tuple combines them. All views.
struct GetItem {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "");
    const Arg index = ctx.value(1, "");
    ArgList parts;
    if (const ArgList* l = index.list()) parts = *l;
    else parts.push_back(index);
    auto is_ellipsis = [](const Arg& a) {
      const auto* e = a.get_if<EnumConst>();
      return e && (e->name == "Ellipsis" || e->name == "...");
    };
    if (std::any_of(parts.begin(), parts.end(), [](const Arg& a) { return a.node() != nullptr; }))
      return lower_tensor_index(ctx, in, parts);
    // Dims the index consumes (ints and slices); None and Ellipsis consume none.
    std::int64_t consumed = 0;
    int ellipses = 0;
    for (const Arg& p : parts) {
      if (p.get_if<std::int64_t>() || p.get_if<Slice>()) ++consumed;
      else if (is_ellipsis(p)) ++ellipses;
      else if (!p.is_none()) ctx.fail("indexing with this kind of index is not supported (ints, slices, None, ...)");
    }
    if (ellipses > 1) ctx.fail("an index can have only one ellipsis");
    runtime::Layout l = ctx.layout(in);
    const auto rank = static_cast<std::int64_t>(l.rank());
    if (consumed > rank) ctx.fail("too many indices for a tensor of rank " + std::to_string(rank));
    std::int64_t offset = 0, dim = 0;
    auto opt_int = [&](const Arg& a) -> std::optional<std::int64_t> {
      if (a.is_none()) return std::nullopt;
      if (const auto* i = a.get_if<std::int64_t>()) return *i;
      ctx.fail("a slice bound is not an int");
    };
    for (const Arg& p : parts) {
      if (const auto* i = p.get_if<std::int64_t>()) {
        auto v = checked(ctx, [&] { return runtime::selected(l, dim, *i); });
        l = std::move(v.layout);
        offset += v.offset;
      } else if (const auto* s = p.get_if<Slice>()) {
        const auto step = opt_int(s->parts[2]).value_or(1);
        auto v = checked(ctx, [&] { return runtime::sliced(l, dim, opt_int(s->parts[0]), opt_int(s->parts[1]), step); });
        l = std::move(v.layout);
        offset += v.offset;
        ++dim;
      } else if (p.is_none()) {
        l = runtime::unsqueezed(l, dim);
        ++dim;
      } else {  // Ellipsis: skip the dims no index names
        dim += rank - consumed;
      }
    }
    ctx.set_result(ctx.view(in, std::move(l), offset));
  }

  // x[t] or x[:, t, u] with integer tensors: aten.index.Tensor's gather, a
  // full slice standing for a dim taken whole (None in aten's list).
  static void lower_tensor_index(runtime::LowerContext& ctx, runtime::ValueId in, const ArgList& parts) {
    ArgList indices;
    for (const Arg& p : parts) {
      const auto* s = p.get_if<Slice>();
      if (p.node()) indices.push_back(p);
      else if (s && s->parts[0].is_none() && s->parts[1].is_none() && s->parts[2].is_none()) indices.push_back(Arg());
      else ctx.fail("indexing with tensors is supported with full slices (:) beside them, not with ints, partial slices, None or ...");
    }
    IndexTensor::lower_indices(ctx, in, &indices);
  }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
