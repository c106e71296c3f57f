#pragma once
// Facts a traced model states about its static shapes, decided while lowering:
// `operator.eq(h, 224)` and the other comparisons of static values (sizes,
// shapes, numbers) are static bools, and `torch._assert(cond, msg)` of a static
// condition vanishes when it holds and is a compile error carrying its message
// when it does not (ViT checks its input size so). A tensor in either place
// cannot be decided before a run and is refused.
#include <string>

#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels {

namespace shape_detail {

enum class Compare { eq, ne, lt, le, gt, ge };

// A static number as a double (bools and ints too); nullopt for anything else.
inline std::optional<double> static_number(const Arg& a) {
  if (const auto* b = a.get_if<bool>()) return *b ? 1.0 : 0.0;
  if (const auto* i = a.get_if<std::int64_t>()) return static_cast<double>(*i);
  if (const auto* d = a.get_if<double>()) return *d;
  return std::nullopt;
}

template <Compare C>
struct StaticCompare {
  static void lower(runtime::LowerContext& ctx) {
    const Arg a = ctx.value(0, ""), b = ctx.value(1, "");
    if (a.node() || b.node())
      ctx.fail("compares a tensor; only static values (sizes, shapes, numbers) are compared while compiling");
    const auto x = static_number(a), y = static_number(b);
    bool r = false;
    if (x && y) {
      switch (C) {
        case Compare::eq: r = *x == *y; break;
        case Compare::ne: r = *x != *y; break;
        case Compare::lt: r = *x < *y; break;
        case Compare::le: r = *x <= *y; break;
        case Compare::gt: r = *x > *y; break;
        case Compare::ge: r = *x >= *y; break;
      }
    } else if (C == Compare::eq || C == Compare::ne) {
      r = (a == b) == (C == Compare::eq);  // lists (shapes), strings, None: Python's ==
    } else {
      ctx.fail("orders only numbers while compiling");
    }
    ctx.set_static_result(Arg(r));
  }
};

// torch._assert(condition, message), aten._assert_scalar(condition, message).
struct StaticAssert {
  static void lower(runtime::LowerContext& ctx) {
    const Arg cond = ctx.value(0, "condition");
    if (cond.node()) ctx.fail("asserts on a tensor, which is known only when the graph runs");
    const auto v = static_number(cond);
    if (!v) ctx.fail("asserts on a value that is neither a bool nor a number");
    if (*v == 0.0) {
      const Arg msg = ctx.has(1, "message") ? ctx.value(1, "message") : Arg();
      const std::string* text = msg.get_if<std::string>();
      ctx.fail("the assertion does not hold for these shapes: " + (text ? *text : std::string("(no message)")));
    }
    ctx.set_static_result(Arg());
  }
};

// aten._assert_tensor_metadata(a, size=None, stride=None, dtype=None, *,
// device=None, layout=None): torch.export's check of what `.to()` made,
// settled while compiling. Strides are not compared: kiln's layouts are its own.
struct AssertTensorMetadata {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::Layout& l = ctx.layout(ctx.tensor(0, "a"));
    const Arg dtype = ctx.has(3, "dtype") ? ctx.value(3, "dtype") : Arg();
    if (const DType* want = dtype.get_if<DType>(); want && *want != l.dtype)
      ctx.fail("the tensor is " + std::string(dtype_name(l.dtype)) + ", the assertion says " + std::string(dtype_name(*want)));
    const Arg size = ctx.has(1, "size") ? ctx.value(1, "size") : Arg();
    if (const ArgList* dims = size.get_if<ArgList>()) {
      bool same = dims->size() == l.rank();
      for (std::size_t k = 0; same && k < dims->size(); ++k) {
        const auto* d = (*dims)[k].get_if<std::int64_t>();
        same = !d || *d == l.shape[k];  // a symbolic size matches any
      }
      if (!same) ctx.fail("the tensor is " + runtime::shape_str(l.shape) + ", the assertion says another size");
    }
    ctx.set_static_result(Arg());
  }
};

}  // namespace shape_detail

}  // namespace kiln::kernels
