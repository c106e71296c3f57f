#pragma once
// A symbolic integer (`s0`): a dimension or argument whose value is only known at run time.
#include <string>

namespace kiln {

struct SymInt {
  std::string name;
  friend bool operator==(const SymInt&, const SymInt&) = default;
};

}  // namespace kiln
