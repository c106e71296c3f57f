#pragma once
// A value of a Frame seen as an xtensor expression over its own memory (no
// copy): shape and strides come from the value's layout, so transposed,
// sliced and broadcast (stride-0) views read correctly.
#include <cstddef>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xstorage.hpp>

#include "kiln/runtime/program.hpp"

namespace kiln::kernels::detail {

// Small-buffer shapes: adapting a value of rank <= 8 allocates nothing, so a
// step may adapt its values on every run.
using XShape = xt::svector<std::size_t, 8>;
using XStrides = xt::svector<std::ptrdiff_t, 8>;

inline XShape xshape(const runtime::Layout& l) { return XShape(l.shape.begin(), l.shape.end()); }
inline XStrides xstrides(const runtime::Layout& l) { return XStrides(l.strides.begin(), l.strides.end()); }

// A strided adaptor over `layout` at `data` (dynamic rank).
template <class T>
auto xadapt(T* data, const runtime::Layout& layout) {
  const auto span = static_cast<std::size_t>(std::max<std::int64_t>(layout.span_elements(), 1));
  return xt::adapt(data, span, xt::no_ownership(), xshape(layout), xstrides(layout));
}
// A flat (1-d) adaptor over n contiguous elements.
template <class T>
auto xflat(T* data, std::size_t n) {
  return xt::adapt(data, n, xt::no_ownership(), XShape{n});
}

}  // namespace kiln::kernels::detail
