// split_cat_pass, unbind_stack_pass and merge_splits_pass
// (kiln/passes/split_cat/): rewrites, the selections Inductor gets wrong
// (reordered, reversed, repeated, partial, negative dims, pieces with other
// users), near-misses, counters, lint, and a numeric check of every rewrite.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/executor/numeric_check.hpp"
#include "test_support.hpp"

using namespace kiln;

namespace {

using Shape = std::vector<std::int64_t>;

TensorMeta f32(const Shape& s) { return TensorMeta{std::vector<Dim>(s.begin(), s.end()), DType::float32, std::nullopt}; }
Shape shape_of(const Node* n) {
  Shape s;
  for (const Dim& d : n->meta.val.tensor()->shape) s.push_back(std::get<std::int64_t>(d));
  return s;
}
std::int64_t norm(std::int64_t d, std::size_t rank) { return d < 0 ? d + static_cast<std::int64_t>(rank) : d; }
Arg ints(const Shape& s) {
  ArgList l;
  for (auto v : s) l.emplace_back(v);
  return Arg(std::move(l));
}
Arg nodes(const std::vector<Node*>& ns) {
  ArgList l;
  for (Node* n : ns) l.emplace_back(n);
  return Arg(std::move(l));
}

// Builds graphs in the canonical form normalization_pass leaves, with meta.
struct Net {
  Graph g;
  Node* input(const std::string& name, const Shape& s) { return g.placeholder(name, f32(s)); }
  Node* split(Node* x, const Shape& sections, std::int64_t dim) {
    const Shape in = shape_of(x);
    const auto d = static_cast<std::size_t>(norm(dim, in.size()));
    MetaVal::List parts;
    for (auto s : sections) {
      Shape p = in;
      p[d] = s;
      parts.emplace_back(f32(p));
    }
    Node* s = g.call_function(torch::split, {Arg(x), ints(sections)}, {{"dim", Arg(dim)}});
    s->meta.val = MetaVal(std::move(parts));
    return s;
  }
  Node* unbind(Node* x, std::int64_t dim) {
    Shape p = shape_of(x);
    const auto d = static_cast<std::size_t>(norm(dim, p.size()));
    const auto n = p[d];
    p.erase(p.begin() + static_cast<std::ptrdiff_t>(d));
    Node* u = g.call_function(torch::unbind, {Arg(x)}, {{"dim", Arg(dim)}});
    u->meta.val = MetaVal(MetaVal::List(static_cast<std::size_t>(n), MetaVal(f32(p))));
    return u;
  }
  Node* item(Node* multi, std::int64_t i) {
    const auto& parts = *multi->meta.val.list();
    Node* n = g.call_function(pyop::getitem, {Arg(multi), Arg(i)});
    n->meta.val = parts[static_cast<std::size_t>(norm(i, parts.size()))];
    return n;
  }
  std::vector<Node*> items(Node* multi) {
    std::vector<Node*> out;
    for (std::size_t i = 0; i < multi->meta.val.list()->size(); ++i) out.push_back(item(multi, static_cast<std::int64_t>(i)));
    return out;
  }
  Node* cat(const std::vector<Node*>& xs, std::int64_t dim) {
    Shape s = shape_of(xs[0]);
    const auto d = static_cast<std::size_t>(norm(dim, s.size()));
    s[d] = 0;
    for (Node* x : xs) s[d] += shape_of(x)[d];
    Node* n = g.call_function(torch::cat, {nodes(xs)}, {{"dim", Arg(dim)}});
    n->meta.val = f32(s);
    return n;
  }
  Node* stack(const std::vector<Node*>& xs, std::int64_t dim) {
    Shape s = shape_of(xs[0]);
    const auto d = norm(dim, s.size() + 1);
    s.insert(s.begin() + d, static_cast<std::int64_t>(xs.size()));
    Node* n = g.call_function(torch::stack, {nodes(xs)}, {{"dim", Arg(dim)}});
    n->meta.val = f32(s);
    return n;
  }
  Node* tanh(Node* x) {
    Node* n = g.call_function(torch::tanh, {Arg(x)});
    n->meta.val = x->meta.val;
    return n;
  }
  Node* squeeze(Node* x, std::int64_t dim) {
    Shape s = shape_of(x);
    const auto d = norm(dim, s.size());
    if (s[static_cast<std::size_t>(d)] == 1) s.erase(s.begin() + d);
    Node* n = g.call_function(torch::squeeze, {Arg(x)}, {{"dim", Arg(dim)}});
    n->meta.val = f32(s);
    return n;
  }
  void output(const std::vector<Node*>& outs) { g.output(ArgList{nodes(outs)}); }
};

std::size_t count_calls(const Graph& g, OpRef op) { return g.find_nodes(OpKind::call_function, op).size(); }

// Runs `pass` on `g` and checks lint and that the outputs equal the original's.
Counters run_checked(Graph& g, const std::string& pass, bool numeric = true) {
  lint(g);
  const Graph original = g.clone();
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.run(g, {pass});
  lint(g);
  if (!numeric) return pm.counters();
  runtime::NumericCheck check(original, {});
  const auto report = check.compare(g);
  INFO(report.summary());
  CHECK(report.ok);
  return pm.counters();
}

// run_checked on a near-miss or a skipped match: also checks that the graph
// keeps its size (nothing was rewritten).
Counters run_unchanged(Graph& g, const std::string& pass) {
  const std::size_t before = g.size();
  const Counters k = run_checked(g, pass);
  CHECK(g.size() == before);
  return k;
}

}  // namespace

// ---- split_cat_pass ----

TEST_CASE("split_cat_pass: a cat of every piece in order along the split dim is the split's input") {
  Net n;
  Node* x = n.input("x", {4, 64});
  auto p = n.items(n.split(x, {16, 16, 16, 16}, 1));
  Node* c = n.cat(p, 1);
  n.output({n.tanh(c)});
  const Counters k = run_checked(n.g, "split_cat_pass");
  CHECK(k.get("scmerge_split_sections_removed") == 3);
  CHECK(k.get("scmerge_split_removed") == 1);
  CHECK(k.get("scmerge_cat_removed") == 1);
  CHECK(k.get("scmerge_split_added") == 0);
  CHECK(k.get("scmerge_cat_added") == 0);
  CHECK(k.get("unbind_stack_pass") == 1);
  CHECK(k.get("pattern_matcher_count") == 1);
  CHECK(count_calls(n.g, torch::split) == 0);
  CHECK(count_calls(n.g, torch::cat) == 0);
  CHECK(n.g.size() == 3);  // x, tanh, output
}

TEST_CASE("split_cat_pass: stacks along the split dim and across it become unflatten and permute") {
  Net n;
  Node* x = n.input("x", {6, 32});
  auto a = n.items(n.split(x, {8, 8, 8, 8}, 1));
  Node* along = n.stack(a, 1);
  Node* y = n.input("y", {6, 32});
  auto b = n.items(n.split(y, {8, 8, 8, 8}, 1));
  Node* across = n.stack(b, 0);
  Node* z = n.input("z", {8, 5});
  auto c = n.items(n.split(z, {2, 2, 2, 2}, 0));
  Node* last = n.stack(c, 2);
  n.output({along, across, last});
  const Counters k = run_checked(n.g, "split_cat_pass");
  CHECK(k.get("unbind_stack_pass") == 3);
  CHECK(k.get("scmerge_split_removed") == 3);
  CHECK(count_calls(n.g, torch::split) == 0);
  CHECK(count_calls(n.g, torch::stack) == 0);
}

TEST_CASE("split_cat_pass: a cat across the split dim with another input of any size there") {
  // Inductor unsqueezes the other input and flattens after the cat, which
  // fails when it is not the pieces' size along the cat dim; kiln flattens the range.
  Net n;
  Node* x = n.input("x", {8, 6});
  auto p = n.items(n.split(x, {4, 4}, 0));
  Node* o = n.input("o", {4, 5});
  Node* c = n.cat({p[0], p[1], o}, 1);
  n.output({c});
  const Counters k = run_checked(n.g, "split_cat_pass");
  CHECK(k.get("unbind_stack_pass") == 1);
  CHECK(k.get("scmerge_cat_added") == 1);
  CHECK(count_calls(n.g, torch::split) == 0);
}

TEST_CASE("split_cat_pass: reordered runs of pieces keep their order") {
  Net n;
  Node* x = n.input("x", {3, 32});
  auto p = n.items(n.split(x, {8, 8, 8, 8}, 1));
  Node* c = n.cat({p[2], p[3], p[0], p[1]}, 1);
  n.output({c});
  const Counters k = run_checked(n.g, "split_cat_pass");
  CHECK(k.get("scmerge_split_sections_removed") == 2);
  CHECK(k.get("scmerge_split_added") == 1);
  CHECK(k.get("scmerge_cat_added") == 1);
  const auto splits = n.g.find_nodes(OpKind::call_function, torch::split);
  REQUIRE(splits.size() == 1);
  CHECK(format_arg(splits[0]->args()[1]) == "[16, 16]");
}

TEST_CASE("split_cat_pass: reversed pieces and pieces also read elsewhere leave the graph") {
  SUBCASE("reversed: nothing merges") {
    Net n;
    Node* x = n.input("x", {3, 32});
    auto p = n.items(n.split(x, {8, 8, 8, 8}, 1));
    n.output({n.cat({p[3], p[2], p[1], p[0]}, 1)});
    const Counters k = run_unchanged(n.g, "split_cat_pass");
    CHECK(k.get("pattern_matcher_count") == 1);
    CHECK(k.get("unbind_stack_pass") == 0);
  }
  SUBCASE("a piece of the cat also read by tanh: the ranges overlap") {
    Net n;
    Node* x = n.input("x", {3, 32});
    auto p = n.items(n.split(x, {8, 8, 16}, 1));
    n.output({n.cat({p[0], p[1]}, 1), n.tanh(p[1]), n.tanh(p[2])});
    const Counters k = run_unchanged(n.g, "split_cat_pass");
    CHECK(k.get("unbind_stack_pass") == 0);
  }
}

TEST_CASE("split_cat_pass: repeated, partial and other-user pieces") {
  Net n;
  Node* x = n.input("x", {4, 64});
  auto p = n.items(n.split(x, {8, 8, 16, 32}, 1));
  Node* q = n.cat({p[1], p[2]}, 1);        // partial: piece 0 and 3 elsewhere
  Node* r = n.stack({p[3], p[3]}, 0);      // repeated
  Node* t = n.tanh(p[0]);                  // another user
  n.output({q, r, t});
  const Counters k = run_checked(n.g, "split_cat_pass");
  CHECK(k.get("scmerge_split_sections_removed") == 1);
  CHECK(k.get("scmerge_split_added") == 1);
  CHECK(k.get("scmerge_cat_removed") == 2);
  const auto splits = n.g.find_nodes(OpKind::call_function, torch::split);
  REQUIRE(splits.size() == 1);
  CHECK(format_arg(splits[0]->args()[1]) == "[8, 24, 32]");
}

TEST_CASE("split_cat_pass: negative dims on the split, the cat and the stack") {
  Net n;
  Node* x = n.input("x", {4, 6, 32});
  auto p = n.items(n.split(x, {8, 8, 8, 8}, -1));
  Node* c = n.cat({p[0], p[1]}, -1);
  Node* s = n.stack({p[2], p[3]}, -2);
  Node* y = n.input("y", {4, 6, 32});
  auto q = n.items(n.split(y, {16, 16}, -1));
  Node* across = n.cat(q, -2);
  n.output({c, s, across});
  const Counters k = run_checked(n.g, "split_cat_pass");
  CHECK(k.get("unbind_stack_pass") == 2);
  CHECK(k.get("scmerge_cat_removed") == 3);
}

TEST_CASE("split_cat_pass near-misses: a split with a non-getitem user or a piece taken twice") {
  SUBCASE("the split's list read whole") {
    Net n;
    Node* x = n.input("x", {4, 16});
    Node* s = n.split(x, {8, 8}, 1);
    auto p = n.items(s);
    Node* c = n.cat(p, 1);
    Node* whole = n.g.call_function(torch::cat, {Arg(s)}, {{"dim", Arg(1)}});
    whole->meta.val = c->meta.val;
    n.output({c, whole});
    const Counters k = run_checked(n.g, "split_cat_pass", /*numeric=*/false);  // the executor takes no list as a node
    CHECK(k.get("pattern_matcher_count") == 0);
    CHECK(count_calls(n.g, torch::split) == 1);
  }
  SUBCASE("two getitems of one piece") {
    Net n;
    Node* x = n.input("x", {4, 16});
    Node* s = n.split(x, {8, 8}, 1);
    auto p = n.items(s);
    Node* again = n.item(s, 0);
    n.output({n.cat(p, 1), n.tanh(again)});
    const Counters k = run_checked(n.g, "split_cat_pass");
    CHECK(k.get("pattern_matcher_count") == 0);
    CHECK(count_calls(n.g, torch::split) == 1);
  }
}

TEST_CASE("split_cat_pass: size-1 pieces squeezed along the split dim become an unbind") {
  Net n;
  Node* x = n.input("x", {4, 3, 8});
  auto p = n.items(n.split(x, {1, 1, 1}, 1));
  std::vector<Node*> outs;
  for (Node* piece : p) outs.push_back(n.tanh(n.squeeze(piece, 1)));
  n.output(outs);
  const Counters k = run_checked(n.g, "split_cat_pass");
  CHECK(k.get("split_cat_pass") == 1);
  CHECK(count_calls(n.g, torch::unbind) == 1);
  CHECK(count_calls(n.g, torch::split) == 0);
  CHECK(count_calls(n.g, torch::squeeze) == 0);
  // Inductor's RepeatedExpr at the last squeeze: split, getitem and squeeze for it, then for each of the 3 squeezes.
  CHECK(k.get("pattern_matcher_count") == 1);
  CHECK(k.get("pattern_matcher_nodes") == 9);
}

TEST_CASE("split_cat_pass: the squeeze case counts Inductor's matches and nodes when its handler declines") {
  SUBCASE("a piece of size 2: Inductor's pattern matches at each of the 4 squeezes, 12 nodes each") {
    Net n;
    Node* x = n.input("x", {4, 5, 8});
    auto p = n.items(n.split(x, {2, 1, 1, 1}, 1));
    std::vector<Node*> outs;
    for (Node* piece : p) outs.push_back(n.squeeze(piece, 1));
    n.output(outs);
    const Counters k = run_unchanged(n.g, "split_cat_pass");
    CHECK(k.get("split_cat_pass") == 0);
    CHECK(k.get("pattern_matcher_count") == 4);
    CHECK(k.get("pattern_matcher_nodes") == 48);
  }
  SUBCASE("one piece read by a tanh: the 2 squeezes are the anchors, 6 nodes each") {
    Net n;
    Node* x = n.input("x", {4, 3, 8});
    auto p = n.items(n.split(x, {1, 1, 1}, 1));
    n.output({n.tanh(p[0]), n.squeeze(p[1], 1), n.squeeze(p[2], 1)});
    const Counters k = run_unchanged(n.g, "split_cat_pass");
    CHECK(k.get("split_cat_pass") == 0);
    CHECK(k.get("pattern_matcher_count") == 2);
    CHECK(k.get("pattern_matcher_nodes") == 12);
  }
  SUBCASE("a negative squeeze dim for the split's 1: no Inductor match, kiln unbinds and counts its own one") {
    Net n;
    Node* x = n.input("x", {4, 3});
    auto p = n.items(n.split(x, {1, 1, 1}, 1));
    std::vector<Node*> outs;
    for (Node* piece : p) outs.push_back(n.squeeze(piece, -1));
    n.output(outs);
    const Counters k = run_checked(n.g, "split_cat_pass");
    CHECK(k.get("split_cat_pass") == 1);
    CHECK(k.get("pattern_matcher_count") == 1);
    CHECK(k.get("pattern_matcher_nodes") == 1);
  }
}

TEST_CASE("split_cat_pass: a squeeze along another dim than the split's is skipped") {
  // Inductor would unbind along the squeeze dim: a different tensor.
  Net n;
  Node* x = n.input("x", {1, 3, 8});
  auto p = n.items(n.split(x, {1, 1, 1}, 1));
  std::vector<Node*> outs;
  for (Node* piece : p) outs.push_back(n.squeeze(piece, 0));
  n.output(outs);
  const Counters k = run_unchanged(n.g, "split_cat_pass");
  CHECK(k.get("split_cat_pass") == 0);
  CHECK(k.get("split_cat_pass_skipped") == 1);
}

// ---- unbind_stack_pass ----

TEST_CASE("unbind_stack_pass: unbind into cat and stack becomes permute and flatten") {
  Net n;
  Node* y = n.input("y", {4, 3, 16});
  auto a = n.items(n.unbind(y, 1));
  Node* c = n.cat(a, 1);
  Node* z = n.input("z", {4, 3, 16});
  auto b = n.items(n.unbind(z, 1));
  Node* s = n.stack(b, 0);
  n.output({c, s});
  const Counters k = run_checked(n.g, "unbind_stack_pass");
  CHECK(k.get("unbind_stack_pass") == 2);
  CHECK(k.get("scmerge_split_sections_removed") == 2);
  CHECK(k.get("scmerge_split_removed") == 2);
  CHECK(k.get("scmerge_cat_removed") == 2);
  CHECK(count_calls(n.g, torch::unbind) == 0);
  CHECK(count_calls(n.g, torch::flatten) == 1);
  CHECK(count_calls(n.g, torch::permute) == 1);
}

TEST_CASE("unbind_stack_pass: negative dims, other inputs and the whole taken twice") {
  Net n;
  Node* y = n.input("y", {4, 3, 16});
  auto a = n.items(n.unbind(y, -1));
  Node* o = n.input("o", {4, 3});
  Node* s = n.stack({o, a[0], a[1]}, -1);  // not the whole: left
  Node* z = n.input("z", {5, 3, 2});
  auto b = n.items(n.unbind(z, -1));
  Node* w = n.input("w", {5, 3});
  Node* t = n.stack({w, b[0], b[1], b[0], b[1]}, -1);  // the whole, twice, after another input
  Node* c = n.cat({b[0], b[1]}, -2);
  n.output({s, t, c});
  const Counters k = run_checked(n.g, "unbind_stack_pass");
  CHECK(k.get("unbind_stack_pass") == 1);
  CHECK(k.get("scmerge_cat_removed") == 2);
  CHECK(count_calls(n.g, torch::unbind) == 1);
}

TEST_CASE("unbind_stack_pass near-misses: reversed, partial, and a piece read by a non-cat user") {
  SUBCASE("reversed") {
    Net n;
    Node* y = n.input("y", {4, 3, 16});
    auto a = n.items(n.unbind(y, 1));
    n.output({n.stack({a[2], a[1], a[0]}, 1)});
    const Counters k = run_unchanged(n.g, "unbind_stack_pass");
    CHECK(k.get("unbind_stack_pass") == 0);
  }
  SUBCASE("partial: one output of three not taken") {
    Net n;
    Node* y = n.input("y", {4, 3, 16});
    Node* u = n.unbind(y, 1);
    n.output({n.stack({n.item(u, 0), n.item(u, 1)}, 1)});
    const Counters k = run_unchanged(n.g, "unbind_stack_pass");
    CHECK(k.get("pattern_matcher_count") == 1);
    CHECK(k.get("unbind_stack_pass") == 0);
  }
}

TEST_CASE("unbind_stack_pass: negative getitem indices") {
  // Inductor reads -3..-1 as offsets of its cumulative sizes and makes an empty range.
  Net n;
  Node* y = n.input("y", {4, 3, 16});
  Node* u = n.unbind(y, 1);
  n.output({n.cat({n.item(u, -3), n.item(u, -2), n.item(u, -1)}, 0)});
  const Counters k = run_checked(n.g, "unbind_stack_pass");
  CHECK(k.get("unbind_stack_pass") == 1);
  CHECK(count_calls(n.g, torch::unbind) == 0);
}

// ---- merge_splits_pass ----

TEST_CASE("merge_splits_pass: a split of a piece along the same dim joins the outer split") {
  Net n;
  Node* x = n.input("x", {4, 64});
  Node* first = n.split(x, {16, 48}, -1);
  Node* a = n.item(first, 0);
  Node* b = n.item(first, 1);
  Node* inner = n.split(b, {8, 8, 32}, -1);
  n.output({n.tanh(a), n.cat({n.item(inner, 2), n.item(inner, 0)}, 1)});  // piece 1 unread
  const Counters k = run_checked(n.g, "merge_splits_pass");
  CHECK(k.get("merge_splits_pass") == 1);
  const auto splits = n.g.find_nodes(OpKind::call_function, torch::split);
  REQUIRE(splits.size() == 1);
  CHECK(format_arg(splits[0]->args()[1]) == "[16, 8, 8, 32]");
  CHECK(count_calls(n.g, pyop::getitem) == 3);
}

TEST_CASE("merge_splits_pass near-misses: another dim, or the piece read elsewhere too") {
  SUBCASE("inner split along another dim") {
    Net n;
    Node* x = n.input("x", {4, 64});
    Node* first = n.split(x, {16, 48}, 1);
    Node* a = n.item(first, 0);
    auto inner = n.items(n.split(n.item(first, 1), {2, 2}, 0));
    n.output({a, inner[0], inner[1]});
    const Counters k = run_checked(n.g, "merge_splits_pass");
    CHECK(k.get("pattern_matcher_count") == 0);
    CHECK(count_calls(n.g, torch::split) == 2);
  }
  SUBCASE("piece also read by tanh") {
    Net n;
    Node* x = n.input("x", {4, 64});
    Node* first = n.split(x, {16, 48}, 1);
    Node* b = n.item(first, 1);
    auto inner = n.items(n.split(b, {24, 24}, 1));
    n.output({n.tanh(b), inner[0], inner[1]});
    const Counters k = run_checked(n.g, "merge_splits_pass");
    CHECK(k.get("pattern_matcher_count") == 0);
    CHECK(count_calls(n.g, torch::split) == 2);
  }
}

// ---- nothing half-applied, and the fixture ----

TEST_CASE("split_cat_pass: a cat without meta is not rewritten at all and counts split_cat_pass_skipped") {
  // Inductor replaces the split first and then returns at the cat that lacks
  // meta, leaving the graph half-rewritten; kiln decides before editing.
  Net n;
  Node* x = n.input("x", {4, 32});
  auto p = n.items(n.split(x, {8, 8, 8, 8}, 1));
  Node* c = n.cat({p[0], p[1]}, 1);
  Node* bare = n.cat({p[2], p[3]}, 1);
  bare->meta.val = MetaVal();
  n.output({c, bare});
  const Counters k = run_unchanged(n.g, "split_cat_pass");
  CHECK(k.get("split_cat_pass_skipped") >= 1);
  CHECK(k.get("unbind_stack_pass") == 0);
  CHECK(c->args()[0].list()->at(0).node() == p[0]);
}

TEST_CASE("each simplify pass after normalization on splitcat_b keeps the graph's outputs") {
  const std::string fixture = std::string(KILN_FIXTURES_DIR) + "/inductor/splitcat_b_pregrad.json.gz";
  const PassRegistry registry = default_pass_registry();
  for (const std::string pass : {"split_cat_pass", "unbind_stack_pass", "merge_splits_pass"}) {
    INFO(pass);
    Graph g = io::read_fx_json(fixture).graph;
    PassManager pm(registry);
    pm.run(g, {"normalization_pass"});
    const Graph original = g.clone();
    pm.run(g, {pass});
    lint(g);
    runtime::NumericCheck check(original, {});
    const auto report = check.compare(g);
    INFO(report.summary());
    CHECK(report.ok);
  }
}
