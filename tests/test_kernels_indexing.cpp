// Indexing and the ops of masks: aten.index.Tensor, roll, the new_* factories,
// lift_fresh_copy, fill_ through a view, comparisons and masked_fill. Each
// result is compared with a loop written out here.
#include <doctest/doctest.h>

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

// The element of `t` (any strides) at a multi-index, as T.
template <class T>
T get(const Tensor& t, std::vector<std::int64_t> idx) {
  std::int64_t off = 0;
  for (std::size_t k = 0; k < idx.size(); ++k) off += idx[k] * t.strides()[k];
  return t.data<T>()[off];
}
float getf(const Tensor& t, std::vector<std::int64_t> idx) { return get<float>(t, std::move(idx)); }

std::int64_t wrap(std::int64_t i, std::int64_t n) { return i < 0 ? i + n : i; }

// The message of the CompileError that compiling `g` throws ("compiled" when none).
std::string compile_error(const Graph& g, const runtime::Weights& w = {}) {
  try {
    (void)CompiledGraph::compile(g, w);
  } catch (const runtime::CompileError& e) {
    return e.what();
  }
  return "compiled";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("aten.index.Tensor with one index tensor picks rows, from a constant index and from an input, negatives wrapping") {
  Graph g;
  Node* x = g.placeholder("x", meta({5, 4, 3}));
  Node* idx = g.placeholder("idx", meta({2, 3}, DType::int64));
  Node* cidx = g.get_attr("cidx", meta({4}, DType::int64));
  Node* a = g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{idx}});
  Node* b = g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{cidx}});
  g.output(ArgList{a, b});
  const std::vector<std::int64_t> iv{0, -1, 4, 2, -5, 3}, cv{3, -2, 0, 4};
  auto cg = CompiledGraph::compile(g, {{"cidx", Tensor::from_values<std::int64_t>({4}, cv)}});
  Tensor tx = random_tensor({5, 4, 3}, 1);
  auto out = cg.run({tx, Tensor::from_values<std::int64_t>({2, 3}, iv)});
  REQUIRE(out[0].shape() == runtime::Shape{2, 3, 4, 3});
  REQUIRE(out[1].shape() == runtime::Shape{4, 4, 3});
  int bad = 0;
  for (std::int64_t p = 0; p < 2; ++p)
    for (std::int64_t q = 0; q < 3; ++q)
      for (std::int64_t j = 0; j < 4; ++j)
        for (std::int64_t k = 0; k < 3; ++k) bad += getf(out[0], {p, q, j, k}) != getf(tx, {wrap(iv[p * 3 + q], 5), j, k});
  for (std::int64_t p = 0; p < 4; ++p)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 3; ++k) bad += getf(out[1], {p, j, k}) != getf(tx, {wrap(cv[p], 5), j, k});
  CHECK(bad == 0);
}

TEST_CASE("index_select picks along any dim from a constant or an input index, 0-d keeping the dim, against a loop") {
  // torch.export writes roll as index_select of a folded index along dims 1 and 2.
  Graph g;
  Node* x = g.placeholder("x", meta({3, 5, 4}));
  Node* idx = g.placeholder("idx", meta({6}, DType::int64));
  Node* cidx = g.get_attr("cidx", meta({3}, DType::int64));
  Node* one = g.get_attr("one", meta({}, DType::int64));
  Node* a = g.call_function(OpRef("aten.index_select.default"), {x, 1, idx});
  Node* b = g.call_function(OpRef("aten.index_select.default"), {x, -1, cidx});
  Node* c = g.call_function(OpRef("torch.index_select"), {x, 0, one});
  g.output(ArgList{a, b, c});
  const std::vector<std::int64_t> iv{4, 0, -1, 2, 2, -5}, cv{3, 0, -2}, two{2};
  auto cg = CompiledGraph::compile(g, {{"cidx", Tensor::from_values<std::int64_t>({3}, cv)},
                                       {"one", Tensor::from_values<std::int64_t>(runtime::Shape{}, two)}});
  const Tensor tx = random_tensor({3, 5, 4}, 2);
  auto out = cg.run({tx, Tensor::from_values<std::int64_t>({6}, iv)});
  REQUIRE(out[0].shape() == runtime::Shape{3, 6, 4});
  REQUIRE(out[1].shape() == runtime::Shape{3, 5, 3});
  REQUIRE(out[2].shape() == runtime::Shape{1, 5, 4});
  int bad = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 6; ++j)
      for (std::int64_t k = 0; k < 4; ++k) bad += getf(out[0], {i, j, k}) != getf(tx, {i, wrap(iv[j], 5), k});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 5; ++j)
      for (std::int64_t k = 0; k < 3; ++k) bad += getf(out[1], {i, j, k}) != getf(tx, {i, j, wrap(cv[k], 4)});
  for (std::int64_t j = 0; j < 5; ++j)
    for (std::int64_t k = 0; k < 4; ++k) bad += getf(out[2], {0, j, k}) != getf(tx, {2, j, k});
  CHECK(bad == 0);
  Graph h;
  Node* y = h.placeholder("y", meta({3, 5}));
  Node* i2 = h.placeholder("i2", meta({2, 2}, DType::int64));
  h.output(ArgList{h.call_function(OpRef("aten.index_select.default"), {y, 1, i2}, {}, "pick")});
  CHECK(contains(compile_error(h), "node pick (aten.index_select.default): index must be 1-d or 0-d, got [2, 2]"));
}

TEST_CASE("Python indexing with integer tensors, as torch.fx records table[index] and x[:, idx], is a gather") {
  Graph g;
  Node* table = g.get_attr("table", meta({9, 2}));
  Node* index = g.get_attr("index", meta({16}, DType::int64));
  Node* x = g.placeholder("x", meta({3, 5, 4}));
  Node* cols = g.placeholder("cols", meta({2}, DType::int64));
  Node* rows = g.call_function(OpRef("operator.getitem"), {table, index});
  Node* picked = g.call_function(OpRef("operator.getitem"), {x, ArgList{Slice{{Arg(), Arg(), Arg()}}, cols}});
  g.output(ArgList{rows, picked});
  Tensor tt = random_tensor({9, 2}, 21), ti = Tensor::empty({16}, DType::int64);
  for (std::int64_t i = 0; i < 16; ++i) ti.data<std::int64_t>()[i] = (i * 5) % 9 - (i % 3 == 0 ? 9 : 0);  // some negative
  auto cg = CompiledGraph::compile(g, {{"table", tt}, {"index", ti}});
  Tensor tx = random_tensor({3, 5, 4}, 22), tc = Tensor::from_values<std::int64_t>({2}, std::vector<std::int64_t>{4, -1});
  auto out = cg.run({tx, tc});
  REQUIRE(out[0].shape() == runtime::Shape{16, 2});
  REQUIRE(out[1].shape() == runtime::Shape{3, 2, 4});
  int bad = 0;
  for (std::int64_t i = 0; i < 16; ++i)
    for (std::int64_t j = 0; j < 2; ++j) bad += getf(out[0], {i, j}) != getf(tt, {wrap(ti.data<std::int64_t>()[i], 9), j});
  for (std::int64_t a = 0; a < 3; ++a)
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t c = 0; c < 4; ++c) bad += getf(out[1], {a, b, c}) != getf(tx, {a, wrap(tc.data<std::int64_t>()[b], 5), c});
  CHECK(bad == 0);
  Graph h;
  Node* y = h.placeholder("y", meta({3, 5}));
  Node* k = h.placeholder("k", meta({2}, DType::int64));
  h.output(ArgList{h.call_function(OpRef("operator.getitem"), {y, ArgList{Arg(1), k}}, {}, "mixed")});
  CHECK(contains(compile_error(h), "node mixed (operator.getitem): indexing with tensors is supported with full slices"));
}

TEST_CASE("aten.index.Tensor with several index tensors broadcasts them, None keeps a dim, apart they lead the result") {
  Graph g;
  Node* x = g.placeholder("x", meta({5, 4, 3}));
  Node* i1 = g.placeholder("i1", meta({2, 1}, DType::int64));
  Node* i2 = g.placeholder("i2", meta({3}, DType::int64));
  Node* i0 = g.placeholder("i0", meta({3}, DType::int64));
  // x[:, i1, i2]: adjacent, B = [2, 3] in place of dims 1 and 2.
  Node* adj = g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{Arg(), i1, i2}});
  // x[i0, :, i2]: apart, B = [3] in front.
  Node* apart = g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{i0, Arg(), i2}});
  // A strided self: x transposed to [3, 4, 5], indexed on its dim 1 by i1.
  Node* t = g.call_function(aten::transpose_int, {x, 0, 2});
  Node* tr = g.call_function(OpRef("aten.index.Tensor"), {t, ArgList{Arg(), i1}});
  g.output(ArgList{adj, apart, tr});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({5, 4, 3}, 2);
  const std::vector<std::int64_t> v1{3, -4}, v2{-1, 0, 2}, v0{4, -5, 1};
  auto out = cg.run({tx, Tensor::from_values<std::int64_t>({2, 1}, v1), Tensor::from_values<std::int64_t>({3}, v2),
                     Tensor::from_values<std::int64_t>({3}, v0)});
  REQUIRE(out[0].shape() == runtime::Shape{5, 2, 3});
  REQUIRE(out[1].shape() == runtime::Shape{3, 4});
  REQUIRE(out[2].shape() == runtime::Shape{3, 2, 1, 5});
  int bad = 0;
  for (std::int64_t p = 0; p < 5; ++p)
    for (std::int64_t a = 0; a < 2; ++a)
      for (std::int64_t b = 0; b < 3; ++b) bad += getf(out[0], {p, a, b}) != getf(tx, {p, wrap(v1[a], 4), wrap(v2[b], 3)});
  for (std::int64_t a = 0; a < 3; ++a)
    for (std::int64_t j = 0; j < 4; ++j) bad += getf(out[1], {a, j}) != getf(tx, {wrap(v0[a], 5), j, wrap(v2[a], 3)});
  for (std::int64_t c = 0; c < 3; ++c)
    for (std::int64_t a = 0; a < 2; ++a)
      for (std::int64_t k = 0; k < 5; ++k) bad += getf(out[2], {c, a, 0, k}) != getf(tx, {k, wrap(v1[a], 4), c});
  CHECK(bad == 0);
}

TEST_CASE("aten.index.Tensor refuses an index out of range, naming the node, when lowering and when running") {
  {
    Graph g;
    Node* x = g.placeholder("x", meta({5, 2}));
    Node* c = g.get_attr("c", meta({2}, DType::int64));
    g.output(ArgList{g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{c}}, {}, "pick")});
    const std::vector<std::int64_t> cv{1, 5};
    const std::string e = compile_error(g, {{"c", Tensor::from_values<std::int64_t>({2}, cv)}});
    CHECK(contains(e, "node pick (aten.index.Tensor): index 5 is out of bounds for dim 0 with size 5"));
  }
  Graph g;
  Node* x = g.placeholder("x", meta({5, 2}));
  Node* i = g.placeholder("i", meta({2}, DType::int64));
  g.output(ArgList{g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{Arg(), i}}, {}, "pick")});
  auto cg = CompiledGraph::compile(g, {});
  const std::vector<std::int64_t> ok{1, -2}, bad{0, -3};
  CHECK_NOTHROW(cg.run({random_tensor({5, 2}, 3), Tensor::from_values<std::int64_t>({2}, ok)}));
  try {
    (void)cg.run({random_tensor({5, 2}, 3), Tensor::from_values<std::int64_t>({2}, bad)});
    FAIL("no error for index -3 of a dim of 2");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "node pick (aten.index.Tensor): index -3 is out of bounds for dim 1 with size 2"));
  }
}

TEST_CASE("aten.index.Tensor refuses masks, float indices, too many indices and indices that do not broadcast") {
  auto refused = [](DType dt, std::vector<Dim> s1, std::vector<Dim> s2, std::size_t count) {
    Graph g;
    Node* x = g.placeholder("x", meta({4, 3}));
    ArgList l;
    for (std::size_t k = 0; k < count; ++k) l.push_back(g.placeholder("i" + std::to_string(k), meta(k == 0 ? s1 : s2, dt)));
    g.output(ArgList{g.call_function(OpRef("aten.index.Tensor"), {x, l}, {}, "bad")});
    return compile_error(g);
  };
  CHECK(contains(refused(DType::bool_, {4}, {}, 1), "node bad (aten.index.Tensor): indices[0] is a bool mask"));
  CHECK(contains(refused(DType::float32, {4}, {}, 1), "indices[0] is float32; indices must be int64 or int32"));
  CHECK(contains(refused(DType::int64, {2}, {2}, 3), "3 indices for a tensor of 2 dims"));
  CHECK(contains(refused(DType::int64, {2}, {3}, 2), "index tensors of shapes [2] and [3] do not broadcast together"));
  Graph g;
  Node* x = g.placeholder("x", meta({4, 3}));
  g.output(ArgList{g.call_function(OpRef("aten.index.Tensor"), {x, ArgList{Arg(), Arg()}}, {}, "none")});
  CHECK(contains(compile_error(g), "indices holds no tensor"));
}

TEST_CASE("roll on one and several dims, negative shifts, shifts past the size, and flattened") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 4, 5}));
  Node* r0 = g.call_function(OpRef("aten.roll.default"), {x, ArgList{1}, ArgList{0}});
  Node* r12 = g.call_function(OpRef("aten.roll.default"), {x, ArgList{-2, 7}, ArgList{1, -1}});
  Node* flat = g.call_function(OpRef("aten.roll.default"), {x, ArgList{13}});
  Node* t = g.call_function(aten::transpose_int, {x, 0, 2});  // [5, 4, 3]: no flat view, rolled through a copy
  Node* tflat = g.call_function(OpRef("torch.roll"), {t, ArgList{-4}});
  Node* twice = g.call_function(OpRef("aten.roll.default"), {x, ArgList{1, 1}, ArgList{2, 2}});  // the same dim twice adds up
  g.output(ArgList{r0, r12, flat, tflat, twice});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({3, 4, 5}, 4);
  auto out = cg.run({tx});
  auto src = [](std::int64_t i, std::int64_t s, std::int64_t n) { return ((i - s) % n + n) % n; };
  int bad = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 5; ++k) {
        bad += getf(out[0], {i, j, k}) != getf(tx, {src(i, 1, 3), j, k});
        bad += getf(out[1], {i, j, k}) != getf(tx, {i, src(j, -2, 4), src(k, 7, 5)});
        const std::int64_t f = (i * 4 + j) * 5 + k, g0 = src(f, 13, 60);
        bad += getf(out[2], {i, j, k}) != tx.data<float>()[g0];
        bad += getf(out[4], {i, j, k}) != getf(tx, {i, j, src(k, 2, 5)});
      }
  // tflat: the transposed tensor in row-major order, rolled by -4, shape [5, 4, 3].
  for (std::int64_t f = 0; f < 60; ++f) {
    const std::int64_t s = src(f, -4, 60);
    const std::int64_t a = s / 12, b = (s / 3) % 4, c = s % 3;  // element (a, b, c) of t is x[c, b, a]
    bad += getf(out[3], {f / 12, (f / 3) % 4, f % 3}) != getf(tx, {c, b, a});
  }
  CHECK(bad == 0);
}

TEST_CASE("roll refuses shifts and dims of different lengths, several shifts without dims, and a dim out of range") {
  auto refused = [](ArgList shifts, Arg dims) {
    Graph g;
    Node* x = g.placeholder("x", meta({3, 4}));
    ArgList args{x, std::move(shifts)};
    if (!dims.is_none()) args.push_back(std::move(dims));
    g.output(ArgList{g.call_function(OpRef("aten.roll.default"), std::move(args), {}, "r")});
    return compile_error(g);
  };
  CHECK(contains(refused(ArgList{1, 2}, ArgList{0}), "node r (aten.roll.default): shifts [1, 2] and dims [0] must have the same length"));
  CHECK(contains(refused(ArgList{1, 2}, Arg()), "roll with no dims takes one shift, got 2"));
  CHECK(contains(refused(ArgList{1}, ArgList{2}), "node r (aten.roll.default): "));
  CHECK(refused(ArgList{1}, ArgList{2}) != "compiled");
}

TEST_CASE("new_zeros, new_ones, new_full and new_empty take self's dtype unless dtype is given, and their size") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 2}));
  Node* xi = g.placeholder("xi", meta({3}, DType::int64));
  Node* z = g.call_function(OpRef("aten.new_zeros.default"), {x, ArgList{2, 3}});
  Node* zi = g.call_function(OpRef("aten.new_zeros.default"), {x, ArgList{4}}, {{"dtype", Arg(DType::int64)}});
  Node* o = g.call_function(OpRef("aten.new_ones.default"), {xi, ArgList{1, 2}});
  Node* f = g.call_function(OpRef("aten.new_full.default"), {x, ArgList{3}, 2.5});
  Node* e = g.call_function(OpRef("aten.new_empty.default"), {x, ArgList{0, 5}});
  Node* m = g.call_method("new_zeros", {x, 3, 1});
  g.output(ArgList{z, zi, o, f, e, m});
  auto cg = CompiledGraph::compile(g, {});
  auto out = cg.run({random_tensor({2, 2}, 5), random_tensor({3}, 6, DType::int64)});
  CHECK(out[0].dtype() == DType::float32);
  CHECK(out[0].shape() == runtime::Shape{2, 3});
  CHECK(out[1].dtype() == DType::int64);
  CHECK(out[1].shape() == runtime::Shape{4});
  CHECK(out[2].dtype() == DType::int64);
  CHECK(out[3].shape() == runtime::Shape{3});
  CHECK(out[4].shape() == runtime::Shape{0, 5});
  CHECK(out[5].shape() == runtime::Shape{3, 1});
  int bad = 0;
  for (std::int64_t i = 0; i < 6; ++i) bad += out[0].data<float>()[i] != 0.0f;
  for (std::int64_t i = 0; i < 4; ++i) bad += out[1].data<std::int64_t>()[i] != 0;
  for (std::int64_t i = 0; i < 2; ++i) bad += out[2].data<std::int64_t>()[i] != 1;
  for (std::int64_t i = 0; i < 3; ++i) bad += out[3].data<float>()[i] != 2.5f;
  for (std::int64_t i = 0; i < 3; ++i) bad += out[5].data<float>()[i] != 0.0f;
  CHECK(bad == 0);

  Graph h;
  Node* y = h.placeholder("y", meta({2}));
  h.output(ArgList{h.call_function(OpRef("aten.new_full.default"), {y, ArgList{3}}, {}, "nf")});
  CHECK(contains(compile_error(h), "node nf (aten.new_full.default): argument 'fill_value' is missing"));
}

TEST_CASE("fill_ of slices of a folded new_zeros builds a mask once, from lift_fresh_copy values and numbers") {
  // The shifted-window mask's pattern: z = new_zeros; z[a:b, c:] = k (fill_ of slices); read z after.
  Graph g;
  Node* x = g.placeholder("x", meta({6, 5}));
  Node* z = g.call_function(OpRef("aten.new_zeros.default"), {x, ArgList{6, 5}});
  Node* rows = g.call_function(aten::slice_Tensor, {z, 0, 0, 3});
  Node* block = g.call_function(aten::slice_Tensor, {rows, 1, 2, 9223372036854775807LL});
  Node* k = g.call_function(OpRef("aten.lift_fresh_copy.default"), {g.get_attr("k", meta({}))});
  g.call_function(OpRef("aten.fill_.Tensor"), {block, k});
  g.call_function(OpRef("aten.fill_.Scalar"), {g.call_function(aten::slice_Tensor, {z, 0, -2, 9223372036854775807LL}), 7});
  Node* sum = g.call_function(aten::add_Tensor, {g.call_function(aten::view, {z, ArgList{30}}), g.call_function(aten::view, {x, ArgList{30}})});
  g.output(ArgList{sum, k});
  Tensor tk = Tensor::from_values<float>({}, std::vector<float>{3.5f});
  auto cg = CompiledGraph::compile(g, {{"k", tk}});
  Tensor tx = random_tensor({6, 5}, 7);
  for (int run = 0; run < 2; ++run) {  // the same on every run
    auto out = cg.run({tx});
    int bad = 0;
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = 0; j < 5; ++j) {
        const float want = i >= 4 ? 7.0f : (i < 3 && j >= 2) ? 3.5f : 0.0f;
        bad += out[0].data<float>()[i * 5 + j] != want + tx.data<float>()[i * 5 + j];
      }
    CHECK(bad == 0);
    CHECK(out[1].data<float>()[0] == 3.5f);
    CHECK(tk.data<float>()[0] == 3.5f);  // the weight itself is untouched
  }
}

TEST_CASE("fill_ of a slice of a run's buffer is a step after earlier readers, with a value known only when running") {
  Graph g;
  Node* x = g.placeholder("x", meta({4, 3}));
  Node* v = g.placeholder("v", meta({}));
  Node* c = g.call_function(aten::clone, {x});
  Node* before = g.call_function(aten::add_Tensor, {c, 1.0});  // reads c before the fill
  g.call_function(OpRef("aten.fill_.Tensor"), {g.call_function(aten::slice_Tensor, {c, 1, 1, 2}), v});
  g.output(ArgList{before, c});
  auto cg = CompiledGraph::compile(g, {});
  Tensor tx = random_tensor({4, 3}, 8);
  auto out = cg.run({tx, Tensor::from_values<float>({}, std::vector<float>{-9.0f})});
  int bad = 0;
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      bad += getf(out[0], {i, j}) != tx.data<float>()[i * 3 + j] + 1.0f;
      bad += getf(out[1], {i, j}) != (j == 1 ? -9.0f : tx.data<float>()[i * 3 + j]);
    }
  CHECK(bad == 0);
}

TEST_CASE("zero_ of the middle third of a cloned weight, as Swin V2 clears its key bias, and of a run's buffer") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 9}));
  Node* b = g.call_function(aten::clone, {g.get_attr("qkv_bias", meta({9}))});
  g.call_function(OpRef("aten.zero_.default"), {g.call_function(aten::slice_Tensor, {b, 0, 3, 6})});
  Node* c = g.call_function(aten::clone, {x});
  g.call_function(OpRef("aten.zero_.default"), {g.call_function(aten::slice_Tensor, {c, 1, 0, 2})}, {}, "z");
  g.output(ArgList{g.call_function(aten::add_Tensor, {x, b}), c});
  Tensor tb = random_tensor({9}, 11);
  auto cg = CompiledGraph::compile(g, {{"qkv_bias", tb}});
  Tensor tx = random_tensor({2, 9}, 12);
  auto out = cg.run({tx});
  int bad = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 9; ++j) {
      const float bias = j >= 3 && j < 6 ? 0.0f : tb.data<float>()[j];
      bad += getf(out[0], {i, j}) != tx.data<float>()[i * 9 + j] + bias;
      bad += getf(out[1], {i, j}) != (j < 2 ? 0.0f : tx.data<float>()[i * 9 + j]);
    }
  CHECK(bad == 0);
  CHECK(tb.data<float>()[4] != 0.0f);  // the weight itself is untouched
  Graph h;
  Node* w = h.get_attr("w", meta({4}));
  h.output(ArgList{h.call_function(OpRef("aten.zero_.default"), {w}, {}, "z")});
  CHECK(contains(compile_error(h, {{"w", random_tensor({4}, 13)}}), "node z (aten.zero_.default): fill_ writes in place into the weight w"));
}

TEST_CASE("fill_ refuses writing into an input, a weight, a folded constant from a value of the run, and after a run-time read") {
  {
    Graph g;
    Node* x = g.placeholder("x", meta({4}));
    g.call_function(OpRef("aten.fill_.Scalar"), {g.call_function(aten::slice_Tensor, {x, 0, 0, 2}), 1}, {}, "f");
    g.output(ArgList{x});
    CHECK(contains(compile_error(g), "node f (aten.fill_.Scalar): fill_ writes in place into the graph's input x"));
  }
  {
    Graph g;
    Node* w = g.get_attr("w", meta({4}));
    g.output(ArgList{g.call_function(OpRef("aten.fill_.Scalar"), {w, 1}, {}, "f")});
    CHECK(contains(compile_error(g, {{"w", random_tensor({4}, 9)}}), "fill_ writes in place into the weight w"));
  }
  {
    Graph g;
    Node* x = g.placeholder("x", meta({4}));
    Node* v = g.placeholder("v", meta({}));
    Node* z = g.call_function(OpRef("aten.new_zeros.default"), {x, ArgList{4}});
    g.call_function(OpRef("aten.fill_.Tensor"), {z, v}, {}, "f");
    g.output(ArgList{z});
    CHECK(contains(compile_error(g), "fill_ writes a value known only when the graph runs into new_zeros"));
  }
  {
    Graph g;
    Node* c = g.call_function(aten::clone, {g.placeholder("h", meta({4}, DType::float16))});
    g.output(ArgList{g.call_function(OpRef("aten.fill_.Scalar"), {c, 1}, {}, "f")});
    CHECK(contains(compile_error(g), "node f (aten.fill_.Scalar): fill_ of a float16 tensor is not supported"));
  }
  Graph g;
  Node* x = g.placeholder("x", meta({4}));
  Node* z = g.call_function(OpRef("aten.new_zeros.default"), {x, ArgList{4}});
  Node* early = g.call_function(aten::add_Tensor, {z, x}, {}, "early");
  g.call_function(OpRef("aten.fill_.Scalar"), {z, 1}, {}, "f");
  g.output(ArgList{early, z});
  CHECK(contains(compile_error(g), "fill_ writes in place into new_zeros, which early read earlier while the graph runs"));
}

TEST_CASE("eq, ne, lt, le, gt and ge against numbers and broadcast tensors give bool tensors") {
  Graph g;
  Node* a = g.placeholder("a", meta({3, 4}));
  Node* b = g.placeholder("b", meta({4}));
  Node* i = g.placeholder("i", meta({5}, DType::int64));
  Node* eq = g.call_function(OpRef("aten.eq.Scalar"), {a, 0});
  Node* ne = g.call_function(OpRef("aten.ne.Tensor"), {a, b});
  Node* lt = g.call_function(OpRef("aten.lt.Tensor"), {a, b});
  Node* ge = g.call_function(OpRef("aten.ge.Scalar"), {i, 2});
  Node* le = g.call_function(OpRef("aten.le.Scalar"), {i, 1.5});
  Node* gt = g.call_function(OpRef("aten.gt.Tensor"), {b, a});
  g.output(ArgList{eq, ne, lt, ge, le, gt});
  auto cg = CompiledGraph::compile(g, {});
  Tensor ta = random_tensor({3, 4}, 10), tb = random_tensor({4}, 11), ti = random_tensor({5}, 12, DType::int64);
  ta.data<float>()[5] = 0.0f;
  ta.data<float>()[6] = tb.data<float>()[2];  // equal elements, so eq and ne see both answers
  auto out = cg.run({ta, tb, ti});
  for (const auto& o : out) CHECK(o.dtype() == DType::bool_);
  int bad = 0;
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 4; ++c) {
      const float x = ta.data<float>()[r * 4 + c], y = tb.data<float>()[c];
      bad += get<bool>(out[0], {r, c}) != (x == 0.0f);
      bad += get<bool>(out[1], {r, c}) != (x != y);
      bad += get<bool>(out[2], {r, c}) != (x < y);
      bad += get<bool>(out[5], {r, c}) != (y > x);
    }
  for (std::int64_t k = 0; k < 5; ++k) {
    bad += get<bool>(out[3], {k}) != (ti.data<std::int64_t>()[k] >= 2);
    bad += get<bool>(out[4], {k}) != (double(ti.data<std::int64_t>()[k]) <= 1.5);
  }
  CHECK(bad == 0);
  Graph h;
  h.output(ArgList{h.call_function(OpRef("aten.eq.Tensor"), {h.placeholder("p", meta({3})), h.placeholder("q", meta({2}))}, {}, "c")});
  CHECK(contains(compile_error(h), "node c (aten.eq.Tensor): "));
}

TEST_CASE("masked_fill puts a value where a broadcast mask is true, cast to self's dtype") {
  Graph g;
  Node* x = g.placeholder("x", meta({3, 4}));
  Node* m = g.placeholder("m", meta({4}, DType::bool_));
  Node* xi = g.placeholder("xi", meta({4}, DType::int64));
  Node* v = g.get_attr("v", meta({}));
  Node* f = g.call_function(OpRef("aten.masked_fill.Scalar"), {x, m, -100.0});
  Node* ft = g.call_function(OpRef("aten.masked_fill.Tensor"), {x, m, v});
  Node* fi = g.call_function(OpRef("aten.masked_fill.Scalar"), {xi, m, 2.7});
  g.output(ArgList{f, ft, fi});
  auto cg = CompiledGraph::compile(g, {{"v", Tensor::from_values<float>({}, std::vector<float>{0.25f})}});
  Tensor tx = random_tensor({3, 4}, 13), ti = random_tensor({4}, 14, DType::int64);
  Tensor tm = Tensor::empty({4}, DType::bool_);
  const bool mv[4] = {true, false, false, true};
  for (int k = 0; k < 4; ++k) tm.data<bool>()[k] = mv[k];
  auto out = cg.run({tx, tm, ti});
  REQUIRE(out[2].dtype() == DType::int64);
  int bad = 0;
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 4; ++c) {
      bad += getf(out[0], {r, c}) != (mv[c] ? -100.0f : tx.data<float>()[r * 4 + c]);
      bad += getf(out[1], {r, c}) != (mv[c] ? 0.25f : tx.data<float>()[r * 4 + c]);
    }
  for (std::int64_t c = 0; c < 4; ++c) bad += get<std::int64_t>(out[2], {c}) != (mv[c] ? 2 : ti.data<std::int64_t>()[c]);
  CHECK(bad == 0);
  Graph h;
  Node* y = h.placeholder("y", meta({3}));
  h.output(ArgList{h.call_function(OpRef("aten.masked_fill.Tensor"),
                                   {y, h.placeholder("mm", meta({3}, DType::bool_)), h.placeholder("vv", meta({3}))}, {}, "mf")});
  CHECK(contains(compile_error(h), "node mf (aten.masked_fill.Tensor): masked_fill takes a 0-d value tensor"));
}
