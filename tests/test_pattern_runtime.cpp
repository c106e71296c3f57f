// RuntimePattern + RuntimeMatcher: Inductor's matching rules
// (torch/_inductor/pattern_matcher.py: _TargetArgsExpr._match, MatchContext.match,
// KeywordArg, ExclusiveKeywordArg, Ignored, Arg, MultiOutputPattern) for patterns
// built at run time. Each test says what Inductor does.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/pattern/runtime_matcher.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;
using p::RuntimePattern;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// add(mm(a, b), c), the addmm pattern.
RuntimePattern mm_add() {
  RuntimePattern r;
  auto a = r.keyword_arg("a"), b = r.keyword_arg("b"), c = r.keyword_arg("c");
  r.set_output(r.call_function(aten::add_Tensor, {r.call_function(aten::mm, {a, b}), c}));
  return r;
}

struct MmAdd {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.placeholder("w");
  Node* b = g.placeholder("b");
  Node* mm = g.call_function(aten::mm, {x, w});
  Node* add = g.call_function(aten::add_Tensor, {mm, b});
  MmAdd() { g.output(ArgList{add}); }
};

}  // namespace

TEST_CASE("a runtime pattern matches, captures by name and lists nodes children first") {
  // Inductor: Match.kwargs holds each KeywordArg's node; m.nodes is [mm, add].
  MmAdd f;
  auto m = p::match(mm_add(), f.add);
  REQUIRE(m.has_value());
  CHECK(m->node("a") == f.x);
  CHECK(m->node("b") == f.w);
  CHECK(m->get("c").node() == f.b);
  CHECK(p::get<"a">(*m).node() == f.x);
  CHECK(m->nodes() == std::vector<Node*>{f.mm, f.add});
  CHECK(m->output_nodes() == std::vector<Node*>{f.add});
  CHECK(m->output_node() == f.add);
  CHECK(m->capture_names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(contains(testing::message_of<Error>([&] { m->get("zz"); }), "binds no KeywordArg 'zz'"));
  // The root is checked too: mm is not an add.
  CHECK_FALSE(p::match(mm_add(), f.mm).has_value());
}

TEST_CASE("exact positional argument count") {
  // Inductor: len(node.args) != len(self.args) is a function_mismatch.
  Graph g;
  Node* x = g.placeholder("x");
  Node* three = g.call_function(OpRef("test.op3.default"), {x, x, x});
  RuntimePattern r;
  r.set_output(r.call_function(OpRef("test.op3.default"), {r.ignored(), r.ignored()}));
  std::string why;
  CHECK_FALSE(p::match(r, three, &why).has_value());
  CHECK(contains(why, "it has 3 positional arguments, the pattern 2"));
  RuntimePattern r3;
  r3.set_output(r3.call_function(OpRef("test.op3.default"), {r3.ignored(), r3.ignored(), r3.ignored()}));
  CHECK(p::match(r3, three).has_value());
}

TEST_CASE("users rule: interior elements need exactly `users` users, outputs are exempt") {
  // Inductor's _match_users: self in ctx.outputs or users is MULTIPLE or len(node.users) == users.
  MmAdd f;
  f.g.call_function(aten::relu, {f.mm});  // mm gets a second user
  std::string why;
  CHECK_FALSE(p::match(mm_add(), f.add, &why).has_value());
  CHECK(contains(why, "node mm: expected 1 user, has 2"));

  RuntimePattern two;
  auto mm2 = two.call_function(aten::mm, {two.ignored(), two.ignored()}, {}, p::users(2));
  two.set_output(two.call_function(aten::add_Tensor, {mm2, two.ignored()}));
  CHECK(p::match(two, f.add).has_value());

  RuntimePattern multiple;
  auto mmm = multiple.call_function(aten::mm, {multiple.ignored(), multiple.ignored()}, {}, p::MULTIPLE);
  multiple.set_output(multiple.call_function(aten::add_Tensor, {mmm, multiple.ignored()}));
  CHECK(p::match(multiple, f.add).has_value());

  // The output itself declares one user, but is exempt: add has one user (output) here
  // and two once another user appears.
  f.g.call_function(aten::neg, {f.add});
  RuntimePattern root_only;
  root_only.set_output(root_only.call_function(aten::add_Tensor, {root_only.ignored(), root_only.ignored()}));
  CHECK(p::match(root_only, f.add).has_value());
}

TEST_CASE("an element shared by two parents must match one node") {
  // Inductor: ctx.match finds the pattern object in pattern_to_node; another node is
  // "repeated pattern differs".
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* r1 = g.call_function(aten::relu, {x});
  Node* r2 = g.call_function(aten::relu, {y});
  Node* same = g.call_function(aten::mul_Tensor, {r1, r1});
  Node* differ = g.call_function(aten::mul_Tensor, {r1, r2});
  g.output(ArgList{same, differ});

  RuntimePattern r;
  auto relu = r.call_function(aten::relu, {r.keyword_arg("x")}, {}, p::users(2));
  r.set_output(r.call_function(aten::mul_Tensor, {relu, relu}));
  // r1 has 3 users in this graph (same twice counts once, differ); make the rule pass with MULTIPLE instead.
  RuntimePattern rm;
  auto relu_m = rm.call_function(aten::relu, {rm.keyword_arg("x")}, {}, p::MULTIPLE);
  rm.set_output(rm.call_function(aten::mul_Tensor, {relu_m, relu_m}));
  auto m = p::match(rm, same);
  REQUIRE(m.has_value());
  CHECK(m->nodes() == std::vector<Node*>{r1, same});  // matched once
  std::string why;
  CHECK_FALSE(p::match(rm, differ, &why).has_value());
  CHECK(contains(why, "repeated pattern differs"));

  // Two distinct elements with the same shape match two different nodes.
  RuntimePattern two;
  auto a1 = two.call_function(aten::relu, {two.ignored()}, {}, p::MULTIPLE);
  auto a2 = two.call_function(aten::relu, {two.ignored()}, {}, p::MULTIPLE);
  two.set_output(two.call_function(aten::mul_Tensor, {a1, a2}));
  CHECK(p::match(two, differ).has_value());
  // A shared leaf is one object too: Ignored() used twice must see one value.
  RuntimePattern leaf;
  auto ig = leaf.ignored();
  leaf.set_output(leaf.call_function(aten::mul_Tensor, {ig, ig}));
  CHECK(p::match(leaf, same).has_value());
  CHECK_FALSE(p::match(leaf, differ).has_value());
}

TEST_CASE("a capture name bound twice must bind equal values") {
  // Inductor: Match.extend raises "kwarg mismatch" for a key bound to two values.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* xx = g.call_function(aten::mul_Tensor, {x, x});
  Node* xy = g.call_function(aten::mul_Tensor, {x, y});
  Node* c1 = g.call_function(aten::add_Tensor, {x, 2});
  Node* c2 = g.call_function(aten::add_Tensor, {x, 2.0});
  g.output(ArgList{xx, xy, c1, c2});
  RuntimePattern r;
  r.set_output(r.call_function(aten::mul_Tensor, {r.keyword_arg("v"), r.keyword_arg("v")}));
  CHECK(p::match(r, xx).has_value());
  std::string why;
  CHECK_FALSE(p::match(r, xy, &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'v'"));
  // Constants compare with Python's ==: 2 == 2.0.
  RuntimePattern k;
  k.set_output(k.call_function(aten::add_Tensor, {k.keyword_arg("x"), k.keyword_arg("s")}));
  auto m = p::match(k, c2);
  REQUIRE(m.has_value());
  CHECK(m->get("s") == kiln::Arg(2.0));
  CHECK(m->get("s").node() == nullptr);
  CHECK_THROWS_AS(m->node("s"), Error);
}

TEST_CASE("exclusive keyword args must bind distinct values") {
  // Inductor: ExclusiveKeywordArg fails with "exclusive arg appears twice" when its
  // node is already in ctx.exclusive_node_set.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* xx = g.call_function(aten::mul_Tensor, {x, x});
  Node* xy = g.call_function(aten::mul_Tensor, {x, y});
  g.output(ArgList{xx, xy});
  RuntimePattern r;
  r.set_output(r.call_function(aten::mul_Tensor, {r.exclusive_keyword_arg("a"), r.exclusive_keyword_arg("b")}));
  std::string why;
  CHECK_FALSE(p::match(r, xx, &why).has_value());
  CHECK(contains(why, "exclusive arg appears twice"));
  auto m = p::match(r, xy);
  REQUIRE(m.has_value());
  CHECK(m->node("a") == x);
  CHECK(m->node("b") == y);
}

TEST_CASE("constants: Python ==, never equal to a node, Arg() captures positionally") {
  // Inductor: a non-pattern child fails when the node's argument is a Node or != it.
  Graph g;
  Node* x = g.placeholder("x");
  Node* one = g.call_function(aten::add_Tensor, {x, 1});
  Node* tru = g.call_function(aten::add_Tensor, {x, true});
  Node* node_arg = g.call_function(aten::add_Tensor, {x, x});
  g.output(ArgList{one, tru, node_arg});
  RuntimePattern r;
  auto a = r.arg();
  r.set_output(r.call_function(aten::add_Tensor, {a, r.constant(1.0)}));
  auto m = p::match(r, one);
  REQUIRE(m.has_value());
  CHECK(m->args() == std::vector<kiln::Arg>{kiln::Arg(x)});
  CHECK(p::match(r, tru).has_value());  // True == 1.0 in Python
  std::string why;
  CHECK_FALSE(p::match(r, node_arg, &why).has_value());
  CHECK(contains(why, "constant_args"));
  CHECK_THROWS_AS(r.constant(kiln::Arg(x)), Error);
}

TEST_CASE("literal lists: exact length, element by element") {
  // Inductor flattens list children with pytree: the spec (length) must be equal.
  Graph g;
  Node* x = g.placeholder("x");
  Node* v2 = g.call_function(aten::view, {x, ArgList{4, 8}});
  Node* v3 = g.call_function(aten::view, {x, ArgList{4, 8, 1}});
  Node* v2b = g.call_function(aten::view, {x, ArgList{4, 9}});
  g.output(ArgList{v2, v3, v2b});
  RuntimePattern r;
  r.set_output(r.call_function(aten::view, {r.keyword_arg("x"), r.list({r.constant(4), r.keyword_arg("n")})}));
  auto m = p::match(r, v2);
  REQUIRE(m.has_value());
  CHECK(m->get("n") == kiln::Arg(8));
  std::string why;
  CHECK_FALSE(p::match(r, v3, &why).has_value());
  CHECK(contains(why, "args_structure"));
  CHECK(p::match(r, v2b).has_value());
  CHECK(p::match(r, v2b)->get("n") == kiln::Arg(9));
}

TEST_CASE("literal lists put a call in pytree mode: a leaf child then does not take a list, as in the compiled DSL") {
  // Inductor flattens arguments with pytree once a pattern argument is a list
  // (or a list/dict constant): a node's list then flattens to several leaves.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  const OpRef frob("mylib.frob.default");
  Node* f = g.call_function(frob, {ArgList{x, y}, ArgList{2, 3}});
  g.output(ArgList{f});
  auto build = [&](bool list_first, bool list_second) {
    RuntimePattern r;
    auto first = list_first ? r.list({r.keyword_arg("a"), r.keyword_arg("b")}) : r.keyword_arg("l");
    auto second = list_second ? r.list({r.keyword_arg("h"), r.keyword_arg("w")}) : r.keyword_arg("shape");
    r.set_output(r.call_function(frob, {first, second}));
    return r;
  };
  CHECK(p::match(build(false, false), f).has_value());
  std::string why;
  CHECK_FALSE(p::match(build(true, false), f, &why).has_value());
  CHECK(contains(why, "args_structure"));
  CHECK(p::match(build(true, true), f).has_value());
  RuntimePattern c;
  c.set_output(c.call_function(frob, {c.keyword_arg("l"), c.constant(ArgList{2, 3})}));
  CHECK_FALSE(p::match(c, f).has_value());
}

TEST_CASE("keyword children: the node's own kwargs, unnamed ones dropped, names in the pattern's order") {
  // Inductor: len(node.kwargs) >= len(pattern.kwargs): the node's kwargs filtered to
  // the pattern's names; then the specs (kwarg names, in order) must be equal.
  Graph g;
  Node* x = g.placeholder("x");
  Node* both = g.call_function(aten::addmm, {x, x, x}, ArgDict{{"beta", 1}, {"alpha", 2}});
  Node* swapped = g.call_function(aten::addmm, {x, x, x}, ArgDict{{"alpha", 2}, {"beta", 1}});
  g.output(ArgList{both, swapped});
  RuntimePattern r;
  auto ig = [&] { return r.ignored(); };
  r.set_output(r.call_function(aten::addmm, {ig(), ig(), ig()}, {{"beta", r.keyword_arg("beta")}, {"alpha", r.keyword_arg("alpha")}}));
  auto m = p::match(r, both);
  REQUIRE(m.has_value());
  CHECK(m->get("alpha") == kiln::Arg(2));
  std::string why;
  CHECK_FALSE(p::match(r, swapped, &why).has_value());  // names out of order
  CHECK(contains(why, "args_structure"));
  // A node kwarg the pattern does not name is dropped.
  RuntimePattern only_alpha;
  only_alpha.set_output(only_alpha.call_function(aten::addmm, {only_alpha.ignored(), only_alpha.ignored(), only_alpha.ignored()},
                                                 {{"alpha", only_alpha.constant(2)}}));
  CHECK(p::match(only_alpha, both).has_value());
  CHECK(p::match(only_alpha, swapped).has_value());
}

TEST_CASE("keyword children: fewer node kwargs than pattern ones normalize through the schema, defaults fill in") {
  // Inductor: len(node.kwargs) < len(pattern.kwargs): normalize_function gives every
  // schema parameter after the positional ones as a kwarg, in schema order.
  Graph g;
  Node* x = g.placeholder("x");
  Node* plain = g.call_function(aten::addmm, {x, x, x});
  Node* alpha3 = g.call_function(aten::addmm, {x, x, x}, ArgDict{{"alpha", 3}});
  Node* unknown = g.call_function(OpRef("test.noschema.default"), {x});
  g.output(ArgList{plain, alpha3, unknown});
  RuntimePattern r;
  r.set_output(r.call_function(aten::addmm, {r.ignored(), r.ignored(), r.ignored()},
                               {{"beta", r.keyword_arg("beta")}, {"alpha", r.keyword_arg("alpha")}}));
  auto m = p::match(r, plain);
  REQUIRE(m.has_value());
  CHECK(m->get("beta") == kiln::Arg(1));
  CHECK(m->get("alpha") == kiln::Arg(1));
  auto m3 = p::match(r, alpha3);
  REQUIRE(m3.has_value());
  CHECK(m3->get("alpha") == kiln::Arg(3));
  // Normalized kwargs come in schema order (beta, alpha): a pattern naming them the other way fails.
  RuntimePattern rev;
  rev.set_output(rev.call_function(aten::addmm, {rev.ignored(), rev.ignored(), rev.ignored()},
                                   {{"alpha", rev.ignored()}, {"beta", rev.ignored()}}));
  CHECK_FALSE(p::match(rev, plain).has_value());
  // No schema: no normalization, no match.
  RuntimePattern ns;
  ns.set_output(ns.call_function(OpRef("test.noschema.default"), {ns.ignored()}, {{"k", ns.ignored()}}));
  std::string why;
  CHECK_FALSE(p::match(ns, unknown, &why).has_value());
  CHECK(contains(why, "no schema of test.noschema.default"));
}

TEST_CASE("keyword rule: a positional argument is not found as a keyword (the count is exact first)") {
  // Inductor compares len(node.args) with the pattern's before normalizing, so
  // leaky_relu(x, 0.2) does not match CallFunction(leaky_relu, x, negative_slope=...).
  Graph g;
  Node* x = g.placeholder("x");
  Node* pos = g.call_function(aten::leaky_relu, {x, 0.2});
  Node* kw = g.call_function(aten::leaky_relu, {x}, ArgDict{{"negative_slope", 0.2}});
  Node* dflt = g.call_function(aten::leaky_relu, {x});
  g.output(ArgList{pos, kw, dflt});
  RuntimePattern r;
  r.set_output(r.call_function(aten::leaky_relu, {r.keyword_arg("x")}, {{"negative_slope", r.keyword_arg("s")}}));
  CHECK_FALSE(p::match(r, pos).has_value());
  CHECK(p::match(r, kw)->get("s") == kiln::Arg(0.2));
  CHECK(p::match(r, dflt)->get("s") == kiln::Arg(0.01));
}

TEST_CASE("keyword_values on its own: names in order, unknown kwargs and missing parameters fail") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* bad = g.call_function(aten::addmm, {x, x, x}, ArgDict{{"gamma", 1}});
  Node* ok = g.call_function(aten::gelu, {x});
  g.output(ArgList{bad, ok});
  const kiln::Arg* out[2] = {nullptr, nullptr};
  const std::string_view two[] = {"beta", "alpha"};
  std::string why;
  CHECK_FALSE(p::keyword_values(bad, two, out, &why));
  CHECK(contains(why, "'gamma' does not bind"));
  const std::string_view approx[] = {"approximate"};
  REQUIRE(p::keyword_values(ok, approx, out, nullptr));
  CHECK(*out[0] == kiln::Arg("none"));
}

TEST_CASE("call elements check kind and target, CallMethod and CallModule by name") {
  // Inductor's _match_fns: node.op == self.op and the target in fns.
  Graph g;
  Node* x = g.placeholder("x");
  Node* view = g.call_method("view", {x, -1});
  Node* fc = g.call_module("encoder.fc", {x});
  Node* relu = g.call_function(aten::relu, {x});
  g.output(ArgList{view, fc, relu});
  RuntimePattern m;
  m.set_output(m.call_method("view", {m.keyword_arg("x"), m.ignored()}));
  CHECK(p::match(m, view).has_value());
  RuntimePattern mod;
  mod.set_output(mod.call_module("encoder.fc", {mod.keyword_arg("x")}));
  CHECK(p::match(mod, fc).has_value());
  CHECK_FALSE(p::match(mod, view).has_value());
  RuntimePattern set;
  set.set_output(set.call_function({aten::sigmoid, aten::relu}, {set.ignored()}));
  CHECK(p::match(set, relu).has_value());
  std::string why;
  CHECK_FALSE(p::match(set, view, &why).has_value());
  CHECK(contains(why, "function_mismatch"));
}

TEST_CASE("MultiOutputPattern: first output at the node, the others from anchors") {
  // Inductor: MultiOutputPattern._match matches outputs[0] at the node, then each
  // other output through find_anchor_nodes (users of already-matched nodes).
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  Node* t = g.call_function(aten::tanh, {r});
  g.output(ArgList{s, t});
  RuntimePattern pat;
  auto relu = pat.call_function(aten::relu, {pat.keyword_arg("a")}, {}, p::users(2));
  pat.set_outputs({pat.call_function(aten::sigmoid, {relu}), std::nullopt, pat.call_function(aten::tanh, {relu})});
  p::RuntimeMatcher matcher(pat);
  CHECK(matcher.root_accepts(s));
  CHECK_FALSE(matcher.root_accepts(t));
  auto m = matcher.match(s);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{s, nullptr, t});
  CHECK(m->nodes() == std::vector<Node*>{r, s, t});
  CHECK(m->node("a") == a);
  CHECK(contains(pat.describe(), "MultiOutputPattern([CallFunction(aten.sigmoid.default, CallFunction(aten.relu.default, KeywordArg('a'), _users=2)), None, "));
  // No tanh beside the sigmoid: no anchor.
  Graph g2;
  Node* a2 = g2.placeholder("a");
  Node* r2 = g2.call_function(aten::relu, {a2});
  Node* s2 = g2.call_function(aten::sigmoid, {r2});
  Node* n2 = g2.call_function(aten::neg, {r2});
  g2.output(ArgList{s2, n2});
  std::string why;
  CHECK_FALSE(p::match(pat, s2, &why).has_value());
  CHECK(contains(why, "no anchor found"));
}

TEST_CASE("MultiOutputPattern: an anchor is found through a literal list's items, as in the compiled DSL") {
  // Inductor's find_anchor_nodes walks the flattened arguments, so an element
  // inside a list child leads to its node's users.
  kiln::testing::ListAnchorGraph f;
  RuntimePattern pat;
  auto x = pat.call_function(aten::sigmoid, {pat.keyword_arg("a")}, {}, p::users(2));
  pat.set_outputs({pat.call_function(aten::relu, {x}),
                   pat.call_function(aten::cat, {pat.list({pat.keyword_arg("b"), x}), pat.ignored()})});
  auto m = p::match(pat, f.r);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{f.r, f.c});
  CHECK(m->node("b") == f.b);
}

TEST_CASE("MultiOutputPattern: a failed anchor candidate is reverted before the next one") {
  // Inductor: _match_from_anchors restores pattern_to_node after each failed
  // candidate, so an element the failed candidate matched is free again.
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  Node* n1 = g.call_function(aten::neg, {a});
  Node* n2 = g.call_function(aten::neg, {a});
  Node* c1 = g.call_function(aten::addmm, {n1, r, 7});  // first candidate: matches neg, fails on 7
  Node* c2 = g.call_function(aten::addmm, {n2, r, 5});
  g.output(ArgList{s, c1, c2});
  RuntimePattern pat;
  auto relu = pat.call_function(aten::relu, {pat.keyword_arg("a")}, {}, p::users(3));
  auto neg = pat.call_function(aten::neg, {pat.ignored()});
  pat.set_outputs({pat.call_function(aten::sigmoid, {relu}),
                   pat.call_function(aten::addmm, {neg, relu, pat.constant(5)})});
  auto m = p::match(pat, s);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{s, c2});
  CHECK(m->nodes() == std::vector<Node*>{r, s, n2, c2});

  // A capture that conflicts with out0's fails the whole match (Match.extend's
  // kwarg mismatch) instead of trying the next candidate.
  Graph g2;
  Node* x = g2.placeholder("x");
  Node* y = g2.placeholder("y");
  Node* r2 = g2.call_function(aten::relu, {x});
  Node* s2 = g2.call_function(aten::sigmoid, {r2});
  Node* bad = g2.call_function(aten::add_Tensor, {r2, y});  // binds a = y, out0 bound a = x
  Node* good = g2.call_function(aten::add_Tensor, {r2, x});
  g2.output(ArgList{s2, bad, good});
  RuntimePattern pat2;
  auto relu2 = pat2.call_function(aten::relu, {pat2.keyword_arg("a")}, {}, p::users(3));
  pat2.set_outputs({pat2.call_function(aten::sigmoid, {relu2}),
                    pat2.call_function(aten::add_Tensor, {relu2, pat2.keyword_arg("a")})});
  std::string why;
  CHECK_FALSE(p::match(pat2, s2, &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'a'"));
}

TEST_CASE("malformed runtime patterns are errors that say what is wrong") {
  RuntimePattern r;
  CHECK(contains(testing::message_of<Error>([&] { p::RuntimeMatcher m(r); }), "no output"));
  auto k = r.keyword_arg("k");
  CHECK(contains(testing::message_of<Error>([&] { r.set_output(k); }), "first output must be a call element"));
  CHECK(contains(testing::message_of<Error>([&] { r.call_function(aten::relu, {RuntimePattern::Ref{7}}); }),
                 "element 7 does not exist"));
  CHECK(contains(testing::message_of<Error>([&] {
                   r.call_function(aten::addmm, {k}, {{"alpha", k}, {"alpha", k}});
                 }),
                 "keyword child 'alpha' given twice"));
  CHECK_THROWS_AS(r.keyword_arg(""), Error);
  CHECK_THROWS_AS(r.call(OpKind::placeholder, aten::relu, {}), Error);
}

TEST_CASE("describe() reads like Inductor's repr") {
  RuntimePattern r;
  auto x = r.keyword_arg("x");
  r.set_output(r.call_function(aten::addmm, {r.ignored(), r.arg(), r.list({x, r.constant(2)})},
                               {{"alpha", r.exclusive_keyword_arg("al")}}, p::MULTIPLE));
  CHECK(r.describe() ==
        "CallFunction(aten.addmm.default, Ignored(), Arg(), [KeywordArg('x'), 2], alpha=ExclusiveKeywordArg('al'), "
        "_users=MULTIPLE)");
}

TEST_CASE("one const RuntimePattern serves matchers on several threads") {
  // The pattern is plain data: each thread makes its own matcher (which keeps the
  // state of its attempts) from the shared pattern and matches its own graph.
  const RuntimePattern shared = mm_add();
  std::vector<int> found(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        MmAdd f;
        p::RuntimeMatcher m(shared);
        if (m.try_match(f.add) && m.result(f.g).node("a") == f.x) ++found[static_cast<std::size_t>(t)];
        (void)shared.describe();
      }
    });
  for (auto& th : threads) th.join();
  CHECK(found == std::vector<int>{50, 50, 50, 50});
}
