// Must NOT compile: a std::vector<int> is neither a pattern nor a value an Arg
// holds (an ArgList or list(...) is). tests/extra_tests.cmake checks the message.
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/pattern.hpp"

int main() {
  namespace p = kiln::pattern;
  auto pat = p::CallFunction(kiln::aten::view, p::kw<"x">, std::vector<int>{2, 3});
  return pat.fns.size() == 1 ? 0 : 1;
}
