#pragma once
// WeightTensor <-> xt::xarray. Kept apart from npy_weights.hpp because xtensor
// headers cost every file that includes them seconds of compile time.
//
//   xt::xarray<float> w = kiln::io::to_xarray<float>(kiln::io::load_weight(f, "w"));
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "kiln/io/npy_weights.hpp"

namespace kiln::io {

// The tensor as an xarray of T; T must match its dtype (float for float32, ...).
template <class T>
xt::xarray<T> to_xarray(const WeightTensor& t) {
  const auto values = t.values<T>();  // checks the dtype
  std::vector<std::size_t> shape(t.shape.begin(), t.shape.end());
  xt::xarray<T> a = xt::xarray<T>::from_shape(shape);
  for (std::size_t i = 0; i < values.size(); ++i) a.data()[i] = values[i];
  return a;
}

// An xarray as a WeightTensor (copied in C order).
template <class T>
WeightTensor from_xarray(const xt::xarray<T>& a) {
  std::vector<std::int64_t> shape(a.shape().begin(), a.shape().end());
  std::vector<T> values(a.size());
  std::size_t i = 0;
  for (auto it = a.template begin<xt::layout_type::row_major>(); it != a.template end<xt::layout_type::row_major>(); ++it)
    values[i++] = *it;
  return make_weight<T>(std::move(shape), values);
}

}  // namespace kiln::io
