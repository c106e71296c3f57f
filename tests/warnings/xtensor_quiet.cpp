// Compiled by the CTest xtensor_headers_quiet_under_avx512 with -O3
// -march=skylake-avx512 -Wall -Wextra -Werror: xsimd's AVX-512 tanh and exp, as
// kiln's unary kernels run them, through kiln's include of xtensor
// (kernels/detail/xtensor.hpp). Through xtensor's headers alone, GCC 12 warns
// inside avx512fintrin.h (PR 105593) and this file fails to build.
#include "kiln/kernels/detail/xtensor.hpp"

#include <array>
#include <cstddef>

float tanh_plus_exp(float* p, std::size_t n) {
  auto x = xt::adapt(p, n, xt::no_ownership(), std::array<std::size_t, 1>{n});
  xt::xtensor<float, 1> y = xt::tanh(x) + xt::exp(x);
  return y(0);
}
