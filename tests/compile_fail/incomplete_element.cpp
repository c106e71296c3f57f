// Must NOT compile: a user's pattern element without describe() (one of the
// members kiln/pattern/element.hpp lists) is refused where it becomes a child,
// with one message (tests/extra_tests.cmake), not deep in the matcher.
#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/pattern.hpp"

struct AnyValue : kiln::pattern::PatternTag {
  static constexpr std::size_t size = 0;
  using captures = kiln::pattern::NameList<>;
  static constexpr bool has_positional = false;
  template <std::size_t Pos>
  void plan(kiln::pattern::PositionInfo*) const {}
  template <std::size_t Pos, class S>
  bool match(const kiln::Arg&, S&) const { return true; }
};

int main() {
  namespace p = kiln::pattern;
  auto pattern = p::CallFunction(kiln::aten::relu, AnyValue{});
  return static_cast<int>(p::describe(pattern).size() == 0);
}
