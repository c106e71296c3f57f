// split_cat_to_slices_pass, unbind_cat_to_view_pass, split_stack_to_cats_pass,
// unbind_stack_to_slices_pass and einsum_to_pointwise_pass
// (kiln/passes/split_cat/pieces_to_views.hpp, einsum_to_pointwise.hpp): each
// rewrite checked against the original graph by the executor, and the
// selections Inductor gets wrong (reordered, repeated, dims that differ).
#include <doctest/doctest.h>

#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/split_cat/einsum_to_pointwise.hpp"
#include "kiln/executor/numeric_check.hpp"
#include "runtime_test_support.hpp"
#include "test_support.hpp"

using namespace kiln;

namespace {

using Shape = std::vector<std::int64_t>;

TensorMeta f32(const Shape& s) { return test::meta(std::vector<Dim>(s.begin(), s.end())); }
Shape shape_of(const Node* n) {
  Shape s;
  for (const Dim& d : n->meta.val.tensor()->shape) s.push_back(std::get<std::int64_t>(d));
  return s;
}
std::int64_t norm(std::int64_t dim, std::size_t rank) { return dim < 0 ? dim + static_cast<std::int64_t>(rank) : dim; }

// torch.split(x, sections, dim=dim) as normalization_pass leaves it, and its getitems.
std::vector<Node*> split(Graph& g, Node* x, const Shape& sections, std::int64_t dim, Node** split_node = nullptr) {
  const Shape in = shape_of(x);
  const auto d = static_cast<std::size_t>(norm(dim, in.size()));
  ArgList secs;
  MetaVal::List parts;
  for (std::int64_t s : sections) {
    secs.push_back(Arg(s));
    Shape p = in;
    p[d] = s;
    parts.push_back(MetaVal(f32(p)));
  }
  Node* s = g.call_function(torch::split, {Arg(x), Arg(secs)}, ArgDict{{"dim", Arg(dim)}});
  s->meta.val = MetaVal(parts);
  if (split_node) *split_node = s;
  std::vector<Node*> items;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    Node* gi = g.call_function(pyop::getitem, {Arg(s), Arg(static_cast<std::int64_t>(i))});
    gi->meta.val = parts[i];
    items.push_back(gi);
  }
  return items;
}
std::vector<Node*> unbind(Graph& g, Node* x, std::int64_t dim, Node** unbind_node = nullptr) {
  Shape in = shape_of(x);
  const auto d = static_cast<std::size_t>(norm(dim, in.size()));
  const std::int64_t n = in[d];
  in.erase(in.begin() + static_cast<std::ptrdiff_t>(d));
  MetaVal::List parts(static_cast<std::size_t>(n), MetaVal(f32(in)));
  Node* u = g.call_function(torch::unbind, {Arg(x)}, ArgDict{{"dim", Arg(dim)}});
  u->meta.val = MetaVal(parts);
  if (unbind_node) *unbind_node = u;
  std::vector<Node*> items;
  for (std::int64_t i = 0; i < n; ++i) {
    Node* gi = g.call_function(pyop::getitem, {Arg(u), Arg(i)});
    gi->meta.val = MetaVal(f32(in));
    items.push_back(gi);
  }
  return items;
}
Node* getitem(Graph& g, Node* parent, std::int64_t i) {
  Node* gi = g.call_function(pyop::getitem, {Arg(parent), Arg(i)});
  const auto& parts = *parent->meta.val.list();
  gi->meta.val = parts[static_cast<std::size_t>(i < 0 ? i + static_cast<std::int64_t>(parts.size()) : i)];
  return gi;
}
ArgList args_of(const std::vector<Node*>& ns) {
  ArgList l;
  for (Node* n : ns) l.push_back(Arg(n));
  return l;
}
Node* cat(Graph& g, const std::vector<Node*>& xs, std::int64_t dim) {
  Shape s = shape_of(xs.front());
  const auto d = static_cast<std::size_t>(norm(dim, s.size()));
  s[d] = 0;
  for (Node* x : xs) s[d] += shape_of(x)[d];
  Node* c = g.call_function(torch::cat, {Arg(args_of(xs))}, ArgDict{{"dim", Arg(dim)}});
  c->meta.val = MetaVal(f32(s));
  return c;
}
Node* stack(Graph& g, const std::vector<Node*>& xs, std::int64_t dim) {
  Shape s = shape_of(xs.front());
  s.insert(s.begin() + norm(dim, s.size() + 1), static_cast<std::int64_t>(xs.size()));
  Node* c = g.call_function(torch::stack, {Arg(args_of(xs))}, ArgDict{{"dim", Arg(dim)}});
  c->meta.val = MetaVal(f32(s));
  return c;
}
Node* tanh(Graph& g, Node* x) {
  Node* t = g.call_function(torch::tanh, {Arg(x)});
  t->meta = x->meta;
  return t;
}
Node* input(Graph& g, const std::string& name, const Shape& s) { return g.placeholder(name, f32(s)); }

// Runs `pass` on `g` (with threshold_to_cat when given), lints it, and checks
// that it still computes what `original` did.
Counters run_checked(Graph& g, const std::string& pass, std::optional<int> threshold = std::nullopt) {
  const Graph original = g.clone();
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  if (threshold) pm.set_options({{pass, {{"threshold_to_cat", *threshold}}}});
  pm.run(g, {pass});
  lint(g);
  runtime::NumericCheck check(original, {});
  const auto report = check.compare(g);
  INFO(report.summary());
  CHECK(report.ok);
  return pm.counters();
}
std::size_t count_of(const Graph& g, OpRef op) { return g.find_nodes(OpKind::call_function, op).size(); }

}  // namespace

// ---- split_cat_to_slices_pass

TEST_CASE("split_cat_to_slices_pass: a cat of a whole split, in order, is the split's input") {
  for (std::int64_t dim : {1, -1}) {
    CAPTURE(dim);
    Graph g;
    Node* x = input(g, "x", {4, 20});
    auto p = split(g, x, {4, 4, 4, 8}, dim);
    Node* c = cat(g, p, dim);
    g.output(ArgList{Arg(tanh(g, c))});
    const Counters n = run_checked(g, "split_cat_to_slices_pass");
    CHECK(n.get("split_cat_to_slices_pass") == 1);
    CHECK(n.get("pattern_matcher_count") == 1);
    CHECK(count_of(g, torch::cat) == 0);
    CHECK(count_of(g, torch::split) == 0);
    CHECK(g.find_nodes(OpKind::call_function, torch::tanh).at(0)->args()[0].node() == x);
  }
}

TEST_CASE("split_cat_to_slices_pass: a run of threshold_to_cat pieces becomes one slice, the rest stays") {
  Graph g;
  Node* x = input(g, "x", {3, 16});
  Node* z = input(g, "z", {3, 5});
  auto p = split(g, x, {2, 3, 4, 7}, 1);
  Node* c = cat(g, {p[1], p[2], z, p[0]}, 1);
  Node* other = tanh(g, p[1]);  // a piece with another user
  g.output(ArgList{Arg(tanh(g, c)), Arg(other)});
  SUBCASE("below the threshold (10 unless given): unchanged") {
    const Counters n = run_checked(g, "split_cat_to_slices_pass");
    CHECK(n.get("split_cat_to_slices_pass") == 0);
    CHECK(count_of(g, torch::cat) == 1);
  }
  SUBCASE("threshold 2: pieces 1..2 are x[:, 2:9]") {
    const Counters n = run_checked(g, "split_cat_to_slices_pass", 2);
    CHECK(n.get("split_cat_to_slices_pass") == 1);
    const Node* fresh = g.find_nodes(OpKind::call_function, torch::cat).at(0);
    REQUIRE(fresh->args()[0].list()->size() == 3);
    const Node* slice = fresh->args()[0].list()->at(0).node();
    CHECK(slice->is_call(pyop::getitem));
    CHECK(shape_of(slice) == Shape{3, 7});
    CHECK(count_of(g, torch::split) == 1);  // p[0] and p[1] are still read
  }
}

TEST_CASE("split_cat_to_slices_pass: only runs in order merge in reversed, repeated and skipping selections") {
  // The selection of pieces, and whether some run of two or more in order is in it.
  const std::vector<std::pair<std::vector<int>, bool>> selections = {
      {{3, 2, 1, 0}, false}, {{2, 0}, false}, {{0, 0, 1, 2, 3}, true}, {{0, 1, 3}, true}, {{1, 0, 2, 3}, true}};
  for (const auto& [sel, merges] : selections) {
    CAPTURE(sel);
    Graph g;
    Node* x = input(g, "x", {2, 8});
    auto p = split(g, x, {2, 2, 2, 2}, 1);
    std::vector<Node*> picked;
    for (int i : sel) picked.push_back(p[static_cast<std::size_t>(i)]);
    g.output(ArgList{Arg(cat(g, picked, 1))});
    const Counters n = run_checked(g, "split_cat_to_slices_pass", 2);
    CHECK(n.get("split_cat_to_slices_pass") == (merges ? 1 : 0));
    CHECK(n.get("split_cat_to_slices_pass_skipped") == 0);
  }
}

TEST_CASE("split_cat_to_slices_pass: a cat along another dim than the split's is skipped, not sliced") {
  Graph g;
  Node* x = input(g, "x", {4, 20});
  auto p = split(g, x, {5, 5, 5, 5}, 1);
  Node* c = cat(g, p, 0);  // [16, 5]: Inductor would return x [4, 20]
  g.output(ArgList{Arg(c)});
  const Counters n = run_checked(g, "split_cat_to_slices_pass");
  CHECK(n.get("split_cat_to_slices_pass") == 0);
  CHECK(n.get("split_cat_to_slices_pass_skipped") == 1);
  CHECK(count_of(g, torch::cat) == 1);
}

TEST_CASE("split_cat_to_slices_pass: a split whose pieces are taken twice is not TorchSplit: no match") {
  Graph g;
  Node* x = input(g, "x", {2, 8});
  Node* s = nullptr;
  auto p = split(g, x, {4, 4}, 1, &s);
  Node* again = getitem(g, s, 0);  // a second getitem of piece 0
  g.output(ArgList{Arg(cat(g, p, 1)), Arg(tanh(g, again))});
  const Counters n = run_checked(g, "split_cat_to_slices_pass");
  CHECK(n.get("pattern_matcher_count") == 0);
  CHECK(count_of(g, torch::cat) == 1);
}

TEST_CASE("split_cat_to_slices_pass: one match rewrites every cat of the split's pieces, as Inductor's does") {
  Graph g;
  Node* x = input(g, "x", {2, 12});
  auto p = split(g, x, {3, 3, 3, 3}, 1);
  Node* first = cat(g, {p[0], p[1]}, 1);
  Node* second = cat(g, {p[2], p[3], p[0]}, 1);
  g.output(ArgList{Arg(tanh(g, first)), Arg(tanh(g, second))});
  const Counters n = run_checked(g, "split_cat_to_slices_pass", 2);
  CHECK(n.get("split_cat_to_slices_pass") == 2);
  CHECK(n.get("pattern_matcher_count") == 1);
  CHECK(count_of(g, torch::cat) == 1);  // first became a slice; second is cat(slice, p[0])
}

// ---- unbind_cat_to_view_pass

TEST_CASE("unbind_cat_to_view_pass: a cat of a whole unbind is a permute and reshape of its input, at any dims") {
  struct Case {
    Shape shape;
    std::int64_t unbind_dim, cat_dim;
  };
  // (0, 2): Inductor swaps dims 0 and 2, which mixes up the others.
  for (const Case& k : {Case{{4, 3, 5}, 1, 1}, Case{{3, 4, 5}, 0, 1}, Case{{3, 4, 5, 6}, 0, 2}, Case{{4, 5, 3}, -1, 0},
                        Case{{4, 3, 5}, 1, -1}}) {
    CAPTURE(k.unbind_dim);
    CAPTURE(k.cat_dim);
    Graph g;
    Node* y = input(g, "y", k.shape);
    auto p = unbind(g, y, k.unbind_dim);
    g.output(ArgList{Arg(tanh(g, cat(g, p, k.cat_dim)))});
    const Counters n = run_checked(g, "unbind_cat_to_view_pass");
    CHECK(n.get("unbind_cat_to_view_pass") == 1);
    CHECK(count_of(g, torch::cat) == 0);
    CHECK(count_of(g, torch::unbind) == 0);
    CHECK(count_of(g, torch::permute) == (norm(k.unbind_dim, k.shape.size()) == norm(k.cat_dim, k.shape.size() - 1) ? 0 : 1));
  }
}

TEST_CASE("unbind_cat_to_view_pass: a negative getitem index is the piece it names") {
  Graph g;
  Node* y = input(g, "y", {4, 3, 5});
  Node* u = nullptr;
  auto p = unbind(g, y, 1, &u);
  Node* last = getitem(g, u, -1);
  g.output(ArgList{Arg(cat(g, {p[0], p[1], last}, 1))});
  const Counters n = run_checked(g, "unbind_cat_to_view_pass");
  CHECK(n.get("unbind_cat_to_view_pass") == 1);
  CHECK(count_of(g, torch::cat) == 0);
}

TEST_CASE("unbind_cat_to_view_pass: every piece of the unbind reordered or repeated is skipped") {
  for (const std::vector<int>& sel : std::vector<std::vector<int>>{{1, 0, 2}, {2, 1, 0}, {0, 0, 2}}) {
    CAPTURE(sel);
    Graph g;
    Node* y = input(g, "y", {4, 3, 5});
    auto p = unbind(g, y, 1);
    std::vector<Node*> picked;
    for (int i : sel) picked.push_back(p[static_cast<std::size_t>(i)]);
    g.output(ArgList{Arg(cat(g, picked, 1))});
    const Counters n = run_checked(g, "unbind_cat_to_view_pass");
    CHECK(n.get("unbind_cat_to_view_pass") == 0);
    CHECK(n.get("unbind_cat_to_view_pass_skipped") == 1);
    CHECK(count_of(g, torch::cat) == 1);
  }
}

TEST_CASE("unbind_cat_to_view_pass: a partial run at the threshold becomes a slice, the pieces with other users stay") {
  Graph g;
  Node* y = input(g, "y", {5, 4, 3});
  Node* z = input(g, "z", {4, 2});
  auto p = unbind(g, y, 0);
  Node* c = cat(g, {z, p[1], p[2], p[3], p[0]}, 1);
  g.output(ArgList{Arg(c), Arg(tanh(g, p[2]))});
  const Counters n = run_checked(g, "unbind_cat_to_view_pass", 3);
  CHECK(n.get("unbind_cat_to_view_pass") == 1);
  const Node* fresh = g.find_nodes(OpKind::call_function, torch::cat).at(0);
  CHECK(fresh->args()[0].list()->size() == 3);
  CHECK(count_of(g, pyop::getitem) == 4);  // the slice, p[0], p[2] and p[4], which nothing read before either
}

// ---- split_stack_to_cats_pass

TEST_CASE("split_stack_to_cats_pass: a stack of a whole split is a reshape (and permute) of its input") {
  struct Case {
    Shape shape;
    std::int64_t split_dim, stack_dim;
  };
  // (2, 0): Inductor swaps dims 2 and 0 of the stack's shape, which is wrong.
  for (const Case& k : {Case{{4, 12}, 1, 1}, Case{{4, 12}, 1, 0}, Case{{4, 12}, 1, 2}, Case{{2, 3, 12}, 2, 0},
                        Case{{2, 3, 12}, -1, -1}}) {
    CAPTURE(k.split_dim);
    CAPTURE(k.stack_dim);
    Graph g;
    Node* x = input(g, "x", k.shape);
    auto p = split(g, x, {3, 3, 3, 3}, k.split_dim);
    g.output(ArgList{Arg(tanh(g, stack(g, p, k.stack_dim)))});
    const Counters n = run_checked(g, "split_stack_to_cats_pass");
    CHECK(n.get("split_stack_to_cats_pass") == 1);
    CHECK(count_of(g, torch::stack) == 0);
    CHECK(count_of(g, torch::split) == 0);
  }
}

TEST_CASE("split_stack_to_cats_pass: a partial run between other tensors, repeated and reversed pieces stay") {
  Graph g;
  Node* x = input(g, "x", {4, 12});
  Node* z = input(g, "z", {4, 3});
  auto p = split(g, x, {3, 3, 3, 3}, 1);
  Node* s = stack(g, {z, p[1], p[2], p[3], z, p[0], p[0]}, 1);
  Node* r = stack(g, {p[3], p[2], p[1], p[0]}, 0);
  g.output(ArgList{Arg(s), Arg(r)});
  const Counters n = run_checked(g, "split_stack_to_cats_pass", 3);
  CHECK(n.get("split_stack_to_cats_pass") == 1);  // s; r has no run in order
  CHECK(count_of(g, torch::stack) == 3);             // r, and s's stacks of the tensors kept
  CHECK(count_of(g, torch::cat) == 1);
}

// ---- unbind_stack_to_slices_pass

TEST_CASE("unbind_stack_to_slices_pass: a stack of a whole unbind is its input, moved") {
  struct Case {
    Shape shape;
    std::int64_t unbind_dim, stack_dim;
  };
  for (const Case& k : {Case{{3, 4, 5}, 0, 0}, Case{{3, 4, 5}, 0, 2}, Case{{4, 5, 3}, 2, 0}, Case{{4, 3, 5}, -2, -1}}) {
    CAPTURE(k.unbind_dim);
    CAPTURE(k.stack_dim);
    Graph g;
    Node* y = input(g, "y", k.shape);
    auto p = unbind(g, y, k.unbind_dim);
    g.output(ArgList{Arg(tanh(g, stack(g, p, k.stack_dim)))});
    const Counters n = run_checked(g, "unbind_stack_to_slices_pass");
    CHECK(n.get("unbind_stack_to_slices_pass") == 1);
    CHECK(count_of(g, torch::stack) == 0);
    CHECK(count_of(g, torch::unbind) == 0);
  }
}

TEST_CASE("unbind_stack_to_slices_pass: partial runs, reordered wholes and other tensors") {
  Graph g;
  Node* y = input(g, "y", {6, 2, 3});
  Node* z = input(g, "z", {2, 3});
  auto p = unbind(g, y, 0);
  Node* s = stack(g, {p[0], p[1], z, p[3], p[4], p[5]}, 1);
  Node* r = stack(g, {p[5], p[4], p[3], p[2], p[1], p[0]}, 0);  // all six, reversed
  g.output(ArgList{Arg(s), Arg(r)});
  const Counters n = run_checked(g, "unbind_stack_to_slices_pass", 2);
  CHECK(n.get("unbind_stack_to_slices_pass") == 1);
  CHECK(n.get("unbind_stack_to_slices_pass_skipped") == 1);
  CHECK(count_of(g, torch::cat) == 1);
}

// ---- the option and the fixture

TEST_CASE("threshold_to_cat must be an integer of at least 1, and no other option is taken") {
  Graph g;
  Node* x = input(g, "x", {2, 8});
  g.output(ArgList{Arg(cat(g, split(g, x, {4, 4}, 1), 1))});
  const PassRegistry registry = default_pass_registry();
  PassManager bad(registry);
  bad.set_options({{"split_stack_to_cats_pass", {{"threshold_to_cat", 0}}}});
  CHECK(testing::message_of<Error>([&] { bad.run(g, {"split_stack_to_cats_pass"}); }).find("threshold_to_cat") !=
        std::string::npos);
  PassManager unknown(registry);
  CHECK_THROWS_AS(unknown.set_options({{"split_cat_to_slices_pass", {{"threshold", 2}}}}), Error);
}

TEST_CASE("every pass, alone after normalization on splitcat_b, keeps its outputs, at threshold 10 and 2") {
  const std::string file = std::string(KILN_FIXTURES_DIR) + "/inductor/splitcat_b_pregrad.json.gz";
  for (const char* pass : {"split_cat_to_slices_pass", "unbind_cat_to_view_pass", "split_stack_to_cats_pass",
                           "unbind_stack_to_slices_pass"}) {
    for (int threshold : {10, 2}) {
      CAPTURE(pass);
      CAPTURE(threshold);
      Graph g = io::read_fx_json(file).graph;
      const PassRegistry registry = default_pass_registry();
      PassManager norm_pm(registry);
      norm_pm.run(g, {"normalization_pass"});
      const Counters n = run_checked(g, pass, threshold);
      if (threshold == 2) CHECK(n.get(pass) == 1);  // q, v, s and t each become slices or views
    }
  }
}

// ---- einsum_to_pointwise_pass

namespace {
const OpRef test_einsum = split_cat::einsum_detail::functional_einsum;
// x [a,b,c], w [a,b,c,d]; out = einsum(eq, x, w) + bias, and the same by matmul for reference.
struct EinsumGraphs {
  Graph einsum, by_matmul;
};
EinsumGraphs einsum_graphs(const std::string& equation, bool read_by_add = true) {
  EinsumGraphs r;
  {
    Graph& g = r.einsum;
    Node* x = input(g, "x", {2, 3, 4});
    Node* w = input(g, "w", {2, 3, 4, 5});
    Node* bias = input(g, "bias", {2, 3, 5});
    Node* e = g.call_function(test_einsum, {Arg(equation), Arg(x), Arg(w)});
    e->meta.val = MetaVal(f32({2, 3, 5}));
    Node* out = read_by_add ? g.call_function(pyop::add, {Arg(e), Arg(bias)}) : g.call_function(torch::mul, {Arg(e), Arg(bias)});
    out->meta.val = MetaVal(f32({2, 3, 5}));
    g.output(ArgList{Arg(out)});
  }
  {
    Graph& g = r.by_matmul;
    Node* x = input(g, "x", {2, 3, 4});
    Node* w = input(g, "w", {2, 3, 4, 5});
    Node* bias = input(g, "bias", {2, 3, 5});
    Node* row = g.call_function(torch::unsqueeze, {Arg(x), Arg(-2)});
    row->meta.val = MetaVal(f32({2, 3, 1, 4}));
    Node* mm = g.call_function(torch::matmul, {Arg(row), Arg(w)});
    mm->meta.val = MetaVal(f32({2, 3, 1, 5}));
    Node* sq = g.call_function(torch::squeeze, {Arg(mm), Arg(-2)});
    sq->meta.val = MetaVal(f32({2, 3, 5}));
    Node* out = g.call_function(pyop::add, {Arg(sq), Arg(bias)});
    out->meta.val = MetaVal(f32({2, 3, 5}));
    g.output(ArgList{Arg(out)});
  }
  return r;
}
Counters run_einsum(Graph& g) {
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.run(g, {"einsum_to_pointwise_pass"});
  lint(g);
  return pm.counters();
}
}  // namespace

TEST_CASE("einsum_to_pointwise_pass: 'bni,bnio->bno' read by an add becomes unsqueeze, mul and sum") {
  auto graphs = einsum_graphs("bni,bnio->bno");
  const Graph original = graphs.einsum.clone();
  const Counters n = run_einsum(graphs.einsum);
  CHECK(n.get("einsum_to_pointwise_pass") == 1);
  CHECK(count_of(graphs.einsum, test_einsum) == 0);
  CHECK(count_of(graphs.einsum, torch::sum) == 1);
  // Against the einsum itself, and against the same product by matmul.
  for (const Graph* reference : std::vector<const Graph*>{&original, &graphs.by_matmul}) {
    runtime::NumericCheck check(*reference, {});
    const auto report = check.compare(graphs.einsum);
    INFO(report.summary());
    CHECK(report.ok);
  }
}

TEST_CASE("einsum_to_pointwise_pass: other equations, repeated letters and einsums no add reads are left") {
  auto no_add = einsum_graphs("bni,bnio->bno", false);
  CHECK(run_einsum(no_add.einsum).get("einsum_to_pointwise_pass") == 0);
  auto other = einsum_graphs("bni,bnio->bio");
  CHECK(run_einsum(other.einsum).get("einsum_to_pointwise_pass") == 0);
  auto diagonal = einsum_graphs("bbi,bbio->bbo");  // Inductor's check takes it; it is no pointwise product
  const Counters n = run_einsum(diagonal.einsum);
  CHECK(n.get("einsum_to_pointwise_pass") == 0);
  CHECK(n.get("einsum_to_pointwise_pass_skipped") == 1);
  CHECK(count_of(diagonal.einsum, test_einsum) == 1);
}

// ---- the einsum kernel (kiln/kernels/einsum.hpp), against naive loops

TEST_CASE("the einsum kernel computes a batched vector-matrix product, a matrix product and a diagonal") {
  using runtime::Tensor;
  auto run = [](const std::string& eq, std::vector<Shape> shapes, const Shape& out) {
    Graph g;
    ArgList args{Arg(eq)};
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      args.push_back(Arg(input(g, "in" + std::to_string(i), shapes[i])));
      inputs.push_back(test::random_tensor(runtime::Shape(shapes[i].begin(), shapes[i].end()), static_cast<unsigned>(11 + i)));
    }
    Node* e = g.call_function(split_cat::einsum_detail::torch_einsum, std::move(args));
    e->meta.val = MetaVal(f32(out));
    g.output(ArgList{Arg(e)});
    auto cg = runtime::CompiledGraph::compile(g, {});
    auto result = cg.run(inputs);
    REQUIRE(result[0].shape() == runtime::Shape(out.begin(), out.end()));
    return std::pair{inputs, result[0]};
  };
  SUBCASE("bni,bnio->bno") {
    auto [in, out] = run("bni,bnio->bno", {{2, 3, 4}, {2, 3, 4, 5}}, {2, 3, 5});
    for (int b = 0; b < 2; ++b)
      for (int n = 0; n < 3; ++n)
        for (int o = 0; o < 5; ++o) {
          double s = 0;
          for (int i = 0; i < 4; ++i)
            s += double(in[0].data<float>()[(b * 3 + n) * 4 + i]) * in[1].data<float>()[((b * 3 + n) * 4 + i) * 5 + o];
          CHECK(out.data<float>()[(b * 3 + n) * 5 + o] == doctest::Approx(s).epsilon(1e-5));
        }
  }
  SUBCASE("ij, jk -> ik, with spaces") {
    auto [in, out] = run("ij, jk -> ik", {{3, 4}, {4, 2}}, {3, 2});
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 2; ++k) {
        double s = 0;
        for (int j = 0; j < 4; ++j) s += double(in[0].data<float>()[i * 4 + j]) * in[1].data<float>()[j * 2 + k];
        CHECK(out.data<float>()[i * 2 + k] == doctest::Approx(s).epsilon(1e-5));
      }
  }
  SUBCASE("ii->i reads the diagonal") {
    auto [in, out] = run("ii->i", {{4, 4}}, {4});
    for (int i = 0; i < 4; ++i) CHECK(out.data<float>()[i] == in[0].data<float>()[i * 4 + i]);
  }
}

TEST_CASE("the einsum kernel refuses sizes that disagree and an implicit output, naming the node") {
  Graph g;
  Node* a = input(g, "a", {3, 4});
  Node* b = input(g, "b", {5, 2});
  Node* e = g.call_function(split_cat::einsum_detail::torch_einsum, {Arg("ij,jk->ik"), Arg(a), Arg(b)}, {}, "bad_einsum");
  e->meta.val = MetaVal(f32({3, 2}));
  g.output(ArgList{Arg(e)});
  CHECK_THROWS_WITH_AS(runtime::CompiledGraph::compile(g, {}), doctest::Contains("bad_einsum"), runtime::CompileError);
}
