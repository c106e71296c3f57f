// Must NOT compile: an extra_check that returns a string, not a bool or a
// kiln::CheckResult (a reason is given as kiln::reject("...")).
// register_pattern's static_assert says what it must be (tests/extra_tests.cmake).
#include <string>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"

int main() {
  namespace p = kiln::pattern;
  kiln::PatternMatcherPass pass("bad");
  pass.register_pattern(
      p::CallFunction(kiln::aten::relu, p::kw<"x">), [](auto& m) { m.erase_nodes(); },
      [](const auto&) { return std::string("no"); });
  return static_cast<int>(pass.num_patterns()) - 1;
}
