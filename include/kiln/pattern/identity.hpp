#pragma once
// Pattern identity. In Inductor a sub-pattern *object* used twice in a pattern
// must match the same node each time, and MultiOutputPattern finds its other
// outputs through sub-pattern objects they share. kiln patterns are values, so
// each pattern element gets an id when it is constructed; copies keep it. Two
// places in a pattern tree with the same id are the same object.
#include <atomic>
#include <cstdint>

namespace kiln::pattern {

inline std::uint32_t next_pattern_id() {
  static std::atomic<std::uint32_t> counter{0};
  return ++counter;
}

struct PatternIdentity {
  std::uint32_t id = next_pattern_id();
};

}  // namespace kiln::pattern
