// Any bytes given to the fx-graph-json reader give a graph that lints, or one
// of the reader's named errors; never a crash, a leak or undefined behaviour.
#include <cstdint>
#include <string_view>

#include "kiln/core.hpp"
#include "kiln/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    kiln::io::GraphFile f = kiln::io::parse_fx_json(text, "<fuzz>");
    kiln::lint(f.graph);
    (void)kiln::io::to_fx_json(f.graph, f.weights);
  } catch (const kiln::Error&) {
    // A named error (FormatError, GraphError, LintError, ...) is the right answer to bad input.
  }
  return 0;
}
