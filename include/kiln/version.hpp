#pragma once
// kiln's version, as CMakeLists.txt's project() states it (a test checks they agree).
#include <string_view>

namespace kiln {
inline constexpr std::string_view kVersion = "0.1.0";
}  // namespace kiln
