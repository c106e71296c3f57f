// NodeArgs: a node's positional arguments, up to three inline and more on the
// heap; editing through the Node across the inline/heap boundary; the braced-list
// call_function that copies its arguments straight into the node.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "test_support.hpp"

using namespace kiln;
using kiln::testing::message_of;

namespace {

// The users of `n`, in order.
std::vector<Node*> users_of(const Node* n) {
  std::vector<Node*> out;
  for (Node* u : n->users()) out.push_back(u);
  return out;
}

// Whether `p` points inside the node's own bytes.
bool inside(const Node* n, const void* p) {
  const auto* b = reinterpret_cast<const char*>(n);
  const auto* q = static_cast<const char*>(p);
  return q >= b && q < b + sizeof(Node);
}

}  // namespace

TEST_CASE("NodeArgs: up to three arguments live inside the node, more on the heap") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(aten::relu, {x});
  Node* a = g.call_function(aten::addmm, {x, x, x});
  Node* c = g.call_function(aten::convolution, {x, x, Arg(), ArgList{1, 1}, ArgList{0, 0}, ArgList{1, 1}, false,
                                                ArgList{0, 0}, 1});
  CHECK(inside(r, r->args().data()));
  CHECK(inside(a, a->args().data()));
  CHECK_FALSE(inside(c, c->args().data()));
  CHECK(r->args().size() == 1);
  CHECK(a->args().size() == 3);
  REQUIRE(c->args().size() == 9);
  CHECK(c->args()[3] == Arg(ArgList{1, 1}));
  CHECK(c->args()[8] == Arg(1));
  CHECK(c->args().back() == Arg(1));
  CHECK(c->args().front() == Arg(x));
  CHECK(users_of(x) == std::vector<Node*>{r, a, c});
  // Reads like a vector: iteration, ==, conversion to an ArgList.
  std::vector<Node*> seen;
  for (const Arg& v : a->args()) seen.push_back(v.node());
  CHECK(seen == std::vector<Node*>{x, x, x});
  const ArgList copy = c->args();
  CHECK(copy.size() == 9);
  CHECK(c->args() == copy);
  CHECK(c->args().to_list() == copy);
  CHECK_FALSE(a->args() == copy);
  CHECK(g.call_function(aten::relu)->args().empty());
  g.output(Arg(x));
  kiln::lint(g);
}

TEST_CASE("NodeArgs: set_args moves between inline and heap storage and keeps users right") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* n = g.call_function(aten::add_Tensor, {x, y});
  // Inline -> heap.
  n->set_args({z, y, x, Arg(2), Arg("s"), z});
  CHECK_FALSE(inside(n, n->args().data()));
  CHECK(n->args() == ArgList{z, y, x, Arg(2), Arg("s"), z});
  CHECK(n->all_input_nodes() == std::vector<Node*>{z, y, x});
  CHECK(users_of(x) == std::vector<Node*>{n});
  // Heap -> heap of another size.
  n->set_args({x, x, x, x});
  CHECK(n->args().size() == 4);
  CHECK(users_of(y).empty());
  CHECK(users_of(z).empty());
  // Heap -> inline.
  n->set_args({y});
  CHECK(inside(n, n->args().data()));
  CHECK(n->args() == ArgList{y});
  CHECK(users_of(x).empty());
  CHECK(users_of(y) == std::vector<Node*>{n});
  // set_arg, replace_input_with and set_kwargs on heap arguments.
  n->set_args({x, y, z, x, y});
  n->set_arg(4, z);
  CHECK(n->args()[4] == Arg(z));
  n->replace_input_with(x, z);
  CHECK(n->args() == ArgList{z, y, z, z, z});
  CHECK(users_of(x).empty());
  n->set_kwargs({{"alpha", 2}});
  CHECK(n->args() == ArgList{z, y, z, z, z});
  CHECK(n->kwargs().find("alpha") != nullptr);
  g.output(Arg(n));
  kiln::lint(g);
}

TEST_CASE("NodeArgs: a rejected argument leaves the node's arguments as they were, inline or heap") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* gone = g.placeholder("gone");
  g.erase_node(gone);
  Node* small = g.call_function(aten::add_Tensor, {x, y});
  Node* big = g.call_function(aten::cat, {ArgList{x, y, x, y}, 0, Arg(), Arg()});
  const ArgList small_before = small->args();
  const ArgList big_before = big->args();
  CHECK(message_of<GraphError>([&] { small->set_args({x, y, x, gone}); }).find("erased node gone") !=
        std::string::npos);
  CHECK(message_of<GraphError>([&] { big->set_args({gone}); }).find("erased node gone") != std::string::npos);
  CHECK(small->args() == small_before);
  CHECK(big->args() == big_before);
  CHECK(inside(small, small->args().data()));
  CHECK_FALSE(inside(big, big->args().data()));
  // A failed braced-list call_function creates nothing.
  const std::size_t size = g.size();
  CHECK_THROWS_AS(g.call_function(aten::relu, {gone}), GraphError);
  CHECK_THROWS_AS(g.call_function(aten::cat, {x, y, x, gone}), GraphError);
  CHECK(g.size() == size);
  g.output(ArgList{small, big});
  kiln::lint(g);
}

TEST_CASE("call_function with a braced list copies the arguments, and the ArgList form moves them") {
  Graph g;
  Node* x = g.placeholder("x");
  const Arg text("a string longer than any small-string buffer");
  const Arg list = ArgList{x, Arg(3)};
  Node* a = g.call_function(aten::add_Tensor, {list, text});
  CHECK(a->args()[0] == list);
  CHECK(a->args()[1] == text);
  CHECK(*text.get_if<std::string>() == "a string longer than any small-string buffer");  // copied, not moved
  ArgList args{x, text, x, text};
  Node* b = g.call_function(aten::cat, std::move(args));
  CHECK(b->args().size() == 4);
  CHECK(b->args()[1] == text);
  CHECK(users_of(x) == std::vector<Node*>{a, b});
  // Both forms name nodes alike.
  CHECK(a->name() == "add");
  CHECK(g.call_function(aten::add_Tensor, {x, x})->name() == "add_1");
  CHECK(g.call_function(aten::add_Tensor, ArgList{x, x})->name() == "add_2");
  CHECK(g.call_function(aten::add_Tensor, {x, x}, {}, "mine")->name() == "mine");
  g.output(Arg(x));
  kiln::lint(g);
}

TEST_CASE("NodeArgs: erasing and recycling nodes with heap arguments frees them, and new nodes start clean") {
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> made;
  for (int i = 0; i < 200; ++i)
    made.push_back(i % 2 ? g.call_function(aten::cat, {x, x, x, x, i}) : g.call_function(aten::relu, {x}));
  for (Node* n : made) g.erase_node(n);
  g.purge_erased();
  CHECK(x->num_users() == 0);
  for (int i = 0; i < 200; ++i) {
    Node* n = i % 3 ? g.call_function(aten::neg, {x}) : g.call_function(aten::cat, {x, i, x, i, x});
    REQUIRE(n->args().size() == (i % 3 ? 1u : 5u));
    REQUIRE(n->args()[0] == Arg(x));
    if (i % 3 == 0) REQUIRE(n->args()[4] == Arg(x));
  }
  CHECK(x->num_users() == 200);
  g.output(Arg(x));
  kiln::lint(g);
}
