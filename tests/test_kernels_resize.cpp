// Resizing kernels (kernels/resize.hpp): F.interpolate, ATen's upsample ops
// and nn.Upsample against a naive loop written here, which takes each output
// element's source coordinate from PyTorch's definitions and interpolates over
// every corner of its cell at once (not axis by axis, as the kernel does).
// Source coordinates are rounded to float, as ATen holds them (a coordinate
// near 40 is then only good to 4e-6), so nearest indices match exactly.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::Dims;
using test::ints;
using test::random_tensor;

namespace {

using Scales = std::vector<std::optional<double>>;

enum class Mode { nearest, nearest_exact, linear, cubic };

ArgList floats(const std::vector<double>& v) { return ArgList(v.begin(), v.end()); }

// One output index's source taps along one axis: (input index, weight).
std::vector<std::pair<std::int64_t, double>> taps(Mode mode, std::int64_t o, std::int64_t in, std::int64_t out,
                                                  std::optional<double> sf, bool align) {
  const bool given = sf && *sf > 0;
  if (mode == Mode::nearest || mode == Mode::nearest_exact) {
    const float scale = given ? static_cast<float>(1.0 / *sf) : static_cast<float>(in) / static_cast<float>(out);
    const float src = mode == Mode::nearest ? static_cast<float>(o) * scale : static_cast<float>((o + 0.5) * scale);
    return {{std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(src)), in - 1), 1.0}};
  }
  // The continuous source coordinate, rounded to float as ATen's float kernels hold it.
  double x;
  if (align) {
    x = out > 1 ? static_cast<float>(o) * (static_cast<float>(in - 1) / static_cast<float>(out - 1)) : 0.0f;
  } else {
    const float scale = given ? static_cast<float>(1.0 / *sf) : static_cast<float>(in) / static_cast<float>(out);
    x = static_cast<float>((o + 0.5) * scale - 0.5);
  }
  if (mode == Mode::linear) {
    if (out == in) return {{o, 1.0}};  // PyTorch copies whatever the scale
    x = std::max(x, 0.0);
    const auto i = static_cast<std::int64_t>(x);
    const double t = x - double(i);
    return {{i, 1 - t}, {std::min(i + 1, in - 1), t}};
  }
  // Keys' cubic convolution, A = -0.75, over the 4 neighbours, indices clamped to the input.
  const double A = -0.75;
  auto kernel = [&](double d) {
    d = std::abs(d);
    return d <= 1 ? (A + 2) * d * d * d - (A + 3) * d * d + 1 : A * d * d * d - 5 * A * d * d + 8 * A * d - 4 * A;
  };
  const auto i = static_cast<std::int64_t>(std::floor(x));
  std::vector<std::pair<std::int64_t, double>> r;
  for (std::int64_t k = -1; k <= 2; ++k) r.push_back({std::clamp<std::int64_t>(i + k, 0, in - 1), kernel(x - double(i + k))});
  return r;
}

// The naive resize of a contiguous [N, C, spatial...] tensor (1 to 3 spatial dims), in double.
std::vector<double> naive_resize(const Tensor& x, Mode mode, const Dims& out, const Scales& sf, bool align) {
  const std::size_t nd = out.size();
  Dims in(3, 1), o3(3, 1);
  for (std::size_t k = 0; k < nd; ++k) {
    in[3 - nd + k] = x.shape()[2 + k];
    o3[3 - nd + k] = out[k];
  }
  auto axis_taps = [&](std::size_t k, std::int64_t o) {  // k: 0..2 of [D, H, W]
    const std::size_t lead = 3 - nd;
    if (k < lead) return std::vector<std::pair<std::int64_t, double>>{{0, 1.0}};
    return taps(mode, o, in[k], o3[k], sf[k - lead], align);
  };
  const std::int64_t NC = x.shape()[0] * x.shape()[1];
  std::vector<double> y;
  for (std::int64_t p = 0; p < NC; ++p)
    for (std::int64_t d = 0; d < o3[0]; ++d)
      for (std::int64_t h = 0; h < o3[1]; ++h)
        for (std::int64_t w = 0; w < o3[2]; ++w) {
          double v = 0;
          for (auto [a, wa] : axis_taps(0, d))
            for (auto [b, wb] : axis_taps(1, h))
              for (auto [c, wc] : axis_taps(2, w)) v += wa * wb * wc * x.data<float>()[((p * in[0] + a) * in[1] + b) * in[2] + c];
          y.push_back(v);
        }
  return y;
}

// A contiguous NCHW-style input as the graph takes it: as it is, or channels-last
// (a placeholder [N, spatial..., C] permuted back to [N, C, spatial...]).
struct Input {
  Tensor logical, given;
  Node* node = nullptr;
};
Input make_input(Graph& g, const Dims& shape, bool channels_last, unsigned seed) {
  Input in;
  in.logical = random_tensor(runtime::Shape(shape.begin(), shape.end()), seed);
  const std::int64_t r = static_cast<std::int64_t>(shape.size());
  Dims to_last{0}, to_first{0, r - 1};
  for (std::int64_t k = 2; k < r; ++k) to_last.push_back(k);
  to_last.push_back(1);
  for (std::int64_t k = 1; k < r - 1; ++k) to_first.push_back(k);
  in.given = channels_last ? Tensor::wrap(in.logical.raw(), runtime::permuted(in.logical.layout(), to_last)).contiguous() : in.logical;
  in.node = g.placeholder("x", meta(std::vector<Dim>(in.given.shape().begin(), in.given.shape().end())));
  if (channels_last) in.node = g.call_function(aten::permute, {in.node, ints(to_first)});
  return in;
}

// Largest |got - want| over the elements, relative to max(1, |want|); shapes must match.
double max_err(const Tensor& got, const std::vector<double>& want, const Dims& shape) {
  REQUIRE(got.shape() == runtime::Shape(shape.begin(), shape.end()));
  REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
  double m = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i)
    m = std::max(m, std::abs(double(test::element(got, i)) - want[static_cast<std::size_t>(i)]) /
                        std::max(1.0, std::abs(want[static_cast<std::size_t>(i)])));
  return m;
}

Tensor run1(const Graph& g, const Tensor& x) {
  auto cg = CompiledGraph::compile(g, {});
  auto out = cg.run({x});
  REQUIRE(out.size() == 1);
  return out[0];
}

std::string compile_error(const Graph& g) {
  try {
    (void)CompiledGraph::compile(g, {});
  } catch (const runtime::CompileError& e) {
    return e.what();
  }
  return "compiled";
}

Dims out_shape(const Dims& in, const Dims& size) {
  Dims s{in[0], in[1]};
  s.insert(s.end(), size.begin(), size.end());
  return s;
}

// floor(in * s) per spatial dim.
Dims scaled(const Dims& in, const std::vector<double>& sf) {
  Dims s;
  for (std::size_t k = 0; k < sf.size(); ++k) s.push_back(static_cast<std::int64_t>(std::floor(double(in[2 + k]) * sf[k])));
  return s;
}

// One F.interpolate call: by size or by scale factor (a single value or one per dim).
struct Case {
  Dims in;
  Dims size;                   // empty: by scale factor
  std::vector<double> factor;  // one value: given as a scalar
  const char* mode;
  std::optional<bool> align;
  bool channels_last;
};

Mode mode_of(const std::string& m) {
  if (m == "nearest") return Mode::nearest;
  if (m == "nearest-exact") return Mode::nearest_exact;
  if (m == "bicubic") return Mode::cubic;
  return Mode::linear;
}

void check_interpolate(const Case& c, double tol) {
  const std::size_t nd = c.in.size() - 2;
  const std::string mode = c.mode;
  CAPTURE(mode);
  CAPTURE(c.channels_last);
  CAPTURE(c.in.size());
  CAPTURE(c.size.size());
  Graph g;
  Input x = make_input(g, c.in, c.channels_last, 7);
  ArgDict kw{{"mode", Arg(c.mode)}};
  if (c.align) kw.set("align_corners", Arg(*c.align));
  std::vector<double> factors = c.factor;
  if (factors.size() == 1) factors.assign(nd, factors[0]);
  if (!c.size.empty()) kw.set("size", c.size.size() == 1 ? Arg(c.size[0]) : Arg(ints(c.size)));
  else kw.set("scale_factor", c.factor.size() == 1 ? Arg(c.factor[0]) : Arg(floats(c.factor)));
  g.output(ArgList{g.call_function(OpRef("torch.nn.functional.interpolate"), {x.node}, std::move(kw))});
  Dims size = c.size;
  if (size.size() == 1) size.assign(nd, size[0]);
  Scales sf(nd);
  if (size.empty()) {
    size = scaled(c.in, factors);
    sf.assign(factors.begin(), factors.end());
  }
  auto cg = CompiledGraph::compile(g, {});
  const Tensor y = cg.run({x.given})[0];
  CHECK(max_err(y, naive_resize(x.logical, mode_of(c.mode), size, sf, c.align.value_or(false)), out_shape(c.in, size)) <= tol);
  // The result keeps the input's dim order.
  CHECK(cg.output_layout(0).is_contiguous() == !c.channels_last);
}

}  // namespace

TEST_CASE("F.interpolate nearest and nearest-exact, by size and by scale factor, up and down, match a loop exactly") {
  const Case cases[] = {
      {{2, 3, 5, 6}, {11, 13}, {}, "nearest", {}, false},
      {{2, 3, 5, 6}, {11, 13}, {}, "nearest", {}, true},
      {{1, 4, 9, 7}, {4, 3}, {}, "nearest", {}, false},  // down
      {{1, 4, 9, 7}, {}, {1.7}, "nearest", {}, true},    // a scalar factor, not an integer
      {{1, 4, 9, 7}, {}, {2.0, 0.5}, "nearest", {}, false},
      {{1, 2, 5, 6}, {10, 12}, {}, "nearest", {}, false},  // exactly twice: ATen's shortcut
      {{2, 3, 5, 6}, {}, {2.3}, "nearest-exact", {}, false},
      {{2, 3, 5, 6}, {}, {2.3}, "nearest-exact", {}, true},
      {{1, 3, 8, 11}, {3, 4}, {}, "nearest-exact", {}, false},
      {{2, 3, 7}, {}, {1.5}, "nearest", {}, false},  // 1-d
      {{2, 3, 7}, {5}, {}, "nearest-exact", {}, true},
      {{1, 2, 3, 4, 5}, {}, {1.5, 2.0, 0.6}, "nearest", {}, false},  // 3-d
      {{1, 2, 3, 4, 5}, {7}, {}, "nearest", {}, true},                // one size for every dim
  };
  for (const Case& c : cases) check_interpolate(c, 0.0);
}

TEST_CASE("F.interpolate linear, bilinear, trilinear and bicubic, corners aligned or not, match a loop") {
  const Case cases[] = {
      {{2, 3, 5, 6}, {11, 13}, {}, "bilinear", {}, false},
      {{2, 3, 5, 6}, {11, 13}, {}, "bilinear", false, true},
      {{2, 3, 5, 6}, {11, 13}, {}, "bilinear", true, false},
      {{2, 3, 5, 6}, {11, 13}, {}, "bilinear", true, true},
      {{1, 4, 16, 9}, {5, 4}, {}, "bilinear", false, false},  // down
      {{1, 4, 16, 9}, {5, 4}, {}, "bilinear", true, true},
      {{1, 4, 9, 7}, {}, {1.7}, "bilinear", false, false},  // the scale 1 / 1.7 reads other points than 9 / 15
      {{1, 4, 9, 7}, {}, {2.5, 0.4}, "bilinear", true, true},
      {{1, 3, 6, 6}, {6, 1}, {}, "bilinear", true, false},  // one output column; a size kept as it is
      {{2, 3, 7}, {}, {1.5}, "linear", false, true},
      {{2, 3, 7}, {3}, {}, "linear", true, false},
      {{1, 2, 3, 4, 5}, {}, {1.5, 2.0, 0.6}, "trilinear", false, true},
      {{1, 2, 3, 4, 5}, {5, 3, 8}, {}, "trilinear", true, false},
      {{2, 3, 5, 6}, {11, 13}, {}, "bicubic", false, false},
      {{2, 3, 5, 6}, {11, 13}, {}, "bicubic", true, true},
      {{1, 4, 16, 9}, {}, {0.6}, "bicubic", false, true},
      {{1, 4, 9, 7}, {}, {1.7, 2.2}, "bicubic", true, false},
  };
  // Cubic weights come from a float source coordinate and sum 16 products of both signs.
  for (const Case& c : cases) check_interpolate(c, std::string(c.mode) == "bicubic" ? 1e-5 : 2e-6);
}

TEST_CASE("recompute_scale_factor takes the scale from the sizes, a given scale factor from itself") {
  // H = 5 by 1.7 is 8 rows; the scale is 1 / 1.7 unless recomputed to 5 / 8: output row 5 reads row 2 or row 3.
  for (bool recompute : {false, true})
    for (const char* mode : {"nearest", "bilinear"}) {
      CAPTURE(recompute);
      CAPTURE(mode);
      Graph g;
      Input x = make_input(g, {1, 2, 5, 4}, false, 3);
      g.output(ArgList{g.call_function(OpRef("torch.nn.functional.interpolate"), {x.node},
                                       {{"scale_factor", Arg(1.7)}, {"mode", Arg(mode)}, {"recompute_scale_factor", Arg(recompute)}})});
      const Scales sf = recompute ? Scales(2) : Scales{1.7, 1.7};
      const double tol = std::string(mode) == "nearest" ? 0.0 : 2e-6;
      const Dims size{8, 6};
      const Tensor y = run1(g, x.given);
      CHECK(max_err(y, naive_resize(x.logical, mode_of(mode), size, sf, false), out_shape({1, 2, 5, 4}, size)) <= tol);
      // The other choice differs: the scale does matter here.
      const Scales other = recompute ? Scales{1.7, 1.7} : Scales(2);
      CHECK(max_err(y, naive_resize(x.logical, mode_of(mode), size, other, false), out_shape({1, 2, 5, 4}, size)) > 1e-3);
    }
}

TEST_CASE("aten upsample ops, vec and default overloads, 1- 2- and 3-d, match a loop") {
  struct AtenCase {
    const char* target;
    Dims in;
    Mode mode;
    bool align;  // align_corners, where the op takes it
    Dims out;
    Scales scales;  // .default: one per dim (may be None); .vec: empty for output_size, else the factors
    bool channels_last;
  };
  const AtenCase cases[] = {
      {"aten.upsample_nearest2d.vec", {2, 3, 5, 6}, Mode::nearest, false, {8, 3}, {1.7, 0.6}, true},
      {"aten.upsample_nearest2d.vec", {2, 3, 5, 6}, Mode::nearest, false, {11, 13}, {}, false},
      {"aten.upsample_nearest2d.default", {2, 3, 5, 6}, Mode::nearest, false, {8, 13}, {1.7, std::nullopt}, false},
      {"aten.upsample_nearest1d.vec", {2, 3, 7}, Mode::nearest, false, {10}, {1.5}, false},
      {"aten.upsample_nearest1d.default", {2, 3, 7}, Mode::nearest, false, {10}, {1.5}, true},
      {"aten.upsample_nearest3d.vec", {1, 2, 3, 4, 5}, Mode::nearest, false, {4, 8, 3}, {1.5, 2.0, 0.6}, false},
      {"aten.upsample_nearest3d.default", {1, 2, 3, 4, 5}, Mode::nearest, false, {4, 8, 3}, {std::nullopt, 2.0, 0.6}, true},
      {"aten._upsample_nearest_exact2d.vec", {2, 3, 5, 6}, Mode::nearest_exact, false, {11, 13}, {2.3, 2.3}, false},
      {"aten._upsample_nearest_exact2d.default", {2, 3, 5, 6}, Mode::nearest_exact, false, {4, 4}, {std::nullopt, std::nullopt}, true},
      {"aten._upsample_nearest_exact1d.vec", {2, 3, 7}, Mode::nearest_exact, false, {3}, {}, false},
      {"aten._upsample_nearest_exact3d.default", {1, 2, 3, 4, 5}, Mode::nearest_exact, false, {5, 3, 8}, {std::nullopt, std::nullopt, std::nullopt}, false},
      {"aten.upsample_bilinear2d.vec", {2, 3, 5, 6}, Mode::linear, true, {11, 13}, {}, true},
      {"aten.upsample_bilinear2d.vec", {2, 3, 5, 6}, Mode::linear, false, {8, 3}, {1.7, 0.6}, false},
      {"aten.upsample_bilinear2d.default", {2, 3, 5, 6}, Mode::linear, false, {11, 13}, {2.3, std::nullopt}, false},
      {"aten.upsample_linear1d.vec", {2, 3, 7}, Mode::linear, false, {10}, {1.5}, true},
      {"aten.upsample_linear1d.default", {2, 3, 7}, Mode::linear, true, {10}, {std::nullopt}, false},
      {"aten.upsample_trilinear3d.vec", {1, 2, 3, 4, 5}, Mode::linear, false, {4, 8, 3}, {1.5, 2.0, 0.6}, true},
      {"aten.upsample_trilinear3d.default", {1, 2, 3, 4, 5}, Mode::linear, true, {5, 3, 8}, {std::nullopt, std::nullopt, std::nullopt}, false},
      {"aten.upsample_bicubic2d.vec", {2, 3, 5, 6}, Mode::cubic, false, {11, 13}, {}, false},
      {"aten.upsample_bicubic2d.default", {2, 3, 5, 6}, Mode::cubic, true, {8, 3}, {1.7, 0.6}, true},
  };
  for (const AtenCase& c : cases) {
    const std::string target = c.target;
    CAPTURE(target);
    CAPTURE(c.channels_last);
    const bool vec = target.ends_with(".vec");
    const bool aligns = c.mode == Mode::linear || c.mode == Mode::cubic;
    Graph g;
    Input x = make_input(g, c.in, c.channels_last, 11);
    ArgList args{Arg(x.node)};
    if (vec) {
      const bool by_size = c.scales.empty();
      args.push_back(by_size ? Arg(ints(c.out)) : Arg());
      if (aligns) args.push_back(Arg(c.align));
      if (by_size) {
        args.push_back(Arg());
      } else {
        ArgList f;
        for (const auto& s : c.scales) f.push_back(Arg(*s));
        args.push_back(Arg(std::move(f)));
      }
    } else {
      args.push_back(Arg(ints(c.out)));
      if (aligns) args.push_back(Arg(c.align));
      for (const auto& s : c.scales) args.push_back(s ? Arg(*s) : Arg());
    }
    g.output(ArgList{g.call_function(OpRef(c.target), std::move(args))});
    const Scales sf = c.scales.empty() ? Scales(c.out.size()) : c.scales;
    const double tol = c.mode == Mode::cubic ? 1e-5 : c.mode == Mode::linear ? 2e-6 : 0.0;
    CHECK(max_err(run1(g, x.given), naive_resize(x.logical, c.mode, c.out, sf, c.align), out_shape(c.in, c.out)) <= tol);
  }
}

TEST_CASE("nn.Upsample, UpsamplingNearest2d and UpsamplingBilinear2d lower as F.interpolate with their attributes") {
  struct ModuleCase {
    const char* cls;
    const char* attrs;
    Mode mode;
    bool align;
    Dims out;
    Scales sf;
  };
  const ModuleCase cases[] = {
      {"Upsample", R"({"size":null,"scale_factor":2.0,"mode":"nearest","align_corners":null,"recompute_scale_factor":null})",
       Mode::nearest, false, {10, 12}, {2.0, 2.0}},
      {"Upsample", R"({"size":[7,9],"scale_factor":null,"mode":"bilinear","align_corners":true,"recompute_scale_factor":null})",
       Mode::linear, true, {7, 9}, {std::nullopt, std::nullopt}},
      {"Upsample", R"({"size":null,"scale_factor":[1.3,0.7],"mode":"bilinear","align_corners":null,"recompute_scale_factor":true})",
       Mode::linear, false, {6, 4}, {std::nullopt, std::nullopt}},
      {"UpsamplingNearest2d", R"({"size":null,"scale_factor":1.5,"mode":"nearest","align_corners":null,"recompute_scale_factor":null})",
       Mode::nearest, false, {7, 9}, {1.5, 1.5}},
      {"UpsamplingBilinear2d", R"({"size":[4,11],"scale_factor":null,"mode":"bilinear","align_corners":true})", Mode::linear, true,
       {4, 11}, {std::nullopt, std::nullopt}},
  };
  for (const ModuleCase& c : cases) {
    CAPTURE(c.attrs);
    Graph g;
    g.modules().set(ModuleInfo{"head.up", std::string("torch.nn.modules.upsampling.") + c.cls, {{"attrs", c.attrs}}});
    Input x = make_input(g, {2, 3, 5, 6}, true, 5);
    g.output(ArgList{g.call_module("head.up", {Arg(x.node)})});
    const double tol = c.mode == Mode::nearest ? 0.0 : 2e-6;
    CHECK(max_err(run1(g, x.given), naive_resize(x.logical, c.mode, c.out, c.sf, c.align), out_shape({2, 3, 5, 6}, c.out)) <= tol);
  }
}

TEST_CASE("F.upsample takes interpolate's arguments, F.upsample_nearest and F.upsample_bilinear fix the mode, against a loop") {
  struct FormCase {
    const char* target;
    ArgList args;  // after the input
    Mode mode;
    bool align;
    Dims out;
    Scales sf;
  };
  const std::optional<double> none;
  const FormCase cases[] = {
      {"torch.nn.functional.upsample", {Arg(), 2.0, Arg(std::string("bilinear")), false}, Mode::linear, false, {10, 12}, {2.0, 2.0}},
      {"torch.nn.functional.upsample", {ints({7, 9})}, Mode::nearest, false, {7, 9}, {none, none}},
      {"torch.nn.functional.upsample_nearest", {ints({7, 9})}, Mode::nearest, false, {7, 9}, {none, none}},
      {"torch.nn.functional.upsample_nearest", {Arg(), 1.5}, Mode::nearest, false, {7, 9}, {1.5, 1.5}},
      {"torch.nn.functional.upsample_bilinear", {ints({4, 11})}, Mode::linear, true, {4, 11}, {none, none}},
      {"torch.nn.functional.upsample_bilinear", {Arg(), 2.0}, Mode::linear, true, {10, 12}, {2.0, 2.0}},
  };
  for (const FormCase& c : cases) {
    CAPTURE(c.target);
    CAPTURE(c.out[0]);
    Graph g;
    Input x = make_input(g, {2, 3, 5, 6}, false, 9);
    ArgList args{x.node};
    args.insert(args.end(), c.args.begin(), c.args.end());
    g.output(ArgList{g.call_function(OpRef(c.target), std::move(args))});
    const double tol = c.mode == Mode::nearest ? 0.0 : 2e-6;
    CHECK(max_err(run1(g, x.given), naive_resize(x.logical, c.mode, c.out, c.sf, c.align), out_shape({2, 3, 5, 6}, c.out)) <= tol);
  }
}

TEST_CASE("F.interpolate in area mode is adaptive average pooling, by size or by scale factor") {
  for (bool by_size : {true, false}) {
    Graph g;
    Input x = make_input(g, {1, 2, 9, 7}, false, 9);
    ArgDict kw{{"mode", Arg("area")}};
    if (by_size) kw.set("size", Arg(ArgList{4, 3}));
    else kw.set("scale_factor", Arg(0.5));  // 4 x 3, as floor(9 * 0.5) x floor(7 * 0.5)
    g.output(ArgList{g.call_function(OpRef("torch.nn.functional.interpolate"), {x.node}, std::move(kw))});
    const Tensor y = run1(g, x.given);
    REQUIRE(y.shape() == runtime::Shape{1, 2, 4, 3});
    double worst = 0;
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t i = 0; i < 4; ++i)
        for (std::int64_t j = 0; j < 3; ++j) {
          const std::int64_t h0 = i * 9 / 4, h1 = ((i + 1) * 9 + 3) / 4, w0 = j * 7 / 3, w1 = ((j + 1) * 7 + 2) / 3;
          double sum = 0;
          for (std::int64_t h = h0; h < h1; ++h)
            for (std::int64_t w = w0; w < w1; ++w) sum += x.logical.data<float>()[(c * 9 + h) * 7 + w];
          worst = std::max(worst, std::abs(test::at(y, {0, c, i, j}) - sum / double((h1 - h0) * (w1 - w0))));
        }
    CHECK(worst <= 1e-6);
  }
}

TEST_CASE("resizing refuses what it cannot do, naming the node, the mode or the argument") {
  auto interpolate_error = [](Dims shape, ArgDict kw) {
    Graph g;
    Node* x = g.placeholder("x", meta(std::vector<Dim>(shape.begin(), shape.end())));
    g.output(ArgList{g.call_function(OpRef("torch.nn.functional.interpolate"), {x}, std::move(kw), "up")});
    return compile_error(g);
  };
  const Dims x4{1, 2, 5, 6};
  CHECK(interpolate_error(x4, {{"size", Arg(ArgList{8, 8})}, {"mode", Arg("lanczos")}})
            .find("node up (torch.nn.functional.interpolate): interpolate mode 'lanczos' has no kernel") != std::string::npos);
  CHECK(interpolate_error(x4, {{"size", Arg(ArgList{8, 8})}, {"mode", Arg("bilinear")}, {"antialias", Arg(true)}})
            .find("antialias=True has no kernel") != std::string::npos);
  CHECK(interpolate_error({1, 2, 5}, {{"size", Arg(8)}, {"mode", Arg("bilinear")}})
            .find("interpolate mode 'bilinear' takes a 4-d input, got [1, 2, 5]") != std::string::npos);
  CHECK(interpolate_error(x4, {{"size", Arg(ArgList{8, 8})}, {"scale_factor", Arg(2.0)}})
            .find("exactly one of size and scale_factor must be given") != std::string::npos);
  CHECK(interpolate_error(x4, {{"mode", Arg("nearest")}}).find("exactly one of size and scale_factor") != std::string::npos);
  CHECK(interpolate_error(x4, {{"size", Arg(ArgList{8, 8})}, {"align_corners", Arg(true)}})
            .find("align_corners is set for mode 'nearest'") != std::string::npos);
  CHECK(interpolate_error(x4, {{"size", Arg(ArgList{8, 8, 8})}}).find("size has 3 values for 2 spatial dims") != std::string::npos);
  CHECK(interpolate_error(x4, {{"scale_factor", Arg(0.1)}})
            .find("input and output sizes must be greater than 0") != std::string::npos);
  CHECK(interpolate_error(x4, {{"size", Arg(ArgList{8, 8})}, {"recompute_scale_factor", Arg(true)}})
            .find("recompute_scale_factor is set with an explicit size") != std::string::npos);
  CHECK(interpolate_error({2, 5}, {{"size", Arg(8)}}).find("interpolate takes a 3-, 4- or 5-d input") != std::string::npos);

  Graph g;
  Node* x = g.placeholder("x", meta({1, 2, 5, 6}));
  g.output(ArgList{g.call_function(OpRef("aten.upsample_nearest2d.vec"), {x, ArgList{8, 8}, ArgList{2.0, 2.0}}, {}, "up")});
  CHECK(compile_error(g).find("node up (aten.upsample_nearest2d.vec): exactly one of output_size and scale_factors") !=
        std::string::npos);
  Graph h;
  Node* y = h.placeholder("y", meta({1, 2, 5}));
  h.output(ArgList{h.call_function(OpRef("aten.upsample_bilinear2d.default"), {y, ArgList{8, 8}, false}, {}, "up")});
  CHECK(compile_error(h).find("takes a 4-d input, got [1, 2, 5]") != std::string::npos);
  Graph m;
  m.modules().set(ModuleInfo{"up", "torch.nn.modules.upsampling.Upsample", {{"attrs", R"({"size":[8,8],"scale_factor":null})"}}});
  Node* z = m.placeholder("z", meta({1, 2, 5, 6}));
  m.output(ArgList{m.call_module("up", {Arg(z)})});
  CHECK(compile_error(m).find("Upsample 'up': attribute 'mode' is missing") != std::string::npos);
}

TEST_CASE("resizing on two threads gives the one-thread result, in both dim orders") {
  for (bool channels_last : {false, true})
    for (const char* mode : {"nearest", "bilinear", "bicubic"}) {
      CAPTURE(channels_last);
      CAPTURE(std::string(mode));
      Graph g;
      Input x = make_input(g, {2, 8, 40, 36}, channels_last, 13);
      g.output(ArgList{g.call_function(OpRef("torch.nn.functional.interpolate"), {x.node},
                                       {{"size", Arg(ArgList{67, 61})}, {"mode", Arg(mode)}})});
      runtime::CompileOptions two;
      two.threads = 2;
      const Tensor one = CompiledGraph::compile(g, {}).run({x.given})[0];
      const Tensor both = CompiledGraph::compile(g, {}, two).run({x.given})[0];
      CHECK(test::max_abs_diff(one, both) == 0);
      const Mode m = mode_of(mode);
      CHECK(max_err(both, naive_resize(x.logical, m, {67, 61}, Scales(2), false), {2, 8, 67, 61}) <=
            (m == Mode::cubic ? 1e-5 : m == Mode::linear ? 2e-6 : 0.0));
    }
}
