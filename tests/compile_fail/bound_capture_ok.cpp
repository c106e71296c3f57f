// Must compile: the twin of unbound_capture.cpp with a name the pattern binds,
// so that the compile-fail test is known to fail for the right reason only.
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
  return m && m->get<"a">().node() == a ? 0 : 1;
}
