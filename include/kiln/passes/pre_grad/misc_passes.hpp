#pragma once
// The pre-grad rewrites outside the split/cat family (Inductor's pre_grad.py
// and misc_patterns.py), each a pass of Inductor's name:
//   kiln-opt g.json --passes numpy_compat_normalization,remove_identity,remove_noop --counters
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pre_grad/gumbel_max_trick.hpp"
#include "kiln/passes/pre_grad/numpy_compat_normalization.hpp"
#include "kiln/passes/pre_grad/permute_fusion.hpp"
#include "kiln/passes/pre_grad/remove_identity.hpp"
#include "kiln/passes/pre_grad/remove_noop.hpp"
#include "kiln/passes/pre_grad/sink_cat_after_pointwise.hpp"

namespace kiln {

namespace pre_grad::detail {
// A pass that runs `fn(graph)` and counts what it returns under `name`.
template <class Fn>
Pass counted_pass(std::string name, std::string description, Fn fn) {
  const std::string counter = name;
  return Pass{std::move(name), std::move(description), [fn, counter](Graph& g, PassContext& ctx) {
                const std::size_t n = fn(g);
                if (n) ctx.counters.increment(counter, static_cast<std::int64_t>(n));
                return n > 0;
              }};
}
}  // namespace pre_grad::detail

inline void register_pregrad_misc_passes(PassRegistry& registry) {
  using pre_grad::detail::counted_pass;
  registry.add(counted_pass("remove_identity", "calls of nn.Identity modules become their input (Inductor's pre_grad)",
                            [](Graph& g) { return pre_grad::remove_identity(g); }));
  registry.add(counted_pass("remove_noop",
                            "views to the same shape, casts to the same dtype, clones, x+0, x*1 and Inductor's "
                            "other no-ops become their input",
                            [](Graph& g) { return pre_grad::remove_noop(g); }));
  registry.add(counted_pass("numpy_compat_normalization",
                            "NumPy keyword names (axis, keepdims, x, a, x1, x2) to torch's (Inductor's misc_patterns)",
                            [](Graph& g) { return pre_grad::numpy_compat_normalization(g); }));
  registry.add({"sink_cat_after_pointwise",
                "relu/tanh after a cat (through views) applied to each piece before it (Inductor's pre_grad)",
                [](Graph& g, PassContext& ctx) { return pre_grad::sink_cat_after_pointwise(g, &ctx.counters) > 0; }});
  registry.add(counted_pass("permute_linear_fusion",
                            "linear of a last-two-dims permute to matmul of a transpose (Inductor's pre_grad)",
                            [](Graph& g) { return pre_grad::permute_linear_fusion(g); }));
  registry.add(counted_pass("linear_permute_fusion",
                            "last-two-dims permute of a linear to matmul(w, x^T) + b (Inductor's pre_grad)",
                            [](Graph& g) { return pre_grad::linear_permute_fusion(g); }));
  registry.add(counted_pass("permute_matmul_fusion",
                            "bmm/matmul of last-two-dims permutes to matmul of transposes (Inductor's pre_grad)",
                            [](Graph& g) { return pre_grad::permute_matmul_fusion(g); }));
  split_cat::register_counting_pass(registry, "apply_gumbel_max_trick_pass",
                                    "argmax(softmax(x) / exponential noise) to argmax(x - log(noise)) (Inductor's "
                                    "apply_gumbel_max_trick)",
                                    pre_grad::make_apply_gumbel_max_trick_pass);
}

}  // namespace kiln
