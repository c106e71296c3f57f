#pragma once
// The dtypes element-wise kernels compute in (float32, int64, bool, and the
// 8-bit integers of quantized tensors), a switch from a runtime DType to its
// C++ type, PyTorch's promotion over those, and the cast that lowering inserts
// where an operand's dtype differs from the one an op computes in.
#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/kernels/detail/xtensor.hpp"
#include "kiln/kernels/pointwise/map.hpp"

namespace kiln::kernels::pointwise_detail {

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) for the C++ type of `d`; fails naming `what` for other dtypes.
template <class F>
decltype(auto) with_dtype(runtime::LowerContext& ctx, DType d, const char* what, F&& f) {
  switch (d) {
    case DType::float32: return f(TypeTag<float>{});
    case DType::int64: return f(TypeTag<std::int64_t>{});
    case DType::bool_: return f(TypeTag<bool>{});
    case DType::uint8: return f(TypeTag<std::uint8_t>{});
    case DType::int8: return f(TypeTag<std::int8_t>{});
    default: ctx.fail(std::string(what) + " is " + std::string(dtype_name(d)) + "; element-wise kernels take float32, int64, bool, uint8 and int8");
  }
}

// `src` converted to `to` (float32, int64 or bool) in a new buffer: float to
// int truncates, nonzero is true. The same dtype gives `src` itself unless
// `copy`. Only these targets are instantiated (each pair is a map: compile time).
inline runtime::ValueId cast_to(runtime::LowerContext& ctx, runtime::ValueId src, DType to, bool copy = false) {
  const DType from = ctx.layout(src).dtype;
  if (from == to && !copy) return src;
  const auto cast_into = [&](auto out_tag) {
    using Out = typename decltype(out_tag)::type;
    return with_dtype(ctx, from, "the input", [&](auto in_tag) {
      using In = typename decltype(in_tag)::type;
      return lower_map<Out, In>(ctx, to, {src}, [](auto&& x) { return xt::cast<Out>(x); });
    });
  };
  switch (to) {
    case DType::float32: return cast_into(TypeTag<float>{});
    case DType::int64: return cast_into(TypeTag<std::int64_t>{});
    case DType::bool_: return cast_into(TypeTag<bool>{});
    default: ctx.fail("casting to " + std::string(dtype_name(to)) + " is not supported (float32, int64 and bool are)");
  }
}

// Promotion category: bool < integer < floating.
inline int dtype_category(DType d) { return d == DType::bool_ ? 0 : is_floating_point(d) ? 2 : 1; }

}  // namespace kiln::kernels::pointwise_detail
