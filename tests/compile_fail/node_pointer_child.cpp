// Must NOT compile: a Node* given as a pattern child (it would be a constant
// that never matches). tests/extra_tests.cmake checks as_child's message.
#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/pattern.hpp"

int main() {
  kiln::Graph g;
  kiln::Node* x = g.placeholder("x");
  auto pat = kiln::pattern::CallFunction(kiln::aten::relu, x);
  return pat.fns.size() == 1 ? 0 : 1;
}
