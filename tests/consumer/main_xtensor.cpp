// The xtensor component: a weight round-trips between xtensor and kiln's
// WeightTensor (exit status 0 only if it does).
#include <iostream>

#include <kiln/io/npy_xtensor.hpp>
#include <xtensor/xarray.hpp>

int main() {
  xt::xarray<float> a = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  kiln::io::WeightTensor w = kiln::io::from_xarray(a);
  xt::xarray<float> back = kiln::io::to_xarray<float>(w);
  const bool ok = back == a && w.shape == std::vector<std::int64_t>{2, 3};
  std::cout << (ok ? "consumer_xtensor ok" : "consumer_xtensor FAILED") << "\n";
  return ok ? 0 : 1;
}
