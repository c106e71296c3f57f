#include <doctest/doctest.h>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"

TEST_CASE("a tiny graph builds and lints") {
  kiln::Graph g;
  auto* x = g.placeholder("x");
  auto* r = g.call_function(kiln::aten::relu, {x});
  g.output(kiln::ArgList{r});
  CHECK_NOTHROW(kiln::lint(g));
  CHECK(r->name() == "relu");
}
