// The aten-level split/cat passes of Inductor's post-grad list
// (kiln/passes/split_cat/aten.hpp, decompose_mm.hpp): normalization_aten_pass,
// unbind_stack_aten_pass, decompose_mm_pass, with their near-misses and the
// numeric check of every rewrite.
#include <doctest/doctest.h>

#include "kiln/executor/numeric_check.hpp"
#include "predispatch_test_support.hpp"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("normalization_aten_pass: splits get their sizes from meta and a non-negative dim, cats too") {
  Graph g;
  Node* x = input(g, "x", {10, 3});
  Node* s = multi(g, aten::split_Tensor, {Arg(x), Arg(4)}, {{4, 3}, {4, 3}, {2, 3}});  // the last piece is shorter
  Node* w = multi(g, aten::split_with_sizes, {Arg(x), Arg(ArgList{Arg(1), Arg(2)}), Arg(-1)}, {{10, 1}, {10, 2}});
  Node* c = call(g, aten::cat, {Arg(list({item(g, s, 2), item(g, s, 0)})), Arg(-2)}, {6, 3});
  g.output(list({c, item(g, w, 1)}));
  const Counters first = run_checked(g, {"normalization_aten_pass"});
  CHECK(first.get("normalization_aten_pass") == 3);
  CHECK(count_calls(g, aten::split_Tensor) == 0);
  for (const Node* n : g.find_nodes(OpKind::call_function, aten::split_with_sizes)) {
    CHECK(n->args().size() == 2);
    CHECK(*n->kwargs().find("dim")->get_if<std::int64_t>() >= 0);
  }
  const Node* split = g.find_nodes(OpKind::call_function, aten::split_with_sizes).at(0);
  CHECK(format_arg(split->args()[1]) == "[4, 4, 2]");
  const Node* cat = g.find_nodes(OpKind::call_function, aten::cat).at(0);
  CHECK(*cat->kwargs().find("dim")->get_if<std::int64_t>() == 0);
  // Again: the splits are canonical; Inductor's cat normalization rewrites and counts every cat each time.
  const Counters second = run_passes(g, {"normalization_aten_pass"});
  CHECK(second.get("normalization_aten_pass") == 1);
}

namespace {
// cat([unsqueeze(select(x, sel_dim, i), unsq_dim) for i in idx], cat_dim) of x [3, 4].
Graph select_cat(std::vector<std::int64_t> idx, std::int64_t sel_dim, std::int64_t unsq_dim, std::int64_t cat_dim,
                 bool extra_user = false) {
  Graph g;
  Node* x = input(g, "x", {3, 4});
  const Sizes rest = (sel_dim == 0 || sel_dim == -2) ? Sizes{4} : Sizes{3};
  ArgList parts;
  Node* first = nullptr;
  Sizes piece;
  for (std::int64_t i : idx) {
    Node* s = call(g, aten::select_int, {Arg(x), Arg(sel_dim), Arg(i)}, rest);
    if (!first) first = s;
    piece = rest;
    const std::int64_t at = unsq_dim < 0 ? unsq_dim + 2 : unsq_dim;
    piece.insert(piece.begin() + at, 1);
    parts.push_back(Arg(call(g, aten::unsqueeze, {Arg(s), Arg(unsq_dim)}, piece)));
  }
  Sizes out = piece;
  out[static_cast<std::size_t>(cat_dim < 0 ? cat_dim + 2 : cat_dim)] *= static_cast<std::int64_t>(idx.size());
  ArgList outs{Arg(call(g, aten::cat, {Arg(parts), Arg(cat_dim)}, out))};
  if (extra_user) outs.push_back(Arg(call(g, aten::tanh, {Arg(first)}, rest)));
  g.output(Arg(outs));
  return g;
}
}  // namespace

TEST_CASE("unbind_stack_aten_pass: every slice of x, unsqueezed and concatenated back in order, is x") {
  Graph g = select_cat({0, 1, -1}, -2, 0, 0);
  const Counters c = run_checked(g, {"unbind_stack_aten_pass"});
  CHECK(c.get("unbind_stack_aten_pass") == 1);
  CHECK(g.size() == 2);  // x, output
  Graph h = select_cat({0, 1, 2, 3}, 1, -1, -1);
  CHECK(run_checked(h, {"unbind_stack_aten_pass"}).get("unbind_stack_aten_pass") == 1);

  struct Miss {
    const char* what;
    std::vector<std::int64_t> idx;
    std::int64_t sel, unsq, cat;
    bool extra;
  };
  for (const Miss& m : {Miss{"partial", {0, 1}, 0, 0, 0, false}, Miss{"reversed", {2, 1, 0}, 0, 0, 0, false},
                        Miss{"repeated", {0, 0, 2}, 0, 0, 0, false}, Miss{"unsqueeze on another dim", {0, 1, 2}, 0, 1, 1, false},
                        Miss{"select with another user", {0, 1, 2}, 0, 0, 0, true}}) {
    INFO(m.what);
    Graph k = select_cat(m.idx, m.sel, m.unsq, m.cat, m.extra);
    const std::size_t before = k.size();
    const Counters ck = run_checked(k, {"unbind_stack_aten_pass"});
    CHECK(ck.get("unbind_stack_aten_pass_skipped") == 1);
    CHECK(ck.get("unbind_stack_aten_pass") == 0);
    CHECK(k.size() == before);
  }
}

TEST_CASE("decompose_mm_pass: small mm, addmm and bmm on cpu become multiply and sum, by Inductor's thresholds") {
  Graph g;
  Node* a = input(g, "a", {1, 8});
  Node* b = input(g, "b", {8, 5});
  Node* c = input(g, "c", {5});
  Node* a3 = input(g, "a3", {1, 2, 3});
  Node* b3 = input(g, "b3", {1, 3, 4});
  Node* big = input(g, "big", {2, 8});  // two rows: over cpu_max_first_dimension_decomposition
  Node* mm = call(g, aten::mm, {Arg(a), Arg(b)}, {1, 5});
  Node* addmm = call(g, aten::addmm, {Arg(c), Arg(a), Arg(b)}, {1, 5});
  Node* bmm = call(g, aten::bmm, {Arg(a3), Arg(b3)}, {1, 2, 4});
  Node* kept = call(g, aten::mm, {Arg(big), Arg(b)}, {2, 5});
  Node* scaled = call(g, aten::addmm, {Arg(c), Arg(a), Arg(b)}, {1, 5}, {{"beta", Arg(2)}});
  g.output(list({mm, addmm, bmm, kept, scaled}));
  const Counters r = run_checked(g, {"decompose_mm_pass"});
  CHECK(r.get("decompose_mm") == 1);
  CHECK(r.get("decompose_addmm") == 1);
  CHECK(r.get("decompose_bmm") == 1);
  CHECK(r.get("decompose_mm_pass_skipped") == 1);  // addmm with beta=2
  CHECK(count_calls(g, aten::mm) == 1);
  CHECK(count_calls(g, aten::addmm) == 1);
  CHECK(count_calls(g, aten::bmm) == 0);
  CHECK(count_calls(g, aten::sum_dim_IntList) == 3);

  // The accelerator policy: a tall mm (>= 10240 rows) by a small matrix (< 32 both ways).
  Graph h;
  Node* tall = input(h, "tall", {10240, 4});
  Node* small = input(h, "small", {4, 16});
  Node* wide = input(h, "wide", {4, 32});
  h.output(list({call(h, aten::mm, {Arg(tall), Arg(small)}, {10240, 16}), call(h, aten::mm, {Arg(tall), Arg(wide)}, {10240, 32})}));
  const Counters acc = run_checked(h, {"decompose_mm_pass"}, {}, {{"decompose_mm_pass", {{"device", "cuda"}}}});
  CHECK(acc.get("decompose_mm") == 1);
  CHECK(count_calls(h, aten::mm) == 1);
  Graph k;
  Node* t2 = input(k, "t2", {10240, 4});
  Node* s2 = input(k, "s2", {4, 16});
  k.output(list({call(k, aten::mm, {Arg(t2), Arg(s2)}, {10240, 16})}));
  CHECK(run_passes(k, {"decompose_mm_pass"}).get("decompose_mm") == 0);  // cpu policy: too many rows
}
