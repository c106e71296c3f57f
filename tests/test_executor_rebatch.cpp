// rebatch and a batch run as slices (CompileOptions::split_batch): shapes and
// sizes rewritten, the same outputs as the whole batch, refusals that name the node.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/executor/rebatch.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::CompileOptions;
using runtime::Tensor;
using test::Dims;
using test::ints;

namespace {

TensorMeta f32(const Dims& shape) { return test::meta(test::dims_of(shape)); }

Node* call(Graph& g, OpRef op, ArgList args, const Dims& shape, std::string_view name = {}) {
  Node* n = g.call_function(op, std::move(args), {}, name);
  n->meta.val = f32(shape);
  return n;
}

// x [B,3,8,8] -> conv 3x3 (4 channels) -> relu -> view [B, 256] -> addmm -> [B, 5],
// and the relu's mean over the spatial dims, [B, 4].
struct ConvNet {
  Graph g;
  runtime::Weights w;
  Node* view = nullptr;
  explicit ConvNet(std::int64_t b) {
    Node* x = g.placeholder("x", f32({b, 3, 8, 8}));
    Node* cw = g.get_attr("cw", f32({4, 3, 3, 3}));
    Node* cb = g.get_attr("cb", f32({4}));
    Node* lw = g.get_attr("lw", f32({256, 5}));
    Node* lb = g.get_attr("lb", f32({5}));
    Node* conv = call(g, aten::convolution,
                      {x, cw, cb, Arg(ints({1, 1})), Arg(ints({1, 1})), Arg(ints({1, 1})), Arg(false), Arg(ints({0, 0})),
                       Arg(std::int64_t{1})},
                      {b, 4, 8, 8}, "conv");
    Node* relu = call(g, aten::relu, {conv}, {b, 4, 8, 8}, "relu");
    view = call(g, aten::view, {relu, Arg(ints({b, 256}))}, {b, 256}, "flat");
    Node* fc = call(g, aten::addmm, {lb, view, lw}, {b, 5}, "fc");
    Node* mean = call(g, aten::mean_dim, {relu, Arg(ints({2, 3}))}, {b, 4}, "pool");
    g.output(ArgList{fc, mean});
    w.emplace("cw", test::random_tensor({4, 3, 3, 3}, 1));
    w.emplace("cb", test::random_tensor({4}, 2));
    w.emplace("lw", test::random_tensor({256, 5}, 3));
    w.emplace("lb", test::random_tensor({5}, 4));
  }
};

CompileOptions split(std::int64_t slice, int threads) {
  CompileOptions o;
  o.threads = threads;
  o.split_batch = slice;
  return o;
}

// The whole graph and its split form give the same outputs (oneDNN may pick
// another kernel for a smaller batch: float sums in another order).
void check_same(const CompiledGraph& whole, const CompiledGraph& sliced, const std::vector<Tensor>& in) {
  const auto a = whole.run(in), b = sliced.run(in);
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].shape() == b[k].shape());
    CHECK(test::max_rel_diff(b[k], a[k]) < 1e-5);
  }
}

std::string refusal(const Graph& g, const runtime::Weights& w, std::int64_t batch) {
  try {
    runtime::rebatch(g, w, batch);
  } catch (const runtime::RebatchError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("rebatch scales dim 0 of every batch-dependent shape and a view's size, and leaves weights alone") {
  ConvNet net(4);
  const Graph one = runtime::rebatch(net.g, net.w, 1);
  for (const Node* n : one.nodes()) {
    const TensorMeta* t = n->meta.val.tensor();
    if (!t) continue;
    CAPTURE(n->name());
    if (n->op() == OpKind::get_attr) CHECK(t->shape == net.g.find_node(n->name())->meta.val.tensor()->shape);
    else CHECK(std::get<std::int64_t>(t->shape[0]) == 1);
  }
  const Node* flat = one.find_node("flat");
  REQUIRE(flat);
  CHECK(flat->arg(1) == Arg(ints({1, 256})));
  CHECK(net.view->arg(1) == Arg(ints({4, 256})));  // the source graph is untouched
  CHECK(runtime::graph_batch(net.g, net.w) == std::optional<std::int64_t>(4));
}

TEST_CASE("a batch run as slices of 1 and of 2 gives the whole batch's outputs") {
  ConvNet net(4);
  const auto whole = CompiledGraph::compile(net.g, net.w, split(0, 2));
  const std::vector<Tensor> in{test::random_tensor({4, 3, 8, 8}, 7)};
  for (std::int64_t slice : {1, 2}) {
    CAPTURE(slice);
    const auto sliced = CompiledGraph::compile(net.g, net.w, split(slice, 2));
    REQUIRE(sliced.batch_split());
    CHECK(sliced.batch_split()->batch == 4);
    CHECK(sliced.batch_split()->slice == slice);
    CHECK(sliced.batch_split_refusal().empty());
    CHECK(sliced.input_layout(0).shape == runtime::Shape{4, 3, 8, 8});
    CHECK(sliced.output_layout(0).shape == runtime::Shape{4, 5});
    CHECK(sliced.output_layout(1).shape == runtime::Shape{4, 4});
    check_same(whole, sliced, in);
  }
}

TEST_CASE("a split context: more threads than slices, one thread, and two contexts at once") {
  ConvNet net(4);
  const auto whole = CompiledGraph::compile(net.g, net.w);
  const auto sliced = CompiledGraph::compile(net.g, net.w, split(1, 8));
  const Tensor x = test::random_tensor({4, 3, 8, 8}, 9), y = test::random_tensor({4, 3, 8, 8}, 10);
  const auto want_x = whole.run({x}), want_y = whole.run({y});
  auto ctx = sliced.make_context();
  CHECK(ctx.threads() >= 1);
  for (int threads : {8, 1, 3}) {
    CAPTURE(threads);
    ctx.set_threads(threads);
    const auto& out = ctx.run({x});
    CHECK(test::max_rel_diff(out[0], want_x[0]) < 1e-5);
    CHECK(test::max_rel_diff(out[1], want_x[1]) < 1e-5);
  }
  std::vector<double> worst(2, 0.0);
  const auto work = [&](int k) {
    auto c = sliced.make_context(2);
    const Tensor& in = k == 0 ? x : y;
    const auto& want = k == 0 ? want_x : want_y;
    for (int r = 0; r < 20; ++r) worst[k] = std::max(worst[k], test::max_rel_diff(c.run({in})[0], want[0]));
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  CHECK(worst[0] < 1e-5);
  CHECK(worst[1] < 1e-5);
  // The whole batch's shape is what a split graph takes.
  CHECK_THROWS_AS(ctx.run({test::random_tensor({1, 3, 8, 8}, 1)}), runtime::InputError);
}

TEST_CASE("a view that folds the batch into rows ([B, S, K] -> [B*S, K]) slices by blocks of rows") {
  Graph g;
  runtime::Weights w;
  Node* x = g.placeholder("x", f32({4, 3, 6}));
  Node* wt = g.get_attr("w", f32({6, 2}));
  Node* rows = call(g, aten::view, {x, Arg(ints({12, 6}))}, {12, 6}, "rows");
  Node* mm = call(g, aten::mm, {rows, wt}, {12, 2}, "mm");
  Node* back = call(g, aten::view, {mm, Arg(ints({4, 3, 2}))}, {4, 3, 2}, "back");
  g.output(ArgList{back});
  w.emplace("w", test::random_tensor({6, 2}, 5));
  const Graph one = runtime::rebatch(g, w, 1);
  CHECK(one.find_node("rows")->arg(1) == Arg(ints({3, 6})));
  CHECK(one.find_node("back")->arg(1) == Arg(ints({1, 3, 2})));
  const auto sliced = CompiledGraph::compile(g, w, split(1, 2));
  REQUIRE(sliced.batch_split());
  check_same(CompiledGraph::compile(g, w), sliced, {test::random_tensor({4, 3, 6}, 6)});
}

TEST_CASE("ops that mix samples are refused naming the node, and the batch then runs whole") {
  const auto base = [](Graph& g) { return g.placeholder("x", f32({4, 6})); };
  runtime::Weights w;
  SUBCASE("a sum over dim 0") {
    Graph g;
    g.output(ArgList{call(g, aten::sum_dim_IntList, {base(g), Arg(ints({0}))}, {6}, "total")});
    const std::string why = refusal(g, w, 1);
    CHECK(why.find("node total (aten.sum.dim_IntList)") != std::string::npos);
    CHECK(why.find("dim 0") != std::string::npos);
    const auto cg = CompiledGraph::compile(g, w, split(1, 2));
    CHECK_FALSE(cg.batch_split());
    CHECK(cg.batch_split_refusal() == why);
    const Tensor x = test::random_tensor({4, 6}, 3);
    const auto out = cg.run({x});
    for (int j = 0; j < 6; ++j) {
      float s = 0;
      for (int i = 0; i < 4; ++i) s += x.data<float>()[i * 6 + j];
      CHECK(out[0].data<float>()[j] == doctest::Approx(s).epsilon(1e-5));
    }
  }
  SUBCASE("a transpose of dim 0, even where the sizes match") {
    Graph g;
    Node* x = g.placeholder("x", f32({4, 4}));
    g.output(ArgList{call(g, aten::transpose_int, {x, Arg(std::int64_t{0}), Arg(std::int64_t{1})}, {4, 4}, "swap")});
    CHECK(refusal(g, w, 1).find("node swap (aten.transpose.int) moves dim 0") != std::string::npos);
  }
  SUBCASE("a view whose dim 0 is not a multiple of the batch") {
    Graph g;
    g.output(ArgList{call(g, aten::view, {base(g), Arg(ints({3, 8}))}, {3, 8}, "mixed")});
    CHECK(refusal(g, w, 1).find("node mixed (aten.view.default) has dim 0 of 3, not a multiple of the batch 4") != std::string::npos);
  }
  SUBCASE("a cat along dim 0") {
    Graph g;
    Node* x = base(g);
    g.output(ArgList{call(g, aten::cat, {Arg(ArgList{x, x}), Arg(std::int64_t{0})}, {8, 6}, "stacked")});
    CHECK(refusal(g, w, 1).find("node stacked (aten.cat.default)") != std::string::npos);
  }
  SUBCASE("a constant read row by row along the batch") {
    Graph g;
    Node* c = g.get_attr("c", f32({4, 6}));
    w.emplace("c", test::random_tensor({4, 6}, 1));
    g.output(ArgList{call(g, aten::add_Tensor, {base(g), c}, {4, 6}, "plus")});
    CHECK(refusal(g, w, 1).find("node plus (aten.add.Tensor) reads the constant c row by row") != std::string::npos);
  }
  SUBCASE("a pad of dim 0, where a pad of the last dim is taken") {
    Graph g;
    Node* x = base(g);
    Node* last = call(g, OpRef("aten.constant_pad_nd.default"), {x, Arg(ints({1, 1}))}, {4, 8}, "wider");
    g.output(ArgList{last});
    CHECK(std::get<std::int64_t>(runtime::rebatch(g, w, 2).find_node("wider")->meta.val.tensor()->shape[0]) == 2);
    Graph h;
    Node* y = base(h);
    h.output(ArgList{call(h, OpRef("aten.constant_pad_nd.default"), {y, Arg(ints({0, 0, 1, 1}))}, {6, 6}, "taller")});
    CHECK(refusal(h, w, 1).find("node taller (aten.constant_pad_nd.default) pads dim 0") != std::string::npos);
  }
  SUBCASE("an op without a rule") {
    Graph g;
    g.output(ArgList{call(g, OpRef("aten.cumsum.default"), {base(g), Arg(std::int64_t{1})}, {4, 6}, "running")});
    CHECK(refusal(g, w, 1).find("node running (aten.cumsum.default) is not an op kiln knows") != std::string::npos);
  }
  SUBCASE("a batch the slices do not divide, and a batch of one slice") {
    Graph g;
    g.output(ArgList{call(g, aten::relu, {base(g)}, {4, 6}, "r")});
    CHECK(refusal(g, w, 3).find("node x (placeholder) has a batch of 4, which slices of 3 do not divide") != std::string::npos);
    CHECK(refusal(g, w, 0).find("at least 1") != std::string::npos);
    const auto cg = CompiledGraph::compile(g, w, split(4, 2));
    CHECK_FALSE(cg.batch_split());
    CHECK(cg.batch_split_refusal().find("single slice") != std::string::npos);
  }
}

// Attention as Swin's windows compute it: qkv [B, S, 3*H*D] viewed [B, S, 3, H, D] and
// permuted to [3, B, H, S, D] (the batch in dim 1), then q, k and v selected along dim 0.
struct Attention {
  Graph g;
  runtime::Weights w;
  explicit Attention(std::int64_t b, bool unbind = false) {
    const std::int64_t S = 5, H = 2, D = 2;
    Node* x = g.placeholder("x", f32({b, S, 3 * H * D}));
    Node* all = call(g, OpRef("aten.slice.Tensor"), {x, Arg(std::int64_t{0}), Arg(std::int64_t{0}), Arg(std::int64_t{9223372036854775807})},
                     {b, S, 3 * H * D}, "all");  // x[:]
    Node* rolled = call(g, OpRef("aten.roll.default"), {all, Arg(ints({1})), Arg(ints({1}))}, {b, S, 3 * H * D}, "rolled");
    Node* split = call(g, aten::view, {rolled, Arg(ints({b, S, 3, H, D}))}, {b, S, 3, H, D}, "heads");
    Node* qkv = call(g, OpRef("aten.permute.default"), {split, Arg(ints({2, 0, 3, 1, 4}))}, {3, b, H, S, D}, "qkv");
    Node *q, *k, *v;
    if (unbind) {
      Node* parts = g.call_function(OpRef("aten.unbind.int"), {qkv, Arg(std::int64_t{0})}, {}, "parts");
      parts->meta.val = MetaVal(MetaVal::List{f32({b, H, S, D}), f32({b, H, S, D}), f32({b, H, S, D})});
      q = call(g, OpRef("operator.getitem"), {parts, Arg(std::int64_t{0})}, {b, H, S, D}, "q");
      k = call(g, OpRef("operator.getitem"), {parts, Arg(std::int64_t{1})}, {b, H, S, D}, "k");
      v = call(g, OpRef("operator.getitem"), {parts, Arg(std::int64_t{2})}, {b, H, S, D}, "v");
    } else {
      q = call(g, OpRef("aten.select.int"), {qkv, Arg(std::int64_t{0}), Arg(std::int64_t{0})}, {b, H, S, D}, "q");
      k = call(g, OpRef("aten.select.int"), {qkv, Arg(std::int64_t{0}), Arg(std::int64_t{1})}, {b, H, S, D}, "k");
      v = call(g, OpRef("aten.select.int"), {qkv, Arg(std::int64_t{-5}), Arg(std::int64_t{2})}, {b, H, S, D}, "v");
    }
    // [B, H, M, N] copied contiguous and viewed [B*H, M, N].
    const auto rows = [&](Node* t, std::int64_t m, std::int64_t n, std::string_view name) {
      Node* c = call(g, OpRef("aten.clone.default"), {t}, {b, H, m, n}, std::string(name) + "_c");
      return call(g, aten::view, {c, Arg(ints({b * H, m, n}))}, {b * H, m, n}, name);
    };
    Node* kt = call(g, aten::transpose_int, {k, Arg(std::int64_t{-2}), Arg(std::int64_t{-1})}, {b, H, D, S}, "kt");
    Node* scores = call(g, aten::bmm, {rows(q, S, D, "q2"), rows(kt, D, S, "kt2")}, {b * H, S, S}, "scores");
    Node* mask = call(g, OpRef("aten.new_zeros.default"), {x, Arg(ints({S, S}))}, {S, S}, "mask");
    Node* masked = call(g, aten::add_Tensor, {scores, mask}, {b * H, S, S}, "masked");
    Node* out = call(g, aten::bmm, {masked, rows(v, S, D, "v2")}, {b * H, S, D}, "mixed");
    g.output(ArgList{call(g, aten::view, {out, Arg(ints({b, H, S, D}))}, {b, H, S, D}, "out")});
  }
};

TEST_CASE("a permute may move the batch out of dim 0 when its users select or unbind along dim 0 (attention's q, k, v)") {
  for (bool unbind : {false, true}) {
    CAPTURE(unbind);
    Attention att(4, unbind);
    const Graph one = runtime::rebatch(att.g, att.w, 1);
    // The permute's batch is its dim 1; q, k and v have it in dim 0 again.
    CHECK(one.find_node("qkv")->meta.val.tensor()->shape == std::vector<Dim>{3, 1, 2, 5, 2});
    CHECK(one.find_node("q")->meta.val.tensor()->shape == std::vector<Dim>{1, 2, 5, 2});
    CHECK(one.find_node("mask")->meta.val.tensor()->shape == std::vector<Dim>{5, 5});  // a constant of x's dtype
    CHECK(one.find_node("q2")->arg(1) == Arg(ints({2, 5, 2})));
    const auto sliced = CompiledGraph::compile(att.g, att.w, split(1, 2));
    REQUIRE_MESSAGE(sliced.batch_split(), sliced.batch_split_refusal());
    check_same(CompiledGraph::compile(att.g, att.w), sliced, {test::random_tensor({4, 5, 12}, 11)});
  }
}

TEST_CASE("the batch moved out of dim 0 is refused where a user does not bring it back") {
  runtime::Weights w;
  Graph g;
  Node* x = g.placeholder("x", f32({4, 3, 2}));
  Node* p = call(g, OpRef("aten.permute.default"), {x, Arg(ints({1, 0, 2}))}, {3, 4, 2}, "moved");
  Node* first = call(g, OpRef("aten.select.int"), {p, Arg(std::int64_t{0}), Arg(std::int64_t{0})}, {4, 2}, "first");
  SUBCASE("a select along another dim") {
    Node* other = call(g, OpRef("aten.select.int"), {p, Arg(std::int64_t{1}), Arg(std::int64_t{0})}, {3, 2}, "sample0");
    g.output(ArgList{first, other});
  }
  SUBCASE("the permuted tensor itself returned") { g.output(ArgList{first, p}); }
  SUBCASE("an element-wise op on it") { g.output(ArgList{first, call(g, aten::relu, {p}, {3, 4, 2}, "r")}); }
  const std::string why = refusal(g, w, 1);
  CHECK(why.find("node moved (aten.permute.default) moves dim 0 (the batch) elsewhere (taken only into dim 1, with every user "
                 "selecting or unbinding along dim 0)") != std::string::npos);
}

TEST_CASE("the batch moved to dim 2 is refused even where a select along dim 0 follows") {
  runtime::Weights w;
  Graph g;
  Node* x = g.placeholder("x", f32({4, 3, 2}));
  Node* p = call(g, OpRef("aten.permute.default"), {x, Arg(ints({1, 2, 0}))}, {3, 2, 4}, "deep");
  g.output(ArgList{call(g, OpRef("aten.select.int"), {p, Arg(std::int64_t{0}), Arg(std::int64_t{0})}, {2, 4}, "first")});
  CHECK(refusal(g, w, 1).find("node deep (aten.permute.default) moves dim 0 (the batch) elsewhere") != std::string::npos);
}

TEST_CASE("rebatch: a whole slice of dim 0, roll, norm and as_strided_ keep samples apart, and their mixing forms are refused") {
  runtime::Weights w;
  SUBCASE("x[1:] along dim 0 drops a sample") {
    Graph g;
    Node* x = g.placeholder("x", f32({4, 6}));
    g.output(ArgList{call(g, OpRef("aten.slice.Tensor"), {x, Arg(std::int64_t{0}), Arg(std::int64_t{1}), Arg(std::int64_t{4})}, {3, 6}, "tail")});
    CHECK(refusal(g, w, 1).find("node tail (aten.slice.Tensor)") != std::string::npos);
  }
  SUBCASE("roll without dims shifts the flattened tensor, across samples") {
    Graph g;
    Node* x = g.placeholder("x", f32({4, 6}));
    g.output(ArgList{call(g, OpRef("aten.roll.default"), {x, Arg(ints({1}))}, {4, 6}, "shifted")});
    CHECK(refusal(g, w, 1).find("node shifted (aten.roll.default) works over every dim, dim 0 (the batch) too") != std::string::npos);
  }
  SUBCASE("a norm over the last dim, as Swin-V2's cosine attention takes it") {
    Graph g;
    Node* x = g.placeholder("x", f32({4, 6}));
    Node* n = call(g, OpRef("aten.norm.ScalarOpt_dim"), {x, Arg(2.0), Arg(ints({-1})), Arg(true)}, {4, 1}, "len");
    g.output(ArgList{call(g, aten::div_Tensor, {x, n}, {4, 6}, "unit")});
    const auto sliced = CompiledGraph::compile(g, w, split(1, 2));
    REQUIRE_MESSAGE(sliced.batch_split(), sliced.batch_split_refusal());
    check_same(CompiledGraph::compile(g, w), sliced, {test::random_tensor({4, 6}, 12)});
  }
  SUBCASE("as_strided_ after a mean, as ConvNeXt's aten graph has it, and one that reads across rows") {
    Graph g;
    Node* x = g.placeholder("x", f32({4, 3, 2, 2}));
    Node* m = call(g, aten::mean_dim, {x, Arg(ints({-1, -2})), Arg(true)}, {4, 3, 1, 1}, "pool");
    Node* r = call(g, OpRef("aten.as_strided_.default"), {m, Arg(ints({4, 3, 1, 1})), Arg(ints({3, 1, 3, 3}))}, {4, 3, 1, 1}, "restrided");
    g.output(ArgList{call(g, aten::view, {r, Arg(ints({4, 3}))}, {4, 3}, "flat")});
    CHECK(runtime::rebatch(g, w, 2).find_node("restrided")->arg(1) == Arg(ints({2, 3, 1, 1})));
    const auto sliced = CompiledGraph::compile(g, w, split(1, 2));
    REQUIRE_MESSAGE(sliced.batch_split(), sliced.batch_split_refusal());
    check_same(CompiledGraph::compile(g, w), sliced, {test::random_tensor({4, 3, 2, 2}, 13)});
    Graph h;
    Node* y = h.placeholder("y", f32({4, 6}));
    h.output(ArgList{call(h, OpRef("aten.as_strided.default"), {y, Arg(ints({4, 6})), Arg(ints({3, 1}))}, {4, 6}, "overlap")});
    CHECK(refusal(h, w, 1).find("node overlap (aten.as_strided.default) reads across the rows of y") != std::string::npos);
  }
}
