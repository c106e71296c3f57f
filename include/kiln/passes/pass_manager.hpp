#pragma once
// PassManager: runs a pipeline of named passes over a graph, with per-pass
// options, counters, wall times, an optional lint after each pass, and passes
// that can be switched off by name.
#include <algorithm>
#include <chrono>
#include <functional>
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

  // Options per pass: {"pass_name": {...}, ...}; a pass without an entry gets {}.
  void set_options(nlohmann::json options) {
    if (!options.is_object()) throw Error("pass options must be a JSON object mapping pass names to objects");
    for (auto& [name, value] : options.items()) {
      const Pass& pass = registry_->get(name);  // an option for an unknown pass is a typo: say so
      if (!value.is_object()) throw Error("pass options for '" + name + "' must be a JSON object");
      for (auto& [key, v] : value.items()) {
        if (std::find(pass.option_keys.begin(), pass.option_keys.end(), key) != pass.option_keys.end()) continue;
        std::string takes;
        for (const auto& k : pass.option_keys) takes += (takes.empty() ? "" : ", ") + k;
        throw Error("pass options for '" + name + "': unknown key '" + key + "' (" +
                    (takes.empty() ? name + " takes no options" : "it takes " + takes) + ")");
      }
    }
    options_ = std::move(options);
  }
  void disable(const std::string& name) { disabled_.insert(registry_->get(name).name); }
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
    std::vector<const Pass*> passes;
    for (const auto& name : pipeline) passes.push_back(&registry_->get(name));
    std::vector<PassRecord> records;
    static const nlohmann::json kNoOptions = nlohmann::json::object();
    for (const Pass* p : passes) {
      PassRecord rec;
      rec.name = p->name;
      if (disabled_.count(p->name)) {
        rec.skipped = true;
        records.push_back(rec);
        continue;
      }
      const nlohmann::json& opts = options_.contains(p->name) ? options_.at(p->name) : kNoOptions;
      PassContext ctx{rec.counters, opts, log_, weights_};
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
