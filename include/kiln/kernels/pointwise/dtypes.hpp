#pragma once
// The dtypes element-wise kernels compute in (float32, int64, bool, and the
// 8-bit integers of quantized tensors), a switch from a runtime DType to its
// C++ type, PyTorch's promotion over those, and the cast that lowering inserts
// where an operand's dtype differs from the one an op computes in. bfloat16
// elements are held as their bits and converted one at a time through float32.
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kiln/core/bfloat16.hpp"
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

// One element converted as PyTorch converts it: a float to an integer
// truncates (to the 8-bit types through int64, so that what lies outside their
// range wraps instead of being undefined), nonzero is true.
template <class Out, class In, class E>
auto converted(E&& x) {
  if constexpr (std::is_floating_point_v<In> && (std::is_same_v<Out, std::uint8_t> || std::is_same_v<Out, std::int8_t>))
    return xt::cast<Out>(xt::cast<std::int64_t>(std::forward<E>(x)));
  else
    return xt::cast<Out>(std::forward<E>(x));
}

// The same for one value, where bfloat16 (its bits) goes through float32.
template <class Out, class In>
Out converted_value(In v) {
  if constexpr (std::is_same_v<Out, bool>) return v != In{};
  else if constexpr (std::is_floating_point_v<In> && std::is_integral_v<Out> && sizeof(Out) == 1)
    return static_cast<Out>(static_cast<std::int64_t>(v));
  else return static_cast<Out>(v);
}

// Casts from or to bfloat16, one element at a time through float32.
inline runtime::ValueId cast_bf16(runtime::LowerContext& ctx, runtime::ValueId src, DType to) {
  const DType from = ctx.layout(src).dtype;
  if (from == DType::bfloat16 && to == DType::bfloat16)
    return lower_map<std::uint16_t, std::uint16_t>(ctx, to, {src}, [](auto&& x) { return x; });
  if (from == DType::bfloat16)
    return with_dtype(ctx, to, "the cast's dtype", [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      return lower_map<Out, std::uint16_t>(ctx, to, {src}, [](auto&& x) {
        return xt::vectorize([](std::uint16_t b) -> Out { return converted_value<Out>(bf16_to_float(b)); })(x);
      });
    });
  return with_dtype(ctx, from, "the input", [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    return lower_map<std::uint16_t, In>(ctx, to, {src}, [](auto&& x) {
      return xt::vectorize([](In v) -> std::uint16_t { return float_to_bf16(static_cast<float>(v)); })(x);
    });
  });
}

// `src` converted to `to` in a new buffer (float32, bfloat16, int64, int8,
// uint8 or bool, from those). The same dtype gives `src` itself unless `copy`.
inline runtime::ValueId cast_to(runtime::LowerContext& ctx, runtime::ValueId src, DType to, bool copy = false) {
  const DType from = ctx.layout(src).dtype;
  if (from == to && !copy) return src;
  if (from == DType::bfloat16 || to == DType::bfloat16) return cast_bf16(ctx, src, to);
  return with_dtype(ctx, to, "the cast's dtype", [&](auto out_tag) {
    using Out = typename decltype(out_tag)::type;
    return with_dtype(ctx, from, "the input", [&](auto in_tag) {
      using In = typename decltype(in_tag)::type;
      return lower_map<Out, In>(ctx, to, {src}, [](auto&& x) { return converted<Out, In>(x); });
    });
  });
}

// Promotion category: bool < integer < floating.
inline int dtype_category(DType d) { return d == DType::bool_ ? 0 : is_floating_point(d) ? 2 : 1; }

}  // namespace kiln::kernels::pointwise_detail
