// Must NOT compile: a handler that takes an int. register_pattern's
// static_assert names the accepted signatures (tests/extra_tests.cmake).
#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"

int main() {
  namespace p = kiln::pattern;
  kiln::PatternMatcherPass pass("bad");
  pass.register_pattern(p::CallFunction(kiln::aten::relu, p::kw<"x">), [](int) {});
  return static_cast<int>(pass.num_patterns()) - 1;
}
