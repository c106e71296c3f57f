#pragma once
// Helpers shared by the doctest suites (not a suite itself: the test CMake only
// picks up test_*.cpp files).
#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"

namespace kiln::testing {

// The message of the E that f() throws, or "<no exception>".
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no exception>";
}

inline std::vector<std::string> names(const std::vector<Node*>& v) {
  std::vector<std::string> out;
  for (Node* n : v) out.push_back(n->name());
  return out;
}
inline std::vector<std::string> names(const Graph& g) { return names(g.node_list()); }

// Sets KILN_PATTERN_DEBUG to a node's name and captures std::cerr; both are
// restored on scope exit.
class DebugCapture {
 public:
  explicit DebugCapture(const char* node_name) : old_(std::cerr.rdbuf(buf_.rdbuf())) {
    ::setenv("KILN_PATTERN_DEBUG", node_name, 1);
  }
  ~DebugCapture() {
    std::cerr.rdbuf(old_);
    ::unsetenv("KILN_PATTERN_DEBUG");
  }
  DebugCapture(const DebugCapture&) = delete;
  DebugCapture& operator=(const DebugCapture&) = delete;
  std::string text() const { return buf_.str(); }

 private:
  std::ostringstream buf_;
  std::streambuf* old_;
};

// What KILN_PATTERN_DEBUG=node_name prints while f() runs.
template <class F>
std::string pattern_debug_output(const char* node_name, F&& f) {
  DebugCapture capture(node_name);
  f();
  return capture.text();
}

// The list links and order keys agree along the whole graph.
inline void check_links(const Graph& g) {
  Node* prev = nullptr;
  for (Node* n : g.nodes()) {
    REQUIRE(n->prev() == prev);
    if (prev) REQUIRE(prev->is_before(*n));
    prev = n;
  }
  REQUIRE(g.back() == prev);
}

// a, b -> s = sigmoid(a) -> r = relu(s), c = cat([b, s], 0): a second output
// (c) reachable from the first (r) only through an item of a list argument.
struct ListAnchorGraph {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* s = g.call_function(aten::sigmoid, {a});
  Node* r = g.call_function(aten::relu, {s});
  Node* c = g.call_function(aten::cat, {ArgList{b, s}, 0});
  ListAnchorGraph() { g.output(ArgList{r, c}); }
};

}  // namespace kiln::testing
