#pragma once
// PassManager: runs a pipeline of named passes over a graph, with per-pass
// options, counters, wall times, an optional lint after each pass, and passes
// that can be switched off by name.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/core/lint.hpp"
#include "kiln/passes/pass_registry.hpp"

namespace kiln {

struct PassRecord {
  std::string name;
  double seconds = 0;
  bool changed = false;
  bool skipped = false;  // switched off with disable()
  Counters counters;     // what this pass counted (PassManager::counters() adds every pass's)
};

class PassManager {
 public:
  explicit PassManager(const PassRegistry& registry) : registry_(&registry) {}
  // The manager keeps a reference: a temporary registry would be gone by run().
  explicit PassManager(PassRegistry&&) = delete;

  // Options per pass or pipeline: {"name": {...}, ...}; one without an entry gets {}.
  void set_options(nlohmann::json options) {
    if (!options.is_object()) throw Error("pass options must be a JSON object mapping pass names to objects");
    for (auto& [name, value] : options.items()) {
      const Pipeline* pipeline = registry_->find_pipeline(name);
      // An option for an unknown pass is a typo: say so.
      check_option_keys(name, value, pipeline ? pipeline->option_keys : registry_->get(name).option_keys);
    }
    options_ = std::move(options);
  }
  void disable(const std::string& name) {
    if (!registry_->find_pipeline(name)) registry_->get(name);  // a typo is an error
    disabled_.insert(name);
  }
  void enable(const std::string& name) { disabled_.erase(name); }
  void set_lint_after_each(bool on) { lint_after_each_ = on; }
  void set_log(std::ostream* log) { log_ = log; }
  // The weights every pass gets as PassContext::weights (null: none); the
  // manager does not own them, and the weights passes create stay in `weights`.
  void set_weights(io::WeightStore* weights) { weights_ = weights; }
  // Called with the graph after every pass that ran (the numeric check,
  // runtime::NumericCheck::hook(), is one); what it throws ends the pipeline.
  void set_after_each_pass(std::function<void(const Graph&, const std::string& pass)> f) { after_each_ = std::move(f); }

  Counters& counters() { return counters_; }
  const Counters& counters() const { return counters_; }

  // Runs the passes in order. Every name is checked before anything runs, so a
  // typo in the pipeline leaves the graph untouched.
  std::vector<PassRecord> run(Graph& g, const std::vector<std::string>& pipeline) {
    static const nlohmann::json kNoOptions = nlohmann::json::object();
    // Pipelines are expanded first, so that their steps are checked too.
    std::vector<std::pair<const Pass*, const nlohmann::json*>> passes;
    std::vector<std::unique_ptr<nlohmann::json>> step_options;  // kept for the run
    for (const auto& name : pipeline) {
      const nlohmann::json& opts = options_.contains(name) ? options_.at(name) : kNoOptions;
      const Pipeline* pl = registry_->find_pipeline(name);
      if (!pl) {
        passes.emplace_back(&registry_->get(name), &opts);
        continue;
      }
      if (disabled_.count(name)) continue;
      for (PipelineStep& step : pl->expand(opts)) {
        const Pass& pass = registry_->get(step.pass);
        check_option_keys(name + "/" + step.pass, step.options, pass.option_keys);
        step_options.push_back(std::make_unique<nlohmann::json>(std::move(step.options)));
        passes.emplace_back(&pass, step_options.back().get());
      }
    }
    std::vector<PassRecord> records;
    for (const auto& [p, opts] : passes) {
      PassRecord rec;
      rec.name = p->name;
      if (disabled_.count(p->name)) {
        rec.skipped = true;
        records.push_back(rec);
        continue;
      }
      PassContext ctx{rec.counters, *opts, log_, weights_};
      const auto t0 = std::chrono::steady_clock::now();
      rec.changed = p->run(g, ctx);
      rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      counters_.merge(rec.counters);
      g.purge_erased();  // no pass keeps node pointers across pass boundaries
      if (lint_after_each_) {
        try {
          lint(g);
        } catch (const LintError& e) {
          throw LintError("after pass '" + p->name + "': " + e.what());
        }
      }
      if (after_each_) after_each_(g, p->name);
      records.push_back(rec);
    }
    return records;
  }

 private:
  static void check_option_keys(const std::string& name, const nlohmann::json& value, const std::vector<std::string>& keys) {
    if (!value.is_object()) throw Error("pass options for '" + name + "' must be a JSON object");
    for (auto& [key, v] : value.items()) {
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string takes;
      for (const auto& k : keys) takes += (takes.empty() ? "" : ", ") + k;
      throw Error("pass options for '" + name + "': unknown key '" + key + "' (" +
                  (takes.empty() ? name + " takes no options" : "it takes " + takes) + ")");
    }
  }

  const PassRegistry* registry_;
  nlohmann::json options_ = nlohmann::json::object();
  std::set<std::string> disabled_;
  bool lint_after_each_ = true;
  std::ostream* log_ = nullptr;
  io::WeightStore* weights_ = nullptr;
  std::function<void(const Graph&, const std::string&)> after_each_;
  Counters counters_;
};

}  // namespace kiln
