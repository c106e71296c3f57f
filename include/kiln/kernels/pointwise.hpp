#pragma once
// Element-wise kernels on xtensor: unary math, binary arithmetic with
// broadcasting and scalars, at the torch-function, method and aten levels.
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <cmath>

#include "kiln/kernels/detail/xt_adapt.hpp"
#include "kiln/kernels/kernel.hpp"

namespace kiln::kernels {

namespace detail {
// out = f(in) for a float32 tensor of any layout; the result is contiguous.
template <class F>
void lower_unary_f32(runtime::LowerContext& ctx, F f) {
  const auto in = ctx.tensor(0, "input");
  const auto& l = ctx.layout(in);
  if (l.dtype != DType::float32) ctx.fail("input is " + std::string(dtype_name(l.dtype)) + "; this kernel takes float32");
  const auto out = ctx.buffer(l.shape, l.dtype);
  ctx.add_step(runtime::make_step([in, out, f](runtime::Frame& fr) {
                 const auto& il = fr.layout(in);
                 const auto n = static_cast<std::size_t>(il.numel());
                 auto o = xflat(fr.data_as<float>(out), n);
                 if (il.is_contiguous()) o = f(xflat(fr.data_as<float>(in), n));
                 else xadapt(fr.data_as<float>(out), fr.layout(out)) = f(xadapt(fr.data_as<float>(in), il));
               }),
               {in}, {out});
  ctx.set_result(out);
}
}  // namespace detail

template <>
struct Kernel<"aten.relu.default"> {
  static void lower(runtime::LowerContext& ctx) {
    detail::lower_unary_f32(ctx, [](auto&& x) { return xt::maximum(x, 0.0f); });
  }
};

inline constexpr auto pointwise_kernels = boost::hana::tuple_t<Kernel<"aten.relu.default">>;

}  // namespace kiln::kernels
