#pragma once
// fill_(self, value) and zero_(self): the one in-place write kiln follows through views. A
// slice assignment (`mask[a:b, c:d] = k`, traced as fill_ of a slice) writes
// into the buffer the slice views, and later readers of that buffer must see
// it. Into a buffer of the run it is a step; into a constant lowering folded
// (a zeros() made once) it is done once, when lowering; into a weight or an
// input it is refused.
#include <string>
#include <unordered_set>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/shape/copies.hpp"
#include "kiln/runtime/strided_copy.hpp"

namespace kiln::kernels {

namespace shape_detail {

// Every element of `target` (a strided view at `p`) set to `v`; `one` holds an element's bytes.
inline void fill_strided(std::byte* p, const runtime::Layout& target, double v, std::byte* one) {
  fill_elements(one, 1, target.dtype, v);
  const runtime::Layout from{target.dtype, target.shape, runtime::Shape(target.rank(), 0)};
  runtime::run_copy(runtime::plan_copy(from, target), one, p, 1);
}

struct FillInPlace {
  static void lower(runtime::LowerContext& ctx) {
    const auto target = ctx.tensor(0, "self");
    // The value: a number, or a 0-d tensor (known now when it is a constant).
    std::optional<double> value;
    std::optional<runtime::ValueId> value_tensor;
    if (const Node* n = ctx.value(1, "value").node()) {
      const auto v = ctx.tensor(1, "value");
      if (ctx.layout(v).rank() != 0)
        ctx.fail("fill_ takes a 0-d value tensor, got " + runtime::shape_str(ctx.layout(v).shape) + " (" + n->name() + ")");
      if (const auto c = ctx.constant(v)) value = read_element(static_cast<const std::byte*>(c->raw()), c->dtype());
      else value_tensor = v;
    } else {
      value = ctx.scalar_arg(1, "value");
    }
    fill(ctx, target, value, value_tensor);
  }

  // Writes `value` (or the 0-d `value_tensor`) into every element of `target`.
  static void fill(runtime::LowerContext& ctx, runtime::ValueId target, std::optional<double> value,
                   std::optional<runtime::ValueId> value_tensor) {
    switch (ctx.layout(target).dtype) {
      case DType::float32: case DType::float64: case DType::int64: case DType::int32:
      case DType::bool_: case DType::uint8: case DType::int8: break;
      default: ctx.fail("fill_ of a " + std::string(dtype_name(ctx.layout(target).dtype)) + " tensor is not supported");
    }
    const runtime::ValueInfo& ti = ctx.info(target);
    const runtime::ValueId root = ti.storage == runtime::Storage::view ? ti.base : target;
    switch (ctx.info(root).storage) {
      case runtime::Storage::arena:
        // A known value into an untouched empty(): its contents are set once (mvit_v1_b's repeat counts).
        if (!value_tensor && ctx.make_constant_if_untouched(root)) return when_lowering(ctx, target, root, value, value_tensor);
        return in_run(ctx, target, value, value_tensor);
      case runtime::Storage::constant: return when_lowering(ctx, target, root, value, value_tensor);
      default: ctx.fail("fill_ writes in place into the graph's input " + ctx.info(root).name + ", which kiln does not change");
    }
  }

  // A step writing into the run's buffer; steps run in graph order, so readers before see the old values.
  static void in_run(runtime::LowerContext& ctx, runtime::ValueId target, std::optional<double> value,
                     std::optional<runtime::ValueId> value_tensor) {
    const runtime::Layout tl = ctx.layout(target);
    std::vector<runtime::ValueId> reads{target};
    if (value_tensor) reads.push_back(*value_tensor);
    const runtime::ValueId vt = value_tensor.value_or(0);
    const bool from_tensor = value_tensor.has_value();
    const double v = value.value_or(0);
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   const double x = from_tensor ? read_element(f.data(vt), f.layout(vt).dtype) : v;
                   fill_strided(f.data(target), tl, x, f.scratch());
                 }),
                 reads, {target}, 16);
    ctx.set_result(ctx.view(target, tl));
  }

  // A constant lowering made (a folded zeros()): written now, once, if nothing
  // that runs later has read it already.
  static void when_lowering(runtime::LowerContext& ctx, runtime::ValueId target, runtime::ValueId root,
                            std::optional<double> value, std::optional<runtime::ValueId> value_tensor) {
    const Node* owner = owner_of(ctx, root);
    if (!owner || owner->op() == OpKind::get_attr || owner->op() == OpKind::placeholder)
      ctx.fail("fill_ writes in place into the weight " + ctx.info(root).name + ", which kiln does not change");
    if (value_tensor)
      ctx.fail("fill_ writes a value known only when the graph runs into " + owner->name() +
               ", which lowering made a constant");
    refuse_earlier_readers(ctx, *owner, root);
    auto c = ctx.constant(target);
    std::byte one[16];
    fill_strided(static_cast<std::byte*>(c->raw()), c->layout(), *value, one);
    ctx.set_result(ctx.view(target, ctx.layout(target)));
  }

  // The node whose value is `root`, down the chain of self arguments.
  static const Node* owner_of(const runtime::LowerContext& ctx, runtime::ValueId root) {
    const Arg* a = ctx.find_arg(0, "self");
    const Node* n = a ? a->node() : nullptr;
    while (n) {
      const runtime::Lowered& l = ctx.lowered(n);
      if (l.is_tensor() && l.id == root) return n;
      n = n->args().empty() ? nullptr : n->arg(0).node();
    }
    return nullptr;
  }

  // A node lowered already that reads `root` in a step (not a view of it, not
  // a constant folded from it) would see the new values on each run.
  static void refuse_earlier_readers(const runtime::LowerContext& ctx, const Node& owner, runtime::ValueId root,
                                     std::string_view op = "fill_") {
    std::vector<const Node*> todo{&owner};
    std::unordered_set<const Node*> seen{&owner};
    while (!todo.empty()) {
      const Node* n = todo.back();
      todo.pop_back();
      for (const Node* u : n->users()) {
        if (!u || u == &ctx.node() || !ctx.is_lowered(u) || seen.contains(u)) continue;
        seen.insert(u);
        const runtime::Lowered& l = ctx.lowered(u);
        if (!l.is_tensor()) continue;
        const runtime::ValueInfo& i = ctx.info(l.id);
        if (l.id == root || (i.storage == runtime::Storage::view && i.base == root)) {
          todo.push_back(u);
        } else if (i.storage != runtime::Storage::constant && !(i.storage == runtime::Storage::view && ctx.info(i.base).storage == runtime::Storage::constant)) {
          ctx.fail(std::string(op) + " writes in place into " + owner.name() + ", which " + u->name() +
                   " read earlier while the graph runs; an in-place write after a read is not supported");
        }
      }
    }
  }
};

// zero_(self): fill_ with 0 (Swin V2 zeroes the key third of a cloned qkv bias).
struct ZeroInPlace {
  static void lower(runtime::LowerContext& ctx) { FillInPlace::fill(ctx, ctx.tensor(0, "self"), 0.0, std::nullopt); }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
