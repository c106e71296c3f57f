#pragma once
// Group and batch fusion (Inductor's group_batch_fusion.py, Meta's "Optimus"):
// many independent, same-shaped ops become one batched op. Each fusion is a
// pass of its own name (batch_linear, batch_layernorm, batch_aten_add, ...)
// that counts each fused set under that name; run them in the order wanted,
// as Inductor's pre_grad_fusion_options / post_grad_fusion_options do:
//
//   kiln-opt model.json --passes batch_linear,batch_layernorm,batch_tanh --counters
//   kiln-opt model.json --passes batch_linear --pass-options '{"batch_linear": {"min_fuse_set_size": 3}}'
//
// In C++: gbf::apply_group_batch_fusion(graph, gbf::BatchLinear{}, &counters).
#include <functional>
#include <memory>
#include <string>

#include "kiln/passes/group_batch_fusion/post_grad.hpp"
#include "kiln/passes/group_batch_fusion/pre_grad.hpp"
#include "kiln/passes/group_batch_fusion/search.hpp"
#include "kiln/passes/pass_registry.hpp"

namespace kiln {

// Every fusion, pre-grad first, each made fresh.
inline std::vector<std::unique_ptr<gbf::Fusion>> group_batch_fusions() {
  auto all = gbf::pre_grad_fusions();
  for (auto& f : gbf::post_grad_fusions()) all.push_back(std::move(f));
  return all;
}

// The fusion called `name`, or nullptr.
inline std::unique_ptr<gbf::Fusion> make_group_batch_fusion(std::string_view name) {
  for (auto& f : group_batch_fusions())
    if (f->name() == name) return std::move(f);
  return nullptr;
}

inline void register_group_batch_fusion_passes(PassRegistry& registry) {
  for (const auto& f : group_batch_fusions()) {
    const std::string name = f->name();
    registry.add({name,
                  std::string(f->pre_grad() ? "pre-grad" : "post-grad") +
                      " group/batch fusion (Inductor's " + name + "); options: the search options",
                  [name](Graph& g, PassContext& ctx) {
                    auto fusion = make_group_batch_fusion(name);
                    fusion->options = gbf::SearchOptions::from_json(ctx.options, name);
                    return gbf::apply_group_batch_fusion(g, *fusion, &ctx.counters, ctx.log) > 0;
                  },
                  gbf::SearchOptions::keys()});
  }
}

}  // namespace kiln
