// kiln's int8 depthwise kernel (kernels/detail/int8_depthwise.hpp) alone, on
// MobileNetV2's stride-1 depthwise convolutions (3x3, padding 1) at a batch and
// thread count: the kernel's time without the model around it, to compare
// builds of the kernel side by side in one call (each run alternating shapes).
// The shapes first run untimed for WARMUP_MS (1000): a new process on the device can
// run at half speed for some tenths of a second (bench/README).
//   build/bench/kiln-bench-int8-depthwise BATCH THREADS [ITERATIONS] [ROUNDS] [WARMUP_MS]   (one JSON line per shape and round)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kiln/kernels/detail/int8_depthwise.hpp"

namespace {

using kiln::kernels::detail::Int8DepthwisePlan;

// A 3x3 plan of C channels on H x H images, random weights packed as onednn/qconv.hpp packs them.
Int8DepthwisePlan plan(std::int64_t N, std::int64_t C, std::int64_t H, std::mt19937& rng) {
  Int8DepthwisePlan p;
  p.N = N, p.C = C, p.H = p.W = p.OH = p.OW = H, p.KH = p.KW = 3, p.PH = p.PW = 1;
  p.source_zero_point = 0;
  const std::int64_t padded = p.padded_channels();
  p.weight.assign(static_cast<std::size_t>(4 * padded * 3 * 4), 0);
  p.compensation.assign(static_cast<std::size_t>(padded), 0);
  p.scale.assign(static_cast<std::size_t>(padded), 0.002f), p.bias.assign(static_cast<std::size_t>(padded), 3.0f);
  std::uniform_int_distribution<int> w(-127, 127);
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t kh = 0; kh < 3; ++kh)
      for (std::int64_t kw = 0; kw < 3; ++kw) {
        const auto v = static_cast<std::int8_t>(w(rng));
        for (std::int64_t rot = 0; rot < 4; ++rot)
          p.weight[static_cast<std::size_t>((((rot * (padded / 16) + c / 16) * 3 + kw) * 16 + c % 16) * 4 + (rot + kh) % 4)] = v;
      }
  p.q_lo = 0, p.q_hi = 255;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s BATCH THREADS [ITERATIONS] [ROUNDS] [WARMUP_MS]\n", argv[0]);
    return 2;
  }
  const std::int64_t N = std::atoll(argv[1]);
  const int threads = std::atoi(argv[2]), iterations = argc > 3 ? std::atoi(argv[3]) : 50, rounds = argc > 4 ? std::atoi(argv[4]) : 3;
  const double warmup_ms = argc > 5 ? std::atof(argv[5]) : 1000.0;
  if (!kiln::kernels::detail::kInt8DepthwiseBuilt) {
    std::fprintf(stderr, "this build has no int8 depthwise kernel (it needs AVX-512 BW, VL, VNNI and VBMI)\n");
    return 1;
  }
  struct Shape {
    std::int64_t C, H;
  };
  const std::vector<Shape> shapes{{32, 112}, {144, 56}, {192, 28}, {384, 14}, {576, 14}, {960, 7}};
  std::mt19937 rng(0);
  std::vector<Int8DepthwisePlan> plans;
  std::vector<std::vector<std::uint8_t>> xs, outs;
  for (const Shape& s : shapes) {
    plans.push_back(plan(N, s.C, s.H, rng));
    xs.emplace_back(static_cast<std::size_t>(N * s.H * s.H * s.C));
    for (auto& v : xs.back()) v = static_cast<std::uint8_t>(rng());
    outs.emplace_back(xs.back().size());
  }
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < warmup_ms)
    for (std::size_t k = 0; k < shapes.size(); ++k)
      kiln::kernels::detail::run_int8_depthwise(plans[k], xs[k].data(), outs[k].data(), threads);
  for (int round = 0; round < rounds; ++round)
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      const auto run = [&] { kiln::kernels::detail::run_int8_depthwise(plans[k], xs[k].data(), outs[k].data(), threads); };
      for (int i = 0; i < 5; ++i) run();
      std::vector<double> ms;
      for (int i = 0; i < iterations; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf("{\"round\": %d, \"batch\": %lld, \"threads\": %d, \"C\": %lld, \"H\": %lld, \"median_ms\": %.4f, \"min_ms\": %.4f}\n", round,
                  static_cast<long long>(N), threads, static_cast<long long>(shapes[k].C), static_cast<long long>(shapes[k].H),
                  ms[ms.size() / 2], ms.front());
    }
  return 0;
}
