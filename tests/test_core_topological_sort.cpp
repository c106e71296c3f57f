// stable_topological_sort(): Inductor's algorithm (torch/_inductor/pattern_matcher.py):
//   pending = reversed(graph.nodes) used as a stack; for each popped node, the inputs
//   (args then kwargs, duplicates included) that are not ready yet; if any, the node
//   waits on the LAST of them; otherwise it is ready, is placed right after the cursor
//   (if not already there) and becomes the cursor, and the nodes waiting on it are
//   pushed back so that they are popped in the order they started waiting.
// Every expected order below was worked out by hand with that algorithm.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "test_support.hpp"
#include "kiln/ops/aten.hpp"

using namespace kiln;
using namespace kiln::testing;


TEST_CASE("an already sorted graph is left exactly as it is") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(aten::add_Tensor, {x, y});
  Node* b = g.call_function(aten::mul_Tensor, {a, x}, {{"k", Arg(y)}});
  Node* c = g.call_function(aten::cat, {ArgList{a, b, a}});
  Node* d = g.call_function(aten::neg, {x});  // unused, mid-graph
  g.output(ArgList{c, d});
  const std::vector<Node*> before = g.node_list();
  std::vector<Node*> prevs, nexts;
  for (Node* n : before) {
    prevs.push_back(n->prev());
    nexts.push_back(n->next());
  }
  CHECK(stable_topological_sort(g) == 0);
  CHECK(g.node_list() == before);
  for (std::size_t i = 0; i < before.size(); ++i) {
    CHECK(before[i]->prev() == prevs[i]);
    CHECK(before[i]->next() == nexts[i]);
  }
  CHECK_NOTHROW(lint(g));
  // Twice is the same as once.
  CHECK(stable_topological_sort(g) == 0);
  CHECK(g.node_list() == before);
}

TEST_CASE("an empty graph and a single node sort trivially") {
  Graph g;
  CHECK(stable_topological_sort(g) == 0);
  Node* x = g.placeholder("x");
  CHECK(stable_topological_sort(g) == 0);
  CHECK(g.front() == x);
}

TEST_CASE("a user moved before its inputs goes right after the last of them") {
  // Built x, a=relu(x), b=neg(a), c=add(a, b), output(c); then c moved to the front.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {a});
  Node* c = g.call_function(aten::add_Tensor, {a, b});
  g.output(ArgList{c});
  g.move_before(x, c);
  REQUIRE(names(g) == std::vector<std::string>{"add", "x", "relu", "neg", "output"});
  // c waits on b (its last unready input); x, a, b are ready in place; c follows b.
  CHECK(stable_topological_sort(g) == 1);
  CHECK(names(g) == std::vector<std::string>{"x", "relu", "neg", "add", "output"});
  check_links(g);
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("a fully reversed diamond") {
  // x; l=relu(x); r=neg(x); j=add(l, r); output(j); listed as j, r, l, x, output.
  //  pop j: waits on r (last of l, r)     pop r: waits on x     pop l: waits on x
  //  pop x: ready, first ready node stays where it is (cursor was empty)
  //  re-push [r, l]: r ready, moved after x (1); j re-pushed, now waits on l
  //  l ready, moved after r (2); j ready, moved after l (3); output already follows.
  Graph g;
  Node* x = g.placeholder("x");
  Node* l = g.call_function(aten::relu, {x});
  Node* r = g.call_function(aten::neg, {x});
  Node* j = g.call_function(aten::add_Tensor, {l, r});
  Node* out = g.output(ArgList{j});
  g.move_before(x, j);
  g.move_before(x, r);
  g.move_before(x, l);
  REQUIRE(g.node_list() == std::vector<Node*>{j, r, l, x, out});
  CHECK(stable_topological_sort(g) == 3);
  CHECK(g.node_list() == std::vector<Node*>{x, r, l, j, out});
  check_links(g);
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("two waiters on the same node resume in the order they started waiting") {
  // x; a=relu(x); b=neg(x); u1=add(a, b); u2=mul(b, a); output(u1, u2);
  // listed x, u1, u2, a, b, output.
  //  u1 waits on b (last unready of a, b); u2 waits on a (last unready of b, a)
  //  a ready -> moved after x (1); u2 resumes, waits on b: waiting[b] = [u1, u2]
  //  b ready -> moved after a (2); u1 then u2 become ready where they are.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {x});
  Node* u1 = g.call_function(aten::add_Tensor, {a, b});
  Node* u2 = g.call_function(aten::mul_Tensor, {b, a});
  Node* out = g.output(ArgList{u1, u2});
  g.move_before(a, u1);
  g.move_before(a, u2);
  REQUIRE(g.node_list() == std::vector<Node*>{x, u1, u2, a, b, out});
  CHECK(stable_topological_sort(g) == 2);
  CHECK(g.node_list() == std::vector<Node*>{x, a, b, u1, u2, out});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("kwargs count after args when choosing what to wait on") {
  // x; a=relu(x); b=neg(x); k1=add(b, other=a); k2=add(a, other=b); output(k1, k2);
  // listed x, k1, k2, a, b, output.
  //  k1's inputs in order are [b, a] -> waits on a;  k2's are [a, b] -> waits on b
  //  a ready, moved after x (1); k1 resumes and waits on b: waiting[b] = [k2, k1]
  //  b ready, moved after a (2); k2 ready, moved after b (3); k1 ready, already after k2.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {x});
  Node* k1 = g.call_function(aten::add_Tensor, {b}, {{"other", Arg(a)}});
  Node* k2 = g.call_function(aten::add_Tensor, {a}, {{"other", Arg(b)}});
  Node* out = g.output(ArgList{k1, k2});
  g.move_before(a, k1);
  g.move_before(a, k2);
  REQUIRE(g.node_list() == std::vector<Node*>{x, k1, k2, a, b, out});
  CHECK(stable_topological_sort(g) == 3);
  CHECK(g.node_list() == std::vector<Node*>{x, a, b, k2, k1, out});
  check_links(g);
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("a repeated input counts at each position when choosing what to wait on") {
  // x; a=relu(x); b=neg(x); u1=cat([a, b, a]); u2=cat([a, b]); output(u1, u2);
  // listed x, u2, u1, b, a, output.
  //  u2 waits on b (last of a, b); u1 waits on a (the repeated a is last)
  //  b ready, moved after x (1); u2 resumes and waits on a: waiting[a] = [u1, u2]
  //  a ready, moved after b (2); u1 ready, moved after a (3); u2 ready, follows u1.
  // (Waiting on the last *distinct* input would give x, b, a, u2, u1 instead.)
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {x});
  Node* u1 = g.call_function(aten::cat, {ArgList{a, b, a}});
  Node* u2 = g.call_function(aten::cat, {ArgList{a, b}});
  Node* out = g.output(ArgList{u1, u2});
  g.move_before(a, u2);
  g.move_before(a, u1);
  g.move_before(a, b);
  REQUIRE(g.node_list() == std::vector<Node*>{x, u2, u1, b, a, out});
  CHECK(stable_topological_sort(g) == 3);
  CHECK(g.node_list() == std::vector<Node*>{x, b, a, u1, u2, out});
  check_links(g);
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("unrelated nodes keep their relative order") {
  // x; p=relu(x); q=neg(p); s=exp(x); t=log(x); output(q, s, t); q moved to the front.
  //  q waits on p; x is ready and stays; p is ready right after x; q resumes and is
  //  moved after p (1); the list is then x, p, q, s, t, so s and t follow in place.
  Graph g;
  Node* x = g.placeholder("x");
  Node* p = g.call_function(aten::relu, {x});
  Node* q = g.call_function(aten::neg, {p});
  Node* s = g.call_function(aten::exp, {x});
  Node* t = g.call_function(aten::log, {x});
  Node* out = g.output(ArgList{q, s, t});
  g.move_before(x, q);
  REQUIRE(g.node_list() == std::vector<Node*>{q, x, p, s, t, out});
  CHECK(stable_topological_sort(g) == 1);
  CHECK(g.node_list() == std::vector<Node*>{x, p, q, s, t, out});
  CHECK_NOTHROW(lint(g));
}

TEST_CASE("a dependency cycle throws GraphError naming a node of it") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  Node* b = g.call_function(aten::neg, {a});
  g.output(ArgList{b});
  a->set_args({b});  // relu <- neg <- relu
  std::string msg;
  try {
    stable_topological_sort(g);
  } catch (const GraphError& e) {
    msg = e.what();
  }
  REQUIRE_FALSE(msg.empty());
  CHECK(msg.find("cycle") != std::string::npos);
  CHECK((msg.find("relu") != std::string::npos || msg.find("neg") != std::string::npos));
  CHECK_THROWS_AS(stable_topological_sort(g), GraphError);
}

TEST_CASE("a self-loop is a cycle") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::relu, {x});
  g.output(ArgList{a});
  a->set_args({a});
  CHECK_THROWS_AS(stable_topological_sort(g), GraphError);
}

TEST_CASE("sorting a larger shuffled chain restores it and lints") {
  // A chain n0 -> n1 -> ... -> n199 listed backwards.
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> chain;
  Node* prev = x;
  for (int i = 0; i < 200; ++i) chain.push_back(prev = g.call_function(aten::neg, {prev}));
  Node* out = g.output(ArgList{prev});
  for (Node* n : chain) g.move_before(g.front(), n);  // each in turn to the front: reversed chain, then x
  REQUIRE(g.front() == chain.back());
  std::size_t moved = stable_topological_sort(g);
  CHECK(moved == 200);
  std::vector<Node*> expect{x};
  expect.insert(expect.end(), chain.begin(), chain.end());
  expect.push_back(out);
  CHECK(g.node_list() == expect);
  check_links(g);
  CHECK_NOTHROW(lint(g));
}
