// Call patterns (CallFunction / CallMethod / CallModule and their VarArgs forms)
// and Match, with Inductor's semantics (torch/_inductor/pattern_matcher.py).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;
using kiln::testing::names;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// An op with no declared schema.
constexpr OpRef kFrob{"mylib.frob.default"};
constexpr OpRef kSoftmaxInt{"aten.softmax.int"};

// The P1 shape: add(mm(a, b), c), optionally with extra users of mm.
struct AddMM {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* mm = g.call_function(aten::mm, {a, b});
  Node* add = nullptr;
  std::vector<Node*> extra;
  explicit AddMM(int extra_mm_users = 0, const char* add_name = "") {
    add = g.call_function(aten::add_Tensor, {mm, c}, {}, add_name);
    ArgList outs{add};
    for (int i = 0; i < extra_mm_users; ++i) {
      extra.push_back(g.call_function(aten::relu, {mm}));
      outs.push_back(extra.back());
    }
    g.output(outs);
  }
};

auto addmm_pattern() {
  return p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">), p::kw<"c">);
}

}  // namespace

// ---- targets and argument counts ----

TEST_CASE("CallFunction with a target set matches any of its targets and nothing else") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  Node* s = g.call_function(aten::sigmoid, {x});
  Node* t = g.call_function(aten::tanh, {x});
  g.output(ArgList{r, s, t});
  auto pat = p::CallFunction({aten::relu, aten::sigmoid}, p::kw<"x">);
  CHECK(p::match(pat, r).has_value());
  CHECK(p::match(pat, s).has_value());
  std::string why;
  CHECK_FALSE(p::match(pat, t, &why).has_value());
  CHECK(contains(why, "node tanh"));
  CHECK(contains(why, "function_mismatch"));
}

TEST_CASE("CallFunction requires a call_function node: same target name as a method does not match") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* as_method = g.call_method("aten.relu.default", {x});  // same target hash as aten::relu
  Node* as_function = g.call_function(aten::relu, {x});
  g.output(ArgList{as_method, as_function});
  REQUIRE(as_method->target() == aten::relu);
  auto pat = p::CallFunction(aten::relu, p::kw<"x">);
  CHECK(p::match(pat, as_function).has_value());
  CHECK_FALSE(p::match(pat, as_method).has_value());
}

TEST_CASE("CallFunction requires exactly as many positional arguments as positional children") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* two = g.call_function(aten::add_Tensor, {x, y});
  Node* three = g.call_function(aten::add_Tensor, {x, y, 2});
  Node* one = g.call_function(aten::add_Tensor, {x});
  Node* two_kw = g.call_function(aten::add_Tensor, {x, y}, {{"alpha", 2}});
  g.output(ArgList{two, three, one, two_kw});
  auto pat = p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">);
  CHECK(p::match(pat, two).has_value());
  std::string why;
  CHECK_FALSE(p::match(pat, three, &why).has_value());
  CHECK(contains(why, "it has 3 positional arguments, the pattern 2"));
  CHECK_FALSE(p::match(pat, one).has_value());
  // Node kwargs the pattern does not name are not looked at.
  CHECK(p::match(pat, two_kw).has_value());
}

// ---- the users rule ----

TEST_CASE("users rule: an interior call pattern's node must have exactly one user by default") {
  AddMM one_user;
  AddMM two_users(1);
  CHECK(p::match(addmm_pattern(), one_user.add).has_value());
  std::string why;
  CHECK_FALSE(p::match(addmm_pattern(), two_users.add, &why).has_value());
  CHECK(contains(why, "node mm"));
  CHECK(contains(why, "expected 1 user, has 2"));
}

TEST_CASE("users rule: users(2) requires exactly two users") {
  auto pat = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">, p::users(2)), p::kw<"c">);
  AddMM one(0), two(1), three(2);
  std::string why;
  CHECK_FALSE(p::match(pat, one.add, &why).has_value());
  CHECK(contains(why, "expected 2 users, has 1"));
  CHECK(p::match(pat, two.add).has_value());
  CHECK_FALSE(p::match(pat, three.add, &why).has_value());
  CHECK(contains(why, "expected 2 users, has 3"));
}

TEST_CASE("users rule: MULTIPLE accepts any number of users") {
  auto pat = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">, p::MULTIPLE), p::kw<"c">);
  AddMM one(0), two(1), four(3);
  CHECK(p::match(pat, one.add).has_value());
  CHECK(p::match(pat, two.add).has_value());
  CHECK(p::match(pat, four.add).has_value());
}

TEST_CASE("users rule: the root is exempt, whatever users it declares") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* mm = g.call_function(aten::mm, {a, b});
  Node* r1 = g.call_function(aten::relu, {mm});
  Node* r2 = g.call_function(aten::sigmoid, {mm});
  g.output(ArgList{r1, r2});
  REQUIRE(mm->num_users() == 2);
  CHECK(p::match(p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">), mm).has_value());
  CHECK(p::match(p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">, p::users(5)), mm).has_value());
  CHECK(p::match(p::CallFunctionVarArgs(aten::mm), mm).has_value());
}

TEST_CASE("users rule: an interior VarArgs pattern's node is checked too") {
  AddMM one(0), two(1);
  auto pat = p::CallFunction(aten::add_Tensor, p::CallFunctionVarArgs(aten::mm), p::kw<"c">);
  CHECK(p::match(pat, one.add).has_value());
  std::string why;
  CHECK_FALSE(p::match(pat, two.add, &why).has_value());
  CHECK(contains(why, "node mm"));
  CHECK(contains(why, "user"));
}

// ---- keyword children ----

TEST_CASE("keyword child: matched against the node's kwargs when present") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* add = g.call_function(aten::add_Tensor, {x, y}, {{"alpha", 2}});
  g.output(ArgList{add});
  auto m = p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(p::kw<"al">)), add);
  REQUIRE(m.has_value());
  CHECK(m->get<"al">() == Arg(2));
  CHECK(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(2.0)), add).has_value());
  std::string why;
  CHECK_FALSE(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(1)), add, &why)
                  .has_value());
  CHECK(contains(why, "constant_args"));
}

TEST_CASE("keyword child: a node with more positional arguments than the pattern does not match (Inductor's count rule)") {
  // Inductor checks len(node.args) == len(pattern.args) before anything else:
  // split(x, 64, 1) has three positional arguments, this pattern two, so it
  // fails although the schema would name the third `dim`.
  Graph g;
  Node* x = g.placeholder("x");
  Node* split = g.call_function(torch::split, {x, 64, 1});
  g.output(ArgList{split});
  auto pat = p::CallFunction(torch::split, p::kw<"x">, p::kw<"s">, p::kwarg<"dim">(p::kw<"d">));
  std::string why;
  CHECK_FALSE(p::match(pat, split, &why).has_value());
  CHECK(contains(why, "it has 3 positional arguments, the pattern 2"));
  // kiln's looser rule, asked for, finds `dim` among the positional arguments.
  auto m = p::match(pat.with_keyword_rule(p::KeywordRule::normalize), split);
  REQUIRE(m.has_value());
  CHECK(m->get<"x">().node() == x);
  CHECK(m->get<"s">() == Arg(64));
  CHECK(m->get<"d">() == Arg(1));
}

TEST_CASE("keyword child: absent from the node, the schema default is matched (add.Tensor alpha=1)") {
  // Inductor: the node has fewer kwargs than the pattern, so normalize_function
  // fills in the schema's defaults.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* add = g.call_function(aten::add_Tensor, {x, y});
  Node* split = g.call_function(torch::split, {x, 64});
  g.output(ArgList{add, split});
  auto m = p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(p::kw<"al">)), add);
  REQUIRE(m.has_value());
  CHECK(m->get<"al">() == Arg(1));
  CHECK(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(1)), add).has_value());
  CHECK_FALSE(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kw<"y">, p::kwarg<"alpha">(2)), add).has_value());
  auto ms = p::match(p::CallFunction(torch::split, p::kw<"x">, p::kw<"s">, p::kwarg<"dim">(p::kw<"d">)), split);
  REQUIRE(ms.has_value());
  CHECK(ms->get<"d">() == Arg(0));
}

TEST_CASE("keyword child: absent and the op has no schema, no match, given as a kwarg, a match") {
  // Inductor: normalize_function finds no signature and the match fails.
  Graph g;
  Node* x = g.placeholder("x");
  Node* bare = g.call_function(kFrob, {x});
  Node* with_kw = g.call_function(kFrob, {x}, {{"mode", 3}});
  Node* positional = g.call_function(kFrob, {x, 3});
  g.output(ArgList{bare, with_kw, positional});
  REQUIRE(OpSchemaRegistry::instance().find(kFrob) == nullptr);
  auto pat = p::CallFunction(kFrob, p::kw<"x">, p::kwarg<"mode">(p::kw<"m">));
  std::string why;
  CHECK_FALSE(p::match(pat, bare, &why).has_value());
  CHECK(contains(why, "no schema of mylib.frob.default"));
  auto m = p::match(pat, with_kw);
  REQUIRE(m.has_value());
  CHECK(m->get<"m">() == Arg(3));
  CHECK_FALSE(p::match(pat, positional).has_value());
  // The looser rule cannot name the extra positional argument without a schema either.
  why.clear();
  CHECK_FALSE(p::match(pat.with_keyword_rule(p::KeywordRule::normalize), bare, &why).has_value());
  CHECK(contains(why, "no keyword argument 'mode'"));
  CHECK_FALSE(p::match(pat.with_keyword_rule(p::KeywordRule::normalize), positional).has_value());
}

TEST_CASE("keyword child: the looser rule still fails an extra positional argument no keyword child names") {
  // add.Tensor(self, other, *, alpha): add(x, y) has one positional argument more
  // than this pattern, and `alpha` cannot take it, so `other` would be ignored.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* add = g.call_function(aten::add_Tensor, {x, y});
  Node* split = g.call_function(torch::split, {x, 64, 1});
  g.output(ArgList{add, split});
  const auto loose = p::KeywordRule::normalize;
  CHECK_FALSE(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, p::kwarg<"alpha">(p::kw<"al">)).with_keyword_rule(loose), add)
                  .has_value());
  // torch.split(tensor, split_size_or_sections, dim=0): naming only dim leaves
  // split_size_or_sections unmatched.
  CHECK_FALSE(
      p::match(p::CallFunction(torch::split, p::kw<"x">, p::kwarg<"dim">(p::kw<"d">)).with_keyword_rule(loose), split)
          .has_value());
  // Naming both is fine.
  auto m = p::match(p::CallFunction(torch::split, p::kw<"x">, p::kwarg<"split_size_or_sections">(p::kw<"s">),
                                    p::kwarg<"dim">(p::kw<"d">))
                        .with_keyword_rule(loose),
                    split);
  REQUIRE(m.has_value());
  CHECK(m->get<"s">() == Arg(64));
  CHECK(m->get<"d">() == Arg(1));
}

TEST_CASE("keyword child: the order of keyword arguments counts, as in Inductor's flattened structure") {
  // Inductor compares (len(args), *kwargs.keys()) of node and pattern: the same
  // names in another order are a different structure.
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* ab = g.call_function(aten::addmm, {c, a, b}, {{"alpha", 2}, {"beta", 3}});
  Node* bare = g.call_function(aten::addmm, {c, a, b});
  g.output(ArgList{ab, bare});
  auto alpha_beta = p::CallFunction(aten::addmm, p::kw<"c">, p::kw<"a">, p::kw<"b">, p::kwarg<"alpha">(p::kw<"al">),
                                    p::kwarg<"beta">(p::kw<"be">));
  auto beta_alpha = p::CallFunction(aten::addmm, p::kw<"c">, p::kw<"a">, p::kw<"b">, p::kwarg<"beta">(p::kw<"be">),
                                    p::kwarg<"alpha">(p::kw<"al">));
  auto m = p::match(alpha_beta, ab);
  REQUIRE(m.has_value());
  CHECK(m->get<"al">() == Arg(2));
  CHECK(m->get<"be">() == Arg(3));
  std::string why;
  CHECK_FALSE(p::match(beta_alpha, ab, &why).has_value());
  CHECK(contains(why, "args_structure: keyword arguments (alpha, beta), the pattern wants (beta, alpha)"));
  // Normalized kwargs come in schema order (self, mat1, mat2, *, beta, alpha).
  auto mb = p::match(beta_alpha, bare);
  REQUIRE(mb.has_value());
  CHECK(mb->get<"be">() == Arg(1));
  CHECK(mb->get<"al">() == Arg(1));
  CHECK_FALSE(p::match(alpha_beta, bare).has_value());
  // The looser rule ignores the order.
  CHECK(p::match(beta_alpha.with_keyword_rule(p::KeywordRule::normalize), ab).has_value());
  CHECK(p::match(alpha_beta.with_keyword_rule(p::KeywordRule::normalize), bare).has_value());
}

TEST_CASE("keyword child: with as many kwargs as the pattern the node is not normalized, extra kwargs are dropped") {
  // Inductor normalizes only when the node has fewer kwargs than the pattern;
  // otherwise it keeps just the kwargs the pattern names.
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* beta_only = g.call_function(aten::addmm, {c, a, b}, {{"beta", 2}});
  Node* both = g.call_function(aten::addmm, {c, a, b}, {{"beta", 2}, {"alpha", 3}});
  Node* unknown = g.call_function(aten::addmm, {c, a, b}, {{"gamma", 1}});
  g.output(ArgList{beta_only, both, unknown});
  auto alpha = p::CallFunction(aten::addmm, p::kw<"c">, p::kw<"a">, p::kw<"b">, p::kwarg<"alpha">(p::kw<"al">));
  // One kwarg against one keyword child: `beta` is dropped and `alpha` is
  // missing; the schema's default is not consulted.
  std::string why;
  CHECK_FALSE(p::match(alpha, beta_only, &why).has_value());
  CHECK(contains(why, "args_structure"));
  auto m = p::match(alpha, both);
  REQUIRE(m.has_value());
  CHECK(m->get<"al">() == Arg(3));
  // Fewer kwargs than the pattern's two: normalized, and `gamma` does not bind
  // to addmm's schema (Python's Signature.bind raises), so no match.
  auto two = p::CallFunction(aten::addmm, p::kw<"c">, p::kw<"a">, p::kw<"b">, p::kwarg<"beta">(p::kw<"be">),
                             p::kwarg<"alpha">(p::kw<"al">));
  why.clear();
  CHECK_FALSE(p::match(two, unknown, &why).has_value());
  CHECK(contains(why, "'gamma' does not bind"));
  CHECK(p::match(two, beta_only).has_value());  // normalized: beta=2, alpha=1
}

TEST_CASE("literal lists put the pattern in pytree mode: a leaf child then does not take a list") {
  // Inductor flattens node and pattern arguments with pytree once a pattern
  // argument is a list, tuple or dict; a node's list argument then flattens to
  // several leaves and cannot meet one KeywordArg.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* f = g.call_function(kFrob, {ArgList{x, y}, ArgList{2, 3}});
  Node* nested = g.call_function(kFrob, {ArgList{ArgList{x}, y}, 4});
  g.output(ArgList{f, nested});
  // No container in the pattern: simple flattening, a KeywordArg takes a list.
  auto simple = p::match(p::CallFunction(kFrob, p::kw<"l">, p::kw<"shape">), f);
  REQUIRE(simple.has_value());
  CHECK(simple->get<"shape">() == Arg(ArgList{2, 3}));
  std::string why;
  CHECK_FALSE(p::match(p::CallFunction(kFrob, p::list(p::kw<"a">, p::kw<"b">), p::kw<"shape">), f, &why).has_value());
  CHECK(contains(why, "args_structure"));
  auto both = p::match(p::CallFunction(kFrob, p::list(p::kw<"a">, p::kw<"b">), p::list(p::kw<"h">, p::kw<"w">)), f);
  REQUIRE(both.has_value());
  CHECK(both->get<"w">() == Arg(3));
  // A list constant does the same.
  CHECK_FALSE(p::match(p::CallFunction(kFrob, p::kw<"l">, Arg(ArgList{2, 3})), f).has_value());
  CHECK(p::match(p::CallFunction(kFrob, p::list(p::Ignored(), p::Ignored()), Arg(ArgList{2, 3})), f).has_value());
  // Inside a literal list, an element the pattern has as a leaf must not be a list.
  CHECK_FALSE(p::match(p::CallFunction(kFrob, p::list(p::kw<"a">, p::kw<"b">), p::kw<"n">), nested).has_value());
  CHECK(p::match(p::CallFunction(kFrob, p::list(p::list(p::kw<"a">), p::kw<"b">), p::kw<"n">), nested).has_value());
}

// ---- sub-pattern identity ----

TEST_CASE("a sub-pattern object used twice must match the same node both times") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r1 = g.call_function(aten::relu, {a});
  Node* r2 = g.call_function(aten::relu, {a});  // structurally identical to r1
  Node* same = g.call_function(aten::add_Tensor, {r1, r1});
  Node* r3 = g.call_function(aten::relu, {a});
  Node* r4 = g.call_function(aten::relu, {a});
  Node* differ = g.call_function(aten::add_Tensor, {r3, r4});
  g.output(ArgList{same, differ});
  (void)r2;

  auto r = p::CallFunction(aten::relu, p::kw<"x">);
  auto shared = p::CallFunction(aten::add_Tensor, r, r);
  auto m = p::match(shared, same);
  REQUIRE(m.has_value());
  CHECK(names(m->nodes()) == std::vector<std::string>{r1->name(), same->name()});  // r1 once
  std::string why;
  CHECK_FALSE(p::match(shared, differ, &why).has_value());
  CHECK(contains(why, "node " + r4->name()));
  CHECK(contains(why, "repeated pattern differs"));

  // Two separately built (structurally equal) sub-patterns may match different nodes.
  auto separate = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::relu, p::kw<"x">),
                                  p::CallFunction(aten::relu, p::kw<"x">));
  CHECK(p::match(separate, differ).has_value());
}

// ---- CallMethod, CallModule, VarArgs ----

TEST_CASE("CallMethod and CallModule match call_method / call_module nodes by name") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* view = g.call_method("view", {x, ArgList{2, 3}});
  Node* fc = g.call_module("encoder.fc", {view});
  Node* fview = g.call_function(OpRef("view"), {x, ArgList{2, 3}});
  g.output(ArgList{fc, fview});
  auto mpat = p::CallMethod("view", p::kw<"x">, p::kw<"shape">);
  auto m = p::match(mpat, view);
  REQUIRE(m.has_value());
  CHECK(m->get<"shape">() == Arg(ArgList{2, 3}));
  CHECK_FALSE(p::match(mpat, fview).has_value());
  CHECK_FALSE(p::match(p::CallMethod("reshape", p::kw<"x">, p::kw<"shape">), view).has_value());

  auto modpat = p::CallModule("encoder.fc", p::CallMethod("view", p::kw<"x">, p::Ignored()));
  auto mm = p::match(modpat, fc);
  REQUIRE(mm.has_value());
  CHECK(mm->get<"x">().node() == x);
  CHECK_FALSE(p::match(p::CallModule("decoder.fc", p::Arg()), fc).has_value());
  CHECK(p::describe(modpat) == "CallModule(encoder.fc, CallMethod(view, KeywordArg('x'), Ignored()))");
}

TEST_CASE("CallFunctionVarArgs checks only the target and passes every arg and kwarg through") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* add = g.call_function(aten::add_Tensor, {x, y, 7}, {{"alpha", 2}, {"out", Arg()}});
  Node* add0 = g.call_function(aten::add_Tensor, {});
  g.output(ArgList{add, add0});
  auto pat = p::CallFunctionVarArgs(aten::add_Tensor);
  auto m = p::match(pat, add);
  REQUIRE(m.has_value());
  REQUIRE(m->args().size() == 3);
  CHECK(m->args()[0].node() == x);
  CHECK(m->args()[1].node() == y);
  CHECK(m->args()[2] == Arg(7));
  REQUIRE(m->var_kwargs().size() == 2);
  CHECK(*m->var_kwargs().find("alpha") == Arg(2));
  CHECK(m->var_kwargs().find("out")->is_none());
  auto m0 = p::match(pat, add0);
  REQUIRE(m0.has_value());
  CHECK(m0->args().empty());
  CHECK(m0->var_kwargs().empty());
  CHECK_FALSE(p::match(p::CallFunctionVarArgs(aten::mul_Tensor), add).has_value());
  CHECK(p::match(p::CallMethodVarArgs("view"), g.call_method("view", {x, 1, 2})).has_value());
}

TEST_CASE("a VarArgs node's kwargs share the match's keyword namespace: a capture or another VarArgs kwarg must agree") {
  // Inductor: _TargetExprVarArgs puts node.kwargs into Match.kwargs, and
  // Match.extend fails on a key two sub-matches bind to different values.
  Graph g;
  Node* x = g.placeholder("x");
  Node* s1 = g.call_function(kSoftmaxInt, {x}, {{"dim", 1}});
  Node* s2 = g.call_function(kSoftmaxInt, {x}, {{"dim", 1}});
  Node* s3 = g.call_function(kSoftmaxInt, {x}, {{"dim", 0}});
  Node* same = g.call_function(aten::add_Tensor, {s1, s2});
  Node* differ = g.call_function(aten::add_Tensor, {s1, s3});
  Node* with_dim_capture = g.call_function(aten::mul_Tensor, {s1, 1});
  Node* with_other_dim = g.call_function(aten::mul_Tensor, {s3, 1});
  g.output(ArgList{same, differ, with_dim_capture, with_other_dim});
  auto two = p::CallFunction(aten::add_Tensor, p::CallFunctionVarArgs(kSoftmaxInt, p::MULTIPLE),
                             p::CallFunctionVarArgs(kSoftmaxInt, p::MULTIPLE));
  auto m = p::match(two, same);
  REQUIRE(m.has_value());
  CHECK(*m->var_kwargs().find("dim") == Arg(1));
  std::string why;
  CHECK_FALSE(p::match(two, differ, &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'dim'"));
  // A KeywordArg named like the VarArgs node's kwarg, bound after it.
  auto captured = p::CallFunction(aten::mul_Tensor, p::CallFunctionVarArgs(kSoftmaxInt, p::MULTIPLE), p::kw<"dim">);
  CHECK(p::match(captured, with_dim_capture).has_value());
  why.clear();
  CHECK_FALSE(p::match(captured, with_other_dim, &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'dim'"));
}

// ---- Match ----

TEST_CASE("typed captures: get<> gives the value, node<> the node, and throws for a constant") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* split = g.call_function(torch::split, {x, 64}, {{"dim", 1}});
  g.output(ArgList{split});
  auto m = p::match(p::CallFunction(torch::split, p::kw<"x">, p::kw<"s">, p::kwarg<"dim">(p::kw<"d">)), split);
  REQUIRE(m.has_value());
  CHECK(m->node<"x">() == x);
  CHECK(m->get<"s">() == Arg(64));
  auto msg = kiln::testing::message_of<Error>([&] { (void)m->node<"s">(); });
  CHECK(contains(msg, "Match::node<\"s\">"));
  CHECK(contains(msg, "constant 64"));
  CHECK(contains(msg, "not a node"));
}

TEST_CASE("Match::nodes lists children before parents, output_node is the root's node") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* r = g.call_function(aten::relu, {c});   // created before mm: creation order is not the rule
  Node* mm = g.call_function(aten::mm, {a, b});
  Node* add = g.call_function(aten::add_Tensor, {mm, r});
  g.output(ArgList{add});
  auto pat = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">),
                             p::CallFunction(aten::relu, p::kw<"c">));
  auto m = p::match(pat, add);
  REQUIRE(m.has_value());
  CHECK(names(m->nodes()) == std::vector<std::string>{"mm", "relu", "add"});
  CHECK(m->output_node() == add);
  REQUIRE(m->output_nodes().size() == 1);
  CHECK(m->output_nodes()[0] == add);
  CHECK(&m->graph() == &g);
  CHECK(names(m->filter_nodes(aten::mm)) == std::vector<std::string>{"mm"});
  CHECK(m->filter_nodes(aten::sigmoid).empty());
}

TEST_CASE("Match::erase_nodes erases only the matched nodes nothing uses any more") {
  AddMM t(1);  // mm is also used by a relu
  auto pat = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">, p::MULTIPLE), p::kw<"c">);
  auto m = p::match(pat, t.add);
  REQUIRE(m.has_value());
  Node* fused = nullptr;
  {
    auto guard = t.g.inserting_before(t.add);
    fused = t.g.call_function(aten::addmm, {t.c, t.a, t.b});
  }
  t.add->replace_all_uses_with(fused);
  m->erase_nodes();
  CHECK(t.add->erased());
  CHECK_FALSE(t.mm->erased());  // still used by the relu
  CHECK(t.mm->num_users() == 1);
  lint(t.g);
  // Nothing left to erase: a second call is harmless.
  m->erase_nodes();
  CHECK_FALSE(t.mm->erased());
}

TEST_CASE("Match::replace_with_graph splices in the replacement and erases the dead matched nodes") {
  AddMM t;
  t.add->meta.val = MetaVal(std::int64_t{5});  // any meta value: it is carried over to the replacement
  Node* user = nullptr;
  {
    auto guard = t.g.inserting_before(t.g.output_node());
    user = t.g.call_function(aten::relu, {t.add});
  }
  t.g.output_node()->set_args({ArgList{user}});
  auto m = p::match(addmm_pattern(), t.add);
  REQUIRE(m.has_value());
  Node* fused = m->replace_with_graph([&](Graph& g) {
    return g.call_function(aten::addmm, {m->get<"c">(), m->get<"a">(), m->get<"b">()});
  });
  CHECK(t.add->erased());
  CHECK(t.mm->erased());
  CHECK(fused->target() == aten::addmm);
  CHECK(fused->is_before(*user));
  CHECK(user->args()[0].node() == fused);
  CHECK(fused->meta.val == MetaVal(std::int64_t{5}));
  REQUIRE(fused->args().size() == 3);
  CHECK(fused->args()[0].node() == t.c);
  CHECK(fused->args()[1].node() == t.a);
  CHECK(fused->args()[2].node() == t.b);
  lint(t.g);
}

// ---- explanations and describe() ----

TEST_CASE("explain: the failure reason names the node on the failing path and the rule") {
  AddMM t(1, "add_3");
  std::string why;
  CHECK_FALSE(p::match(addmm_pattern(), t.add, &why).has_value());
  CHECK(contains(why, "node mm"));  // the interior node, not the root
  CHECK(contains(why, "user"));
  CHECK(contains(why, "has 2"));

  // Deeper: the mismatch is at the grandchild.
  Graph g;
  Node* a = g.placeholder("a");
  Node* s = g.call_function(aten::sigmoid, {a}, {}, "sig_7");
  Node* n = g.call_function(aten::neg, {s});
  Node* add = g.call_function(aten::add_Tensor, {n, a}, {}, "add_3");
  g.output(ArgList{add});
  auto deep = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::neg, p::CallFunction(aten::relu, p::Arg())),
                              p::Arg());
  CHECK_FALSE(p::match(deep, add, &why).has_value());
  CHECK(contains(why, "node sig_7"));
  CHECK(contains(why, "function_mismatch"));
  CHECK(contains(why, "aten.sigmoid.default"));
  CHECK(contains(why, "aten.relu.default"));
  // A successful match clears the reason.
  CHECK(p::match(p::CallFunction(aten::add_Tensor, p::Arg(), p::Arg()), add, &why).has_value());
  CHECK(why.empty());
}

TEST_CASE("describe() of a nested pattern reads like Inductor's repr") {
  auto pat = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">), p::kw<"c">);
  CHECK(p::describe(pat) ==
        "CallFunction(aten.add.Tensor, CallFunction(aten.mm.default, KeywordArg('a'), KeywordArg('b')), KeywordArg('c'))");
  auto pat2 = p::CallFunction(aten::add_Tensor, p::CallFunction({aten::relu, aten::sigmoid}, p::Arg(), p::MULTIPLE),
                              p::Ignored(), p::kwarg<"alpha">(1));
  CHECK(p::describe(pat2) ==
        "CallFunction(aten.add.Tensor, CallFunction([aten.relu.default, aten.sigmoid.default], Arg(), _users=MULTIPLE), "
        "Ignored(), alpha=1)");
  CHECK(p::describe(p::CallFunction(aten::mm, p::Arg(), p::Arg(), p::users(2))) ==
        "CallFunction(aten.mm.default, Arg(), Arg(), _users=2)");
  CHECK(p::describe(p::CallFunctionVarArgs(aten::mm)) == "CallFunctionVarArgs(aten.mm.default)");
  CHECK(p::describe(p::CallMethodVarArgs("view", p::MULTIPLE)) == "CallMethodVarArgs(view, _users=MULTIPLE)");
  p::PatternPlan<decltype(pat)> plan(pat);
  CHECK(plan.describe() == p::describe(pat));
}
