#pragma once
// Helpers shared by the doctest suites (not a suite itself: the test CMake only
// picks up test_*.cpp files).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core/graph.hpp"

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

}  // namespace kiln::testing
