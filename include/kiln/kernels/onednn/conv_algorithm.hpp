#pragma once
// Which algorithm a convolution eligible for Winograd (3x3, stride 1, dilation
// 1, ungrouped, no residual add) asks oneDNN for, under CompileOptions::conv_algorithm.
//
// Winograd does about half the multiplications of the direct method, but
// oneDNN's Winograd primitive reads and writes its own blocked layout, so the
// step reorders the activation in and out around it. On the device machine
// (ResNet-50, AVX-512) that paid at 58 and 115 million multiply-adds per thread
// (batch 1 on 2 threads, batch 16 on 16) and lost at 7 million (batch 1 on 16
// threads): `automatic` takes Winograd from the geometric middle, 20 million.
#include <algorithm>
#include <cstdint>

#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels::onednn {

inline constexpr std::int64_t winograd_min_macs_per_thread = 20'000'000;

// `macs`: the convolution's multiply-adds (N * OC * OH * OW * C/G * KH * KW).
inline bool wants_winograd(const runtime::CompileOptions& options, std::int64_t macs) {
  using A = runtime::CompileOptions::ConvAlgorithm;
  switch (options.conv_algorithm) {
    case A::direct:
      return false;
    case A::winograd:
      return true;
    case A::automatic:
      return macs / std::max(1, options.threads) >= winograd_min_macs_per_thread;
  }
  return false;
}

}  // namespace kiln::kernels::onednn
