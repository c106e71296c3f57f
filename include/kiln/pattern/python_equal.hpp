#pragma once
// Equality of argument values as Python's `==` decides it, which is how
// Inductor compares a pattern's constants with a node's arguments: numbers
// compare by value across int, float and bool (1 == 1.0 == True), lists
// element-wise, nodes by identity, everything else structurally.
#include "kiln/core/arg.hpp"

namespace kiln::pattern {

inline bool python_equal(const kiln::Arg& a, const kiln::Arg& b) {
  auto number = [](const kiln::Arg& x, double& out) {
    if (const auto* i = x.get_if<std::int64_t>()) return out = static_cast<double>(*i), true;
    if (const auto* d = x.get_if<double>()) return out = *d, true;
    if (const auto* t = x.get_if<bool>()) return out = *t ? 1.0 : 0.0, true;
    return false;
  };
  double x, y;
  if (number(a, x) && number(b, y)) {
    // int64 against int64 stays exact beyond 2^53.
    if (a.is<std::int64_t>() && b.is<std::int64_t>()) return *a.get_if<std::int64_t>() == *b.get_if<std::int64_t>();
    return x == y;
  }
  const auto* la = a.list();
  const auto* lb = b.list();
  if (la && lb) {
    if (la->size() != lb->size()) return false;
    for (std::size_t i = 0; i < la->size(); ++i)
      if (!python_equal((*la)[i], (*lb)[i])) return false;
    return true;
  }
  return a == b;
}

}  // namespace kiln::pattern
