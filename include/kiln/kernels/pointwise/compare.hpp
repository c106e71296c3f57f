#pragma once
// Comparisons (eq, ne, lt, le, gt, ge with a tensor or a number on the right)
// into bool tensors, with broadcasting, and masked_fill. Masks are small
// (attention masks built once, then folded to constants), so a comparison is
// a plain loop in the promoted dtype rather than an xtensor expression.
#include <string>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/pointwise/binary.hpp"
#include "kiln/kernels/shape/copies.hpp"
#include "kiln/kernels/shape/indexing.hpp"

namespace kiln::kernels::pointwise_detail {

enum class CompareOp { eq, ne, lt, le, gt, ge };

template <CompareOp K, class T>
bool compare(T a, T b) {
  if constexpr (K == CompareOp::eq) return a == b;
  else if constexpr (K == CompareOp::ne) return a != b;
  else if constexpr (K == CompareOp::lt) return a < b;
  else if constexpr (K == CompareOp::le) return a <= b;
  else if constexpr (K == CompareOp::gt) return a > b;
  else return a >= b;
}

inline std::int64_t read_integer(const std::byte* p, DType dt) {
  if (dt == DType::int64) return *reinterpret_cast<const std::int64_t*>(p);
  return static_cast<std::int64_t>(shape_detail::read_element(p, dt));
}

template <CompareOp K>
struct CompareKernel {
  static void lower(runtime::LowerContext& ctx) {
    const bool is_aten = ctx.node().target_name().starts_with("aten.");
    const Operand a = read_operand(ctx, 0, is_aten ? "self" : "input");
    const Operand b = read_operand(ctx, 1, "other");
    if (!a.tensor && !b.tensor) ctx.fail("neither operand is a tensor");
    // In the promoted category: floats as double, integers and bools as int64.
    const bool floating = promote(ctx, a, b) == DType::float32;
    runtime::Shape shape;
    std::array<runtime::Layout, 2> ls;
    for (int i = 0; i < 2; ++i) {
      const Operand& o = i == 0 ? a : b;
      ls[i] = o.tensor ? ctx.layout(*o.tensor) : runtime::Layout::contiguous({}, DType::float32);
      try {
        shape = i == 0 ? ls[i].shape : runtime::broadcast_shapes(shape, ls[i].shape);
      } catch (const runtime::ShapeError& e) {
        ctx.fail(e.what());
      }
    }
    if (shape.size() > shape_detail::kMaxWalkRank) ctx.fail("comparisons take tensors of at most 16 dims");
    const runtime::ValueId out = ctx.buffer(shape, DType::bool_);
    std::array<runtime::Shape, 2> strides;
    for (int i = 0; i < 2; ++i) strides[i] = runtime::expanded(ls[i], shape).strides;
    std::vector<runtime::ValueId> reads;
    for (const Operand* o : {&a, &b})
      if (o->tensor) reads.push_back(*o->tensor);
    const std::array<std::optional<runtime::ValueId>, 2> ids{a.tensor, b.tensor};
    const std::array<Scalar, 2> scalars{a.scalar, b.scalar};
    const std::array<DType, 2> dts{ls[0].dtype, ls[1].dtype};
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   bool* o = f.data_as<bool>(out);
                   shape_detail::walk_broadcast<2>(shape, strides, [&](std::int64_t flat, const std::array<std::int64_t, 2>& off) {
                     auto side = [&](int i) {
                       const std::byte* p = ids[i] ? f.data(*ids[i]) + off[i] * static_cast<std::int64_t>(dtype_itemsize(dts[i])) : nullptr;
                       return p;
                     };
                     if (floating) {
                       const double x = side(0) ? shape_detail::read_element(side(0), dts[0]) : scalars[0].f;
                       const double y = side(1) ? shape_detail::read_element(side(1), dts[1]) : scalars[1].f;
                       o[flat] = compare<K>(x, y);
                     } else {
                       const std::int64_t x = side(0) ? read_integer(side(0), dts[0]) : scalars[0].i;
                       const std::int64_t y = side(1) ? read_integer(side(1), dts[1]) : scalars[1].i;
                       o[flat] = compare<K>(x, y);
                     }
                   });
                 }),
                 reads, {out});
    ctx.set_result(out);
  }
};

// masked_fill(self, mask, value): where(mask, value, self), the value cast to
// self's dtype as PyTorch does (a float into an int tensor truncates).
struct MaskedFill {
  static void lower(runtime::LowerContext& ctx) {
    const Arg* self = ctx.find_arg(0, "self");
    const Arg* mask = ctx.find_arg(1, "mask");
    if (!self || !self->node() || !mask || !mask->node()) ctx.fail("self and mask must be tensors");
    const DType dt = ctx.layout(ctx.tensor(0, "self")).dtype;
    const Operand v = read_operand(ctx, 2, "value");
    Arg value;
    if (v.tensor) {
      if (ctx.layout(*v.tensor).rank() != 0) ctx.fail("masked_fill takes a 0-d value tensor");
      value = *ctx.find_arg(2, "value");
    } else if (dt == DType::float32) {
      value = Arg(v.scalar.f);
    } else if (dt == DType::bool_) {
      value = Arg(v.scalar.f != 0);
    } else {
      value = Arg(static_cast<std::int64_t>(v.scalar.f));
    }
    ctx.lower_as("aten.where.self", {runtime::CallArg::of(*mask), runtime::CallArg::of(std::move(value)), runtime::CallArg::of(*self)});
  }
};

}  // namespace kiln::kernels::pointwise_detail

namespace kiln::kernels {

using pointwise_detail::CompareKernel;
using pointwise_detail::CompareOp;

using compare_kernels = KernelGroup<
    KernelEntry<"aten.eq.Scalar", CompareKernel<CompareOp::eq>>,
    KernelEntry<"aten.eq.Tensor", CompareKernel<CompareOp::eq>>,
    KernelEntry<"torch.eq", CompareKernel<CompareOp::eq>>,
    KernelEntry<"Tensor.eq", CompareKernel<CompareOp::eq>>,
    KernelEntry<"aten.ne.Scalar", CompareKernel<CompareOp::ne>>,
    KernelEntry<"aten.ne.Tensor", CompareKernel<CompareOp::ne>>,
    KernelEntry<"torch.ne", CompareKernel<CompareOp::ne>>,
    KernelEntry<"Tensor.ne", CompareKernel<CompareOp::ne>>,
    KernelEntry<"aten.lt.Scalar", CompareKernel<CompareOp::lt>>,
    KernelEntry<"aten.lt.Tensor", CompareKernel<CompareOp::lt>>,
    KernelEntry<"torch.lt", CompareKernel<CompareOp::lt>>,
    KernelEntry<"aten.le.Scalar", CompareKernel<CompareOp::le>>,
    KernelEntry<"aten.le.Tensor", CompareKernel<CompareOp::le>>,
    KernelEntry<"torch.le", CompareKernel<CompareOp::le>>,
    KernelEntry<"aten.gt.Scalar", CompareKernel<CompareOp::gt>>,
    KernelEntry<"aten.gt.Tensor", CompareKernel<CompareOp::gt>>,
    KernelEntry<"torch.gt", CompareKernel<CompareOp::gt>>,
    KernelEntry<"aten.ge.Scalar", CompareKernel<CompareOp::ge>>,
    KernelEntry<"aten.ge.Tensor", CompareKernel<CompareOp::ge>>,
    KernelEntry<"torch.ge", CompareKernel<CompareOp::ge>>,
    KernelEntry<"aten.masked_fill.Scalar", pointwise_detail::MaskedFill>,
    KernelEntry<"aten.masked_fill.Tensor", pointwise_detail::MaskedFill>,
    KernelEntry<"Tensor.masked_fill", pointwise_detail::MaskedFill>>;

}  // namespace kiln::kernels
