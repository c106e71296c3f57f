// Reads back what tools/export_fx.py --leaf-modules torch.nn.Linear,torch.nn.Conv2d
// wrote for tests/python/small_model.py: the conv and the linear stay call_module
// nodes, and the "modules" table gives their classes and constants, so a pattern
// can match them by class as Inductor's CallModule(nn.Linear, ...) does
// (extract_target: the class of the submodule a call_module node calls).
// The export directory comes from the environment (see extra_tests.cmake).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"

namespace fs = std::filesystem;
namespace p = kiln::pattern;

namespace {
fs::path export_dir() {
  const char* d = std::getenv("KILN_EXPORT_DIR");
  REQUIRE_MESSAGE(d != nullptr, "KILN_EXPORT_DIR is not set");
  return d;
}
}  // namespace

TEST_CASE("the exporter writes a modules table for every call_module target") {
  auto file = kiln::io::read_fx_json(export_dir() / "graph.json");
  CHECK_NOTHROW(kiln::lint(file.graph));
  std::vector<std::string> called;
  for (const kiln::Node* n : file.graph.nodes())
    if (n->op() == kiln::OpKind::call_module) called.emplace_back(n->target_name());
  CHECK(called == std::vector<std::string>{"conv", "fc"});
  const kiln::ModuleTable& t = file.graph.modules();
  CHECK(t.size() == 2);
  const kiln::ModuleInfo* conv = t.find("conv");
  const kiln::ModuleInfo* fc = t.find("fc");
  REQUIRE(conv);
  REQUIRE(fc);
  CHECK(conv->class_name == "torch.nn.modules.conv.Conv2d");
  CHECK(fc->class_name == "torch.nn.modules.linear.Linear");
  // The constants come as "attrs": Linear(8, 16), Conv2d(3, 8, 3, padding=1).
  REQUIRE(fc->fields.size() == 1);
  CHECK(fc->fields[0].first == "attrs");
  auto fc_attrs = nlohmann::json::parse(fc->fields[0].second);
  CHECK(fc_attrs.at("in_features") == 8);
  CHECK(fc_attrs.at("out_features") == 16);
  auto conv_attrs = nlohmann::json::parse(conv->fields.at(0).second);
  CHECK(conv_attrs.at("in_channels") == 3);
  CHECK(conv_attrs.at("padding") == nlohmann::json::array({1, 1}));
  // The leaf modules' parameters, read by no get_attr, are the weights PATH.NAME.
  for (const std::string w : {"conv.weight", "conv.bias", "fc.weight", "fc.bias"})
    CHECK(std::count_if(file.weights.begin(), file.weights.end(), [&](const auto& e) { return e.first == w; }) == 1);
  // Written back unchanged.
  CHECK(kiln::io::to_fx_json(file.graph, file.weights).find(R"("fc":{"class":"torch.nn.modules.linear.Linear","attrs":{)") !=
        std::string::npos);
}

TEST_CASE("a module-class pattern finds the exported Linear") {
  auto file = kiln::io::read_fx_json(export_dir() / "graph.json");
  kiln::PatternMatcherPass pass("linear_by_class");
  std::vector<std::string> seen;
  pass.register_pattern(p::CallModule(kiln::module_class("torch.nn.modules.linear.Linear"), p::kw<"x">, p::MULTIPLE),
                        [&](auto&, kiln::Graph&, kiln::Node* root) { seen.push_back(root->name()); });
  CHECK(pass.apply(file.graph) == 1);
  CHECK(seen == std::vector<std::string>{"fc"});
}
