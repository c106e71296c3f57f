// MultiOutputPattern(out0, out1, ...): out0 matched at the root node, the other
// outputs found from anchors, with Inductor's semantics
// (torch/_inductor/pattern_matcher.py, MultiOutputPattern._match and
// _match_from_anchors): outputs are exempt from the users rule, a failed anchor
// candidate is reverted before the next, output_nodes() follows output order.
#include <doctest/doctest.h>

#include <optional>
#include <utility>
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

// sigmoid(relu(a)) and tanh(relu(a)): two outputs sharing one producer.
struct Siblings {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  Node* t = g.call_function(aten::tanh, {r});
  Siblings() { g.output(ArgList{s, t}); }
};

// relu has two users, sigmoid and tanh, both inside the pattern. A non-output
// call pattern must match a node with exactly `users` users (1 unless stated),
// so the shared producer is declared users(2): what Inductor's fx_to_pattern
// writes for it, and stricter than MULTIPLE, which would also accept a relu
// that something outside the pattern still reads.
auto shared_relu() { return p::CallFunction(aten::relu, p::kw<"a">, p::users(2)); }

}  // namespace

TEST_CASE("MultiOutputPattern matches two siblings that share an input sub-pattern") {
  Siblings f;
  auto x = shared_relu();
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), p::CallFunction(aten::tanh, x));
  auto m = p::match(pat, f.s);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{f.s, f.t});
  CHECK(m->output_node() == f.s);
  CHECK(m->nodes() == std::vector<Node*>{f.r, f.s, f.t});
  CHECK(m->node<"a">() == f.a);
  // out0 decides where the pattern is tried: tanh is not a root for it.
  p::PatternPlan<decltype(pat)> plan(pat);
  CHECK(plan.root_accepts(f.s));
  CHECK_FALSE(plan.root_accepts(f.t));
  CHECK_FALSE(plan.match(f.t).has_value());
}

TEST_CASE("the shared producer of two outputs needs users(2): with the default users=1 it fails") {
  Siblings f;
  auto x = p::CallFunction(aten::relu, p::kw<"a">);
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), p::CallFunction(aten::tanh, x));
  std::string why;
  CHECK_FALSE(p::match(pat, f.s, &why).has_value());
  CHECK(contains(why, "expected 1 user, has 2"));
}

TEST_CASE("output_nodes() follows the order of the outputs, with nullptr for std::nullopt") {
  Siblings f;
  auto x = shared_relu();
  auto reversed = p::MultiOutputPattern(p::CallFunction(aten::tanh, x), p::CallFunction(aten::sigmoid, x));
  auto m = p::match(reversed, f.t);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{f.t, f.s});

  auto with_none =
      p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), std::nullopt, p::CallFunction(aten::tanh, x));
  auto m2 = p::match(with_none, f.s);
  REQUIRE(m2.has_value());
  CHECK(m2->output_nodes() == std::vector<Node*>{f.s, nullptr, f.t});
  auto with_no_output = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), p::NoOutput{},
                                              p::CallFunction(aten::tanh, x));
  auto m3 = p::match(with_no_output, f.s);
  REQUIRE(m3.has_value());
  CHECK(m3->output_nodes() == std::vector<Node*>{f.s, nullptr, f.t});
}

TEST_CASE("MultiOutputPattern fails when a later output has no node to anchor on") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  Node* n = g.call_function(aten::neg, {r});  // relu's second user is not a tanh
  g.output(ArgList{s, n});

  auto x = shared_relu();
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), p::CallFunction(aten::tanh, x));
  std::string why;
  CHECK_FALSE(p::match(pat, s, &why).has_value());
  CHECK(contains(why, "output 1: no anchor found"));
}

TEST_CASE("a failed anchor candidate is reverted before the next one is tried") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b1 = g.placeholder("b1");
  Node* b2 = g.placeholder("b2");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  // The first candidate matches relu and tanh(b1), then fails on the constant.
  Node* t1 = g.call_function(aten::tanh, {b1});
  Node* add1 = g.call_function(aten::add_Tensor, {r, t1, Arg(3)});
  Node* t2 = g.call_function(aten::tanh, {b2});
  Node* add2 = g.call_function(aten::add_Tensor, {r, t2, Arg(2)});
  g.output(ArgList{s, add1, add2});

  auto x = p::CallFunction(aten::relu, p::kw<"a">, p::users(3));
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x),
                                   p::CallFunction(aten::add_Tensor, x, p::CallFunction(aten::tanh, p::kw<"b">), 2));
  auto m = p::match(pat, s);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{s, add2});
  // Left from the first candidate, the tanh slot (t1), the capture b (b1) or
  // the nodes (t1) would each break this.
  CHECK(m->node<"b">() == b2);
  CHECK(m->nodes() == std::vector<Node*>{r, s, t2, add2});
}

TEST_CASE("when every anchor candidate fails, the last one's reason is reported") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  Node* add1 = g.call_function(aten::add_Tensor, {r, a, Arg(3)});
  Node* add2 = g.call_function(aten::add_Tensor, {r, a, Arg(4)});
  g.output(ArgList{s, add1, add2});

  auto x = p::CallFunction(aten::relu, p::kw<"a">, p::users(3));
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), p::CallFunction(aten::add_Tensor, x, p::kw<"a">, 2));
  std::string why;
  CHECK_FALSE(p::match(pat, s, &why).has_value());
  CHECK(contains(why, "constant_args"));
  CHECK(contains(why, "4"));
}

TEST_CASE("every output is exempt from the users rule, interior patterns are not") {
  auto build = [](Graph& g, bool extra_relu_user) {
    Node* a = g.placeholder("a");
    Node* r = g.call_function(aten::relu, {a});
    Node* s = g.call_function(aten::sigmoid, {r});
    Node* t = g.call_function(aten::tanh, {r});
    // Both outputs have several users outside the pattern.
    ArgList outs{g.call_function(aten::neg, {s}), g.call_function(aten::exp, {s}), g.call_function(aten::neg, {t}),
                 g.call_function(aten::exp, {t})};
    if (extra_relu_user) outs.emplace_back(g.call_function(aten::exp, {r}));
    g.output(outs);
    return std::pair{s, t};
  };
  auto x = shared_relu();
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), p::CallFunction(aten::tanh, x));

  Graph g1;
  auto [s, t] = build(g1, false);
  auto m = p::match(pat, s);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{s, t});

  // The interior relu gets a third user: no longer users(2).
  Graph g2;
  std::string why;
  CHECK_FALSE(p::match(pat, build(g2, true).first, &why).has_value());
  CHECK(contains(why, "expected 2 users, has 3"));
}

TEST_CASE("an output that also occurs inside another output is exempt there too (by object, as Inductor)") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* r = g.call_function(aten::relu, {a});
  Node* s = g.call_function(aten::sigmoid, {r});
  Node* other = g.call_function(aten::neg, {r});  // relu has two users
  g.output(ArgList{s, other});

  // relu keeps the default users=1, but it is an output: Inductor's
  // `self in ctx.outputs` holds wherever the object is matched.
  auto y = p::CallFunction(aten::relu, p::kw<"a">);
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, y), y);
  auto m = p::match(pat, s);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{s, r});
  CHECK(m->nodes() == std::vector<Node*>{r, s});
  // The same relu as a plain interior pattern is held to users=1.
  CHECK_FALSE(p::match(p::CallFunction(aten::sigmoid, y), s).has_value());
}

TEST_CASE("exclusive args taken by a failed anchor candidate stay taken (as in Inductor)") {
  // _match_from_anchors reverts pattern_to_node only; the context's exclusive
  // set keeps what the failed candidate added.
  auto x = p::CallFunction(aten::relu, p::Ignored(), p::users(3));
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x),
                                   p::CallFunction(aten::add_Tensor, x, p::ExclusiveKeywordArg<"e">{}, 2));
  auto build = [](Graph& g, bool same_q) {
    Node* a = g.placeholder("a");
    Node* q = g.placeholder("q");
    Node* q2 = g.placeholder("q2");
    Node* r = g.call_function(aten::relu, {a});
    Node* s = g.call_function(aten::sigmoid, {r});
    Node* add1 = g.call_function(aten::add_Tensor, {r, same_q ? q : q2, Arg(3)});  // takes e, then fails
    Node* add2 = g.call_function(aten::add_Tensor, {r, q, Arg(2)});
    g.output(ArgList{s, add1, add2});
    return s;
  };
  Graph g1;
  std::string why;
  CHECK_FALSE(p::match(pat, build(g1, true), &why).has_value());
  CHECK(contains(why, "exclusive arg appears twice"));
  Graph g2;
  CHECK(p::match(pat, build(g2, false)).has_value());
}

TEST_CASE("an anchor match whose capture disagrees with out0's fails the whole pattern") {
  // Inductor takes the first candidate that matches and then raises "kwarg
  // mismatch" from Match.extend; it does not go on to the next candidate.
  auto x = p::CallFunction(aten::relu, p::kw<"a">, p::users(3));
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x),
                                   p::CallFunction(aten::add_Tensor, x, p::KeywordArg<"a">{}));  // another "a" object
  auto build = [](Graph& g, bool first_disagrees) {
    Node* a = g.placeholder("a");
    Node* b = g.placeholder("b");
    Node* r = g.call_function(aten::relu, {a});
    Node* s = g.call_function(aten::sigmoid, {r});
    Node* add1 = g.call_function(aten::add_Tensor, {r, first_disagrees ? b : a});
    Node* add2 = g.call_function(aten::add_Tensor, {r, a});
    g.output(ArgList{s, add1, add2});
    return s;
  };
  Graph g1;
  std::string why;
  CHECK_FALSE(p::match(pat, build(g1, true), &why).has_value());
  CHECK(contains(why, "kwarg mismatch: 'a'"));
  Graph g2;
  CHECK(p::match(pat, build(g2, false)).has_value());
}

TEST_CASE("a later output is anchored through an item of a literal list child (Inductor walks the flattened arguments)") {
  // cat([b, sigmoid(a)], 0) found from the sigmoid that relu's output matched:
  // Inductor's find_anchor_nodes visits each flattened argument, list items too.
  kiln::testing::ListAnchorGraph f;
  auto x = p::CallFunction(aten::sigmoid, p::kw<"a">, p::users(2));
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::relu, x),
                                   p::CallFunction(aten::cat, p::list(p::kw<"b">, x), p::Ignored()));
  auto m = p::match(pat, f.r);
  REQUIRE(m.has_value());
  CHECK(m->output_nodes() == std::vector<Node*>{f.r, f.c});
  CHECK(m->node<"b">() == f.b);
}

TEST_CASE("MultiOutputPattern describes itself in Inductor's style") {
  auto x = p::CallFunction(aten::relu, p::kw<"a">, p::users(2));
  auto pat = p::MultiOutputPattern(p::CallFunction(aten::sigmoid, x), std::nullopt, p::CallFunction(aten::tanh, x));
  CHECK(p::describe(pat) ==
        "MultiOutputPattern([CallFunction(aten.sigmoid.default, CallFunction(aten.relu.default, KeywordArg('a'), "
        "_users=2)), None, CallFunction(aten.tanh.default, CallFunction(aten.relu.default, KeywordArg('a'), "
        "_users=2))])");
}
