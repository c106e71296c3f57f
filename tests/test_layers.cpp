// The layer rule of docs/ARCHITECTURE.md, checked on the headers as they are:
// every `#include "kiln/..."` under include/kiln/ goes to the file's own layer
// or one below it, never up. A header's layer is its folder under include/kiln/
// (detail/ folders belong to their parent); the top-level headers belong to the
// layer they gather, and the tools' headers sit on top.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Lowest first: each layer may include only those before it (and itself).
constexpr std::array<std::string_view, 9> kLayers{"core", "ops", "io", "pattern", "passes",
                                                  "runtime", "kernels", "executor", "tools"};

const std::map<std::string, std::string, std::less<>> kTopLevel{
    {"core.hpp", "core"},       {"ops.hpp", "ops"},           {"io.hpp", "io"},
    {"pattern.hpp", "pattern"}, {"passes.hpp", "passes"},     {"version.hpp", "core"},
    {"opt_main.hpp", "tools"},  {"run_main.hpp", "tools"},    {"tool_args.hpp", "tools"}};

// The layer of a path relative to include/kiln/, or "" when no layer owns it.
std::string layer_of(const std::string& rel) {
  const auto slash = rel.find('/');
  if (slash == std::string::npos) {
    auto it = kTopLevel.find(rel);
    return it == kTopLevel.end() ? "" : it->second;
  }
  return rel.substr(0, slash);
}

std::ptrdiff_t rank_of(std::string_view layer) {
  auto it = std::find(kLayers.begin(), kLayers.end(), layer);
  return it == kLayers.end() ? -1 : it - kLayers.begin();
}

struct Include {
  std::string file;  // relative to include/kiln/
  int line;
  std::string target;  // relative to include/kiln/
};

std::vector<Include> kiln_includes(const fs::path& root) {
  static const std::regex include_re(R"(^\s*#\s*include\s*["<]kiln/([^">]+)[">])");
  std::vector<Include> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() != ".hpp") continue;
    const std::string rel = fs::relative(e.path(), root).generic_string();
    std::ifstream in(e.path());
    std::string text;
    int n = 0;
    for (std::smatch m; std::getline(in, text);) {
      ++n;
      if (std::regex_search(text, m, include_re)) out.push_back({rel, n, m[1].str()});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every header of include/kiln belongs to a layer") {
  const fs::path root = fs::path(KILN_SOURCE_DIR) / "include" / "kiln";
  std::vector<std::string> orphans;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && rank_of(layer_of(fs::relative(e.path(), root).generic_string())) < 0)
      orphans.push_back(fs::relative(e.path(), root).generic_string());
  CHECK_MESSAGE(orphans.empty(), "headers in no layer (add the folder to kLayers and docs/ARCHITECTURE.md): "
                                     << doctest::toString(orphans.size()) << ", first " << (orphans.empty() ? "" : orphans[0]));
}

TEST_CASE("no include goes up a layer") {
  const fs::path root = fs::path(KILN_SOURCE_DIR) / "include" / "kiln";
  const auto includes = kiln_includes(root);
  REQUIRE(includes.size() > 100);  // the walk found the headers
  std::string upward;
  for (const Include& i : includes) {
    const auto from = rank_of(layer_of(i.file)), to = rank_of(layer_of(i.target));
    if (to > from)
      upward += "\n  " + i.file + ":" + std::to_string(i.line) + " (" + layer_of(i.file) + ") includes kiln/" + i.target +
                " (" + layer_of(i.target) + ")";
  }
  CHECK_MESSAGE(upward.empty(), "includes that go up a layer:" << upward);
}

TEST_CASE("the layer check sees an include that goes up") {
  // What the rule refuses, on names alone: a kernel header reaching the executor,
  // the runtime layer reaching a kernel, core reaching io.
  CHECK(rank_of(layer_of("executor/lowering.hpp")) > rank_of(layer_of("kernels/onednn/matmul.hpp")));
  CHECK(rank_of(layer_of("kernels/kernel.hpp")) > rank_of(layer_of("runtime/lower_context.hpp")));
  CHECK(rank_of(layer_of("io/npy_weights.hpp")) > rank_of(layer_of("core/node.hpp")));
  CHECK(rank_of(layer_of("kernels/detail/xtensor.hpp")) == rank_of("kernels"));
  CHECK(rank_of(layer_of("run_main.hpp")) == rank_of("tools"));
  CHECK(rank_of(layer_of("unknown.hpp")) < 0);
}
