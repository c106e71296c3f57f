// What fusing a 1x1 expand convolution with the depthwise convolution after it
// would save, measured on oneDNN 2.6 alone before kiln builds it: MobileNetV2's
// int8 blocks at batch 16, run (a) as kiln runs them now, each convolution over
// the whole batch on all threads (the wide uint8 tensor written whole, then read
// back), (b) one image per thread, both convolutions back to back on that
// image (its wide tensor, at most 1.2 MB, stays in the thread's cache), and
// (c) oneDNN's own fusion: the 1x1 convolution with the depthwise one as its
// post-op (append_dw), over the whole batch; (c)'s bytes are compared with (a)'s.
//   build/bench/kiln-bench-expand-dw-fusion THREADS [ITERATIONS]     (one JSON line per block)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
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

// Weights i * 7 % 29 - 14 by their logical index (oihw, or goihw for a depthwise
// convolution), reordered into `packed`: every implementation computes the same sums.
dnnl::memory packed_weights(const dnnl::memory::dims& dims, const dnnl::memory::desc& packed) {
  const dnnl::memory::desc plain(dims, dt::s8, dims.size() == 5 ? tag::goihw : tag::oihw);
  dnnl::memory src(plain, engine()), dst(packed, engine());
  auto* w = static_cast<std::int8_t*>(src.get_data_handle());
  for (std::size_t i = 0; i < plain.get_size(); ++i) w[i] = static_cast<std::int8_t>(int(i * 7 % 29) - 14);
  dnnl::stream s(engine());
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
  return dst;
}

dnnl::memory ones(dnnl::memory::dim n) {
  dnnl::memory m(dnnl::memory::desc({n}, dt::f32, tag::x), engine());
  std::fill_n(static_cast<float*>(m.get_data_handle()), n, 1.0f);
  return m;
}

// relu6 then the requantization, as make_conv's convolutions end.
void append_relu6_requant(dnnl::post_ops& po) {
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 6.0f);
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 40.0f, 0.0f);
}

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
  append_relu6_requant(po);
  attr.set_post_ops(po);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, w_any, b_md, dst,
                                          {stride, stride}, {pad, pad}, {pad, pad});
  Conv c{dnnl::convolution_forward::primitive_desc(d, attr, engine()), {}, {}, {}};
  c.prim = dnnl::convolution_forward(c.pd);
  c.weights = packed_weights(wdims, c.pd.weights_desc());
  c.bias = ones(oc);
  return c;
}

// (c): the 1x1 expand convolution with the 3x3 depthwise one as its post-op, each ending as make_conv's do.
struct FusedConv {
  Conv conv;
  dnnl::memory dw_weights, dw_bias;
};
FusedConv make_fused(dnnl::memory::dim batch, dnnl::memory::dim ic, dnnl::memory::dim oc, dnnl::memory::dim h, dnnl::memory::dim stride) {
  const dnnl::memory::desc src({batch, ic, h, h}, dt::u8, tag::nhwc), wide({batch, oc, h, h}, dt::u8, tag::nhwc);
  const dnnl::memory::desc w_any({oc, ic, 1, 1}, dt::s8, tag::any), b_md({oc}, dt::f32, tag::x);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(0, {0.002f});
  dnnl::post_ops po;
  append_relu6_requant(po);
  po.append_dw(dt::s8, dt::f32, dt::u8, 3, stride, 1, 0, {0.002f});
  append_relu6_requant(po);
  attr.set_post_ops(po);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, w_any, b_md, wide,
                                          {1, 1}, {0, 0}, {0, 0});
  // oneDNN may list its reference fusion (the two primitives run one after the other
  // through a buffer, ref_fused_convolution) first; the fused JIT kernel is wanted
  // (where none follows, next_impl() leaves the last one).
  dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
  while (std::string_view(pd.impl_info_str()).starts_with("ref") && pd.next_impl()) {
  }
  FusedConv f{{pd, {}, {}, {}}, {}, {}};
  f.conv.prim = dnnl::convolution_forward(f.conv.pd);
  f.conv.weights = packed_weights({oc, ic, 1, 1}, f.conv.pd.weights_desc());
  f.conv.bias = ones(oc);
  f.dw_weights = packed_weights({oc, 1, 1, 3, 3}, f.conv.pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS));
  f.dw_bias = ones(oc);
  return f;
}

void run(const Conv& c, dnnl::stream& s, void* src, void* dst, void* scratch) {
  const auto& e = engine();
  c.prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(c.pd.src_desc(), e, src)},
                     {DNNL_ARG_WEIGHTS, c.weights},
                     {DNNL_ARG_BIAS, c.bias},
                     {DNNL_ARG_DST, dnnl::memory(c.pd.dst_desc(), e, dst)},
                     {DNNL_ARG_SCRATCHPAD, dnnl::memory(c.pd.scratchpad_desc(), e, scratch)}});
}

void run_fused(const FusedConv& f, dnnl::stream& s, void* src, void* dst, void* scratch) {
  const auto& e = engine();
  const auto& pd = f.conv.pd;
  f.conv.prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), e, src)},
                          {DNNL_ARG_WEIGHTS, f.conv.weights},
                          {DNNL_ARG_BIAS, f.conv.bias},
                          {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, f.dw_weights},
                          {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, f.dw_bias},
                          {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), e, dst)},
                          {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), e, scratch)}});
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
    // (c) oneDNN's fusion, whole batch, all threads; its output against (a)'s.
    // A CPU whose oneDNN takes no depthwise post-op at all reports null.
    std::optional<FusedConv> fc;
    try {
      fc = make_fused(N, b.ic, b.wide, b.h, b.stride);
    } catch (const dnnl::error&) {
    }
    double onednn_fused = -1;
    bool same = false;
    if (fc) {
      std::vector<std::uint8_t> sc(fc->conv.pd.scratchpad_desc().get_size() + 64), yc(y.size());
      onednn_fused = median_ms(iterations, [&] {
        run_fused(*fc, s, x.data(), yc.data(), sc.data());
        s.wait();
      });
      run(ea, s, x.data(), wide.data(), sa.data());
      run(da, s, wide.data(), y.data(), sa.data());
      s.wait();
      same = yc == y;
    }
    char fused_ms[32] = "null";
    if (fc) std::snprintf(fused_ms, sizeof fused_ms, "%.4f", onednn_fused);
    std::printf(
        "{\"threads\":%d,\"ic\":%ld,\"wide\":%ld,\"size\":%ld,\"stride\":%ld,\"whole_batch_ms\":%.4f,\"per_image_ms\":%.4f,"
        "\"onednn_fused_ms\":%s,\"onednn_fused_same_bytes\":%s,"
        "\"expand_impl\":\"%s\",\"dw_impl\":\"%s\",\"expand_impl_1\":\"%s\",\"dw_impl_1\":\"%s\",\"fused_impl\":\"%s\"}\n",
        threads, static_cast<long>(b.ic), static_cast<long>(b.wide), static_cast<long>(b.h), static_cast<long>(b.stride), whole, fused,
        fused_ms, same ? "true" : "false", ea.pd.impl_info_str(), da.pd.impl_info_str(), e1.pd.impl_info_str(), d1.pd.impl_info_str(),
        fc ? fc->conv.pd.impl_info_str() : "none");
  }
}
