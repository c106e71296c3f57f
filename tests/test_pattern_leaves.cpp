// The leaf patterns: Arg, Ignored, KeywordArg, ExclusiveKeywordArg, constants
// and list(...), with Inductor's semantics (torch/_inductor/pattern_matcher.py).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// x, y placeholders and one call of `op` on `args`, used by the output.
struct OneCall {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* call = nullptr;
  OneCall(OpRef op, std::initializer_list<Arg> args) {
    call = g.call_function(op, ArgList(args));
    g.output(ArgList{call});
  }
};

}  // namespace

TEST_CASE("Arg() matches a node or a constant and passes it on positionally") {
  OneCall t(aten::add_Tensor, {});
  t.call->set_args({t.x, 2});
  auto pat = p::CallFunction(aten::add_Tensor, p::Arg(), p::Arg());
  auto m = p::match(pat, t.call);
  REQUIRE(m.has_value());
  REQUIRE(m->args().size() == 2);
  CHECK(m->args()[0].node() == t.x);
  CHECK(m->args()[1] == Arg(2));
  CHECK(m->capture_names().size() == 0);
}

TEST_CASE("Arg() captures are collected depth first, not breadth first") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* mul = g.call_function(aten::mul_Tensor, {a, b});
  Node* add = g.call_function(aten::add_Tensor, {mul, c});
  g.output(ArgList{add});
  // Breadth first would give c, a, b.
  auto pat = p::CallFunction(aten::add_Tensor, p::CallFunction(aten::mul_Tensor, p::Arg(), p::Arg()), p::Arg());
  auto m = p::match(pat, add);
  REQUIRE(m.has_value());
  REQUIRE(m->args().size() == 3);
  CHECK(m->args()[0].node() == a);
  CHECK(m->args()[1].node() == b);
  CHECK(m->args()[2].node() == c);
}

TEST_CASE("Arg() inside list(...) keeps depth-first order across list elements") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* cat = g.call_function(aten::cat, {ArgList{a, b}, 1});
  g.output(ArgList{cat});
  auto m = p::match(p::CallFunction(aten::cat, p::list(p::Arg(), p::Arg()), p::Arg()), cat);
  REQUIRE(m.has_value());
  REQUIRE(m->args().size() == 3);
  CHECK(m->args()[0].node() == a);
  CHECK(m->args()[1].node() == b);
  CHECK(m->args()[2] == Arg(1));
}

TEST_CASE("Ignored() matches anything (node, constant, list) and captures nothing") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* cat = g.call_function(aten::cat, {ArgList{a, b}, 1});
  Node* add = g.call_function(aten::add_Tensor, {cat, 3.5});
  g.output(ArgList{add});
  auto pat = p::CallFunction(aten::add_Tensor, p::Ignored(), p::Ignored());
  auto m = p::match(pat, add);
  REQUIRE(m.has_value());
  CHECK(m->args().empty());
  // A list argument too.
  auto m2 = p::match(p::CallFunction(aten::cat, p::Ignored(), p::kw<"d">), cat);
  REQUIRE(m2.has_value());
  CHECK(m2->args().empty());
  CHECK(m2->get<"d">() == Arg(1));
}

TEST_CASE("KeywordArg captures by name, and capture_names lists each name once in first-use order") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* mm = g.call_function(aten::mm, {a, b});
  Node* add = g.call_function(aten::add_Tensor, {c, mm});
  g.output(ArgList{add});
  auto pat = p::CallFunction(aten::add_Tensor, p::kw<"c">, p::CallFunction(aten::mm, p::kw<"a">, p::kw<"b">));
  auto m = p::match(pat, add);
  REQUIRE(m.has_value());
  CHECK(m->get<"a">().node() == a);
  CHECK(m->get<"b">().node() == b);
  CHECK(m->get<"c">().node() == c);
  CHECK(m->args().empty());  // KeywordArgs are not positional
  auto names = m->capture_names();
  REQUIRE(names.size() == 3);
  CHECK(names[0] == "c");
  CHECK(names[1] == "a");
  CHECK(names[2] == "b");
}

TEST_CASE("a name bound by two KeywordArg objects must bind equal values") {
  OneCall same(aten::add_Tensor, {});
  same.call->set_args({same.x, same.x});
  OneCall differ(aten::add_Tensor, {});
  differ.call->set_args({differ.x, differ.y});
  // Two distinct objects with one name: Inductor's Match.extend kwarg rule.
  auto pat = p::CallFunction(aten::add_Tensor, p::KeywordArg<"v">(), p::KeywordArg<"v">());
  auto m = p::match(pat, same.call);
  REQUIRE(m.has_value());
  CHECK(m->get<"v">().node() == same.x);
  std::string why;
  CHECK_FALSE(p::match(pat, differ.call, &why).has_value());
  CHECK(contains(why, "kwarg mismatch"));
  CHECK(contains(why, "'v'"));
}

TEST_CASE("one KeywordArg object used twice must match the same value (repeated pattern)") {
  OneCall same(aten::add_Tensor, {});
  same.call->set_args({same.x, same.x});
  OneCall differ(aten::add_Tensor, {});
  differ.call->set_args({differ.x, differ.y});
  auto pat = p::CallFunction(aten::add_Tensor, p::kw<"v">, p::kw<"v">);
  CHECK(p::match(pat, same.call).has_value());
  std::string why;
  CHECK_FALSE(p::match(pat, differ.call, &why).has_value());
  CHECK(contains(why, "node y"));
  CHECK(contains(why, "repeated pattern differs"));
}

TEST_CASE("a repeated name compares values with Python ==: 1 == 1.0 == True, 1 != 2, 1 != '1'") {
  auto pat = p::CallFunction(aten::clamp, p::kw<"x">, p::KeywordArg<"v">(), p::KeywordArg<"v">());
  auto try_with = [&](Arg lo, Arg hi) {
    OneCall t(aten::clamp, {});
    t.call->set_args({t.x, lo, hi});
    return p::match(pat, t.call).has_value();
  };
  CHECK(try_with(1, 1.0));
  CHECK(try_with(1.0, 1));
  CHECK(try_with(1, true));
  CHECK(try_with(true, 1.0));
  CHECK_FALSE(try_with(1, 2));
  CHECK_FALSE(try_with(1, 1.5));
  CHECK_FALSE(try_with(1, "1"));
  CHECK_FALSE(try_with(0, Arg()));  // 0 != None
}

TEST_CASE("ExclusiveKeywordArg: two exclusive args may not bind the same value, KeywordArgs may") {
  OneCall square(aten::mul_Tensor, {});
  square.call->set_args({square.x, square.x});
  OneCall product(aten::mul_Tensor, {});
  product.call->set_args({product.x, product.y});

  auto exclusive = p::CallFunction(aten::mul_Tensor, p::ExclusiveKeywordArg<"a">(), p::ExclusiveKeywordArg<"b">());
  auto plain = p::CallFunction(aten::mul_Tensor, p::KeywordArg<"a">(), p::KeywordArg<"b">());

  std::string why;
  CHECK_FALSE(p::match(exclusive, square.call, &why).has_value());
  CHECK(contains(why, "exclusive arg appears twice"));
  CHECK(contains(why, "node x"));

  auto m = p::match(plain, square.call);
  REQUIRE(m.has_value());
  CHECK(m->get<"a">().node() == square.x);
  CHECK(m->get<"b">().node() == square.x);

  auto m2 = p::match(exclusive, product.call);
  REQUIRE(m2.has_value());
  CHECK(m2->get<"a">().node() == product.x);
  CHECK(m2->get<"b">().node() == product.y);
}

TEST_CASE("ExclusiveKeywordArg compares constants with Python == too (1 and 1.0 collide)") {
  auto exclusive = p::CallFunction(aten::clamp, p::kw<"x">, p::ExclusiveKeywordArg<"lo">(), p::ExclusiveKeywordArg<"hi">());
  OneCall t(aten::clamp, {});
  t.call->set_args({t.x, 1, 1.0});
  CHECK_FALSE(p::match(exclusive, t.call).has_value());
  t.call->set_args({t.x, 1, 2});
  CHECK(p::match(exclusive, t.call).has_value());
}

TEST_CASE("a constant child matches by Python ==: 1 matches 1, 1.0 and True, not 2 or '1'") {
  auto pat = p::CallFunction(aten::add_Tensor, p::kw<"x">, 1);
  auto try_with = [&](Arg other) {
    OneCall t(aten::add_Tensor, {});
    t.call->set_args({t.x, other});
    std::string why;
    bool ok = p::match(pat, t.call, &why).has_value();
    if (!ok) CHECK(contains(why, "constant_args"));
    return ok;
  };
  CHECK(try_with(1));
  CHECK(try_with(1.0));
  CHECK(try_with(true));
  CHECK_FALSE(try_with(2));
  CHECK_FALSE(try_with(0.5));
  CHECK_FALSE(try_with(false));
  CHECK_FALSE(try_with("1"));
  CHECK_FALSE(try_with(Arg()));
  // And the other way round: a float or bool constant in the pattern.
  OneCall t(aten::add_Tensor, {});
  t.call->set_args({t.x, 1});
  CHECK(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, 1.0), t.call).has_value());
  CHECK(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, true), t.call).has_value());
  CHECK_FALSE(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, 1.5), t.call).has_value());
  CHECK(p::match(p::CallFunction(aten::add_Tensor, p::kw<"x">, std::string("1")), t.call).has_value() == false);
}

TEST_CASE("a constant child holding a node is refused when the pattern is built, naming the value") {
  // Inductor fails any constant against a Node (constant_args), so a constant
  // made from a node could never match: kiln refuses it at once, and a Node*
  // child does not compile (tests/compile_fail/node_pointer_child.cpp).
  OneCall t(aten::add_Tensor, {});
  t.call->set_args({t.x, t.y});
  CHECK_THROWS_WITH_AS(p::CallFunction(aten::add_Tensor, p::kw<"a">, Arg(t.y)),
                       doctest::Contains("a pattern constant cannot hold a node reference (%y)"), kiln::Error);
  CHECK_THROWS_WITH_AS(p::CallFunction(aten::cat, Arg(ArgList{Arg(t.x), Arg(t.y)}), 0),
                       doctest::Contains("a pattern constant cannot hold a node reference"), kiln::Error);
  CHECK_NOTHROW(p::CallFunction(aten::cat, Arg(ArgList{Arg(1), Arg(2)}), 0));
}

TEST_CASE("list(...) matches a node list of exactly its length, element by element") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* cat2 = g.call_function(aten::cat, {ArgList{a, b}, 1});
  Node* cat3 = g.call_function(aten::cat, {ArgList{a, b, c}, 1});
  Node* cat1 = g.call_function(aten::cat, {ArgList{a}, 1});
  Node* catc = g.call_function(aten::cat, {ArgList{a, 0}, 1});
  g.output(ArgList{cat2, cat3, cat1, catc});

  auto pat = p::CallFunction(aten::cat, p::list(p::kw<"p">, p::kw<"q">), p::kw<"dim">);
  auto m = p::match(pat, cat2);
  REQUIRE(m.has_value());
  CHECK(m->get<"p">().node() == a);
  CHECK(m->get<"q">().node() == b);
  CHECK(m->get<"dim">() == Arg(1));

  std::string why;
  CHECK_FALSE(p::match(pat, cat3, &why).has_value());
  CHECK(contains(why, "args_structure"));
  CHECK(contains(why, "is not a list of 2"));
  CHECK_FALSE(p::match(pat, cat1).has_value());

  // Constants inside a list, compared with Python ==.
  CHECK(p::match(p::CallFunction(aten::cat, p::list(p::kw<"p">, 0.0), 1), catc).has_value());
  CHECK_FALSE(p::match(p::CallFunction(aten::cat, p::list(p::kw<"p">, 2), 1), catc).has_value());
  // A list pattern never matches a non-list argument.
  CHECK_FALSE(p::match(p::CallFunction(aten::cat, p::list(p::kw<"p">, p::kw<"q">), p::list(1)), cat2).has_value());
}

TEST_CASE("nested list(...) patterns match nested lists structurally") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* view = g.call_method("view", {a, ArgList{ArgList{2, 3}, b}});
  g.output(ArgList{view});
  auto pat = p::CallMethod("view", p::kw<"x">, p::list(p::list(2, p::kw<"n">), p::kw<"s">));
  auto m = p::match(pat, view);
  REQUIRE(m.has_value());
  CHECK(m->get<"n">() == Arg(3));
  CHECK(m->get<"s">().node() == b);
  // Inner length differs.
  CHECK_FALSE(p::match(p::CallMethod("view", p::kw<"x">, p::list(p::list(2, 3, p::Ignored()), p::kw<"s">)), view)
                  .has_value());
}

TEST_CASE("describe() of each leaf in Inductor's repr") {
  CHECK(p::describe(p::Arg()) == "Arg()");
  CHECK(p::describe(p::Ignored()) == "Ignored()");
  CHECK(p::describe(p::kw<"a">) == "KeywordArg('a')");
  CHECK(p::describe(p::KeywordArg<"alpha">()) == "KeywordArg('alpha')");
  CHECK(p::describe(p::ExclusiveKeywordArg<"b">()) == "ExclusiveKeywordArg('b')");
  CHECK(p::describe(p::as_child(1)) == "1");
  CHECK(p::describe(p::as_child(true)) == "True");
  CHECK(p::describe(p::as_child(Arg())) == "None");
  CHECK(p::describe(p::list(p::kw<"a">, p::Arg(), 2, p::list(p::Ignored()))) ==
        "[KeywordArg('a'), Arg(), 2, [Ignored()]]");
}

