// Replacing a match by a replacement graph: Inductor's
// ReplacementPatternEntry.replace_with_graph, Match.replace_by_example and
// register_replacement (torch/_inductor/pattern_matcher.py). Results are
// checked structurally.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/passes/register_replacement.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string data(const char* name) { return std::string(KILN_TEST_DATA_DIR) + "/replacements/" + name; }

// A pass holding register_replacement of <stem>_search.json and <stem>_replace.json.
PatternMatcherPass pass_from_files(const std::string& stem, ReplacementOptions options = {}) {
  io::GraphFile search = io::read_fx_json(data((stem + "_search.json").c_str()));
  io::GraphFile replace = io::read_fx_json(data((stem + "_replace.json").c_str()));
  PatternMatcherPass pass("replacements");
  register_replacement(search.graph, replace.graph, pass, std::move(options));
  return pass;
}

// Two blocks of h = add(mm(h, w), b), then relu.
struct Chain {
  Graph g;
  Node* x = g.placeholder("x", TensorMeta{{2, 4}, DType::float32, std::nullopt});
  Node* w = g.placeholder("w");
  Node* b = g.placeholder("b");
  Node* mm0 = g.call_function(aten::mm, {x, w});
  Node* add0 = g.call_function(aten::add_Tensor, {mm0, b});
  Node* mm1 = g.call_function(aten::mm, {add0, w});
  Node* add1 = g.call_function(aten::add_Tensor, {mm1, b});
  Node* relu = g.call_function(aten::relu, {add1});
  Chain() {
    add0->meta.val = TensorMeta{{2, 4}, DType::float32, std::nullopt};
    g.output(ArgList{relu});
  }
};

}  // namespace

TEST_CASE("register_replacement from fx-graph-json files: mm + add becomes addmm") {
  // Inductor's register_replacement: the search function traced and made a pattern
  // (gen_pattern), the replacement inlined at each match with the search
  // function's arguments, counters per match.
  PatternMatcherPass pass = pass_from_files("mm_add");
  Chain f;
  Counters c;
  CHECK(pass.apply(f.g, &c) == 2);
  CHECK(c.get("pattern_matcher_count") == 2);
  CHECK(c.get("pattern_matcher_nodes") == 4);
  lint(f.g);
  const auto addmms = f.g.find_nodes(OpKind::call_function, aten::addmm);
  REQUIRE(addmms.size() == 2);
  CHECK(f.g.find_nodes(OpKind::call_function, aten::mm).empty());
  CHECK(f.g.find_nodes(OpKind::call_function, aten::add_Tensor).empty());
  // addmm(c, a, b): the second uses the first.
  CHECK(addmms[0]->args() == ArgList{f.b, f.x, f.w});
  CHECK(addmms[1]->args() == ArgList{f.b, addmms[0], f.w});
  CHECK(f.relu->args() == ArgList{addmms[1]});
  // meta.val: taken from the replaced node when the new one has none.
  CHECK(addmms[0]->meta.val == MetaVal(TensorMeta{{2, 4}, DType::float32, std::nullopt}));
  CHECK(addmms[1]->meta.val.is_none());
  // The pass visits the graph backwards: the second block is rewritten first.
  CHECK(testing::names(f.g) == std::vector<std::string>{"x", "w", "b", "addmm_1", "addmm", "relu", "output"});
}

TEST_CASE("a replacement that returns its input: neg(neg(x)) becomes x") {
  // Inductor: replace(old, new) with new an existing node: uses moved, old erased,
  // then match.erase_nodes() erases the inner neg.
  PatternMatcherPass pass = pass_from_files("neg_neg");
  Graph g;
  Node* x = g.placeholder("x");
  Node* n1 = g.call_function(aten::neg, {x});
  Node* n2 = g.call_function(aten::neg, {n1});
  Node* r = g.call_function(aten::relu, {n2});
  g.output(ArgList{r});
  CHECK(pass.apply(g) == 1);
  CHECK(r->args() == ArgList{x});
  CHECK(testing::names(g) == std::vector<std::string>{"x", "relu", "output"});
}

TEST_CASE("several matched outputs: new nodes go before the first output, each output's uses move over") {
  // Inductor: last_node = min over output nodes' positions; replace(old, new) per
  // (output node, replacement value) pair; then erase_nodes.
  Graph search;
  {
    Node* a = search.placeholder("a");
    Node* r = search.call_function(aten::relu, {a});
    search.output(ArgList{search.call_function(aten::sigmoid, {r}), search.call_function(aten::tanh, {r})});
  }
  Graph repl;
  {
    Node* a = repl.placeholder("a");
    Node* n = repl.call_function(aten::neg, {a});
    repl.output(ArgList{repl.call_function(aten::sigmoid, {n}), repl.call_function(aten::abs, {n})});
  }
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  Node* mid = g.call_function(aten::clone, {a});
  Node* t = g.call_function(aten::tanh, {r});
  Node* use_s = g.call_function(aten::add_Tensor, {s, mid});
  Node* use_t = g.call_function(aten::mul_Tensor, {t, t});
  g.output(ArgList{use_s, use_t});
  PatternMatcherPass pass("multi");
  register_replacement(search, repl, pass);
  CHECK(pass.apply(g) == 1);
  lint(g);
  CHECK(testing::names(g) ==
        std::vector<std::string>{"a", "neg", "sigmoid_1", "abs_1", "clone", "add", "mul", "output"});
  Node* neg = g.find_node("neg");
  CHECK(neg->args() == ArgList{a});
  CHECK(use_s->args() == ArgList{g.find_node("sigmoid_1"), mid});
  CHECK(use_t->args() == ArgList{g.find_node("abs_1"), g.find_node("abs_1")});
}

TEST_CASE("several replacement values for one matched node: its getitem users are unpacked") {
  // Inductor's replace(): when `new` is a list and `old` has getitem users, each
  // getitem is replaced by new[index] and old is erased.
  Graph search;
  {
    Node* x = search.placeholder("x");
    search.output(ArgList{search.call_function(OpRef("test.pair.default"), {x})});
  }
  Graph repl;
  {
    Node* x = repl.placeholder("x");
    repl.output(ArgList{repl.call_function(aten::relu, {x}), repl.call_function(aten::neg, {x})});
  }
  Graph g;
  Node* x = g.placeholder("x");
  Node* pair = g.call_function(OpRef("test.pair.default"), {x});
  Node* g1 = g.call_function(pyop::getitem, {pair, 1});
  Node* g0 = g.call_function(pyop::getitem, {pair, 0});
  Node* out = g.call_function(aten::add_Tensor, {g0, g1});
  g.output(ArgList{out});
  PatternMatcherPass pass("unpack");
  register_replacement(search, repl, pass);
  CHECK(pass.apply(g) == 1);
  lint(g);
  CHECK(testing::names(g) == std::vector<std::string>{"x", "relu", "neg", "add", "output"});
  CHECK(out->args() == ArgList{g.find_node("relu"), g.find_node("neg")});
}

TEST_CASE("bad replacements are errors and leave the graph as it was") {
  Chain f;
  const std::string before = to_string(f.g);
  p::RuntimePattern pat = p::gen_pattern(io::read_fx_json(data("mm_add_search.json")).graph);
  p::RuntimeMatcher matcher(pat);
  REQUIRE(matcher.try_match(f.add0));
  p::RuntimeMatch m = matcher.result(f.g);
  // A call_method node (Inductor's Replacer has call_method = None).
  Graph method;
  Node* a = method.placeholder("a");
  method.output(ArgList{method.call_method("view", {a, -1})});
  CHECK(contains(testing::message_of<Error>([&] { p::replace_with_graph(m, method, std::vector<kiln::Arg>{f.x}); }),
                 "replacement node view is a call_method"));
  // Argument count.
  io::GraphFile repl = io::read_fx_json(data("mm_add_replace.json"));
  CHECK(contains(testing::message_of<Error>([&] { p::replace_with_graph(m, repl.graph, std::vector<kiln::Arg>{f.x}); }),
                 "3 placeholders, 1 arguments"));
  // A constant cannot take a node's place.
  Graph constant;
  constant.placeholder("a");
  constant.output(ArgList{kiln::Arg(3)});
  CHECK(contains(testing::message_of<Error>([&] { p::replace_with_graph(m, constant, std::vector<kiln::Arg>{f.x}); }),
                 "replaced by the constant 3"));
  // Two values for one node used directly (not through getitem).
  Graph two;
  Node* t = two.placeholder("a");
  two.output(ArgList{two.call_function(aten::relu, {t}), two.call_function(aten::neg, {t})});
  CHECK(contains(testing::message_of<Error>([&] { p::replace_with_graph(m, two, std::vector<kiln::Arg>{f.x}); }),
                 "its user mm_1 is not a getitem"));
  CHECK(to_string(f.g) == before);
}

TEST_CASE("register_replacement checks both graphs when registering") {
  // Inductor fails at match time when a search argument is unused ("Not all inputs to
  // pattern found in match.kwargs"); kiln says so at registration.
  Graph search;
  Node* a = search.placeholder("a");
  search.placeholder("unused");
  search.output(ArgList{search.call_function(aten::relu, {a})});
  Graph repl;
  Node* ra = repl.placeholder("a");
  repl.placeholder("unused");
  repl.output(ArgList{repl.call_function(aten::neg, {ra})});
  PatternMatcherPass pass("p");
  CHECK(contains(testing::message_of<Error>([&] { register_replacement(search, repl, pass); }),
                 "search placeholder unused ('unused') is not used"));
  Graph search1;
  search1.output(ArgList{search1.call_function(aten::relu, {search1.placeholder("a")})});
  CHECK(contains(testing::message_of<Error>([&] { register_replacement(search1, repl, pass); }),
                 "the replacement graph has 2 placeholders, the search graph 1"));
  CHECK(pass.num_patterns() == 0);
}

TEST_CASE("register_replacement: extra_check, argnames and a compiled match replaced by a graph") {
  ReplacementOptions o;
  o.pattern.argnames = {"lhs", "rhs", "bias"};
  o.extra_check = [](const p::RuntimeMatch& m) { return m.binds("lhs") && m.node("lhs")->name() == "x"; };
  o.pass.name = "mm_add";
  PatternMatcherPass pass = pass_from_files("mm_add", o);
  CHECK(pass.describe() == "mm_add\n");
  Chain f;
  CHECK(pass.apply(f.g) == 1);  // only the block whose mm reads x
  CHECK(f.g.find_nodes(OpKind::call_function, aten::addmm).size() == 1);
  CHECK(f.mm1->erased() == false);

  // replace_with_graph works on a compiled Match as well.
  using namespace kiln::pattern;
  Chain f2;
  auto m = match(CallFunction(aten::add_Tensor, CallFunction(aten::mm, kw<"a">, kw<"b">), kw<"c">), f2.add1);
  REQUIRE(m.has_value());
  io::GraphFile replace = io::read_fx_json(data("mm_add_replace.json"));
  const auto added = replace_with_graph(*m, replace.graph, std::vector<kiln::Arg>{m->get<"a">(), m->get<"b">(), m->get<"c">()});
  REQUIRE(added.size() == 1);
  CHECK(added[0]->args() == ArgList{f2.b, f2.add0, f2.w});
  CHECK(f2.relu->args() == ArgList{added[0]});
  CHECK(f2.mm1->erased());
}

TEST_CASE("replace_by_example binds the replacement's placeholders to captures by name") {
  // Inductor's Match.replace_by_example(replacement_fn, args): here the args are the
  // captures named like the replacement's placeholders.
  Chain f;
  p::RuntimePattern pat = p::gen_pattern(io::read_fx_json(data("mm_add_search.json")).graph);
  PatternMatcherPass pass("by_example");
  io::GraphFile repl = io::read_fx_json(data("mm_add_replace.json"));
  pass.register_runtime_pattern(pat, [&](p::RuntimeMatch& m) { p::replace_by_example(m, repl.graph); });
  CHECK(pass.apply(f.g) == 2);
  CHECK(f.g.find_nodes(OpKind::call_function, aten::addmm).size() == 2);
  lint(f.g);
}
