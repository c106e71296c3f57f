// Must NOT compile: the pattern binds only "a" and "b", so asking its Match for
// "nope" has to fail at compile time with Match::get's static_assert ("binds no
// KeywordArg ..."). tests/extra_tests.cmake builds this and checks the message;
// bound_capture_ok.cpp is the same program with a bound name, which must compile.
#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/pattern.hpp"

int main() {
  namespace p = kiln::pattern;
  kiln::Graph g;
  kiln::Node* a = g.placeholder("a");
  kiln::Node* b = g.placeholder("b");
  kiln::Node* mm = g.call_function(kiln::aten::mm, {a, b});
  g.output(kiln::ArgList{mm});
  auto m = p::match(p::CallFunction(kiln::aten::mm, p::kw<"a">, p::kw<"b">), mm);
  return m && m->get<"nope">().node() == a ? 0 : 1;
}
