// Patterns from example graphs: Inductor's fx_to_pattern / gen_pattern
// (torch/_inductor/pattern_matcher.py). Examples come from C++ builders and from
// fx-graph-json files (tests/data/replacements).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/pattern/from_graph.hpp"
#include "kiln/pattern/runtime_matcher.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string data(const char* name) { return std::string(KILN_TEST_DATA_DIR) + "/replacements/" + name; }

// search(a, b, c) = add(mm(a, b), c)
Graph mm_add_example() {
  Graph g("search");
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* mm = g.call_function(aten::mm, {a, b});
  g.output(ArgList{g.call_function(aten::add_Tensor, {mm, c})});
  return g;
}

}  // namespace

TEST_CASE("a builder's example graph becomes KeywordArgs and call elements with the example's users counts") {
  // Inductor's Converter: placeholder -> KeywordArg(name), call_function ->
  // CallFunction(target, *args, **kwargs) with users = len(node.users).
  const p::RuntimePattern r = p::fx_to_pattern(mm_add_example());
  CHECK(r.describe() ==
        "CallFunction(aten.add.Tensor, CallFunction(aten.mm.default, KeywordArg('a'), KeywordArg('b')), KeywordArg('c'))");
  // The pattern matches the example it came from, and the same shape elsewhere.
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.placeholder("w");
  Node* mm = g.call_function(aten::mm, {x, w});
  Node* add = g.call_function(aten::add_Tensor, {mm, x});
  g.output(ArgList{add});
  auto m = p::match(r, add);
  REQUIRE(m.has_value());
  CHECK(m->node("a") == x);
  CHECK(m->node("c") == x);
  CHECK(m->nodes() == std::vector<Node*>{mm, add});
}

TEST_CASE("users counts come from the example: a node used twice there needs two users") {
  // Inductor sets rv.users = len(n.users): mul(relu(x), relu(x)) has a relu with one
  // user (mul, counted once); relu feeding mul and neg has two.
  Graph ex;
  Node* x = ex.placeholder("x");
  Node* r = ex.call_function(aten::relu, {x});
  Node* mul = ex.call_function(aten::mul_Tensor, {r, r});
  Node* neg = ex.call_function(aten::neg, {r});
  ex.output(ArgList{ex.call_function(aten::add_Tensor, {mul, neg})});
  const p::RuntimePattern pat = p::fx_to_pattern(ex);
  CHECK(contains(pat.describe(), "CallFunction(aten.relu.default, KeywordArg('x'), _users=2)"));
  // The relu element is shared: mul's two arguments and neg's one must be one node.
  CHECK(p::match(pat, ex.find_node("add")).has_value());
  Graph other;
  Node* y = other.placeholder("y");
  Node* r1 = other.call_function(aten::relu, {y});
  Node* r2 = other.call_function(aten::relu, {y});
  Node* m2 = other.call_function(aten::mul_Tensor, {r1, r1});
  Node* n2 = other.call_function(aten::neg, {r2});
  Node* add2 = other.call_function(aten::add_Tensor, {m2, n2});
  other.output(ArgList{add2});
  CHECK_FALSE(p::match(pat, add2).has_value());
}

TEST_CASE("several outputs make a MultiOutputPattern, the shared producer keeps its users count") {
  // Inductor: a tuple result becomes MultiOutputPattern(pytree.tree_leaves(rv)).
  Graph ex;
  Node* a = ex.placeholder("a");
  Node* r = ex.call_function(aten::relu, {a});
  Node* s = ex.call_function(aten::sigmoid, {r});
  Node* t = ex.call_function(aten::tanh, {r});
  ex.output(ArgList{s, t});
  const p::RuntimePattern pat = p::fx_to_pattern(ex);
  CHECK(pat.outputs().size() == 2);
  CHECK(contains(pat.describe(), "MultiOutputPattern([CallFunction(aten.sigmoid.default, CallFunction(aten.relu.default, "
                                 "KeywordArg('a'), _users=2))"));
  auto m = p::match(pat, s);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{s, t});
}

TEST_CASE("placeholder names: de-mangled, or argnames, or exclusive") {
  // Inductor: without argnames, re.sub(r"_\d+$", "", target); with them, argnames[n]
  // (and the target for extra tangents_N); names in exclusive_arg_names become
  // ExclusiveKeywordArg.
  Graph ex;
  Node* x1 = ex.placeholder("x_1");
  Node* y12 = ex.placeholder("y_12");
  ex.output(ArgList{ex.call_function(aten::mul_Tensor, {x1, y12})});
  CHECK(p::fx_arg_names(ex) == std::vector<std::string>{"x", "y"});
  CHECK(p::fx_to_pattern(ex).describe() == "CallFunction(aten.mul.Tensor, KeywordArg('x'), KeywordArg('y'))");
  p::FxToPatternOptions o;
  o.argnames = {"lhs", "rhs"};
  o.exclusive_arg_names = {"rhs"};
  CHECK(p::fx_to_pattern(ex, o).describe() ==
        "CallFunction(aten.mul.Tensor, KeywordArg('lhs'), ExclusiveKeywordArg('rhs'))");
  p::FxToPatternOptions short_names;
  short_names.argnames = {"only"};
  CHECK(contains(testing::message_of<Error>([&] { p::fx_to_pattern(ex, short_names); }),
                 "placeholder y_12 has no name in argnames"));
  Graph joint;
  Node* a = joint.placeholder("a");
  Node* t = joint.placeholder("tangents_1");
  joint.output(ArgList{joint.call_function(aten::mul_Tensor, {a, t})});
  CHECK(p::fx_arg_names(joint, {"primal"}) == std::vector<std::string>{"primal", "tangents_1"});
}

TEST_CASE("ignore_types: gen_pattern ignores ints, floats, dtypes, devices and all-Ignored lists") {
  // Inductor's gen_pattern passes ignore_types=(int, float, list, torch.device,
  // torch.dtype); a list whose items all became Ignored() is Ignored(); bools are
  // not ints (type(True) is bool); getitem's index is never ignored.
  Graph ex;
  Node* x = ex.placeholder("x");
  Node* v = ex.call_function(aten::view, {x, ArgList{4, 8}});
  Node* mixed = ex.call_function(OpRef("test.mixed.default"), {v, ArgList{x, 3}, true, 0.5, DType::float16, "s"},
                                 ArgDict{{"device", Device{"cpu"}}});
  Node* gi = ex.call_function(pyop::getitem, {mixed, 1});
  ex.output(ArgList{gi});
  const std::string kept = p::fx_to_pattern(ex).describe();
  CHECK(contains(kept, "CallFunction(aten.view.default, KeywordArg('x'), [4, 8]"));
  CHECK(contains(kept, "True, 0.5"));
  const std::string ignored = p::gen_pattern(ex).describe();
  CHECK(contains(ignored, "CallFunction(aten.view.default, KeywordArg('x'), Ignored()"));
  CHECK(contains(ignored, "[KeywordArg('x'), Ignored()], True, Ignored(), Ignored(), 's', device=Ignored()"));
  CHECK(contains(ignored, "CallFunction(operator.getitem, CallFunction(test.mixed.default"));
  CHECK(contains(ignored, "), 1)"));  // the index stays
  // The ignored pattern matches other shapes; the kept one does not.
  Graph g;
  Node* y = g.placeholder("y");
  Node* v2 = g.call_function(aten::view, {y, ArgList{2, 16, 1}});
  Node* m2 = g.call_function(OpRef("test.mixed.default"), {v2, ArgList{y, 7}, true, 0.25, DType::float32, "s"},
                             ArgDict{{"device", Device{"cuda"}}});
  Node* gi2 = g.call_function(pyop::getitem, {m2, 1});
  Node* gi0 = g.call_function(pyop::getitem, {m2, 0});
  g.output(ArgList{gi2, gi0});
  // m2 has two users here, the example's one: the interior users rule fails it.
  std::string why;
  CHECK_FALSE(p::match(p::gen_pattern(ex), gi2, &why).has_value());
  CHECK(contains(why, "expected 1 user, has 2"));
  // Without the second getitem the ignored pattern matches, the kept one does not.
  g.erase_node(g.output_node());
  g.output(ArgList{gi2});
  g.erase_node(gi0);
  CHECK(p::match(p::gen_pattern(ex), gi2).has_value());
  CHECK_FALSE(p::match(p::fx_to_pattern(ex), gi2).has_value());
  // getitem's index is kept: getitem(m2, 0) is not matched.
  Node* gi0b = g.call_function(pyop::getitem, {m2, 0});
  g.erase_node(g.output_node());
  g.output(ArgList{gi0b});
  g.erase_node(gi2);
  CHECK_FALSE(p::match(p::gen_pattern(ex), gi0b).has_value());
}

TEST_CASE("the interior users rule applies to a generated pattern's nodes") {
  Graph ex = mm_add_example();
  Graph g;
  Node* x = g.placeholder("x");
  Node* mm = g.call_function(aten::mm, {x, x});
  Node* add = g.call_function(aten::add_Tensor, {mm, x});
  Node* extra = g.call_function(aten::relu, {mm});
  g.output(ArgList{add, extra});
  std::string why;
  CHECK_FALSE(p::match(p::gen_pattern(ex), add, &why).has_value());
  CHECK(contains(why, "node mm: expected 1 user, has 2"));
}

TEST_CASE("scalar_workaround: a scalar equal to a given value becomes a KeywordArg") {
  // Inductor: `if isinstance(x, (float, int)) and x in inv_scalar_workaround:
  // return KeywordArg(inv_scalar_workaround[x])`, before ignore_types.
  Graph ex;
  Node* x = ex.placeholder("x");
  ex.output(ArgList{ex.call_function(aten::mul_Tensor, {x, 0.5})});
  p::FxToPatternOptions o;
  o.scalar_workaround = {{"p", kiln::Arg(0.5)}};
  const p::RuntimePattern pat = p::gen_pattern(ex, o);
  CHECK(pat.describe() == "CallFunction(aten.mul.Tensor, KeywordArg('x'), KeywordArg('p'))");
  Graph g;
  Node* y = g.placeholder("y");
  Node* mul = g.call_function(aten::mul_Tensor, {y, 0.125});
  g.output(ArgList{mul});
  auto m = p::match(pat, mul);
  REQUIRE(m.has_value());
  CHECK(m->get("p") == kiln::Arg(0.125));
  o.scalar_workaround.push_back({"q", kiln::Arg(0.5)});
  CHECK(contains(testing::message_of<Error>([&] { p::gen_pattern(ex, o); }), "the same value"));
}

TEST_CASE("call_method, call_module and get_attr in an example are errors naming the node") {
  // Inductor's Converter sets call_method, call_module and get_attr to _not_implemented.
  Graph ex;
  Node* x = ex.placeholder("x");
  Node* view = ex.call_method("view", {x, -1});
  ex.output(ArgList{ex.call_function(aten::relu, {view})});
  CHECK(contains(testing::message_of<Error>([&] { p::fx_to_pattern(ex); }),
                 "node view is a call_method (view); an example graph may hold only placeholders and call_function"));
  Graph attr;
  Node* w = attr.get_attr("weight");
  attr.output(ArgList{attr.call_function(aten::relu, {w})});
  CHECK(contains(testing::message_of<Error>([&] { p::fx_to_pattern(attr); }), "node weight is a get_attr"));
  Graph ph_out;
  Node* y = ph_out.placeholder("y");
  ph_out.output(ArgList{y});
  CHECK(contains(testing::message_of<Error>([&] { p::fx_to_pattern(ph_out); }), "first output, y, is not a call_function"));
}

TEST_CASE("an example read from an fx-graph-json file") {
  // The search graph a tools/export_fx.py trace would write (mm + add).
  io::GraphFile f = io::read_fx_json(data("mm_add_search.json"));
  const p::RuntimePattern pat = p::gen_pattern(f.graph);
  CHECK(pat.describe() ==
        "CallFunction(aten.add.Tensor, CallFunction(aten.mm.default, KeywordArg('a'), KeywordArg('b')), KeywordArg('c'))");
  io::GraphFile neg = io::read_fx_json(data("neg_neg_search.json"));
  CHECK(p::fx_arg_names(neg.graph) == std::vector<std::string>{"x"});
  CHECK(p::gen_pattern(neg.graph).describe() ==
        "CallFunction(aten.neg.default, CallFunction(aten.neg.default, KeywordArg('x')))");
}

TEST_CASE("an output that is also used inside another output is exempt from the users rule there too") {
  // Inductor decides the exemption by object (self in ctx.outputs): relu is returned
  // and used by sigmoid, so it may have any number of users.
  Graph ex;
  Node* a = ex.placeholder("a");
  Node* r = ex.call_function(aten::relu, {a});
  Node* s = ex.call_function(aten::sigmoid, {r});
  ex.output(ArgList{s, r});
  const p::RuntimePattern pat = p::fx_to_pattern(ex);
  Graph g;
  Node* x = g.placeholder("x");
  Node* r2 = g.call_function(aten::relu, {x});
  Node* s2 = g.call_function(aten::sigmoid, {r2});
  Node* n2 = g.call_function(aten::neg, {r2});
  Node* t2 = g.call_function(aten::tanh, {r2});
  g.output(ArgList{s2, n2, t2});
  auto m = p::match(pat, s2);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{s2, r2});
  // Returned alone (not an output), relu would need its example's two users.
  Graph ex1;
  Node* a1 = ex1.placeholder("a");
  Node* r1 = ex1.call_function(aten::relu, {a1});
  ex1.output(ArgList{ex1.call_function(aten::add_Tensor, {ex1.call_function(aten::sigmoid, {r1}), r1})});
  Graph g1;
  Node* y = g1.placeholder("y");
  Node* ry = g1.call_function(aten::relu, {y});
  Node* add = g1.call_function(aten::add_Tensor, {g1.call_function(aten::sigmoid, {ry}), ry});
  g1.output(ArgList{add, g1.call_function(aten::neg, {ry})});
  std::string why;
  CHECK_FALSE(p::match(p::fx_to_pattern(ex1), add, &why).has_value());
  CHECK(contains(why, "expected 2 users, has 3"));
}
