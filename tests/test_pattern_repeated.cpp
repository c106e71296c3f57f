// RepeatedExpr(inner): `inner` must match at the node and at every other node
// it anchors on, each in a fresh context, with Inductor's semantics
// (torch/_inductor/pattern_matcher.py, RepeatedExpr._match). The classic use:
// every getitem of one split.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/schemas.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// split(x, 2) read by `pieces` getitems, each used once by a relu.
struct Split {
  Graph g;
  Node* x = g.placeholder("x");
  Node* split = g.call_function(torch::split, {x, Arg(2)});
  std::vector<Node*> items;
  std::vector<Node*> uses;
  explicit Split(int pieces = 3) {
    for (int i = 0; i < pieces; ++i) {
      items.push_back(g.call_function(pyop::getitem, {split, Arg(i)}));
      uses.push_back(g.call_function(aten::relu, {items.back()}));
    }
  }
  void finish(ArgList extra = {}) {
    ArgList outs(uses.begin(), uses.end());
    for (auto& e : extra) outs.push_back(e);
    g.output(outs);
  }
};

auto getitem_of_split() {
  return p::CallFunction(pyop::getitem, p::CallFunction(torch::split, p::kw<"x">, p::Ignored(), p::MULTIPLE),
                         p::Ignored());
}

}  // namespace

TEST_CASE("RepeatedExpr matches when every getitem of the split matches") {
  Split f;
  f.finish();
  auto pat = p::RepeatedExpr(getitem_of_split());
  auto m = p::match(pat, f.items[0]);
  REQUIRE(m.has_value());
  CHECK(m->node<"x">() == f.x);
  CHECK(m->output_nodes() == std::vector<Node*>{f.items[0]});
  // Inductor 2.11's order: the first match, then each other anchor's match in
  // a fresh context (the split again every time). The root getitem is not
  // matched again: the anchor search starts with it marked as searched.
  Node* s = f.split;
  CHECK(m->nodes() == std::vector<Node*>{s, f.items[0], s, f.items[1], s, f.items[2]});
  // Tried at another getitem, it checks the same set.
  auto m1 = p::match(pat, f.items[1]);
  REQUIRE(m1.has_value());
  CHECK(m1->nodes() == std::vector<Node*>{s, f.items[1], s, f.items[0], s, f.items[2]});
}

TEST_CASE("RepeatedExpr in a pass: pattern_matcher_nodes counts the nodes as Inductor 2.11 reports them") {
  // Inductor adds len(m.nodes) to pattern_matcher_nodes: 2 for the root's
  // match, 2 for each other getitem (the split each time).
  Split f(4);
  f.finish();
  PatternMatcherPass pass("repeated");
  std::vector<std::size_t> sizes;
  pass.register_pattern(p::RepeatedExpr(getitem_of_split()), [&](auto& m) { sizes.push_back(m.nodes().size()); });
  Counters counters;
  // No handler erases anything, so every getitem is a root and matches.
  CHECK(pass.apply(f.g, &counters) == 4);
  CHECK(sizes == std::vector<std::size_t>{8, 8, 8, 8});
  CHECK(counters.get("pattern_matcher_count") == 4);
  CHECK(counters.get("pattern_matcher_nodes") == 32);
}

TEST_CASE("RepeatedExpr fails when one getitem is used differently (two users instead of one)") {
  Split f;
  Node* again = f.g.call_function(aten::sigmoid, {f.items[2]});
  f.finish({again});
  std::string why;
  CHECK_FALSE(p::match(p::RepeatedExpr(getitem_of_split()), f.items[0], &why).has_value());
  CHECK(contains(why, "node " + f.items[2]->name() + ": expected 1 user, has 2"));
  // Without RepeatedExpr, only the getitem at the root is looked at.
  CHECK(p::match(getitem_of_split(), f.items[0]).has_value());
}

TEST_CASE("the users rule applies to the inner pattern even at the root node") {
  // Inductor's context for a RepeatedExpr lists only the RepeatedExpr as an
  // output, so the inner pattern is held to users=1 at the root getitem too.
  Split f;
  Node* again = f.g.call_function(aten::sigmoid, {f.items[0]});
  f.finish({again});
  std::string why;
  CHECK_FALSE(p::match(p::RepeatedExpr(getitem_of_split()), f.items[0], &why).has_value());
  CHECK(contains(why, "node " + f.items[0]->name() + ": expected 1 user, has 2"));
  // The plain getitem pattern is the output itself there, so exempt.
  CHECK(p::match(getitem_of_split(), f.items[0]).has_value());
}

TEST_CASE("users of the anchor with another target are not candidates") {
  Split f;
  Node* other = f.g.call_function(aten::relu, {f.split});  // the split's other users need not be getitems
  f.finish({other});
  CHECK(p::match(p::RepeatedExpr(getitem_of_split()), f.items[0]).has_value());
}

TEST_CASE("captures must agree across the repeats") {
  SUBCASE("the getitem index: one getitem matches, several disagree") {
    auto pat = p::RepeatedExpr(p::CallFunction(
        pyop::getitem, p::CallFunction(torch::split, p::kw<"x">, p::Ignored(), p::MULTIPLE), p::kw<"i">));
    Split one(1);
    one.finish();
    auto m = p::match(pat, one.items[0]);
    REQUIRE(m.has_value());
    CHECK(m->get<"i">() == Arg(0));
    Split three(3);
    three.finish();
    std::string why;
    CHECK_FALSE(p::match(pat, three.items[0], &why).has_value());
    CHECK(contains(why, "kwarg mismatch: 'i'"));
  }
  SUBCASE("every mul of one relu must scale by the same value") {
    auto pat = p::RepeatedExpr(
        p::CallFunction(aten::mul_Tensor, p::CallFunction(aten::relu, p::kw<"x">, p::MULTIPLE), p::kw<"s">));
    auto build = [](Graph& g, bool same_scale) {
      Node* a = g.placeholder("a");
      Node* b = g.placeholder("b");
      Node* c = g.placeholder("c");
      Node* r = g.call_function(aten::relu, {a});
      Node* m1 = g.call_function(aten::mul_Tensor, {r, b});
      Node* m2 = g.call_function(aten::mul_Tensor, {r, same_scale ? b : c});
      g.output(ArgList{m1, m2});
      return std::pair{m1, b};
    };
    Graph g1;
    auto [m1, b] = build(g1, true);
    auto m = p::match(pat, m1);
    REQUIRE(m.has_value());
    CHECK(m->node<"s">() == b);
    Graph g2;
    std::string why;
    CHECK_FALSE(p::match(pat, build(g2, false).first, &why).has_value());
    CHECK(contains(why, "kwarg mismatch: 's'"));
  }
}

TEST_CASE("each repeat has a fresh exclusive set") {
  // mul(r, b) twice: the exclusive arg binds b once per repeat, never twice in one.
  auto pat = p::RepeatedExpr(p::CallFunction(aten::mul_Tensor, p::CallFunction(aten::relu, p::Ignored(), p::MULTIPLE),
                                             p::ExclusiveKeywordArg<"s">{}));
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* r = g.call_function(aten::relu, {a});
  Node* m1 = g.call_function(aten::mul_Tensor, {r, b});
  Node* m2 = g.call_function(aten::mul_Tensor, {r, b});
  g.output(ArgList{m1, m2});
  auto m = p::match(pat, m1);
  REQUIRE(m.has_value());
  CHECK(m->node<"s">() == b);
}

TEST_CASE("RepeatedExpr as a child: inside ListOf every element checks all the split's getitems") {
  auto pat = p::CallFunction(aten::cat, p::ListOf(p::RepeatedExpr(getitem_of_split())), p::Ignored());
  auto build = [](Graph& g, bool extra_use) {
    Node* x = g.placeholder("x");
    Node* split = g.call_function(torch::split, {x, Arg(2)});
    Node* g0 = g.call_function(pyop::getitem, {split, Arg(0)});
    Node* g1 = g.call_function(pyop::getitem, {split, Arg(1)});
    Node* g2 = g.call_function(pyop::getitem, {split, Arg(2)});
    Node* c = g.call_function(aten::cat, {Arg(ArgList{Arg(g0), Arg(g1)}), Arg(0)});
    ArgList outs{c, g.call_function(aten::relu, {g2})};
    if (extra_use) outs.emplace_back(g.call_function(aten::neg, {g2}));  // g2 is not in the cat
    g.output(outs);
    return c;
  };
  Graph g1;
  auto m = p::match(pat, build(g1, false));
  REQUIRE(m.has_value());
  Graph g2;
  std::string why;
  CHECK_FALSE(p::match(pat, build(g2, true), &why).has_value());
  CHECK(contains(why, "expected 1 user, has 2"));
}

TEST_CASE("RepeatedExpr reports its inner pattern's root for indexing and describes itself") {
  auto pat = p::RepeatedExpr(getitem_of_split());
  CHECK(pat.root_kind() == OpKind::call_function);
  CHECK(pat.root_fns().contains(pyop::getitem.hash));
  CHECK(p::describe(pat) ==
        "RepeatedExpr(CallFunction(operator.getitem, CallFunction(torch.split, KeywordArg('x'), Ignored(), "
        "_users=MULTIPLE), Ignored()))");
}
