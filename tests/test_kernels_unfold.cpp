// Unfold / Fold (kernels/shape/unfold.hpp) and bilinear / _trilinear
// (kernels/bilinear.hpp) at the torch, aten and module levels, against loops
// written here over window positions and summed indices; and their errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::ints;
using test::meta;
using test::Dims;
using test::max_rel;
using test::error_of;
using test::random_tensor;

namespace {

struct Win {
  std::int64_t kh, kw, dh = 1, dw = 1, ph = 0, pw = 0, sh = 1, sw = 1;
  std::int64_t blocks(std::int64_t size, bool h) const {
    return h ? (size + 2 * ph - dh * (kh - 1) - 1) / sh + 1 : (size + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  }
};

// Calls f(n, c, y, x, row, l) for every window element of an image [N, C, H, W] that lies inside it.
void each_window_element(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, const Win& w,
                         const std::function<void(std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t)>& f) {
  const std::int64_t bh = w.blocks(H, true), bw = w.blocks(W, false);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < w.kh; ++i)
        for (std::int64_t j = 0; j < w.kw; ++j)
          for (std::int64_t by = 0; by < bh; ++by)
            for (std::int64_t bx = 0; bx < bw; ++bx) {
              const std::int64_t y = by * w.sh - w.ph + i * w.dh, x = bx * w.sw - w.pw + j * w.dw;
              if (y >= 0 && y < H && x >= 0 && x < W) f(n, c, y, x, (c * w.kh + i) * w.kw + j, by * bw + bx);
            }
}

// im2col of a contiguous [N, C, H, W] (values in `img`) -> [N, C*kh*kw, L], flat.
std::vector<double> im2col(const std::vector<float>& img, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, const Win& w) {
  const std::int64_t rows = C * w.kh * w.kw, L = w.blocks(H, true) * w.blocks(W, false);
  std::vector<double> out(static_cast<std::size_t>(N * rows * L), 0.0);
  each_window_element(N, C, H, W, w, [&](auto n, auto c, auto y, auto x, auto row, auto l) {
    out[static_cast<std::size_t>((n * rows + row) * L + l)] = img[static_cast<std::size_t>(((n * C + c) * H + y) * W + x)];
  });
  return out;
}

// col2im of a contiguous [N, C*kh*kw, L] -> [N, C, H, W], flat, overlaps summed.
std::vector<double> col2im(const std::vector<float>& col, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, const Win& w) {
  const std::int64_t rows = C * w.kh * w.kw, L = w.blocks(H, true) * w.blocks(W, false);
  std::vector<double> out(static_cast<std::size_t>(N * C * H * W), 0.0);
  each_window_element(N, C, H, W, w, [&](auto n, auto c, auto y, auto x, auto row, auto l) {
    out[static_cast<std::size_t>(((n * C + c) * H + y) * W + x)] += col[static_cast<std::size_t>((n * rows + row) * L + l)];
  });
  return out;
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> v;
  for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(test::element(t, i));
  return v;
}


std::string compile_error(Graph& g) {
  return error_of([&] { (void)CompiledGraph::compile(g, {}); });
}

}  // namespace

TEST_CASE("unfold is im2col with kernel_size, dilation, padding and stride, at torch and aten level, batched or not") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 3, 7, 6}));
  Node* u0 = g.call_function(OpRef("torch.nn.functional.unfold"), {x, 2});
  Node* u1 = g.call_function(OpRef("torch.nn.functional.unfold"), {x, ints({3, 2})},
                             {{"dilation", Arg(ints({2, 1}))}, {"padding", Arg(ints({1, 2}))}, {"stride", Arg(ints({2, 3}))}});
  Node* u2 = g.call_function(OpRef("aten.im2col.default"), {x, ints({2, 2}), ints({1, 1}), ints({0, 0}), ints({2, 2})});
  Node* c = g.call_function(OpRef("aten.select.int"), {x, 0, 1});  // [3, 7, 6], unbatched
  Node* u3 = g.call_function(OpRef("aten.im2col.default"), {c, ints({3, 3}), ints({1, 2}), ints({1, 1}), ints({1, 2})});
  g.output(ArgList{u0, u1, u2, u3});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tx = random_tensor({2, 3, 7, 6}, 11);
  const auto out = cg.run({tx});
  const auto img = values(tx);
  CHECK(out[0].shape() == runtime::Shape{2, 12, 30});
  CHECK(max_rel(out[0], im2col(img, 2, 3, 7, 6, Win{2, 2})) < 1e-7);
  const Win w1{3, 2, 2, 1, 1, 2, 2, 3};
  CHECK(out[1].shape() == runtime::Shape{2, 18, w1.blocks(7, true) * w1.blocks(6, false)});
  CHECK(max_rel(out[1], im2col(img, 2, 3, 7, 6, w1)) < 1e-7);
  CHECK(out[2].shape() == runtime::Shape{2, 12, 9});
  CHECK(max_rel(out[2], im2col(img, 2, 3, 7, 6, Win{2, 2, 1, 1, 0, 0, 2, 2})) < 1e-7);
  const std::vector<float> second(img.begin() + 3 * 7 * 6, img.end());
  const Win w3{3, 3, 1, 2, 1, 1, 1, 2};
  CHECK(out[3].shape() == runtime::Shape{27, w3.blocks(7, true) * w3.blocks(6, false)});
  CHECK(max_rel(out[3], im2col(second, 1, 3, 7, 6, w3)) < 1e-7);
}

TEST_CASE("fold sums overlapping windows into output_size, at torch and aten level, batched or not, and undoes a disjoint unfold") {
  Graph g;
  const Win w{3, 2, 1, 2, 1, 0, 1, 1};  // overlapping windows, dilated along W, padded along H
  const std::int64_t H = 5, W = 6, L = w.blocks(H, true) * w.blocks(W, false);
  Node* col = g.placeholder("col", meta({2, 12, L}));
  Node* f0 = g.call_function(OpRef("torch.nn.functional.fold"), {col, ints({H, W}), ints({3, 2})},
                             {{"dilation", Arg(ints({1, 2}))}, {"padding", Arg(ints({1, 0}))}});
  Node* f1 = g.call_function(OpRef("aten.col2im.default"), {col, ints({H, W}), ints({3, 2}), ints({1, 2}), ints({1, 0}), ints({1, 1})});
  Node* one = g.call_function(OpRef("aten.select.int"), {col, 0, 0});  // [12, L], unbatched
  Node* f2 = g.call_function(OpRef("torch.nn.functional.fold"), {one, ints({H, W}), ints({3, 2})},
                             {{"dilation", Arg(ints({1, 2}))}, {"padding", Arg(ints({1, 0}))}, {"stride", 1}});
  Node* x = g.placeholder("x", meta({1, 4, 6, 8}));
  Node* roundtrip = g.call_function(OpRef("torch.nn.functional.fold"),
                                    {g.call_function(OpRef("torch.nn.functional.unfold"), {x, 2}, {{"stride", 2}}), ints({6, 8}), 2},
                                    {{"stride", 2}});
  g.output(ArgList{f0, f1, f2, roundtrip});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tc = random_tensor({2, 12, L}, 21), tx = random_tensor({1, 4, 6, 8}, 22);
  const auto out = cg.run({tc, tx});
  const auto cols = values(tc);
  CHECK(out[0].shape() == runtime::Shape{2, 2, H, W});
  CHECK(max_rel(out[0], col2im(cols, 2, 2, H, W, w)) < 1e-6);
  CHECK(max_rel(out[1], col2im(cols, 2, 2, H, W, Win{3, 2, 1, 2, 1, 0, 1, 1})) < 1e-6);
  CHECK(out[2].shape() == runtime::Shape{2, H, W});
  const std::vector<float> first(cols.begin(), cols.begin() + 12 * L);
  CHECK(max_rel(out[2], col2im(first, 1, 2, H, W, w)) < 1e-6);
  const auto img = values(tx);
  CHECK(max_rel(out[3], std::vector<double>(img.begin(), img.end())) == 0);
}

TEST_CASE("the Unfold and Fold modules lower as their functions, with their attributes") {
  Graph g;
  Node* x = g.placeholder("x", meta({1, 2, 5, 4}));
  g.modules().set(ModuleInfo{"unfold", "torch.nn.modules.fold.Unfold",
                             {{"attrs", R"({"kernel_size":[2,3],"dilation":1,"padding":[1,0],"stride":[2,1]})"}}});
  g.modules().set(ModuleInfo{"fold", "torch.nn.modules.fold.Fold",
                             {{"attrs", R"({"output_size":[5,4],"kernel_size":[2,3],"dilation":1,"padding":[1,0],"stride":[2,1]})"}}});
  Node* u = g.call_module("unfold", {x});
  g.output(ArgList{u, g.call_module("fold", {u})});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor tx = random_tensor({1, 2, 5, 4}, 31);
  const auto out = cg.run({tx});
  const Win w{2, 3, 1, 1, 1, 0, 2, 1};
  const auto cols = im2col(values(tx), 1, 2, 5, 4, w);
  CHECK(out[0].shape() == runtime::Shape{1, 12, 6});
  CHECK(max_rel(out[0], cols) < 1e-7);
  CHECK(max_rel(out[1], col2im(std::vector<float>(cols.begin(), cols.end()), 1, 2, 5, 4, w)) < 1e-6);

  Graph h;
  h.modules().set(ModuleInfo{"fold", "torch.nn.modules.fold.Fold", {{"attrs", R"({"kernel_size":2,"dilation":1,"padding":0,"stride":1})"}}});
  h.output(ArgList{h.call_module("fold", {h.placeholder("c", meta({1, 4, 4}))}, {}, "f")});
  CHECK(compile_error(h) == "node f (fold): torch.nn.modules.fold.Fold 'fold': attribute 'output_size' is missing");
}

TEST_CASE("unfold and fold refuse other ranks and dtypes, bad window sizes, a window larger than the image and columns that do not fit") {
  auto refused = [](const char* target, Dims shape, ArgList extra, DType dt = DType::float32) {
    Graph g;
    ArgList args{g.placeholder("x", meta(test::dims_of(shape), dt))};
    args.insert(args.end(), extra.begin(), extra.end());
    g.output(ArgList{g.call_function(OpRef(target), std::move(args), {}, "bad")});
    return compile_error(g);
  };
  const std::string un = "node bad (torch.nn.functional.unfold): ", fo = "node bad (torch.nn.functional.fold): ";
  CHECK(refused("torch.nn.functional.unfold", {4, 5}, {2}) == un + "takes a 3-d or 4-d input, got [4, 5]");
  CHECK(refused("torch.nn.functional.unfold", {1, 2, 4, 5}, {2}, DType::int64) == un + "takes a float32 input, got int64");
  CHECK(refused("torch.nn.functional.unfold", {1, 2, 4, 5}, {ints({2, 2, 2})}) == un + "kernel_size [2, 2, 2] must be an int or 2 ints");
  CHECK(refused("torch.nn.functional.unfold", {1, 2, 4, 5}, {0}) == un + "kernel_size [0] must be positive");
  CHECK(refused("torch.nn.functional.unfold", {1, 2, 4, 5}, {2, 1, -1}) == un + "padding [-1] must not be negative");
  CHECK(refused("torch.nn.functional.unfold", {1, 2, 4, 5}, {2, 1, 0, ints({1, 0})}) == un + "stride [1, 0] must be positive");
  CHECK(refused("torch.nn.functional.unfold", {1, 2, 4, 5}, {3, 2}) ==
        un + "the window (kernel_size [3, 3], dilation [2, 2]) does not fit the padded image [4, 5]");
  CHECK(refused("torch.nn.functional.fold", {1, 2, 3, 4}, {ints({3, 3}), 2}) == fo + "takes a 2-d or 3-d input, got [1, 2, 3, 4]");
  CHECK(refused("torch.nn.functional.fold", {1, 6, 4}, {ints({3, 3}), 2}) ==
        fo + "input dim 1 of [1, 6, 4] is not a multiple of the kernel's 4 elements");
  CHECK(refused("torch.nn.functional.fold", {8, 5}, {ints({3, 3}), 2}) ==
        fo + "input [8, 5] has 5 columns; output_size [3, 3] with this window makes 4");
  CHECK(refused("aten.col2im.default", {1, 8, 4}, {ints({3, 3}), ints({2, 2}), ints({1, 1}), ints({0, 0}), ints({1, 1})}, DType::int64) ==
        "node bad (aten.col2im.default): takes a float32 input, got int64");
}

namespace {

// Row-major indices of `shape`, each handed to f.
void each_index(const Dims& shape, const std::function<void(const Dims&)>& f) {
  Dims idx(shape.size(), 0);
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  for (std::int64_t k = 0; k < n; ++k) {
    f(idx);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

float at(const Tensor& t, const Dims& idx) {
  std::int64_t off = 0;
  for (std::size_t k = 0; k < idx.size(); ++k) off += idx[k] * t.strides()[k];
  return t.data<float>()[off];
}

// sum_ij x1[r, i] w[o, i, j] x2[r, j] + b[o] for x1 [R, I], x2 [R, J] (rows flattened), flat [R, O].
std::vector<double> bilinear(const Tensor& x1, const Tensor& x2, const Tensor& w, const Tensor* b) {
  const std::int64_t I = w.shape()[1], J = w.shape()[2], O = w.shape()[0], R = x1.numel() / I;
  std::vector<double> out;
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t o = 0; o < O; ++o) {
      double acc = b ? test::element(*b, o) : 0.0;
      for (std::int64_t i = 0; i < I; ++i)
        for (std::int64_t j = 0; j < J; ++j)
          acc += double(test::element(x1, r * I + i)) * test::element(w, (o * I + i) * J + j) * test::element(x2, r * J + j);
      out.push_back(acc);
    }
  return out;
}

}  // namespace

TEST_CASE("bilinear is x1^T W x2 + b over the last dims, with or without bias, at torch and aten level and as the module") {
  Graph g;
  Node* x1 = g.placeholder("x1", meta({2, 3, 4}));
  Node* x2 = g.placeholder("x2", meta({2, 3, 5}));
  Node* w = g.placeholder("w", meta({6, 4, 5}));
  Node* b = g.placeholder("b", meta({6}));
  Node* v1 = g.placeholder("v1", meta({4}));
  Node* v2 = g.placeholder("v2", meta({5}));
  g.modules().set(ModuleInfo{"bil", "torch.nn.modules.linear.Bilinear", {{"attrs", R"({"in1_features":4,"in2_features":5,"out_features":6})"}}});
  ArgList outs{g.call_function(OpRef("torch.bilinear"), {x1, x2, w, b}),
               g.call_function(OpRef("torch.nn.functional.bilinear"), {x1, x2, w}),
               g.call_function(OpRef("aten.bilinear.default"), {v1, v2, w, b}),
               g.call_module("bil", {x1, x2})};
  g.output(outs);
  Tensor tw = random_tensor({6, 4, 5}, 41), tb = random_tensor({6}, 42);
  auto cg = CompiledGraph::compile(g, {{"bil.weight", tw}, {"bil.bias", tb}});
  const Tensor t1 = random_tensor({2, 3, 4}, 43), t2 = random_tensor({2, 3, 5}, 44), u1 = random_tensor({4}, 45),
               u2 = random_tensor({5}, 46);
  const auto out = cg.run({t1, t2, tw, tb, u1, u2});
  CHECK(out[0].shape() == runtime::Shape{2, 3, 6});
  CHECK(max_rel(out[0], bilinear(t1, t2, tw, &tb)) < 1e-6);
  CHECK(max_rel(out[1], bilinear(t1, t2, tw, nullptr)) < 1e-6);
  CHECK(out[2].shape() == runtime::Shape{6});
  CHECK(max_rel(out[2], bilinear(u1, u2, tw, &tb)) < 1e-6);
  CHECK(max_rel(out[3], bilinear(t1, t2, tw, &tb)) < 1e-6);
}

TEST_CASE("_trilinear inserts the expand dims, broadcasts, multiplies and sums over sumdim, inputs strided") {
  Graph g;
  Node* a = g.placeholder("a", meta({4, 3}));
  Node* at_ = g.call_function(aten::t, {a});  // [3, 4], strided
  Node* w = g.placeholder("w", meta({2, 4, 5}));
  Node* c = g.placeholder("c", meta({3, 5}));
  // bilinear's own form: [3, 4] -> [3, 1, 4, 1], [2, 4, 5] -> [1, 2, 4, 5], [3, 5] -> [3, 1, 1, 5], summing dims 2 and 3
  Node* t0 = g.call_function(OpRef("aten._trilinear.default"), {at_, w, c, ints({1, 3}), ints({0}), ints({1, 2}), ints({2, 3}), 1});
  // an elementwise product kept whole (no sumdim) and one summed over a dim all three share
  Node* t1 = g.call_function(OpRef("aten._trilinear.default"), {at_, at_, at_, ints({}), ints({}), ints({}), ints({})});
  Node* t2 = g.call_function(OpRef("aten._trilinear.default"), {c, c, c, ints({}), ints({}), ints({}), ints({0})});
  g.output(ArgList{t0, t1, t2});
  auto cg = CompiledGraph::compile(g, {});
  const Tensor ta = random_tensor({4, 3}, 51), tw = random_tensor({2, 4, 5}, 52), tc = random_tensor({3, 5}, 53);
  const auto out = cg.run({ta, tw, tc});
  std::vector<double> want0, want1, want2;
  each_index({3, 2}, [&](const Dims& r) {
    double acc = 0;
    each_index({4, 5}, [&](const Dims& s) {
      acc += double(at(ta, {s[0], r[0]})) * at(tw, {r[1], s[0], s[1]}) * at(tc, {r[0], s[1]});
    });
    want0.push_back(acc);
  });
  each_index({3, 4}, [&](const Dims& r) {
    const double v = at(ta, {r[1], r[0]});
    want1.push_back(v * v * v);
  });
  each_index({5}, [&](const Dims& r) {
    double acc = 0;
    for (std::int64_t i = 0; i < 3; ++i) acc += std::pow(double(at(tc, {i, r[0]})), 3);
    want2.push_back(acc);
  });
  CHECK(out[0].shape() == runtime::Shape{3, 2});
  CHECK(max_rel(out[0], want0) < 1e-6);
  CHECK(out[1].shape() == runtime::Shape{3, 4});
  CHECK(max_rel(out[1], want1) < 1e-6);
  CHECK(out[2].shape() == runtime::Shape{5});
  CHECK(max_rel(out[2], want2) < 1e-6);
}

TEST_CASE("bilinear and _trilinear refuse mismatched shapes, bad expand and sumdim lists and other dtypes") {
  auto bil = [](Dims s1, Dims s2, Dims sw, Dims sb, DType dt = DType::float32) {
    Graph g;
    ArgList args{g.placeholder("x1", meta(test::dims_of(s1), dt)), g.placeholder("x2", meta(test::dims_of(s2))),
                 g.placeholder("w", meta(test::dims_of(sw)))};
    if (!sb.empty()) args.push_back(g.placeholder("b", meta(test::dims_of(sb))));
    g.output(ArgList{g.call_function(OpRef("torch.bilinear"), std::move(args), {}, "bad")});
    return compile_error(g);
  };
  const std::string bn = "node bad (torch.bilinear): ";
  CHECK(bil({2, 4}, {3, 5}, {6, 4, 5}, {}) == bn + "input1 [2, 4] and input2 [3, 5] must have the same dims but the last");
  CHECK(bil({2, 4}, {2, 5}, {6, 5, 4}, {}) == bn + "weight [6, 5, 4] must be [out, 4, 5] for input1 [2, 4] and input2 [2, 5]");
  CHECK(bil({2, 4}, {2, 5}, {6, 4, 5}, {5}) == bn + "bias [5] (float32) must be float32 [6]");
  CHECK(bil({2, 4}, {2, 5}, {6, 4, 5}, {}, DType::int64) == bn + "takes float32 inputs, got int64");

  auto tri = [](Dims s1, Dims s2, Dims s3, Dims e1, Dims e2, Dims e3, Dims sum) {
    Graph g;
    g.output(ArgList{g.call_function(OpRef("aten._trilinear.default"),
                                     {g.placeholder("a", meta(test::dims_of(s1))), g.placeholder("b", meta(test::dims_of(s2))),
                                      g.placeholder("c", meta(test::dims_of(s3))), ints(e1), ints(e2), ints(e3), ints(sum)},
                                     {}, "bad")});
    return compile_error(g);
  };
  const std::string tn = "node bad (aten._trilinear.default): ";
  CHECK(tri({2, 3}, {2, 3}, {3}, {}, {}, {}, {}) ==
        tn + "input 3 [3] with expand3 [] does not reach the rank 2 of input 1 with its expands");
  CHECK(tri({2, 3}, {2, 3}, {3}, {}, {}, {2}, {}) == tn + "expand3 [2] must hold distinct dims below 2");
  CHECK(tri({2, 3}, {2, 3}, {2, 4}, {}, {}, {}, {}) == tn + "shapes [2, 3] and [2, 4] do not broadcast");
  CHECK(tri({2, 3}, {2, 3}, {2, 3}, {}, {}, {}, {1, 1}) == tn + "sumdim [1, 1] must hold distinct dims below 2");
}

TEST_CASE("unfold, fold and bilinear on two threads match the naive loops") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 8, 20, 18}));
  Node* u = g.call_function(OpRef("torch.nn.functional.unfold"), {x, 3}, {{"padding", 1}, {"dilation", Arg(ints({1, 2}))}});
  Node* f = g.call_function(OpRef("torch.nn.functional.fold"), {u, ints({20, 18}), 3}, {{"padding", 1}, {"dilation", Arg(ints({1, 2}))}});
  Node* a = g.placeholder("a", meta({64, 16}));
  Node* w = g.placeholder("w", meta({8, 16, 16}));
  g.output(ArgList{u, f, g.call_function(OpRef("torch.bilinear"), {a, a, w})});
  runtime::CompileOptions two;
  two.threads = 2;
  auto cg = CompiledGraph::compile(g, {}, two);
  const Tensor tx = random_tensor({2, 8, 20, 18}, 61), ta = random_tensor({64, 16}, 62), tw = random_tensor({8, 16, 16}, 63);
  const auto out = cg.run({tx, ta, tw});
  const Win win{3, 3, 1, 2, 1, 1, 1, 1};
  const auto cols = im2col(values(tx), 2, 8, 20, 18, win);
  CHECK(max_rel(out[0], cols) == 0);
  CHECK(max_rel(out[1], col2im(std::vector<float>(cols.begin(), cols.end()), 2, 8, 20, 18, win)) < 1e-6);
  CHECK(max_rel(out[2], bilinear(ta, ta, tw, nullptr)) < 1e-6);
}
