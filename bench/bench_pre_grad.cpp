// Time of the whole pre_grad pipeline (kiln/passes/pre_grad_pipeline.hpp) on
// towers graphs (tests/towers_graph.hpp, the shape of the fixture's Dynamo
// graph) and on exported graphs given as files, with the pipeline's options
// (default: freezing on and every split/cat pass, as the fixture's pipeline
// runs them; batch fusions are timed by kiln-bench-group-batch-fusion).
// Prints one JSON line per graph: nodes before and after, best time of the
// reps, counters of the last rep; with --steps, each step's time in the best rep.
//   kiln-bench-pre-grad [--towers 32768] [--reps 5] [--options JSON] [--steps] [GRAPH.json ...]
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/io/fx_json_read.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "towers_graph.hpp"

namespace {

nlohmann::json default_options() {
  nlohmann::json list = nlohmann::json::array();
  for (const char* p : {"normalization_pass", "remove_split_with_size_one_pass", "merge_getitem_cat_pass",
                        "merge_stack_tahn_unbind_pass", "merge_splits_pass", "mutate_cat_pass", "split_cat_pass",
                        "unbind_stack_pass", "split_cat_to_slices_pass", "unbind_cat_to_view_pass",
                        "split_stack_to_cats_pass", "unbind_stack_to_slices_pass",
                        "move_reshape_out_of_split_stack_pass"})
    list.push_back({{p, nlohmann::json::object()}});
  return {{"freezing", true}, {"pre_grad_fusion_options", list}};
}

// Best wall time of `reps` runs of the pipeline on fresh copies from `make`.
template <class Make>
void time_pipeline(const std::string& label, Make&& make, const nlohmann::json& options, int reps, bool steps) {
  const kiln::PassRegistry registry = kiln::default_pass_registry();
  double best = 1e300;
  std::size_t before = 0, after = 0;
  kiln::Counters counters;
  nlohmann::json step_ms = nlohmann::json::array();
  for (int r = 0; r < reps; ++r) {
    auto [graph, weights] = make();
    before = graph.size();
    kiln::PassManager pm(registry);
    pm.set_options({{"pre_grad", options}});
    pm.set_lint_after_each(false);  // the pipeline's own time, as Inductor's pre_grad_passes
    if (weights) pm.set_weights(&*weights);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<kiln::PassRecord> records = pm.run(graph, {"pre_grad"});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (ms < best) {
      best = ms;
      step_ms = nlohmann::json::array();
      for (const kiln::PassRecord& rec : records) step_ms.push_back({rec.name, rec.seconds * 1e3});
    }
    after = graph.size();
    counters = pm.counters();
  }
  std::cout << "{\"graph\":\"" << label << "\",\"nodes\":" << before << ",\"nodes_after\":" << after
            << ",\"best_ms\":" << best << ",\"counters\":" << counters.to_json().dump();
  if (steps) std::cout << ",\"steps_ms\":" << step_ms.dump();
  std::cout << "}\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> towers{32768};
  std::vector<std::string> files;
  int reps = 5;
  bool steps = false;
  nlohmann::json options = default_options();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--towers" && i + 1 < argc) {
      towers.clear();
      std::stringstream ss(argv[++i]);
      for (std::string part; std::getline(ss, part, ',');) towers.push_back(std::stoll(part));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (a == "--options" && i + 1 < argc) {
      options = nlohmann::json::parse(argv[++i]);
    } else if (a == "--steps") {
      steps = true;
    } else if (!a.empty() && a[0] != '-') {
      files.push_back(a);
    } else {
      std::cerr << "usage: kiln-bench-pre-grad [--towers N,...] [--reps R] [--options JSON] [--steps] [GRAPH.json ...]\n";
      return 2;
    }
  }
  using Made = std::pair<kiln::Graph, std::optional<kiln::io::WeightStore>>;
  for (std::int64_t n : towers)
    time_pipeline("towers_" + std::to_string(n), [&] { return Made{kiln::testing::towers_graph(n), std::nullopt}; },
                  options, reps, steps);
  for (const std::string& f : files) {
    time_pipeline(
        f,
        [&] {
          kiln::io::GraphFile file = kiln::io::read_fx_json(f);
          kiln::io::WeightStore store(file);
          for (const auto& [name, path] : file.weights) store.find(name);  // read before the clock starts
          return Made{std::move(file.graph), std::move(store)};
        },
        options, reps, steps);
  }
}
