#pragma once
// PatternOptions: how PatternMatcherPass::register_pattern files a pattern.
#include <cstddef>
#include <string>

namespace kiln {

struct PatternOptions {
  bool prepend = false;  // try before the patterns registered earlier at the same root
  std::string name{};    // shown by KILN_PATTERN_DEBUG and describe(); defaults to the pattern's text
  std::size_t pass_number = 0;  // for PatternMatcherPasses: which of its passes gets the pattern
};

}  // namespace kiln
