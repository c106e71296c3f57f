#pragma once
// PassRegistry: the passes that can be named on kiln-opt's command line or in a
// PassManager pipeline. Each pass family registers its passes in one function.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/passes/pass.hpp"

namespace kiln {

class PassRegistry {
 public:
  // Adds a pass; a second pass of the same name is an error.
  void add(Pass pass) {
    if (pass.name.empty()) throw Error("PassRegistry: a pass needs a name");
    if (!pass.run) throw Error("PassRegistry: pass '" + pass.name + "' has no run function");
    if (find(pass.name) || find_pipeline(pass.name))
      throw Error("PassRegistry: pass '" + pass.name + "' is already registered");
    passes_.push_back(std::move(pass));
  }
  // Adds a pipeline; its name may not be a pass's or another pipeline's.
  void add_pipeline(Pipeline pipeline) {
    if (pipeline.name.empty() || !pipeline.expand) throw Error("PassRegistry: a pipeline needs a name and an expansion");
    if (find(pipeline.name) || find_pipeline(pipeline.name))
      throw Error("PassRegistry: pipeline '" + pipeline.name + "' is already registered");
    pipelines_.push_back(std::move(pipeline));
  }
  const Pipeline* find_pipeline(std::string_view name) const {
    auto it = std::find_if(pipelines_.begin(), pipelines_.end(), [&](const Pipeline& p) { return p.name == name; });
    return it == pipelines_.end() ? nullptr : &*it;
  }
  const std::vector<Pipeline>& pipelines() const { return pipelines_; }
  const Pass* find(std::string_view name) const {
    auto it = std::find_if(passes_.begin(), passes_.end(), [&](const Pass& p) { return p.name == name; });
    return it == passes_.end() ? nullptr : &*it;
  }
  // The pass called `name`; the error lists the known names.
  const Pass& get(std::string_view name) const {
    if (const Pass* p = find(name)) return *p;
    throw Error("unknown pass '" + std::string(name) + "' (known passes: " + joined_names() + ")");
  }
  const std::vector<Pass>& passes() const { return passes_; }
  std::string joined_names() const {
    std::string s;
    for (const auto& p : passes_) s += (s.empty() ? "" : ", ") + p.name;
    for (const auto& p : pipelines_) s += (s.empty() ? "" : ", ") + p.name;
    return s;
  }

 private:
  std::vector<Pass> passes_;
  std::vector<Pipeline> pipelines_;
};

}  // namespace kiln
