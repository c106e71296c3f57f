// OpSet, the targets of a call pattern (Inductor's fns): any number of them.
// Inductor keeps fns in a list and a set with no limit; kiln keeps the first
// eight inline and the rest beside them.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;

namespace {
const std::vector<OpRef>& twelve() {
  static const std::vector<OpRef> ops = [] {
    std::vector<OpRef> v;
    for (int i = 0; i < 12; ++i)
      v.push_back(OpRegistry::instance().intern("kiln_test_set.op" + std::to_string(i) + ".default"));
    return v;
  }();
  return ops;
}
p::OpSet set_of_twelve() {
  p::OpSet s;
  for (OpRef op : twelve()) s.add(op);
  return s;
}
}  // namespace

TEST_CASE("an OpSet takes more than eight targets and accepts each of them") {
  // Inductor: CallFunction([f0, ..., f11], ...) matches any of the twelve.
  p::OpSet s = set_of_twelve();
  CHECK(s.size() == 12);
  for (OpRef op : twelve()) CHECK(s.contains(op.hash));
  CHECK_FALSE(s.contains(aten::relu.hash));
  CHECK(s.describe().find("kiln_test_set.op11.default") != std::string::npos);
  p::OpSet braced{aten::relu, aten::sigmoid, aten::tanh, aten::mul_Tensor, aten::mul_Scalar, aten::add_Tensor,
                  aten::add_Scalar, aten::mm, aten::addmm, aten::leaky_relu};
  CHECK(braced.size() == 10);
  CHECK(braced.contains(aten::leaky_relu.hash));
  CHECK(braced.contains(aten::addmm.hash));
  CHECK_FALSE(braced.contains(aten::bmm.hash));
}

TEST_CASE("a call pattern with twelve targets matches at the root, as a child, and as a pass root") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* last = g.call_function(twelve()[11], {x});
  Node* mid = g.call_function(twelve()[8], {last});
  Node* first = g.call_function(twelve()[0], {mid});
  Node* other = g.call_function(aten::relu, {first});
  g.output(ArgList{other});
  auto pat = p::CallFunction(set_of_twelve(), p::CallFunction(set_of_twelve(), p::kw<"x">));
  CHECK(p::match(pat, mid).has_value());    // child op8 reached through a reference
  CHECK(p::match(pat, first).has_value());  // root op0, child op8
  CHECK_FALSE(p::match(pat, last).has_value());  // its input is a placeholder
  CHECK_FALSE(p::match(pat, other).has_value());

  PatternMatcherPass pass("twelve");
  std::vector<std::string> seen;
  pass.register_pattern(p::CallFunction(set_of_twelve(), p::kw<"x">, p::MULTIPLE),
                        [&](auto&, Graph&, Node* root) { seen.push_back(root->name()); });
  CHECK(pass.apply(g) == 3);
  CHECK(seen == std::vector<std::string>{first->name(), mid->name(), last->name()});
}
