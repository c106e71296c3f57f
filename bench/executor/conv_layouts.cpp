// kiln-bench-conv-layouts: how fast oneDNN runs ResNet-50's convolutions with
// activations in NHWC (what kiln's executor keeps between steps), in the
// layout the primitive picks for itself (format_tag::any), and in oneDNN's
// 16-channel blocked layout (nChw16c, what ONNX Runtime's NCHWc kernels use
// on AVX-512), so that the executor's choice of activation layout rests on a
// measurement on the machine at hand. Each of ResNet-50's 53 convolution shapes is timed alone
// (weights in the primitive's own layout, as kiln packs them), and the times
// are summed with each shape's count.
//
//   kiln-bench-conv-layouts [--batch 1] [--reps 20]   (threads: OMP_NUM_THREADS)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include <dnnl.hpp>

namespace {

struct ConvShape {
  int count;  // how many of ResNet-50's convolutions have this shape
  int ic, oc, hw, k, stride, pad;
};

// torchvision's ResNet-50 at 224x224 (v1.5: the stride sits in the 3x3).
const std::vector<ConvShape> kResNet50 = {
    {1, 3, 64, 224, 7, 2, 3},
    // layer1, 56x56
    {1, 64, 64, 56, 1, 1, 0}, {3, 64, 64, 56, 3, 1, 1}, {4, 64, 256, 56, 1, 1, 0}, {2, 256, 64, 56, 1, 1, 0},
    // layer2
    {1, 256, 128, 56, 1, 1, 0}, {1, 128, 128, 56, 3, 2, 1}, {1, 256, 512, 56, 1, 2, 0},
    {4, 128, 512, 28, 1, 1, 0}, {3, 512, 128, 28, 1, 1, 0}, {3, 128, 128, 28, 3, 1, 1},
    // layer3
    {1, 512, 256, 28, 1, 1, 0}, {1, 256, 256, 28, 3, 2, 1}, {1, 512, 1024, 28, 1, 2, 0},
    {6, 256, 1024, 14, 1, 1, 0}, {5, 1024, 256, 14, 1, 1, 0}, {5, 256, 256, 14, 3, 1, 1},
    // layer4
    {1, 1024, 512, 14, 1, 1, 0}, {1, 512, 512, 14, 3, 2, 1}, {1, 1024, 2048, 14, 1, 2, 0},
    {3, 512, 2048, 7, 1, 1, 0}, {2, 2048, 512, 7, 1, 1, 0}, {2, 512, 512, 7, 3, 1, 1},
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timed {
  double ms;
  std::string impl, src_format;
};

std::string format_of(const dnnl::memory::desc& md) {
  // The blocking of a plain or blocked 4-d desc, as "nhwc", "nchw" or "blocked".
  const auto& b = md.data.format_desc.blocking;
  if (b.inner_nblks > 0) return "blocked" + std::to_string(b.inner_blks[0]);
  return b.strides[1] == 1 ? "nhwc" : "nchw";
}

enum class Act { nhwc, any, blocked16, winograd };

Timed time_conv(const dnnl::engine& eng, dnnl::stream& s, const ConvShape& c, int batch, Act act_kind, int reps) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const int oh = (c.hw + 2 * c.pad - c.k) / c.stride + 1;
  const dnnl::memory::dims src{batch, c.ic, c.hw, c.hw}, w{c.oc, c.ic, c.k, c.k}, dst{batch, c.oc, oh, oh};
  const tag act = act_kind == Act::nhwc ? tag::nhwc : act_kind == Act::blocked16 ? tag::nChw16c : tag::any;
  // oneDNN 2.6 has a Winograd F(4x4, 3x3) convolution for AVX-512 (3x3, stride 1 only).
  const auto algo = act_kind == Act::winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
  // A 3-channel image cannot be blocked by 16: the stem reads it as NCHW.
  const tag src_tag = act_kind == Act::blocked16 && c.ic % 16 != 0 ? tag::nchw : act;
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, algo,
                                    dnnl::memory::desc(src, dt::f32, src_tag), dnnl::memory::desc(w, dt::f32, tag::any),
                                    dnnl::memory::desc({c.oc}, dt::f32, tag::a), dnnl::memory::desc(dst, dt::f32, act),
                                    {c.stride, c.stride}, {c.pad, c.pad}, {c.pad, c.pad});
  dnnl::primitive_attr attr;
  dnnl::post_ops po;
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr.set_post_ops(po);
  dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
  dnnl::memory sm(pd.src_desc(), eng), wm(pd.weights_desc(), eng), bm(pd.bias_desc(), eng), dm(pd.dst_desc(), eng);
  for (auto* m : {&sm, &wm, &bm, &dm}) {
    float* p = static_cast<float*>(m->get_data_handle());
    const std::size_t n = m->get_desc().get_size() / sizeof(float);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  }
  dnnl::convolution_forward conv(pd);
  const std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, dm}};
  for (int i = 0; i < 3; ++i) conv.execute(s, args);
  s.wait();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    conv.execute(s, args);
    s.wait();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  return {median(t), pd.impl_info_str(), format_of(pd.src_desc())};
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 1, reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--batch") batch = std::atoi(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: kiln-bench-conv-layouts [--batch N] [--reps N]\n");
      return 2;
    }
  }
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  double total_nhwc = 0, total_any = 0, total_blocked = 0, total_best = 0;
  for (const ConvShape& c : kResNet50) {
    const Timed n = time_conv(eng, s, c, batch, Act::nhwc, reps);
    const Timed a = time_conv(eng, s, c, batch, Act::any, reps);
    const Timed b = time_conv(eng, s, c, batch, Act::blocked16, reps);
    total_nhwc += c.count * n.ms;
    total_any += c.count * a.ms;
    total_blocked += c.count * b.ms;
    // Winograd where oneDNN has it and it is faster than the direct NHWC one.
    Timed w{n.ms, "-", ""};
    if (c.k == 3 && c.stride == 1) {
      try {
        w = time_conv(eng, s, c, batch, Act::winograd, reps);
      } catch (const dnnl::error&) {
        w.impl = "unavailable";
      }
    }
    total_best += c.count * std::min(n.ms, w.ms);
    std::printf("{\"ic\":%d,\"oc\":%d,\"hw\":%d,\"k\":%d,\"stride\":%d,\"count\":%d,\"nhwc_ms\":%.4f,\"nhwc_impl\":\"%s\","
                "\"any_ms\":%.4f,\"any_impl\":\"%s\",\"any_src\":\"%s\",\"blocked16_ms\":%.4f,\"blocked16_impl\":\"%s\",\"winograd_ms\":%.4f,\"winograd_impl\":\"%s\"}\n",
                c.ic, c.oc, c.hw, c.k, c.stride, c.count, n.ms, n.impl.c_str(), a.ms, a.impl.c_str(), a.src_format.c_str(), b.ms,
                b.impl.c_str(), w.ms, w.impl.c_str());
  }
  std::printf("{\"batch\":%d,\"total_nhwc_ms\":%.3f,\"total_any_ms\":%.3f,\"total_blocked16_ms\":%.3f,"
              "\"total_nhwc_or_winograd_ms\":%.3f}\n",
              batch, total_nhwc, total_any, total_blocked, total_best);
  return 0;
}
