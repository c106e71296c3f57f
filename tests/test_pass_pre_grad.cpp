// The pre-grad rewrites outside the split/cat family (kiln/passes/pre_grad/):
// per pass a positive case, the near-misses it must leave, its counters,
// lint, and the executor's numeric check of the rewritten graph against the
// original one.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/executor/numeric_check.hpp"

using namespace kiln;

namespace {

TensorMeta f32(std::vector<Dim> shape) { return TensorMeta{std::move(shape), DType::float32, std::nullopt}; }
TensorMeta i64(std::vector<Dim> shape) { return TensorMeta{std::move(shape), DType::int64, std::nullopt}; }
const OpRef getitem("operator.getitem");

// Runs one registered pass and returns its counters.
Counters run_pass(Graph& g, const std::string& pass) {
  static const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.run(g, {pass});
  return pm.counters();
}
Node* with_meta(Node* n, MetaVal v) {
  n->meta.val = std::move(v);
  return n;
}
// Whether `n` is still one of the graph's nodes (PassManager frees erased nodes
// after each pass, so a test compares pointers instead of reading them).
bool in_graph(const Graph& g, const Node* n) {
  for (const Node* m : g.nodes())
    if (m == n) return true;
  return false;
}
std::size_t count(const Graph& g, OpKind op, OpRef target) { return g.find_nodes(op, target).size(); }
std::size_t count_methods(const Graph& g, std::string_view name) {
  std::size_t k = 0;
  for (const Node* n : g.nodes()) k += n->op() == OpKind::call_method && n->target_name() == name;
  return k;
}
// The rewritten graph computes what the original did, on random inputs.
void check_numerics(const Graph& original, const Graph& rewritten) {
  runtime::NumericCheck check(original, {});
  const runtime::NumericReport r = check.compare(rewritten);
  INFO(r.summary());
  CHECK(r.ok);
}

}  // namespace

// ---------------------------------------------------------------- remove_identity

TEST_CASE("remove_identity: nn.Identity calls become their input, other modules stay") {
  Graph g;
  g.modules().set("id", "torch.nn.modules.linear.Identity");
  g.modules().set("block.skip", "torch.nn.modules.linear.Identity");
  g.modules().set("drop", "torch.nn.modules.dropout.Dropout");
  Node* x = g.placeholder("x", f32({3, 4}));
  Node* id = with_meta(g.call_module("id", {Arg(x)}), f32({3, 4}));
  Node* r = with_meta(g.call_function(torch::relu, {Arg(id)}), f32({3, 4}));
  Node* skip = with_meta(g.call_module("block.skip", {Arg(r)}), f32({3, 4}));  // an output itself
  g.output(ArgList{Arg(skip), Arg(r)});
  const Graph original = g.clone();

  const Counters c = run_pass(g, "remove_identity");
  CHECK(c.get("remove_identity") == 2);
  CHECK(g.find_nodes(OpKind::call_module).empty());
  CHECK(r->args()[0].node() == x);
  CHECK(g.output_node()->args()[0].list()->at(0).node() == r);
  lint(g);
  check_numerics(original, g);

  // A module of another class, and an Identity called with two arguments, are left.
  Graph h;
  h.modules().set("drop", "torch.nn.modules.dropout.Dropout");
  h.modules().set("id", "torch.nn.modules.linear.Identity");
  Node* y = h.placeholder("y", f32({3}));
  Node* d = h.call_module("drop", {Arg(y)});
  Node* odd = h.call_module("id", {Arg(d), Arg(y)});
  h.output(ArgList{Arg(odd)});
  CHECK(run_pass(h, "remove_identity").get("remove_identity") == 0);
  CHECK(h.find_nodes(OpKind::call_module).size() == 2);
  lint(h);
}

TEST_CASE("the executor runs an nn.Identity call_module as its input (module:...Identity kernel)") {
  Graph g;
  g.modules().set("id", "torch.nn.modules.linear.Identity");
  Node* x = g.placeholder("x", f32({2, 3}));
  g.output(ArgList{Arg(with_meta(g.call_module("id", {Arg(x)}), f32({2, 3})))});
  const auto cg = runtime::CompiledGraph::compile(g, {});
  std::vector<float> values(6);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 1.0f;
  const auto out = cg.run({runtime::Tensor::from_values<float>({2, 3}, values)});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].shape() == runtime::Shape{2, 3});
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t c = 0; c < 3; ++c)
      CHECK(out[0].data<float>()[r * out[0].strides()[0] + c * out[0].strides()[1]] == values[static_cast<std::size_t>(r * 3 + c)]);
}

// ---------------------------------------------------------------- remove_noop

TEST_CASE("remove_noop: same-shape views, same-dtype casts, clones, x+0, 1*x, x/1, x**1, cat of one") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 6}));
  Node* v = with_meta(g.call_method("view", {Arg(x), Arg(4), Arg(6)}), f32({4, 6}));
  Node* r = with_meta(g.call_function(torch::reshape, {Arg(v), Arg(ArgList{Arg(4), Arg(-1)})}), f32({4, 6}));
  Node* a = with_meta(g.call_function(torch::add, {Arg(r), Arg(0)}), f32({4, 6}));
  Node* m = with_meta(g.call_function(pyop::mul, {Arg(1.0), Arg(a)}), f32({4, 6}));
  Node* dv = with_meta(g.call_function(torch::div, {Arg(m), Arg(1)}), f32({4, 6}));
  Node* to = with_meta(g.call_method("to", {Arg(dv), Arg(DType::float32)}), f32({4, 6}));
  Node* cl = with_meta(g.call_function(OpRef("torch.clone"), {Arg(to)}), f32({4, 6}));
  Node* ct = with_meta(g.call_function(torch::cat, {Arg(ArgList{Arg(cl)})}, ArgDict{{"dim", Arg(0)}}), f32({4, 6}));
  Node* pw = with_meta(g.call_function(OpRef("torch.pow"), {Arg(ct), Arg(1)}), f32({4, 6}));
  Node* t = with_meta(g.call_function(torch::tanh, {Arg(pw)}), f32({4, 6}));
  // Near-misses: each changes the value or the shape.
  Node* other_shape = with_meta(g.call_method("view", {Arg(t), Arg(6), Arg(4)}), f32({6, 4}));
  Node* plus_one = with_meta(g.call_function(torch::add, {Arg(t), Arg(1)}), f32({4, 6}));
  Node* times_two = with_meta(g.call_function(torch::mul, {Arg(t), Arg(2.0)}), f32({4, 6}));
  Node* zero_minus = with_meta(g.call_function(pyop::sub, {Arg(0), Arg(t)}), f32({4, 6}));
  Node* floor_div = with_meta(g.call_function(torch::div, {Arg(t), Arg(1)}, ArgDict{{"rounding_mode", Arg(std::string("floor"))}}),
                              f32({4, 6}));
  Node* y = g.placeholder("y", f32({1, 6}));
  Node* broadcast_zero = with_meta(g.call_function(torch::add, {Arg(y), Arg(0)}), f32({1, 6}));
  Node* grown = with_meta(g.call_function(torch::add, {Arg(broadcast_zero), Arg(t)}), f32({4, 6}));
  g.output(ArgList{Arg(other_shape), Arg(plus_one), Arg(times_two), Arg(zero_minus), Arg(floor_div), Arg(grown)});
  const Graph original = g.clone();

  const Counters c = run_pass(g, "remove_noop");
  CHECK(c.get("remove_noop") == 10);  // view .. pow, and y + 0
  CHECK(t->args()[0].node() == x);
  CHECK(grown->args()[0].node() == y);
  CHECK(other_shape->args()[0].node() == t);
  CHECK(in_graph(g, plus_one));
  CHECK(in_graph(g, times_two));
  CHECK(in_graph(g, zero_minus));
  CHECK(in_graph(g, floor_div));
  CHECK(g.size() == 10);  // x, y, tanh, the five near-misses, grown, output
  lint(g);
  check_numerics(original, g);
}

TEST_CASE("remove_noop: what must stay (dtype changes, device moves, mutation, output aliasing, contiguous)") {
  // int64 + 0.5 is a float tensor; .to("cpu") is decided by device, not meta.
  Graph g;
  Node* i = g.placeholder("i", i64({5}));
  Node* promoted = with_meta(g.call_function(torch::add, {Arg(i), Arg(0.0)}), TensorMeta{{5}, DType::float32, std::nullopt});
  Node* moved = with_meta(g.call_method("to", {Arg(promoted), Arg(std::string("cpu"))}), TensorMeta{{5}, DType::float32, std::nullopt});
  Node* floored = with_meta(g.call_function(OpRef("torch.floor"), {Arg(moved)}), TensorMeta{{5}, DType::float32, std::nullopt});
  Node* int_floor = with_meta(g.call_function(OpRef("torch.floor"), {Arg(i)}), i64({5}));
  Node* int_use = with_meta(g.call_function(torch::add, {Arg(int_floor), Arg(int_floor)}), i64({5}));
  g.output(ArgList{Arg(floored), Arg(int_use)});
  CHECK(run_pass(g, "remove_noop").get("remove_noop") == 1);  // floor of an int64 tensor only
  CHECK(int_use->args()[0].node() == i);
  CHECK(in_graph(g, promoted));
  CHECK(in_graph(g, moved));
  CHECK(in_graph(g, floored));
  lint(g);

  // A clone that an in-place op then writes must stay (removing it would write x).
  Graph h;
  Node* x = h.placeholder("x", f32({3}));
  Node* cl = with_meta(h.call_method("clone", {Arg(x)}), f32({3}));
  Node* inplace = with_meta(h.call_method("add_", {Arg(cl), Arg(1)}), f32({3}));
  Node* same_view = with_meta(h.call_method("view", {Arg(inplace), Arg(3)}), f32({3}));
  Node* use = with_meta(h.call_function(torch::relu, {Arg(same_view)}), f32({3}));
  h.output(ArgList{Arg(use), Arg(x)});
  CHECK(run_pass(h, "remove_noop").get("remove_noop") == 1);  // the view, not the clone
  CHECK(in_graph(h, cl));
  CHECK(use->args()[0].node() == inplace);
  lint(h);

  // An output that is a clone of an input stays a separate tensor; contiguous()
  // of a tensor whose strides are not recorded stays too.
  Graph k;
  Node* z = k.placeholder("z", f32({2, 3}));
  Node* copy = with_meta(k.call_function(OpRef("torch.clone"), {Arg(z)}), f32({2, 3}));
  Node* tz = with_meta(k.call_function(torch::tanh, {Arg(z)}), f32({2, 3}));
  Node* cont = with_meta(k.call_method("contiguous", {Arg(tz)}), f32({2, 3}));
  k.output(ArgList{Arg(copy), Arg(cont)});
  CHECK(run_pass(k, "remove_noop").get("remove_noop") == 0);
  CHECK(in_graph(k, copy));
  CHECK(in_graph(k, cont));
  // With strides recorded as contiguous, that contiguous() goes.
  TensorMeta strided = f32({2, 3});
  strided.stride = std::vector<Dim>{std::int64_t{3}, std::int64_t{1}};
  tz->meta.val = strided;
  cont->meta.val = strided;
  CHECK(run_pass(k, "remove_noop").get("remove_noop") == 1);
  CHECK(!in_graph(k, cont));
  lint(k);
}

// ---------------------------------------------------------------- numpy_compat_normalization

TEST_CASE("numpy_compat_normalization: axis, keepdims, x, x2 become dim, keepdim, input, other") {
  auto build = [](bool numpy) {
    Graph g;
    Node* x = g.placeholder("x", f32({3, 4}));
    Node* y = g.placeholder("y", f32({3, 4}));
    Node* s = with_meta(g.call_function(torch::sum, {Arg(x)},
                                        numpy ? ArgDict{{"axis", Arg(1)}, {"keepdims", Arg(true)}}
                                              : ArgDict{{"dim", Arg(1)}, {"keepdim", Arg(true)}}),
                        f32({3, 1}));
    Node* a = with_meta(g.call_function(torch::sub, ArgList{},
                                        numpy ? ArgDict{{"x", Arg(y)}, {"x2", Arg(s)}} : ArgDict{{"input", Arg(y)}, {"other", Arg(s)}}),
                        f32({3, 4}));
    g.output(ArgList{Arg(a)});
    return g;
  };
  Graph g = build(true);
  const Counters c = run_pass(g, "numpy_compat_normalization");
  CHECK(c.get("numpy_compat_normalization") == 2);
  const Node* s = g.find_nodes(OpKind::call_function, torch::sum).at(0);
  REQUIRE(s->kwargs().size() == 2);
  CHECK(*s->kwargs().find("dim")->get_if<std::int64_t>() == 1);
  CHECK(*s->kwargs().find("keepdim")->get_if<bool>());
  const Node* a = g.find_nodes(OpKind::call_function, torch::sub).at(0);
  CHECK(a->kwargs().find("input")->node() == g.find_node("y"));
  CHECK(a->kwargs().find("other")->node() == s);
  lint(g);
  // The executor reads torch's names: the normalized graph computes what the torch-named one does.
  check_numerics(build(false), g);

  // Left: aten ops, callables kiln has no signature for, NumPy names the callable
  // has no torch parameter for, and a call giving both spellings.
  Graph h;
  Node* x = h.placeholder("x", f32({3, 4}));
  Node* aten_sum = h.call_function(OpRef("aten.sum.dim_IntList"), {Arg(x)}, ArgDict{{"axis", Arg(ArgList{Arg(0)})}});
  Node* unknown = h.call_function(OpRef("torch.cdist"), ArgList{}, ArgDict{{"x1", Arg(x)}, {"x2", Arg(x)}});
  Node* no_other = h.call_function(torch::exp, ArgList{}, ArgDict{{"x2", Arg(x)}});
  Node* both = h.call_function(torch::mean, {Arg(x)}, ArgDict{{"axis", Arg(0)}, {"dim", Arg(1)}});
  h.output(ArgList{Arg(aten_sum), Arg(unknown), Arg(no_other), Arg(both)});
  CHECK(run_pass(h, "numpy_compat_normalization").get("numpy_compat_normalization") == 0);
  CHECK(aten_sum->kwargs().contains("axis"));
  CHECK(unknown->kwargs().contains("x1"));
  CHECK(no_other->kwargs().contains("x2"));
  CHECK(both->kwargs().contains("axis"));
  lint(h);
}

// ---------------------------------------------------------------- sink_cat_after_pointwise

TEST_CASE("sink_cat_after_pointwise: relu after cat and views becomes cat of relus, near-misses stay") {
  Graph g;
  Node* a = g.placeholder("a", f32({2, 3}));
  Node* b = g.placeholder("b", f32({2, 5}));
  Node* cat = with_meta(g.call_function(torch::cat, {Arg(ArgList{Arg(a), Arg(b)}), Arg(-1)}), f32({2, 8}));
  Node* v1 = with_meta(g.call_method("view", {Arg(cat), Arg(16)}), f32({16}));
  Node* v2 = with_meta(g.call_method("view", {Arg(v1), Arg(4), Arg(4)}), f32({4, 4}));
  Node* relu = with_meta(g.call_function(torch::relu, {Arg(v2)}), f32({4, 4}));
  Node* out = with_meta(g.call_function(torch::sigmoid, {Arg(relu)}), f32({4, 4}));
  // The method form, straight after a cat.
  Node* cat2 = with_meta(g.call_function(torch::cat, {Arg(ArgList{Arg(a), Arg(a)})}, ArgDict{{"dim", Arg(0)}}), f32({4, 3}));
  Node* tanh = with_meta(g.call_method("tanh", {Arg(cat2)}), f32({4, 3}));
  g.output(ArgList{Arg(out), Arg(tanh)});
  const Graph original = g.clone();

  const Counters c = run_pass(g, "sink_cat_after_pointwise");
  CHECK(c.get("sink_cat_after_pointwise") == 2);
  CHECK(!in_graph(g, relu));
  CHECK(!in_graph(g, tanh));
  CHECK(count(g, OpKind::call_function, torch::relu) == 2);
  CHECK(count_methods(g, "tanh") == 2);
  CHECK(out->args()[0].node() == v2);
  const Node* new_cat = v1->args()[0].node();
  REQUIRE(new_cat->is_call(torch::cat));
  CHECK(new_cat->args()[1].get_if<std::int64_t>() != nullptr);
  for (const Arg& piece : *new_cat->args()[0].list()) CHECK(piece.node()->is_call(torch::relu));
  lint(g);
  check_numerics(original, g);

  // Left: a cat with a second user, a view with a second user, a non-relu/tanh op.
  Graph h;
  Node* p = h.placeholder("p", f32({2, 3}));
  Node* c1 = with_meta(h.call_function(torch::cat, {Arg(ArgList{Arg(p), Arg(p)}), Arg(0)}), f32({4, 3}));
  Node* r1 = with_meta(h.call_function(torch::relu, {Arg(c1)}), f32({4, 3}));
  Node* c2 = with_meta(h.call_function(torch::cat, {Arg(ArgList{Arg(p), Arg(p)}), Arg(1)}), f32({2, 6}));
  Node* vv = with_meta(h.call_method("view", {Arg(c2), Arg(12)}), f32({12}));
  Node* r2 = with_meta(h.call_function(torch::relu, {Arg(vv)}), f32({12}));
  Node* c3 = with_meta(h.call_function(torch::cat, {Arg(ArgList{Arg(p), Arg(p)}), Arg(0)}), f32({4, 3}));
  Node* s3 = with_meta(h.call_function(torch::sigmoid, {Arg(c3)}), f32({4, 3}));
  h.output(ArgList{Arg(r1), Arg(c1), Arg(r2), Arg(vv), Arg(s3)});
  const Counters ch = run_pass(h, "sink_cat_after_pointwise");
  CHECK(ch.get("sink_cat_after_pointwise") == 0);
  CHECK(count(h, OpKind::call_function, torch::relu) == 2);
  lint(h);

  // Pieces of different dtypes: cat promotes before tanh; kiln skips and counts it.
  Graph k;
  Node* f = k.placeholder("f", f32({2}));
  Node* n = k.placeholder("n", i64({2}));
  Node* mixed = with_meta(k.call_function(torch::cat, {Arg(ArgList{Arg(f), Arg(n)})}), f32({4}));
  Node* th = with_meta(k.call_function(torch::tanh, {Arg(mixed)}), f32({4}));
  k.output(ArgList{Arg(th)});
  const Counters ck = run_pass(k, "sink_cat_after_pointwise");
  CHECK(ck.get("sink_cat_after_pointwise") == 0);
  CHECK(ck.get("sink_cat_after_pointwise_skipped") == 1);
  CHECK(th->args()[0].node() == mixed);
}

// ---------------------------------------------------------------- permute fusions

namespace {
Node* permute(Graph& g, Node* x, std::vector<std::int64_t> dims, std::vector<Dim> out_shape) {
  ArgList args{Arg(x)};
  for (auto d : dims) args.push_back(Arg(d));
  return with_meta(g.call_method("permute", std::move(args)), f32(std::move(out_shape)));
}
}  // namespace

TEST_CASE("permute_linear_fusion: linear of a last-two-dims permute becomes matmul(x^T, w^T) + b") {
  Graph g;
  Node* x = g.placeholder("x", f32({2, 5, 4}));
  Node* w = g.placeholder("w", f32({3, 5}));
  Node* b = g.placeholder("b", f32({3}));
  Node* p = permute(g, x, {0, 2, 1}, {2, 4, 5});
  Node* lin = with_meta(g.call_function(F::linear, {Arg(p), Arg(w), Arg(b)}), f32({2, 4, 3}));
  // A rank-4 permute by negative dims, a linear without bias, the permute used again.
  Node* x4 = g.placeholder("x4", f32({2, 2, 5, 3}));
  Node* p4 = with_meta(g.call_method("permute", {Arg(x4), Arg(ArgList{Arg(0), Arg(1), Arg(-1), Arg(-2)})}), f32({2, 2, 3, 5}));
  Node* lin4 = with_meta(g.call_function(F::linear, {Arg(p4), Arg(w)}), f32({2, 2, 3, 3}));
  Node* again = with_meta(g.call_function(torch::relu, {Arg(p4)}), f32({2, 2, 3, 5}));
  g.output(ArgList{Arg(lin), Arg(lin4), Arg(again)});
  const Graph original = g.clone();

  const Counters c = run_pass(g, "permute_linear_fusion");
  CHECK(c.get("permute_linear_fusion") == 2);
  CHECK(count(g, OpKind::call_function, F::linear) == 0);
  CHECK(!in_graph(g, p));
  CHECK(in_graph(g, p4));  // still read by relu
  CHECK(count(g, OpKind::call_function, torch::matmul) == 2);
  lint(g);
  check_numerics(original, g);

  // Left: a permute that moves another dim, a swap of the first two dims.
  Graph h;
  Node* y = h.placeholder("y", f32({5, 2, 4}));
  Node* w2 = h.placeholder("w", f32({3, 5}));
  Node* rot = permute(h, y, {1, 2, 0}, {2, 4, 5});
  Node* l1 = with_meta(h.call_function(F::linear, {Arg(rot), Arg(w2)}), f32({2, 4, 3}));
  Node* z = h.placeholder("z", f32({4, 2, 5}));
  Node* front = permute(h, z, {1, 0, 2}, {2, 4, 5});
  Node* l2 = with_meta(h.call_function(F::linear, {Arg(front), Arg(w2)}), f32({2, 4, 3}));
  h.output(ArgList{Arg(l1), Arg(l2)});
  CHECK(run_pass(h, "permute_linear_fusion").get("permute_linear_fusion") == 0);
  CHECK(count(h, OpKind::call_function, F::linear) == 2);
  lint(h);
}

TEST_CASE("linear_permute_fusion: a last-two-dims permute of a linear becomes matmul(w, x^T) + b.unsqueeze(-1)") {
  // Rank 3: the weight is broadcast over the batch by matmul, as in Inductor's
  // linear_transpose. kiln's executor does not broadcast a matmul's first
  // operand, so this graph is checked by structure; the rank-2 ones below numerically.
  Graph g;
  Node* x = g.placeholder("x", f32({2, 4, 5}));
  Node* w = g.placeholder("w", f32({3, 5}));
  Node* b = g.placeholder("b", f32({3}));
  Node* lin = with_meta(g.call_function(F::linear, {Arg(x), Arg(w), Arg(b)}), f32({2, 4, 3}));
  Node* p = permute(g, lin, {0, -1, -2}, {2, 3, 4});
  g.output(ArgList{Arg(p)});
  const Counters c = run_pass(g, "linear_permute_fusion");
  CHECK(c.get("linear_permute_fusion") == 1);
  CHECK(!in_graph(g, lin));
  CHECK(!in_graph(g, p));
  const Node* add = g.output_node()->args()[0].list()->at(0).node();
  REQUIRE(add->is_call(torch::add));
  const Node* mm = add->args()[0].node();
  REQUIRE(mm->is_call(torch::matmul));
  CHECK(mm->args()[0].node() == w);
  const Node* xt = mm->args()[1].node();
  REQUIRE(xt->is_call(torch::transpose));
  CHECK(xt->args()[0].node() == x);
  CHECK(mm->meta.val.tensor()->shape == std::vector<Dim>{std::int64_t{2}, std::int64_t{3}, std::int64_t{4}});
  const Node* column = add->args()[1].node();
  REQUIRE(column->is_call(torch::unsqueeze));
  CHECK(column->args()[0].node() == b);
  CHECK(add->meta.val.tensor()->shape == std::vector<Dim>{std::int64_t{2}, std::int64_t{3}, std::int64_t{4}});
  lint(g);

  // Rank 2, with and without bias, through Tensor.permute and torch.permute.
  Graph g2;
  Node* x2 = g2.placeholder("x2", f32({6, 5}));
  Node* w2 = g2.placeholder("w", f32({3, 5}));
  Node* b2 = g2.placeholder("b", f32({3}));
  Node* lin2 = with_meta(g2.call_function(F::linear, {Arg(x2), Arg(w2), Arg(b2)}), f32({6, 3}));
  Node* p2 = permute(g2, lin2, {1, 0}, {3, 6});
  Node* lin3 = with_meta(g2.call_function(F::linear, {Arg(x2), Arg(w2)}), f32({6, 3}));
  Node* p3 = with_meta(g2.call_function(torch::permute, {Arg(lin3), Arg(ArgList{Arg(-1), Arg(0)})}), f32({3, 6}));
  g2.output(ArgList{Arg(p2), Arg(p3)});
  const Graph original2 = g2.clone();
  CHECK(run_pass(g2, "linear_permute_fusion").get("linear_permute_fusion") == 2);
  CHECK(count(g2, OpKind::call_function, F::linear) == 0);
  CHECK(count(g2, OpKind::call_function, torch::matmul) == 2);
  CHECK(count(g2, OpKind::call_function, torch::unsqueeze) == 1);
  lint(g2);
  check_numerics(original2, g2);

  // Left: a permute that is not a swap of the last two dims.
  Graph h;
  Node* y = h.placeholder("y", f32({2, 4, 5}));
  Node* w3 = h.placeholder("w", f32({3, 5}));
  Node* l = with_meta(h.call_function(F::linear, {Arg(y), Arg(w3)}), f32({2, 4, 3}));
  Node* rot = permute(h, l, {2, 0, 1}, {3, 2, 4});
  h.output(ArgList{Arg(rot)});
  CHECK(run_pass(h, "linear_permute_fusion").get("linear_permute_fusion") == 0);
  CHECK(in_graph(h, rot));
  lint(h);

  // A linear read elsewhere too stays; the permute alone is rewritten.
  Graph k;
  Node* u = k.placeholder("u", f32({4, 5}));
  Node* w4 = k.placeholder("w", f32({3, 5}));
  Node* l3 = with_meta(k.call_function(F::linear, {Arg(u), Arg(w4)}), f32({4, 3}));
  Node* sw = permute(k, l3, {1, 0}, {3, 4});
  k.output(ArgList{Arg(sw), Arg(l3)});
  const Graph k_original = k.clone();
  CHECK(run_pass(k, "linear_permute_fusion").get("linear_permute_fusion") == 1);
  CHECK(in_graph(k, l3));
  CHECK(!in_graph(k, sw));
  lint(k);
  check_numerics(k_original, k);
}

TEST_CASE("permute_matmul_fusion: bmm/matmul of last-two-dims permutes becomes matmul of transposes") {
  Graph g;
  Node* a = g.placeholder("a", f32({2, 5, 4}));
  Node* b = g.placeholder("b", f32({2, 5, 3}));
  Node* pa = permute(g, a, {0, 2, 1}, {2, 4, 5});
  Node* bmm = with_meta(g.call_function(torch::bmm, {Arg(pa), Arg(b)}), f32({2, 4, 3}));
  Node* c = g.placeholder("c", f32({2, 4, 5}));
  Node* d = g.placeholder("d", f32({2, 3, 5}));
  Node* pd = permute(g, d, {0, 2, 1}, {2, 5, 3});
  Node* mm = with_meta(g.call_function(torch::matmul, {Arg(c), Arg(pd)}), f32({2, 4, 3}));
  // Both sides permuted, bmm's second operand given as mat2=.
  Node* e = g.placeholder("e", f32({2, 3, 4}));
  Node* pe = permute(g, e, {0, 2, 1}, {2, 4, 3});
  Node* f = g.placeholder("f", f32({2, 5, 3}));
  Node* pf = permute(g, f, {0, 2, 1}, {2, 3, 5});
  Node* both = with_meta(g.call_function(torch::bmm, {Arg(pe)}, ArgDict{{"mat2", Arg(pf)}}), f32({2, 4, 5}));
  g.output(ArgList{Arg(bmm), Arg(mm), Arg(both)});
  const Graph original = g.clone();

  const Counters counters = run_pass(g, "permute_matmul_fusion");
  CHECK(counters.get("permute_matmul_fusion") == 3);
  CHECK(count(g, OpKind::call_function, torch::bmm) == 0);
  CHECK(count_methods(g, "permute") == 0);
  CHECK(count(g, OpKind::call_function, torch::transpose) == 4);
  CHECK(count(g, OpKind::call_function, torch::matmul) == 3);
  lint(g);
  check_numerics(original, g);

  // Left: a permute of the batch dims, and a product without permutes.
  Graph h;
  Node* x = h.placeholder("x", f32({4, 2, 5}));
  Node* y = h.placeholder("y", f32({2, 5, 3}));
  Node* px = permute(h, x, {1, 0, 2}, {2, 4, 5});
  Node* m1 = with_meta(h.call_function(torch::bmm, {Arg(px), Arg(y)}), f32({2, 4, 3}));
  Node* m2 = with_meta(h.call_function(torch::matmul, {Arg(m1), Arg(h.placeholder("z", f32({2, 3, 3})))}), f32({2, 4, 3}));
  h.output(ArgList{Arg(m2)});
  CHECK(run_pass(h, "permute_matmul_fusion").get("permute_matmul_fusion") == 0);
  CHECK(in_graph(h, px));
  CHECK(in_graph(h, m1));
  lint(h);
}

TEST_CASE("linear_permute_fusion at ranks 3 and 4, with and without bias, computes the permuted linear") {
  // The rewrite is matmul(w, x^T): the 2-d weight broadcast over x's batch dims.
  // kiln's executor does not broadcast a matmul's first operand (its oneDNN
  // matmul lowering refuses it), so the runnable copy expands w to the batch
  // shape first; everything else the pass wrote runs as written.
  for (const bool bias : {true, false})
    for (const std::size_t rank : {3u, 4u}) {
      INFO("rank " << rank << (bias ? ", bias" : ", no bias"));
      const std::vector<Dim> batch = rank == 3 ? std::vector<Dim>{3} : std::vector<Dim>{2, 3};
      auto with_batch = [&](std::vector<Dim> tail) {
        std::vector<Dim> s = batch;
        s.insert(s.end(), tail.begin(), tail.end());
        return s;
      };
      Graph g;
      Node* x = g.placeholder("x", f32(with_batch({5, 7})));
      Node* w = g.placeholder("w", f32({4, 7}));
      ArgList args{Arg(x), Arg(w)};
      if (bias) args.push_back(Arg(g.placeholder("b", f32({4}))));
      Node* lin = with_meta(g.call_function(F::linear, std::move(args)), f32(with_batch({5, 4})));
      std::vector<std::int64_t> dims;
      for (std::size_t d = 0; d + 2 < rank; ++d) dims.push_back(static_cast<std::int64_t>(d));
      dims.push_back(-1);
      dims.push_back(static_cast<std::int64_t>(rank) - 2);
      Node* p = permute(g, lin, dims, with_batch({4, 5}));
      g.output(ArgList{Arg(p)});
      const Graph original = g.clone();
      REQUIRE(run_pass(g, "linear_permute_fusion").get("linear_permute_fusion") == 1);
      CHECK(count(g, OpKind::call_function, F::linear) == 0);
      lint(g);

      Graph runnable = g.clone();
      const auto mms = runnable.find_nodes(OpKind::call_function, torch::matmul);
      REQUIRE(mms.size() == 1);
      Node* weight = mms[0]->args()[0].node();
      REQUIRE(weight->op() == OpKind::placeholder);
      ArgList sizes{Arg(weight)};
      for (const Dim& d : with_batch({4, 7})) sizes.push_back(Arg(std::get<std::int64_t>(d)));
      {
        auto at = runnable.inserting_before(mms[0]);
        Node* expanded = with_meta(runnable.call_method("expand", std::move(sizes)), f32(with_batch({4, 7})));
        mms[0]->set_arg(0, Arg(expanded));
      }
      lint(runnable);
      check_numerics(original, runnable);
    }
}

// ---------------------------------------------------------------- apply_gumbel_max_trick

namespace {
struct Sampler {
  Graph g;
  Node* logits;
  Node* softmax;
  Node* rand_exp;
  Node* argmax;
};
// argmax(softmax(logits, dim) / torch.empty(...).exponential_(rate), dim=-1, keepdim=True)
Sampler sampler(std::int64_t softmax_dim, double rate = 1.0, bool softmax_read_elsewhere = false) {
  Sampler s;
  Graph& g = s.g;
  s.logits = g.placeholder("logits", f32({4, 10}));
  s.softmax = with_meta(g.call_function(F::softmax, {Arg(s.logits)}, ArgDict{{"dim", Arg(softmax_dim)}}), f32({4, 10}));
  Node* empty = with_meta(g.call_function(OpRef("torch.empty"), {Arg(4), Arg(10)}), f32({4, 10}));
  s.rand_exp = with_meta(g.call_method("exponential_", {Arg(empty), Arg(rate)}), f32({4, 10}));
  Node* div = with_meta(g.call_function(pyop::truediv, {Arg(s.softmax), Arg(s.rand_exp)}), f32({4, 10}));
  s.argmax = with_meta(g.call_function(OpRef("torch.argmax"), {Arg(div)}, ArgDict{{"dim", Arg(-1)}, {"keepdim", Arg(true)}}),
                       i64({4, 1}));
  ArgList outs{Arg(s.argmax)};
  if (softmax_read_elsewhere) outs.push_back(Arg(s.softmax));
  g.output(outs);
  return s;
}
}  // namespace

TEST_CASE("apply_gumbel_max_trick_pass: argmax(softmax(x) / Exp(1)) becomes argmax(x + -log(e))") {
  Sampler s = sampler(-1);
  const Counters c = run_pass(s.g, "apply_gumbel_max_trick_pass");
  CHECK(c.get("apply_gumbel_max_trick") == 1);
  CHECK(c.get("pattern_matcher_count") == 1);
  CHECK(!in_graph(s.g, s.softmax));
  Node* sum = s.argmax->args()[0].node();
  REQUIRE(sum->is_call(pyop::add));
  CHECK(sum->args()[0].node() == s.logits);
  Node* neg = sum->args()[1].node();
  REQUIRE(neg->is_call(pyop::neg));
  Node* log = neg->args()[0].node();
  REQUIRE(log->is_call(torch::log));
  CHECK(log->args()[0].node() == s.rand_exp);
  CHECK(s.g.size() == 8);  // logits, empty, exponential_, log, neg, add, argmax, output
  lint(s.g);
  // The softmax's dim written as 1 (the last of rank 2) is the same.
  Sampler last = sampler(1);
  CHECK(run_pass(last.g, "apply_gumbel_max_trick_pass").get("apply_gumbel_max_trick") == 1);
}

namespace {
// argmax(softmax(logits, dim) / torch.empty(5, 13).exponential_(1.0), dim=-1,
// keepdim=True), with a placeholder `noise` that nothing reads yet: the
// numeric check puts exp(noise) in the sample's place.
Graph noisy_sampler(std::int64_t softmax_dim) {
  Graph g;
  Node* logits = g.placeholder("logits", f32({5, 13}));
  g.placeholder("noise", f32({5, 13}));
  Node* softmax = with_meta(g.call_function(F::softmax, {Arg(logits)}, ArgDict{{"dim", Arg(softmax_dim)}}), f32({5, 13}));
  Node* empty = with_meta(g.call_function(OpRef("torch.empty"), {Arg(5), Arg(13)}), f32({5, 13}));
  Node* rand_exp = with_meta(g.call_method("exponential_", {Arg(empty), Arg(1.0)}), f32({5, 13}));
  Node* div = with_meta(g.call_function(pyop::truediv, {Arg(softmax), Arg(rand_exp)}), f32({5, 13}));
  Node* argmax = with_meta(
      g.call_function(OpRef("torch.argmax"), {Arg(div)}, ArgDict{{"dim", Arg(-1)}, {"keepdim", Arg(true)}}), i64({5, 1}));
  g.output(ArgList{Arg(argmax)});
  return g;
}

// The executor has no kernel for torch.argmax nor for Tensor.exponential_ (a
// random fill), so a sampler is run up to the argmax's input with the sample
// fixed to exp(noise) (positive, as an Exp(1) sample is), and the test takes
// each row's argmax itself.
Graph up_to_argmax_with_fixed_noise(Graph g) {
  Node* noise = nullptr;
  for (Node* n : g.find_nodes(OpKind::placeholder))
    if (n->name() == "noise") noise = n;
  Node* rand_exp = nullptr;
  for (Node* n : g.nodes())
    if (n->op() == OpKind::call_method && n->target_name() == "exponential_") rand_exp = n;
  const auto argmaxes = g.find_nodes(OpKind::call_function, OpRef("torch.argmax"));
  REQUIRE(noise);
  REQUIRE(rand_exp);
  REQUIRE(argmaxes.size() == 1);
  Node* empty = rand_exp->args()[0].node();
  Node* fixed;
  {
    auto at = g.inserting_before(rand_exp);
    fixed = with_meta(g.call_function(torch::exp, {Arg(noise)}), rand_exp->meta.val);
  }
  rand_exp->replace_all_uses_with(fixed);
  g.erase_node(rand_exp);
  g.erase_node(empty);
  Node* scores = argmaxes[0]->args()[0].node();
  g.output_node()->set_args(ArgList{Arg(ArgList{Arg(scores)})});
  g.erase_node(argmaxes[0]);
  lint(g);
  return g;
}

// Each row's first index of its largest value.
std::vector<std::int64_t> row_argmax(const runtime::Tensor& t) {
  const runtime::Tensor c = t.contiguous();
  const float* v = c.data<float>();
  const std::int64_t rows = c.size(0), cols = c.size(1);
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < rows; ++i) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < cols; ++j)
      if (v[i * cols + j] > v[i * cols + best]) best = j;
    out.push_back(best);
  }
  return out;
}

// argmax_j(logits[i, j] - noise[i, j]) per row: the Gumbel-max index, from the inputs.
std::vector<std::int64_t> gumbel_index(const runtime::Tensor& logits, const runtime::Tensor& noise) {
  const runtime::Tensor x = logits.contiguous(), n = noise.contiguous();
  runtime::Tensor d = runtime::Tensor::empty(x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) d.data<float>()[i] = x.data<float>()[i] - n.data<float>()[i];
  return row_argmax(d);
}
}  // namespace

TEST_CASE("apply_gumbel_max_trick_pass picks the original's index in every row once the noise is fixed") {
  Graph g = noisy_sampler(-1);
  const Graph original = g.clone();
  REQUIRE(run_pass(g, "apply_gumbel_max_trick_pass").get("apply_gumbel_max_trick") == 1);
  lint(g);
  const auto before = runtime::CompiledGraph::compile(up_to_argmax_with_fixed_noise(original.clone()), {});
  const auto after = runtime::CompiledGraph::compile(up_to_argmax_with_fixed_noise(g.clone()), {});
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    const auto inputs = runtime::random_inputs(before, seed);
    const auto want = row_argmax(before.run(inputs)[0]);
    CHECK(row_argmax(after.run(inputs)[0]) == want);
    CHECK(want == gumbel_index(inputs[0], inputs[1]));
  }
}

TEST_CASE("apply_gumbel_max_trick_pass leaves a softmax over dim 0, whose index the trick would change") {
  Graph g = noisy_sampler(0);
  const Graph original = g.clone();
  CHECK(run_pass(g, "apply_gumbel_max_trick_pass").get("apply_gumbel_max_trick_skipped") == 1);
  const auto before = runtime::CompiledGraph::compile(up_to_argmax_with_fixed_noise(original.clone()), {});
  const auto after = runtime::CompiledGraph::compile(up_to_argmax_with_fixed_noise(g.clone()), {});
  bool trick_differs = false;
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const auto inputs = runtime::random_inputs(before, seed);
    const auto want = row_argmax(before.run(inputs)[0]);
    CHECK(row_argmax(after.run(inputs)[0]) == want);
    trick_differs = trick_differs || want != gumbel_index(inputs[0], inputs[1]);
  }
  CHECK(trick_differs);  // softmax over dim 0 divides each column by its own sum: not the Gumbel-max index
}

TEST_CASE("apply_gumbel_max_trick_pass near-misses: softmax over another dim, rate 2, softmax read elsewhere") {
  Sampler other_dim = sampler(0);
  const Counters c = run_pass(other_dim.g, "apply_gumbel_max_trick_pass");
  CHECK(c.get("apply_gumbel_max_trick") == 0);
  CHECK(c.get("apply_gumbel_max_trick_skipped") == 1);
  CHECK(in_graph(other_dim.g, other_dim.softmax));

  Sampler rate_two = sampler(-1, 2.0);
  CHECK(run_pass(rate_two.g, "apply_gumbel_max_trick_pass").get("apply_gumbel_max_trick") == 0);
  CHECK(in_graph(rate_two.g, rate_two.softmax));

  Sampler shared = sampler(-1, 1.0, true);
  CHECK(run_pass(shared.g, "apply_gumbel_max_trick_pass").get("apply_gumbel_max_trick") == 0);
  CHECK(in_graph(shared.g, shared.softmax));
  lint(shared.g);

  // argmax without keepdim is not the pattern.
  Sampler no_keepdim = sampler(-1);
  no_keepdim.argmax->set_kwargs(ArgDict{{"dim", Arg(-1)}});
  CHECK(run_pass(no_keepdim.g, "apply_gumbel_max_trick_pass").get("pattern_matcher_count") == 0);
}
