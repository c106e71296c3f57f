// What fusing a 1x1 expand convolution with the depthwise convolution after it
// would save, measured on oneDNN 2.6 alone before kiln builds it: MobileNetV2's
// int8 blocks at batch 16, run (a) as kiln runs them now, each convolution over
// the whole batch on all threads (the wide uint8 tensor written whole, then read
// back), and (b) one image per thread, both convolutions back to back on that
// image (its wide tensor, at most 1.2 MB, stays in the thread's cache).
//   build/bench/kiln-bench-expand-dw-fusion THREADS [ITERATIONS]     (one JSON line per block)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Conv {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  dnnl::memory weights, bias;
};

// An int8 convolution of `batch` NHWC uint8 images, uint8 out through relu6 and a requantization.
Conv make_conv(dnnl::memory::dim batch, dnnl::memory::dim ic, dnnl::memory::dim oc, dnnl::memory::dim h, dnnl::memory::dim k,
               dnnl::memory::dim stride, bool depthwise) {
  const dnnl::memory::dim pad = k / 2, oh = (h + 2 * pad - k) / stride + 1;
  const dnnl::memory::desc src({batch, ic, h, h}, dt::u8, tag::nhwc), dst({batch, oc, oh, oh}, dt::u8, tag::nhwc);
  const dnnl::memory::dims wdims = depthwise ? dnnl::memory::dims{oc, 1, 1, k, k} : dnnl::memory::dims{oc, ic, k, k};
  const dnnl::memory::desc w_any(wdims, dt::s8, tag::any), b_md({oc}, dt::f32, tag::x);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(0, {0.002f});
  dnnl::post_ops po;
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 6.0f);
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 40.0f, 0.0f);
  attr.set_post_ops(po);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, w_any, b_md, dst,
                                          {stride, stride}, {pad, pad}, {pad, pad});
  Conv c{dnnl::convolution_forward::primitive_desc(d, attr, engine()), {}, {}, {}};
  c.prim = dnnl::convolution_forward(c.pd);
  c.weights = dnnl::memory(c.pd.weights_desc(), engine());
  auto* w = static_cast<std::int8_t*>(c.weights.get_data_handle());
  for (std::size_t i = 0; i < c.pd.weights_desc().get_size(); ++i) w[i] = static_cast<std::int8_t>(int(i * 7 % 29) - 14);
  c.bias = dnnl::memory(b_md, engine());
  std::fill_n(static_cast<float*>(c.bias.get_data_handle()), oc, 1.0f);
  return c;
}

void run(const Conv& c, dnnl::stream& s, void* src, void* dst, void* scratch) {
  const auto& e = engine();
  c.prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(c.pd.src_desc(), e, src)},
                     {DNNL_ARG_WEIGHTS, c.weights},
                     {DNNL_ARG_BIAS, c.bias},
                     {DNNL_ARG_DST, dnnl::memory(c.pd.dst_desc(), e, dst)},
                     {DNNL_ARG_SCRATCHPAD, dnnl::memory(c.pd.scratchpad_desc(), e, scratch)}});
}

template <class F>
double median_ms(int iterations, F f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2, iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  const dnnl::memory::dim N = 16;
  struct Block {
    dnnl::memory::dim ic, wide, h, stride;
  };
  // MobileNetV2's expand + depthwise pairs at 224x224 (input channels, expanded, size, depthwise stride).
  const Block blocks[] = {{16, 96, 112, 2}, {24, 144, 56, 1}, {24, 144, 56, 2}, {32, 192, 28, 1}, {64, 384, 14, 1}, {96, 576, 14, 1},
                          {160, 960, 7, 1}};
  for (const Block& b : blocks) {
    const dnnl::memory::dim oh = (b.h - 1) / b.stride + 1;
    std::vector<std::uint8_t> x(N * b.h * b.h * b.ic, 3), wide(N * b.h * b.h * b.wide), y(N * oh * oh * b.wide);
    // (a) whole batch, all threads.
    omp_set_num_threads(threads);
    const Conv ea = make_conv(N, b.ic, b.wide, b.h, 1, 1, false), da = make_conv(N, b.wide, b.wide, b.h, 3, b.stride, true);
    std::vector<std::uint8_t> sa(std::max(ea.pd.scratchpad_desc().get_size(), da.pd.scratchpad_desc().get_size()) + 64);
    dnnl::stream s(engine());
    const double whole = median_ms(iterations, [&] {
      run(ea, s, x.data(), wide.data(), sa.data());
      run(da, s, wide.data(), y.data(), sa.data());
    });
    // (b) one image per thread, both convolutions made for one thread.
    omp_set_num_threads(1);
    const Conv e1 = make_conv(1, b.ic, b.wide, b.h, 1, 1, false), d1 = make_conv(1, b.wide, b.wide, b.h, 3, b.stride, true);
    omp_set_num_threads(threads);
    const std::size_t pad1 = std::max(e1.pd.scratchpad_desc().get_size(), d1.pd.scratchpad_desc().get_size()) + 64;
    const std::size_t img_wide = static_cast<std::size_t>(b.h * b.h * b.wide);
    std::vector<std::uint8_t> per_thread(static_cast<std::size_t>(threads) * (img_wide + pad1));
    std::vector<dnnl::stream> streams;
    for (int t = 0; t < threads; ++t) streams.emplace_back(engine());
    const double fused = median_ms(iterations, [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (dnnl::memory::dim n = 0; n < N; ++n) {
        const int t = omp_get_thread_num();
        std::uint8_t* mine = per_thread.data() + static_cast<std::size_t>(t) * (img_wide + pad1);
        run(e1, streams[t], x.data() + n * b.h * b.h * b.ic, mine, mine + img_wide);
        run(d1, streams[t], mine, y.data() + n * oh * oh * b.wide, mine + img_wide);
      }
    });
    std::printf(
        "{\"threads\":%d,\"ic\":%ld,\"wide\":%ld,\"size\":%ld,\"stride\":%ld,\"whole_batch_ms\":%.4f,\"per_image_ms\":%.4f,"
        "\"expand_impl\":\"%s\",\"dw_impl\":\"%s\",\"expand_impl_1\":\"%s\",\"dw_impl_1\":\"%s\"}\n",
        threads, static_cast<long>(b.ic), static_cast<long>(b.wide), static_cast<long>(b.h), static_cast<long>(b.stride), whole, fused,
        ea.pd.impl_info_str(), da.pd.impl_info_str(), e1.pd.impl_info_str(), d1.pd.impl_info_str());
  }
}
