// torchvision's Swin Transformer leaves (torch.fx.wrap'd functions) against
// the computation written out here as loops: the relative-position bias, the
// patch-merging pad and shifted-window attention with its mask.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::random_tensor;

namespace {

constexpr const char* kSwa = "torchvision.models.swin_transformer.shifted_window_attention";

std::string compile_error(const Graph& g) {
  try {
    (void)CompiledGraph::compile(g, {});
  } catch (const runtime::CompileError& e) {
    return e.what();
  }
  return "compiled";
}

float f4(const Tensor& t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return t.data<float>()[((a * t.shape()[1] + b) * t.shape()[2] + c) * t.shape()[3] + d];
}

struct SwaCase {
  std::int64_t B, H, W, C, heads;
  std::vector<std::int64_t> ws, shift;
};

// shifted_window_attention written as loops over one [B, H, W, C] input; with
// `logit_scale`, Swin V2's cosine attention (and its key bias cleared).
std::vector<double> reference(const SwaCase& k, const Tensor& x, const Tensor& wqkv, const Tensor& bqkv, const Tensor& wp,
                              const Tensor& bp, const Tensor& bias, const Tensor* logit_scale = nullptr) {
  const std::int64_t ws0 = k.ws[0], ws1 = k.ws[1], C = k.C, hd = C / k.heads;
  const std::int64_t ph = k.H + (ws0 - k.H % ws0) % ws0, pw = k.W + (ws1 - k.W % ws1) % ws1;
  const std::int64_t s0 = ws0 >= ph ? 0 : k.shift[0], s1 = ws1 >= pw ? 0 : k.shift[1];
  const bool shifted = s0 + s1 > 0;
  const std::int64_t nwh = ph / ws0, nww = pw / ws1, n = ws0 * ws1;
  // The padded, rolled map at (r, c): the input at ((r + s0) mod ph, (c + s1) mod pw), 0 in the padding.
  auto map = [&](std::int64_t b, std::int64_t r, std::int64_t c, std::int64_t ch) -> double {
    const std::int64_t i = (r + s0) % ph, j = (c + s1) % pw;
    return i < k.H && j < k.W ? f4(x, b, i, j, ch) : 0.0;
  };
  auto region = [&](std::int64_t r, std::int64_t c) {
    const int hr = r < ph - ws0 ? 0 : r < ph - s0 ? 1 : 2, wr = c < pw - ws1 ? 0 : c < pw - s1 ? 1 : 2;
    return 3 * hr + wr;
  };
  std::vector<double> rolled_out(static_cast<std::size_t>(k.B * ph * pw * C), 0.0);
  for (std::int64_t b = 0; b < k.B; ++b)
    for (std::int64_t wa = 0; wa < nwh; ++wa)
      for (std::int64_t wb = 0; wb < nww; ++wb) {
        auto row = [&](std::int64_t t) { return wa * ws0 + t / ws1; };
        auto col = [&](std::int64_t t) { return wb * ws1 + t % ws1; };
        std::vector<double> qkv(static_cast<std::size_t>(n * 3 * C));
        for (std::int64_t t = 0; t < n; ++t)
          for (std::int64_t o = 0; o < 3 * C; ++o) {
            double s = logit_scale && o >= C && o < 2 * C ? 0.0 : bqkv.data<float>()[o];
            for (std::int64_t c = 0; c < C; ++c) s += map(b, row(t), col(t), c) * wqkv.data<float>()[o * C + c];
            qkv[t * 3 * C + o] = s;
          }
        std::vector<double> y(static_cast<std::size_t>(n * C), 0.0);
        for (std::int64_t h = 0; h < k.heads; ++h)
          for (std::int64_t i = 0; i < n; ++i) {
            std::vector<double> a(static_cast<std::size_t>(n));
            double top = -1e300;
            for (std::int64_t j = 0; j < n; ++j) {
              double s = 0, nq = 0, nk = 0;
              for (std::int64_t d = 0; d < hd; ++d) {
                const double qd = qkv[i * 3 * C + h * hd + d], kd = qkv[j * 3 * C + C + h * hd + d];
                s += qd * kd;
                nq += qd * qd;
                nk += kd * kd;
              }
              if (logit_scale)
                s = s / (std::max(std::sqrt(nq), 1e-12) * std::max(std::sqrt(nk), 1e-12)) *
                    std::exp(std::min(double(logit_scale->data<float>()[h]), std::log(100.0)));
              else
                s *= std::pow(double(hd), -0.5);
              s += bias.data<float>()[(h * n + i) * n + j];
              if (shifted && region(row(i), col(i)) != region(row(j), col(j))) s -= 100.0;
              a[j] = s;
              top = std::max(top, s);
            }
            double sum = 0;
            for (auto& v : a) sum += (v = std::exp(v - top));
            for (std::int64_t d = 0; d < hd; ++d) {
              double s = 0;
              for (std::int64_t j = 0; j < n; ++j) s += a[j] / sum * qkv[j * 3 * C + 2 * C + h * hd + d];
              y[i * C + h * hd + d] = s;
            }
          }
        for (std::int64_t t = 0; t < n; ++t)
          for (std::int64_t o = 0; o < C; ++o) {
            double s = bp.data<float>()[o];
            for (std::int64_t c = 0; c < C; ++c) s += y[t * C + c] * wp.data<float>()[o * C + c];
            rolled_out[((b * ph + row(t)) * pw + col(t)) * C + o] = s;
          }
      }
  // Rolled back and cropped: output (i, j) is the rolled map's ((i - s0) mod ph, (j - s1) mod pw).
  std::vector<double> out;
  for (std::int64_t b = 0; b < k.B; ++b)
    for (std::int64_t i = 0; i < k.H; ++i)
      for (std::int64_t j = 0; j < k.W; ++j)
        for (std::int64_t c = 0; c < C; ++c)
          out.push_back(rolled_out[((b * ph + (i - s0 + ph) % ph) * pw + (j - s1 + pw) % pw) * C + c]);
  return out;
}

}  // namespace

TEST_CASE("shifted_window_attention matches its loops, shifted with padding, unshifted, and with the shift dropped for a large window") {
  const std::vector<SwaCase> cases{{2, 5, 6, 4, 2, {3, 3}, {1, 1}},  // padded to 6x6, 4 windows, shifted
                                   {1, 6, 6, 6, 3, {3, 3}, {0, 0}},
                                   {1, 3, 2, 4, 1, {3, 3}, {1, 1}},  // one window: no shift
                                   {1, 4, 6, 4, 2, {2, 3}, {1, 2}}};
  unsigned seed = 100;
  for (const SwaCase& k : cases) {
    CAPTURE(k.H);
    CAPTURE(k.W);
    const std::int64_t n = k.ws[0] * k.ws[1];
    // With relu as the node's only user, which a matmul must not fold into one of the node's pieces.
    auto build = [&](bool relu) {
      Graph g;
      Node* x = g.placeholder("x", meta({k.B, k.H, k.W, k.C}));
      Node* wqkv = g.placeholder("wqkv", meta({3 * k.C, k.C}));
      Node* bqkv = g.placeholder("bqkv", meta({3 * k.C}));
      Node* wp = g.placeholder("wp", meta({k.C, k.C}));
      Node* bp = g.placeholder("bp", meta({k.C}));
      Node* bias = g.placeholder("bias", meta({1, k.heads, n, n}));
      ArgList ws{k.ws[0], k.ws[1]}, shift{k.shift[0], k.shift[1]};
      Node* y = g.call_function(OpRef(kSwa), {x, wqkv, wp, bias, ws, k.heads},
                                {{"shift_size", Arg(shift)}, {"attention_dropout", Arg(0.0)}, {"dropout", Arg(0.0)},
                                 {"qkv_bias", Arg(bqkv)}, {"proj_bias", Arg(bp)}});
      g.output(ArgList{relu ? g.call_function(OpRef("torch.relu"), {y}) : y});
      return CompiledGraph::compile(g, {});
    };
    std::vector<Tensor> ins{random_tensor({k.B, k.H, k.W, k.C}, seed++), random_tensor({3 * k.C, k.C}, seed++),
                            random_tensor({3 * k.C}, seed++), random_tensor({k.C, k.C}, seed++), random_tensor({k.C}, seed++),
                            random_tensor({1, k.heads, n, n}, seed++)};
    const auto want = reference(k, ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]);
    for (bool relu : {false, true}) {
      CAPTURE(relu);
      auto out = build(relu).run(ins);
      REQUIRE(out[0].shape() == runtime::Shape{k.B, k.H, k.W, k.C});
      double worst = 0;
      for (std::int64_t i = 0; i < out[0].numel(); ++i) {
        const double w = want[static_cast<std::size_t>(i)];
        worst = std::max(worst, std::abs(test::element(out[0], i) - (relu ? std::max(0.0, w) : w)));
      }
      CHECK(worst < 1e-4);
    }
  }
}

TEST_CASE("Swin V2's shifted_window_attention (cosine attention, logit_scale per head, key bias cleared) matches its loops") {
  const std::vector<SwaCase> cases{{2, 5, 6, 4, 2, {3, 3}, {1, 1}}, {1, 4, 6, 6, 3, {2, 3}, {0, 0}}};
  unsigned seed = 200;
  for (const SwaCase& k : cases) {
    CAPTURE(k.H);
    const std::int64_t n = k.ws[0] * k.ws[1];
    Graph g;
    Node* x = g.placeholder("x", meta({k.B, k.H, k.W, k.C}));
    Node* wqkv = g.placeholder("wqkv", meta({3 * k.C, k.C}));
    Node* bqkv = g.get_attr("bqkv", meta({3 * k.C}));
    Node* wp = g.placeholder("wp", meta({k.C, k.C}));
    Node* bp = g.placeholder("bp", meta({k.C}));
    Node* bias = g.placeholder("bias", meta({k.heads, n, n}));
    Node* ls = g.get_attr("logit_scale", meta({k.heads, 1, 1}));
    ArgList ws{k.ws[0], k.ws[1]}, shift{k.shift[0], k.shift[1]};
    g.output(ArgList{g.call_function(OpRef(kSwa), {x, wqkv, wp, bias, ws, k.heads},
                                     {{"shift_size", Arg(shift)}, {"attention_dropout", Arg(0.0)}, {"dropout", Arg(0.0)},
                                      {"qkv_bias", Arg(bqkv)}, {"proj_bias", Arg(bp)}, {"logit_scale", Arg(ls)}})});
    Tensor tb = random_tensor({3 * k.C}, seed++), tls = random_tensor({k.heads, 1, 1}, seed++);
    tls.data<float>()[0] = 5.0f;  // above log(100): clamped
    auto cg = CompiledGraph::compile(g, {{"bqkv", tb}, {"logit_scale", tls}});
    std::vector<Tensor> ins{random_tensor({k.B, k.H, k.W, k.C}, seed++), random_tensor({3 * k.C, k.C}, seed++),
                            random_tensor({k.C, k.C}, seed++), random_tensor({k.C}, seed++), random_tensor({k.heads, n, n}, seed++)};
    const auto want = reference(k, ins[0], ins[1], tb, ins[2], ins[3], ins[4], &tls);
    auto out = cg.run(ins);
    REQUIRE(out[0].shape() == runtime::Shape{k.B, k.H, k.W, k.C});
    double worst = 0;
    for (std::int64_t i = 0; i < out[0].numel(); ++i)
      worst = std::max(worst, std::abs(test::element(out[0], i) - want[static_cast<std::size_t>(i)]));
    CHECK(worst < 1e-4);
    CHECK(tb.data<float>()[k.C] != 0.0f);  // the bias weight itself is untouched
  }
}

TEST_CASE("shifted_window_attention refuses a logit_scale of the wrong size, dropout, heads that do not divide C and a bad window") {
  auto refused = [](std::int64_t heads, ArgDict extra, ArgList ws) {
    Graph g;
    Node* x = g.placeholder("x", meta({1, 4, 4, 4}));
    Node* w = g.placeholder("w", meta({12, 4}));
    Node* p = g.placeholder("p", meta({4, 4}));
    Node* b = g.placeholder("b", meta({1, 1, 4, 4}));
    g.output(ArgList{g.call_function(OpRef(kSwa), {x, w, p, b, std::move(ws), heads}, std::move(extra), "swa")});
    return compile_error(g);
  };
  const std::string node = std::string("node swa (") + kSwa + "): ";
  {
    Graph g;
    Node* x = g.placeholder("x", meta({1, 4, 4, 4}));
    Node* w = g.placeholder("w", meta({12, 4}));
    Node* p = g.placeholder("p", meta({4, 4}));
    Node* b = g.placeholder("b", meta({1, 1, 4, 4}));
    Node* ls = g.placeholder("ls", meta({2, 1, 1}));
    g.output(ArgList{g.call_function(OpRef(kSwa), {x, w, p, b, ArgList{2, 2}, 1},
                                     {{"shift_size", Arg(ArgList{0, 0})}, {"logit_scale", Arg(ls)}}, "swa")});
    CHECK(compile_error(g).find(node + "logit_scale must hold one float32 per head (1), got float32 [2, 1, 1]") != std::string::npos);
  }
  CHECK(refused(1, {{"shift_size", Arg(ArgList{0, 0})}, {"dropout", Arg(0.1)}}, ArgList{2, 2}).find("dropout is not 0") != std::string::npos);
  CHECK(refused(3, {{"shift_size", Arg(ArgList{0, 0})}}, ArgList{2, 2}).find("num_heads 3 does not divide the 4 channels") !=
        std::string::npos);
  CHECK(refused(1, {{"shift_size", Arg(ArgList{0, 0})}}, ArgList{2}).find("window_size and shift_size must hold 2 sizes each") !=
        std::string::npos);
}

TEST_CASE("_get_relative_position_bias gathers the table's rows by the index and puts heads first") {
  Graph g;
  Node* table = g.placeholder("table", meta({9, 2}));
  Node* index = g.get_attr("index", meta({16}, DType::int64));
  Node* r = g.call_function(OpRef("torchvision.models.swin_transformer._get_relative_position_bias"), {table, index, ArgList{2, 2}});
  g.output(ArgList{r});
  std::vector<std::int64_t> iv;
  for (int k = 0; k < 16; ++k) iv.push_back((k * 5 + 3) % 9);
  auto cg = CompiledGraph::compile(g, {{"index", Tensor::from_values<std::int64_t>({16}, iv)}});
  Tensor tt = random_tensor({9, 2}, 20);
  auto out = cg.run({tt});
  REQUIRE(out[0].shape() == runtime::Shape{1, 2, 4, 4});
  int bad = 0;
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t j = 0; j < 4; ++j) bad += f4(out[0], 0, h, i, j) != tt.data<float>()[iv[i * 4 + j] * 2 + h];
  CHECK(bad == 0);

  Graph h;
  Node* t2 = h.placeholder("t", meta({9, 2}));
  Node* i2 = h.placeholder("i", meta({16}));
  h.output(ArgList{h.call_function(OpRef("torchvision.models.swin_transformer._get_relative_position_bias"), {t2, i2, ArgList{2, 2}},
                                   {}, "rpb")});
  CHECK(compile_error(h).find("node rpb (torchvision.models.swin_transformer._get_relative_position_bias): the index must be int64 or int32") !=
        std::string::npos);
}

TEST_CASE("_patch_merging_pad pads H and W to even sizes and puts the four interleaved quarters side by side") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3, 5, 2}));
  g.output(ArgList{g.call_function(OpRef("torchvision.models.swin_transformer._patch_merging_pad"), {x})});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({2, 3, 5, 2}, 21);
  auto out = cg.run({tx});
  REQUIRE(out[0].shape() == runtime::Shape{2, 2, 3, 8});
  const int dh[4] = {0, 1, 0, 1}, dw[4] = {0, 0, 1, 1};
  int bad = 0;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        for (int q = 0; q < 4; ++q)
          for (std::int64_t c = 0; c < 2; ++c) {
            const std::int64_t si = 2 * i + dh[q], sj = 2 * j + dw[q];
            const float want = si < 3 && sj < 5 ? f4(tx, b, si, sj, c) : 0.0f;
            bad += f4(out[0], b, i, j, q * 2 + c) != want;
          }
  CHECK(bad == 0);
  Graph h;
  h.output(ArgList{h.call_function(OpRef("torchvision.models.swin_transformer._patch_merging_pad"), {h.placeholder("y", meta({4, 2}))}, {},
                                   "pm")});
  CHECK(compile_error(h).find("the input must be [..., H, W, C], got [4, 2]") != std::string::npos);
}
