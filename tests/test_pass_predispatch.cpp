// The pre-dispatch passes of Inductor's pipeline (kiln/passes/pre_grad/):
// each rewrite, the near-misses it must leave (counted `<pass>_skipped`
// where the pattern is there but the rewrite would change an output), and
// the numeric check of the original against the rewritten graph.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kiln/executor/numeric_check.hpp"
#include "predispatch_test_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {
// Every output of `g` after `names`, run on `g` unchanged: a pass that must not fire.
void check_unchanged(Graph& g, const std::vector<std::string>& names, const std::string& skipped, std::int64_t times = 1) {
  const std::size_t before = g.size();
  const Counters c = run_checked(g, names);
  CHECK(c.get(skipped) == times);
  CHECK(c.get(names.back()) == 0);
  CHECK(g.size() == before);
}
}  // namespace

TEST_CASE("stack_to_unsqueeze_pass: a stack of one tensor becomes unsqueeze, a stack of two is left") {
  Graph g;
  Node* x = input(g, "x", {3, 4});
  Node* s = call(g, torch::stack, {Arg(list({x}))}, {3, 4, 1}, {{"dim", Arg(-1)}});
  Node* a = call(g, aten::stack, {Arg(list({x})), Arg(-3)}, {1, 3, 4});
  g.output(list({call(g, torch::tanh, {Arg(s)}, {3, 4, 1}), a}));
  const Counters c = run_checked(g, {"stack_to_unsqueeze_pass"});
  CHECK(c.get("stack_to_unsqueeze_pass") == 2);
  CHECK(count_calls(g, torch::stack) + count_calls(g, aten::stack) == 0);
  const Node* u = g.find_nodes(OpKind::call_function, torch::unsqueeze).at(0);
  CHECK(*u->args()[1].get_if<std::int64_t>() == 2);
  CHECK(*g.find_nodes(OpKind::call_function, aten::unsqueeze).at(0)->args()[1].get_if<std::int64_t>() == 0);

  Graph h;
  Node* y = input(h, "y", {3, 4});
  h.output(list({call(h, torch::stack, {Arg(list({y, y}))}, {2, 3, 4})}));
  CHECK(run_checked(h, {"stack_to_unsqueeze_pass"}).get("stack_to_unsqueeze_pass") == 0);
  CHECK(count_calls(h, torch::stack) == 1);
}

TEST_CASE("remove_reshape_pass: a reshape or view to the same shape goes, one to another shape stays") {
  Graph g;
  Node* x = input(g, "x", {2, 6});
  Node* same = call(g, torch::reshape, {Arg(x), Arg(ArgList{Arg(2), Arg(-1)})}, {2, 6});
  Node* view = call(g, aten::view, {Arg(same), Arg(ArgList{Arg(2), Arg(6)})}, {2, 6});
  Node* other = call(g, aten::reshape, {Arg(view), Arg(ArgList{Arg(6), Arg(2)})}, {6, 2});
  g.output(list({call(g, torch::tanh, {Arg(other)}, {6, 2}), view}));
  const Counters c = run_checked(g, {"remove_reshape_pass"});
  CHECK(c.get("remove_reshape_pass") == 2);
  CHECK(count_calls(g, torch::reshape) == 0);
  CHECK(count_calls(g, aten::view) == 0);
  REQUIRE(count_calls(g, aten::reshape) == 1);
  CHECK(g.find_nodes(OpKind::call_function, aten::reshape).at(0)->args()[0].node() == x);
}

TEST_CASE("relu_nan_to_num: nan_to_num after relu stays unless its values are known finite") {
  // relu keeps NaN and +inf: nan_to_num(relu(x)) is not relu(x).
  Graph g;
  Node* x = input(g, "x", {4});
  Node* r = call(g, torch::relu, {Arg(x)}, {4});
  Node* n = call(g, torch::nan_to_num, {Arg(r)}, {4});
  g.output(list({n}));
  {
    const auto cg = runtime::CompiledGraph::compile(g, {});
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> v{std::numeric_limits<float>::quiet_NaN(), inf, -inf, -2.0f};
    const auto out = cg.run({runtime::Tensor::from_values<float>({4}, v)});
    CHECK(out[0].data<float>()[0] == 0.0f);
    CHECK(out[0].data<float>()[1] == std::numeric_limits<float>::max());
    CHECK(out[0].data<float>()[2] == 0.0f);
  }
  const Counters c = run_checked(g, {"relu_nan_to_num"});
  CHECK(c.get("relu_nan_to_num_skipped") == 1);
  CHECK(c.get("relu_nan_to_num") == 0);
  CHECK(count_calls(g, torch::nan_to_num) == 1);

  // After a nan_to_num the values are finite; relu keeps them so: the second one goes.
  Graph h;
  Node* y = input(h, "y", {3, 5});
  Node* clean = call(h, torch::nan_to_num, {Arg(y)}, {3, 5});
  Node* r2 = call(h, aten::relu, {Arg(clean)}, {3, 5});
  Node* again = call(h, torch::nan_to_num, {Arg(r2)}, {3, 5});
  h.output(list({again}));
  const Counters c2 = run_checked(h, {"relu_nan_to_num"});
  CHECK(c2.get("relu_nan_to_num") == 1);
  CHECK(count_calls(h, torch::nan_to_num) == 1);
  CHECK(h.output_node()->args()[0].list()->at(0).node() == r2);

  // Not the default arguments: left alone, not counted.
  Graph k;
  Node* z = input(k, "z", {3});
  Node* cz = call(k, torch::nan_to_num, {Arg(z)}, {3});
  Node* rz = call(k, torch::relu, {Arg(cz)}, {3});
  k.output(list({call(k, torch::nan_to_num, {Arg(rz)}, {3}, {{"nan", Arg(1.5)}})}));
  const Counters c3 = run_passes(k, {"relu_nan_to_num"});
  CHECK(c3.get("relu_nan_to_num") == 0);
  CHECK(c3.get("relu_nan_to_num_skipped") == 0);
}

TEST_CASE("merge_concats_pass: nested cats on one dim flatten, repeated inner cats twice") {
  Graph g;
  Node* a = input(g, "a", {2, 3});
  Node* b = input(g, "b", {2, 1});
  Node* c = input(g, "c", {2, 2});
  Node* inner = call(g, torch::cat, {Arg(list({a, b}))}, {2, 4}, {{"dim", Arg(1)}});
  Node* mid = call(g, torch::cat, {Arg(list({c, inner}))}, {2, 6}, {{"dim", Arg(-1)}});
  Node* twice = call(g, torch::cat, {Arg(list({b, b}))}, {2, 2}, {{"dim", Arg(1)}});
  Node* outer = call(g, torch::cat, {Arg(list({mid, a, twice, twice}))}, {2, 13}, {{"dim", Arg(1)}});
  g.output(list({outer}));
  const Counters c1 = run_checked(g, {"merge_concats_pass"});
  CHECK(c1.get("merge_concats_pass") == 1);
  REQUIRE(count_calls(g, torch::cat) == 1);
  const Node* flat = g.find_nodes(OpKind::call_function, torch::cat).at(0);
  CHECK(flat->args()[0].list()->size() == 8);  // c a b | a | b b | b b

  // An inner cat on another dim, or with another user, is kept.
  Graph h;
  Node* x = input(h, "x", {2, 3});
  Node* rows = call(h, aten::cat, {Arg(list({x, x})), Arg(0)}, {4, 3});
  Node* cols = call(h, aten::cat, {Arg(list({x, x})), Arg(1)}, {2, 6});
  Node* o2 = call(h, aten::cat, {Arg(list({cols, cols})), Arg(0)}, {4, 6});
  Node* shared = call(h, aten::cat, {Arg(list({x, x})), Arg(-1)}, {2, 6});
  Node* o3 = call(h, aten::cat, {Arg(list({shared, x})), Arg(1)}, {2, 9});
  h.output(list({rows, o2, o3, call(h, aten::tanh, {Arg(shared)}, {2, 6})}));
  const std::size_t before = h.size();
  const Counters c2 = run_checked(h, {"merge_concats_pass"});
  CHECK(c2.get("merge_concats_pass") == 0);
  CHECK(c2.get("merge_concats_pass_skipped") == 1);
  CHECK(h.size() == before);
}

TEST_CASE("remove_split_ops_pass: all pieces back in order on the split's dim give the input") {
  Graph g;
  Node* x = input(g, "x", {4, 6});
  Node* s = multi(g, torch::split, {Arg(x), Arg(ArgList{Arg(2), Arg(4)})}, {{4, 2}, {4, 4}}, {{"dim", Arg(-1)}});
  Node* p0 = item(g, s, 0);
  Node* p1 = item(g, s, -1);
  Node* cat = call(g, torch::cat, {Arg(list({p0, p1}))}, {4, 6}, {{"dim", Arg(1)}});
  g.output(list({call(g, torch::tanh, {Arg(cat)}, {4, 6})}));
  const Counters c = run_checked(g, {"remove_split_ops_pass"});
  CHECK(c.get("remove_split_ops_pass") == 1);
  CHECK(g.size() == 3);  // x, tanh, output
  CHECK(g.find_nodes(OpKind::call_function, torch::tanh).at(0)->args()[0].node() == x);

  // Reordered, repeated, partial, another dim, a piece used elsewhere: left.
  auto near_miss = [](int which) {
    Graph h;
    Node* y = input(h, "y", {4, 4});
    const bool rows = which == 3;
    Node* sp = rows ? multi(h, aten::split_with_sizes, {Arg(y), Arg(ArgList{Arg(2), Arg(2)}), Arg(0)}, {{2, 4}, {2, 4}})
                    : multi(h, aten::split_with_sizes, {Arg(y), Arg(ArgList{Arg(1), Arg(3)}), Arg(1)}, {{4, 1}, {4, 3}});
    Node* q0 = item(h, sp, 0);
    Node* q1 = item(h, sp, 1);
    ArgList out;
    switch (which) {
      case 0: out.push_back(Arg(call(h, aten::cat, {Arg(list({q1, q0})), Arg(1)}, {4, 4}))); break;
      case 1: out.push_back(Arg(call(h, aten::cat, {Arg(list({q1, q1})), Arg(-1)}, {4, 6}))); break;
      case 2: out.push_back(Arg(call(h, aten::cat, {Arg(list({q1})), Arg(1)}, {4, 3}))); break;
      case 3: out.push_back(Arg(call(h, aten::cat, {Arg(list({q0, q1})), Arg(1)}, {2, 8}))); break;
      case 4:
        out.push_back(Arg(call(h, aten::cat, {Arg(list({q0, q1})), Arg(1)}, {4, 4})));
        out.push_back(Arg(call(h, aten::tanh, {Arg(q0)}, {4, 1})));
        break;
    }
    h.output(Arg(out));
    check_unchanged(h, {"remove_split_ops_pass"}, "remove_split_ops_pass_skipped");
  };
  for (int which = 0; which < 5; ++which) {
    INFO("near miss " << which);
    near_miss(which);
  }

  // A split into one piece: each getitem of it is the input.
  Graph k;
  Node* z = input(k, "z", {3, 2});
  Node* one = multi(k, torch::chunk, {Arg(z), Arg(1)}, {{3, 2}});
  Node* u = call(k, torch::tanh, {Arg(item(k, one, 0))}, {3, 2});
  Node* v = call(k, torch::sigmoid, {Arg(item(k, one, -1))}, {3, 2});
  k.output(list({u, v}));
  CHECK(run_checked(k, {"remove_split_ops_pass"}).get("remove_split_ops_pass") == 1);
  CHECK(u->args()[0].node() == z);
  CHECK(v->args()[0].node() == z);
}

TEST_CASE("fuse_chunk_squeeze_cat_pass: chunk -> squeeze -> cat of every piece is one reshape") {
  Graph g;
  Node* x = input(g, "x", {2, 3, 4});
  Node* ch = multi(g, torch::chunk, {Arg(x), Arg(3)}, {{2, 1, 4}, {2, 1, 4}, {2, 1, 4}}, {{"dim", Arg(-2)}});
  ArgList sq;
  for (int i = 0; i < 3; ++i) sq.push_back(Arg(call(g, torch::squeeze, {Arg(item(g, ch, i))}, {2, 4}, {{"dim", Arg(1)}})));
  g.output(list({call(g, torch::cat, {Arg(sq)}, {2, 12}, {{"dim", Arg(1)}})}));
  CHECK(run_checked(g, {"fuse_chunk_squeeze_cat_pass"}).get("fuse_chunk_squeeze_cat_pass") == 1);
  CHECK(g.size() == 3);  // x, reshape, output
  CHECK(count_calls(g, torch::reshape) == 1);

  // Along another dim the pieces interleave: not a reshape of x.
  Graph h;
  Node* y = input(h, "y", {2, 3, 4});
  Node* ch2 = multi(h, torch::chunk, {Arg(y), Arg(3), Arg(1)}, {{2, 1, 4}, {2, 1, 4}, {2, 1, 4}});
  ArgList sq2;
  for (int i = 0; i < 3; ++i) sq2.push_back(Arg(call(h, torch::squeeze, {Arg(item(h, ch2, i)), Arg(1)}, {2, 4})));
  h.output(list({call(h, torch::cat, {Arg(sq2), Arg(0)}, {6, 4})}));
  check_unchanged(h, {"fuse_chunk_squeeze_cat_pass"}, "fuse_chunk_squeeze_cat_pass_skipped");
  // Reversed order.
  Graph k;
  Node* z = input(k, "z", {2, 2, 4});
  Node* ch3 = multi(k, torch::chunk, {Arg(z), Arg(2), Arg(1)}, {{2, 1, 4}, {2, 1, 4}});
  Node* s0 = call(k, torch::squeeze, {Arg(item(k, ch3, 0)), Arg(1)}, {2, 4});
  Node* s1 = call(k, torch::squeeze, {Arg(item(k, ch3, 1)), Arg(1)}, {2, 4});
  k.output(list({call(k, torch::cat, {Arg(list({s1, s0})), Arg(1)}, {2, 8})}));
  check_unchanged(k, {"fuse_chunk_squeeze_cat_pass"}, "fuse_chunk_squeeze_cat_pass_skipped");
}

TEST_CASE("fuse_chunk_reshape_concat_pass: reshapes that keep the dims before the chunk's fuse into one") {
  Graph g;
  Node* x = input(g, "x", {2, 8});
  Node* ch = multi(g, aten::split_Tensor, {Arg(x), Arg(4), Arg(1)}, {{2, 4}, {2, 4}});
  Node* r0 = call(g, aten::reshape, {Arg(item(g, ch, 0)), Arg(ArgList{Arg(2), Arg(2), Arg(2)})}, {2, 2, 2});
  Node* r1 = call(g, aten::view, {Arg(item(g, ch, 1)), Arg(ArgList{Arg(2), Arg(2), Arg(2)})}, {2, 2, 2});
  g.output(list({call(g, aten::cat, {Arg(list({r0, r1})), Arg(-2)}, {2, 4, 2})}));
  CHECK(run_checked(g, {"fuse_chunk_reshape_concat_pass"}).get("fuse_chunk_reshape_concat_pass") == 1);
  REQUIRE(count_calls(g, aten::reshape) == 1);
  CHECK(g.find_nodes(OpKind::call_function, aten::reshape).at(0)->args()[0].node() == x);
  CHECK(g.size() == 3);

  // A reshape that moves the batch dim ([2, 4] -> [4, 2]) and a cat on dim 0: not x's order.
  Graph h;
  Node* y = input(h, "y", {2, 8});
  Node* ch2 = multi(h, torch::chunk, {Arg(y), Arg(2), Arg(1)}, {{2, 4}, {2, 4}});
  Node* q0 = call(h, torch::reshape, {Arg(item(h, ch2, 0)), Arg(ArgList{Arg(4), Arg(2)})}, {4, 2});
  Node* q1 = call(h, torch::reshape, {Arg(item(h, ch2, 1)), Arg(ArgList{Arg(4), Arg(2)})}, {4, 2});
  h.output(list({call(h, torch::cat, {Arg(list({q0, q1})), Arg(0)}, {8, 2})}));
  check_unchanged(h, {"fuse_chunk_reshape_concat_pass"}, "fuse_chunk_reshape_concat_pass_skipped");
}

TEST_CASE("fuse_chunk_reshape_unsqueeze_concat_pass: a stack of reshaped chunks at the chunk's dim is one reshape") {
  auto build = [](Graph& g, std::int64_t at) {
    Node* x = input(g, "x", {2, 8});
    Node* ch = multi(g, torch::chunk, {Arg(x), Arg(2)}, {{2, 4}, {2, 4}}, {{"dim", Arg(1)}});
    ArgList parts;
    Sizes piece = at == 1 ? Sizes{2, 1, 2, 2} : Sizes{1, 2, 2, 2};
    for (int i = 0; i < 2; ++i) {
      Node* r = call(g, torch::reshape, {Arg(item(g, ch, i)), Arg(ArgList{Arg(2), Arg(2), Arg(2)})}, {2, 2, 2});
      parts.push_back(Arg(call(g, torch::unsqueeze, {Arg(r), Arg(at)}, piece)));
    }
    Sizes out = piece;
    out[static_cast<std::size_t>(at)] = 2;
    g.output(list({call(g, torch::cat, {Arg(parts)}, out, {{"dim", Arg(at)}})}));
  };
  Graph g;
  build(g, 1);
  const Counters c = run_checked(g, {"fuse_chunk_reshape_unsqueeze_concat_pass"});
  CHECK(c.get("fuse_chunk_reshape_unsqueeze_concat_pass") == 1);
  CHECK(g.size() == 3);
  // Stacked in front of the batch dim: a permutation of x, left.
  Graph h;
  build(h, 0);
  check_unchanged(h, {"fuse_chunk_reshape_unsqueeze_concat_pass"}, "fuse_chunk_reshape_unsqueeze_concat_pass_skipped");
}

TEST_CASE("fuse_split_getitem_squeeze_cat: split -> getitem -> squeeze -> cat, and a piece with another user") {
  auto build = [](Graph& g, bool extra_user) {
    Node* x = input(g, "x", {3, 2, 5});
    Node* sp = multi(g, aten::split_with_sizes, {Arg(x), Arg(ArgList{Arg(1), Arg(1), Arg(1)}), Arg(-3)},
                     {{1, 2, 5}, {1, 2, 5}, {1, 2, 5}});
    ArgList parts;
    Node* first = nullptr;
    for (int i = 0; i < 3; ++i) {
      Node* it = item(g, sp, i);
      if (!first) first = it;
      parts.push_back(Arg(call(g, aten::squeeze_dim, {Arg(it), Arg(0)}, {2, 5})));
    }
    ArgList outs{Arg(call(g, aten::cat, {Arg(parts)}, {6, 5}))};
    if (extra_user) outs.push_back(Arg(call(g, aten::tanh, {Arg(first)}, {1, 2, 5})));
    g.output(Arg(outs));
  };
  Graph g;
  build(g, false);
  CHECK(run_checked(g, {"fuse_split_getitem_squeeze_cat"}).get("fuse_split_getitem_squeeze_cat") == 1);
  CHECK(g.size() == 3);
  CHECK(count_calls(g, aten::reshape) == 1);
  Graph h;
  build(h, true);
  check_unchanged(h, {"fuse_split_getitem_squeeze_cat"}, "fuse_split_getitem_squeeze_cat_skipped");
}

TEST_CASE("fuse_parallel_linear_pass: linears of one input fuse, weights from inputs and get_attr") {
  runtime::Weights weights;
  weights.emplace("w1", random_tensor({3, 8}, 1));
  weights.emplace("b1", random_tensor({3}, 2));
  weights.emplace("w3", random_tensor({2, 8}, 3));
  Graph g;
  Node* x = input(g, "x", {4, 8});
  Node* w2 = input(g, "w2", {5, 8});
  Node* b2 = input(g, "b2", {5});
  Node* w1 = g.get_attr("w1", f32({3, 8}));
  Node* b1 = g.get_attr("b1", f32({3}));
  Node* w3 = g.get_attr("w3", f32({2, 8}));
  Node* l1 = call(g, F::linear, {Arg(x), Arg(w1), Arg(b1)}, {4, 3});
  Node* l2 = call(g, F::linear, {Arg(x), Arg(w2)}, {4, 5}, {{"bias", Arg(b2)}});
  Node* l3 = call(g, F::linear, {Arg(x), Arg(w3)}, {4, 2});  // no bias: not in the biased group
  Node* l4 = call(g, F::linear, {Arg(x), Arg(w1), Arg(b1)}, {4, 3});  // the same weight again
  g.output(list({call(g, torch::tanh, {Arg(l1)}, {4, 3}), l2, l3, call(g, torch::relu, {Arg(l4)}, {4, 3})}));
  const Counters c = run_checked(g, {"fuse_parallel_linear_pass"}, weights);
  CHECK(c.get("fuse_parallel_linear_pass") == 1);
  CHECK(count_calls(g, F::linear) == 2);  // the fused one and the bias-free one
  CHECK(count_calls(g, torch::split) == 1);
  REQUIRE(count_calls(g, torch::cat) == 2);

  // A weight computed after the first linear cannot join it there.
  Graph h;
  Node* y = input(h, "y", {4, 8});
  Node* p = input(h, "p", {5, 8});
  Node* q = input(h, "q", {3, 8});
  Node* m1 = call(h, aten::linear, {Arg(y), Arg(q)}, {4, 3});
  Node* late = call(h, aten::relu, {Arg(p)}, {5, 8});
  Node* m2 = call(h, aten::linear, {Arg(y), Arg(late)}, {4, 5});
  h.output(list({m1, m2}));
  check_unchanged(h, {"fuse_parallel_linear_pass"}, "fuse_parallel_linear_pass_skipped");

  // As a module's trace writes them (BERT's query, key and value): each
  // get_attr just before its linear. Those read no node, so they move up.
  runtime::Weights qkv;
  Graph m;
  Node* t = input(m, "t", {4, 8});
  ArgList qkv_outs;
  for (const char* name : {"q", "k", "v"}) {
    qkv.emplace(std::string(name) + ".w", random_tensor({8, 8}, 10 + name[0]));
    qkv.emplace(std::string(name) + ".b", random_tensor({8}, 20 + name[0]));
    Node* w = m.get_attr(std::string(name) + ".w", f32({8, 8}));
    Node* b = m.get_attr(std::string(name) + ".b", f32({8}));
    qkv_outs.push_back(Arg(call(m, F::linear, {Arg(t), Arg(w), Arg(b)}, {4, 8})));
  }
  m.output(Arg(qkv_outs));
  const Counters cm = run_checked(m, {"fuse_parallel_linear_pass"}, qkv);
  CHECK(cm.get("fuse_parallel_linear_pass") == 1);
  CHECK(cm.get("fuse_parallel_linear_pass_skipped") == 0);
  CHECK(count_calls(m, F::linear) == 1);

  // aten level, three linears: one aten.linear, cats and split_with_sizes.
  Graph k;
  Node* z = input(k, "z", {2, 3, 6});
  std::vector<Node*> ws;
  for (int i = 0; i < 3; ++i) ws.push_back(input(k, "w" + std::to_string(i), {i + 1, 6}));
  ArgList outs;
  for (int i = 0; i < 3; ++i) outs.push_back(Arg(call(k, aten::linear, {Arg(z), Arg(ws[i])}, {2, 3, i + 1})));
  k.output(Arg(outs));
  CHECK(run_checked(k, {"fuse_parallel_linear_pass"}).get("fuse_parallel_linear_pass") == 1);
  CHECK(count_calls(k, aten::linear) == 1);
  CHECK(count_calls(k, aten::split_with_sizes) == 1);
}

TEST_CASE("fuse_split_linear_add_pass: linears of every piece summed are one linear on the whole input") {
  auto build = [](Graph& g, int variant) {
    Node* x = input(g, "x", {4, 6});
    const bool rows = variant == 2;
    Node* sp = rows ? multi(g, torch::split, {Arg(x), Arg(ArgList{Arg(2), Arg(2)})}, {{2, 6}, {2, 6}})
                    : multi(g, torch::split, {Arg(x), Arg(ArgList{Arg(1), Arg(2), Arg(3)}), Arg(-1)},
                            {{4, 1}, {4, 2}, {4, 3}});
    std::vector<Node*> lin;
    const std::size_t n = rows ? 2 : 3;
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t k = rows ? 6 : static_cast<std::int64_t>(i) + 1;
      Node* w = input(g, "w" + std::to_string(i), {5, k});
      Node* b = input(g, "b" + std::to_string(i), {5});
      const std::int64_t piece = variant == 1 && i == 2 ? 1 : static_cast<std::int64_t>(i);  // 1: piece 1 twice
      Node* it = item(g, sp, piece);
      const Sizes ws = rows ? Sizes{5, 6} : Sizes{5, static_cast<std::int64_t>(piece) + 1};
      if (ws != Sizes{5, k}) w = input(g, "v" + std::to_string(i), ws);
      lin.push_back(call(g, F::linear, {Arg(it), Arg(w), i == 1 ? Arg() : Arg(b)}, {rows ? 2 : 4, 5}));
    }
    const Sizes out{rows ? 2 : 4, 5};
    Node* sum = call(g, torch::add, {Arg(lin[n - 1]), Arg(lin[0])}, out);  // taken in any order
    if (n == 3) sum = call(g, torch::add, {Arg(sum), Arg(lin[1])}, out);
    ArgList outs{Arg(sum)};
    if (variant == 3) outs.push_back(Arg(lin[0]));  // a term used elsewhere
    g.output(Arg(outs));
  };
  Graph g;
  build(g, 0);
  const Counters c = run_checked(g, {"fuse_split_linear_add_pass"});
  CHECK(c.get("fuse_split_linear_add_pass") == 1);
  CHECK(count_calls(g, F::linear) == 1);
  CHECK(count_calls(g, torch::split) == 0);
  CHECK(count_calls(g, torch::add) == 1);  // the two biases summed
  // The sum of the linears inside a larger sum with another term: that inner sum fuses.
  Graph e;
  Node* x = input(e, "x", {4, 6});
  Node* w0 = input(e, "w0", {5, 2});
  Node* w1 = input(e, "w1", {5, 4});
  Node* z = input(e, "z", {4, 5});
  Node* sp = multi(e, aten::split_with_sizes, {Arg(x), Arg(ArgList{Arg(2), Arg(4)}), Arg(1)}, {{4, 2}, {4, 4}});
  Node* l0 = call(e, aten::linear, {Arg(item(e, sp, 0)), Arg(w0)}, {4, 5});
  Node* l1 = call(e, aten::linear, {Arg(item(e, sp, 1)), Arg(w1)}, {4, 5});
  Node* inner = call(e, aten::add_Tensor, {Arg(l0), Arg(l1)}, {4, 5});
  e.output(list({call(e, aten::add_Tensor, {Arg(inner), Arg(z)}, {4, 5})}));
  CHECK(run_checked(e, {"fuse_split_linear_add_pass"}).get("fuse_split_linear_add_pass") == 1);
  CHECK(count_calls(e, aten::linear) == 1);
  CHECK(count_calls(e, aten::add_Tensor) == 1);
  for (int variant : {1, 2, 3}) {
    INFO("near miss " << variant);
    Graph h;
    build(h, variant);
    check_unchanged(h, {"fuse_split_linear_add_pass"}, "fuse_split_linear_add_pass_skipped");
  }
}

// ---------------------------------------------------------------- the method forms a traced module writes

namespace {
Node* method(Graph& g, std::string_view name, ArgList args, const Sizes& shape, ArgDict kwargs = {}) {
  Node* n = g.call_method(name, std::move(args), std::move(kwargs));
  n->meta.val = f32(shape);
  return n;
}
Node* multi_method(Graph& g, std::string_view name, ArgList args, const std::vector<Sizes>& pieces, ArgDict kwargs = {}) {
  Node* n = g.call_method(name, std::move(args), std::move(kwargs));
  MetaVal::List parts;
  for (const Sizes& p : pieces) parts.push_back(MetaVal(f32(p)));
  n->meta.val = MetaVal(std::move(parts));
  return n;
}
std::size_t count_methods(const Graph& g, std::string_view name) {
  std::size_t k = 0;
  for (const Node* n : g.nodes()) k += n->op() == OpKind::call_method && n->target_name() == name;
  return k;
}
}  // namespace

TEST_CASE("remove_reshape_pass on x.reshape and x.view: to the same shape they go, to another they stay") {
  Graph g;
  Node* x = input(g, "x", {3, 5});
  Node* same = method(g, "reshape", {Arg(x), Arg(3), Arg(5)}, {3, 5});
  Node* view = method(g, "view", {Arg(same), Arg(ArgList{Arg(3), Arg(-1)})}, {3, 5});
  Node* other = method(g, "view", {Arg(view), Arg(5), Arg(3)}, {5, 3});
  g.output(list({other, view}));
  CHECK(run_checked(g, {"remove_reshape_pass"}).get("remove_reshape_pass") == 2);
  CHECK(count_methods(g, "reshape") == 0);
  REQUIRE(count_methods(g, "view") == 1);
  CHECK(g.output_node()->args()[0].list()->at(1).node() == x);
}

TEST_CASE("fuse_chunk_reshape_concat_pass and fuse_chunk_squeeze_cat_pass on x.chunk, .reshape, .view, .squeeze") {
  Graph g;
  Node* x = input(g, "x", {2, 9});
  Node* ch = multi_method(g, "chunk", {Arg(x), Arg(3), Arg(1)}, {{2, 3}, {2, 3}, {2, 3}});
  ArgList shaped;
  for (int i = 0; i < 3; ++i)
    shaped.push_back(Arg(method(g, i == 1 ? "view" : "reshape", {Arg(item(g, ch, i)), Arg(2), Arg(3), Arg(1)}, {2, 3, 1})));
  g.output(list({call(g, torch::cat, {Arg(shaped), Arg(1)}, {2, 9, 1})}));
  CHECK(run_checked(g, {"fuse_chunk_reshape_concat_pass"}).get("fuse_chunk_reshape_concat_pass") == 1);
  CHECK(g.size() == 3);  // x, reshape, output
  REQUIRE(count_calls(g, torch::reshape) == 1);

  Graph h;
  Node* y = input(h, "y", {2, 3, 5});
  Node* ch2 = multi_method(h, "chunk", {Arg(y), Arg(3)}, {{2, 1, 5}, {2, 1, 5}, {2, 1, 5}}, {{"dim", Arg(1)}});
  ArgList sq;
  for (int i = 0; i < 3; ++i) sq.push_back(Arg(method(h, "squeeze", {Arg(item(h, ch2, i)), Arg(1)}, {2, 5})));
  h.output(list({call(h, torch::cat, {Arg(sq), Arg(1)}, {2, 15})}));
  CHECK(run_checked(h, {"fuse_chunk_squeeze_cat_pass"}).get("fuse_chunk_squeeze_cat_pass") == 1);
  CHECK(count_methods(h, "chunk") == 0);
  CHECK(count_methods(h, "squeeze") == 0);

  // Reversed pieces through the methods: left and counted.
  Graph k;
  Node* z = input(k, "z", {2, 2, 5});
  Node* ch3 = multi_method(k, "chunk", {Arg(z), Arg(2), Arg(1)}, {{2, 1, 5}, {2, 1, 5}});
  Node* s0 = method(k, "squeeze", {Arg(item(k, ch3, 0)), Arg(1)}, {2, 5});
  Node* s1 = method(k, "squeeze", {Arg(item(k, ch3, 1)), Arg(1)}, {2, 5});
  k.output(list({call(k, torch::cat, {Arg(list({s1, s0})), Arg(1)}, {2, 10})}));
  check_unchanged(k, {"fuse_chunk_squeeze_cat_pass"}, "fuse_chunk_squeeze_cat_pass_skipped");
}

TEST_CASE("fuse_chunk_reshape_unsqueeze_concat_pass on .reshape then .unsqueeze of x.chunk pieces") {
  Graph g;
  Node* x = input(g, "x", {3, 8});
  Node* ch = multi_method(g, "chunk", {Arg(x), Arg(2)}, {{3, 4}, {3, 4}}, {{"dim", Arg(1)}});
  ArgList parts;
  for (int i = 0; i < 2; ++i) {
    Node* r = method(g, "reshape", {Arg(item(g, ch, i)), Arg(ArgList{Arg(3), Arg(2), Arg(2)})}, {3, 2, 2});
    parts.push_back(Arg(method(g, "unsqueeze", {Arg(r), Arg(1)}, {3, 1, 2, 2})));
  }
  g.output(list({call(g, torch::cat, {Arg(parts), Arg(1)}, {3, 2, 2, 2})}));
  CHECK(run_checked(g, {"fuse_chunk_reshape_unsqueeze_concat_pass"}).get("fuse_chunk_reshape_unsqueeze_concat_pass") == 1);
  CHECK(g.size() == 3);
}

TEST_CASE("fuse_split_linear_add_pass and remove_split_ops_pass on x.split") {
  Graph g;
  Node* x = input(g, "x", {4, 5});
  Node* sp = multi_method(g, "split", {Arg(x), Arg(ArgList{Arg(2), Arg(3)}), Arg(1)}, {{4, 2}, {4, 3}});
  Node* w0 = input(g, "w0", {3, 2});
  Node* w1 = input(g, "w1", {3, 3});
  Node* l0 = call(g, F::linear, {Arg(item(g, sp, 0)), Arg(w0)}, {4, 3});
  Node* l1 = call(g, F::linear, {Arg(item(g, sp, 1)), Arg(w1)}, {4, 3});
  g.output(list({call(g, torch::add, {Arg(l0), Arg(l1)}, {4, 3})}));
  CHECK(run_checked(g, {"fuse_split_linear_add_pass"}).get("fuse_split_linear_add_pass") == 1);
  CHECK(count_calls(g, F::linear) == 1);
  CHECK(count_methods(g, "split") == 0);

  // x.split into one piece: its getitem is x.
  Graph h;
  Node* y = input(h, "y", {4, 5});
  Node* one = multi_method(h, "split", {Arg(y), Arg(5)}, {{4, 5}}, {{"dim", Arg(1)}});
  h.output(list({call(h, torch::relu, {Arg(item(h, one, 0))}, {4, 5})}));
  CHECK(run_checked(h, {"remove_split_ops_pass"}).get("remove_split_ops_pass") == 1);
  CHECK(count_methods(h, "split") == 0);
}

TEST_CASE("relu_nan_to_num on x.relu() and .nan_to_num(): known finite goes, possibly NaN stays") {
  Graph g;
  Node* x = input(g, "x", {3, 7});
  Node* clean = method(g, "nan_to_num", {Arg(x)}, {3, 7});
  Node* r = method(g, "relu", {Arg(clean)}, {3, 7});
  Node* again = method(g, "nan_to_num", {Arg(r)}, {3, 7});
  g.output(list({again}));
  CHECK(run_checked(g, {"relu_nan_to_num"}).get("relu_nan_to_num") == 1);
  CHECK(count_methods(g, "nan_to_num") == 1);  // the first one, on x

  Graph h;
  Node* y = input(h, "y", {3, 7});
  Node* r2 = method(h, "relu", {Arg(y)}, {3, 7});
  h.output(list({method(h, "nan_to_num", {Arg(r2)}, {3, 7})}));
  check_unchanged(h, {"relu_nan_to_num"}, "relu_nan_to_num_skipped");
}
