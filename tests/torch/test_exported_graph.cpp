// Reads back what tools/export_fx.py wrote for tests/python/small_model.py
// (conv, batch-norm, relu, mean, split/cat, linear, layer-norm) and checks that
// the C++ side sees the model: targets, shapes, weights, inputs and outputs.
// The export directory and level come from the environment (see extra_tests.cmake).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io.hpp"

namespace fs = std::filesystem;

namespace {

fs::path export_dir() {
  const char* d = std::getenv("KILN_EXPORT_DIR");
  REQUIRE_MESSAGE(d != nullptr, "KILN_EXPORT_DIR is not set");
  return d;
}
std::string level() {
  const char* l = std::getenv("KILN_EXPORT_LEVEL");
  return l ? l : "torch";
}

std::set<std::string> call_targets(const kiln::Graph& g) {
  std::set<std::string> out;
  for (const kiln::Node* n : g.nodes())
    if (n->op() == kiln::OpKind::call_function) out.insert(std::string(n->target_name()));
  return out;
}

std::vector<std::int64_t> static_shape(const kiln::TensorMeta& t) {
  std::vector<std::int64_t> s;
  for (const auto& d : t.shape) s.push_back(std::get<std::int64_t>(d));
  return s;
}

}  // namespace

TEST_CASE("the exported graph reads back, lints, and names the model's ops canonically") {
  auto file = kiln::io::read_fx_json(export_dir() / "graph.json");
  CHECK_NOTHROW(kiln::lint(file.graph));
  const auto targets = call_targets(file.graph);
  std::set<std::string> expected;
  if (level() == "torch") {
    expected = {"torch.conv2d", "torch.nn.functional.batch_norm", "torch.nn.functional.relu", "torch.split",
                "operator.getitem", "torch.cat", "torch.nn.functional.linear", "torch.nn.functional.layer_norm"};
  } else {
    expected = {"aten.convolution.default", "aten.split.Tensor", "aten.cat.default", "aten.addmm.default",
                "aten.native_layer_norm.default", "aten.relu.default", "operator.getitem"};
  }
  for (const auto& t : expected) CHECK_MESSAGE(targets.count(t) == 1, "missing target " << t);
  // Batch norm is spelled differently across PyTorch versions at the ATen level.
  if (level() == "aten")
    CHECK((targets.count("aten.native_batch_norm.default") + targets.count("aten._native_batch_norm_legit_no_training.default")) == 1);
}

TEST_CASE("every computed value carries its shape, and the input and output shapes are the model's") {
  auto file = kiln::io::read_fx_json(export_dir() / "graph.json");
  std::size_t with_meta = 0, calls = 0;
  for (const kiln::Node* n : file.graph.nodes()) {
    if (n->op() != kiln::OpKind::call_function) continue;
    ++calls;
    with_meta += !n->meta.val.is_none();
  }
  CHECK(calls > 8);
  CHECK(with_meta == calls);
  auto ph = file.graph.placeholders();
  REQUIRE(ph.size() == 1);
  REQUIRE(ph[0]->meta.val.tensor());
  CHECK(static_shape(*ph[0]->meta.val.tensor()) == std::vector<std::int64_t>{2, 3, 8, 8});
  const kiln::Node* out = file.graph.output_node();
  REQUIRE(out);
  const auto* results = out->arg(0).list();
  REQUIRE(results);
  REQUIRE(results->size() == 1);
  const kiln::Node* result = (*results)[0].node();
  REQUIRE(result);
  REQUIRE(result->meta.val.tensor());
  CHECK(static_shape(*result->meta.val.tensor()) == std::vector<std::int64_t>{2, 16});
}

TEST_CASE("every get_attr has a weight whose shape and dtype match its meta") {
  auto file = kiln::io::read_fx_json(export_dir() / "graph.json");
  auto attrs = file.graph.find_nodes(kiln::OpKind::get_attr);
  CHECK(attrs.size() >= 8);  // conv w/b, bn w/b/mean/var, linear w/b, ln w/b
  for (const kiln::Node* a : attrs) {
    CAPTURE(a->name());
    auto w = kiln::io::load_weight(file, a->target_name());
    REQUIRE(a->meta.val.tensor());
    CHECK(w.dtype == a->meta.val.tensor()->dtype);
    CHECK(w.shape == static_shape(*a->meta.val.tensor()));
  }
}

TEST_CASE("the inputs and PyTorch's outputs saved beside the graph match its placeholders and result") {
  const fs::path dir = export_dir();
  std::ifstream mf(dir / "manifest.json");
  REQUIRE(mf);
  auto manifest = nlohmann::json::parse(mf);
  auto file = kiln::io::read_fx_json(dir / "graph.json");
  auto ph = file.graph.placeholders();
  REQUIRE(manifest["inputs"].size() == ph.size());
  for (std::size_t i = 0; i < ph.size(); ++i) {
    auto x = kiln::io::read_npy(dir / manifest["inputs"][i].get<std::string>());
    CHECK(x.shape == static_shape(*ph[i]->meta.val.tensor()));
    CHECK(x.dtype == kiln::DType::float32);
  }
  REQUIRE(manifest["outputs"].size() == 1);
  auto y = kiln::io::read_npy(dir / manifest["outputs"][0].get<std::string>());
  CHECK(y.shape == std::vector<std::int64_t>{2, 16});
  // The model ends in layer_norm then relu: every value is >= 0 and some are > 0.
  auto v = y.values<float>();
  float mx = 0;
  for (float f : v) {
    CHECK(f >= 0.0f);
    mx = std::max(mx, f);
  }
  CHECK(mx > 0.0f);
}
