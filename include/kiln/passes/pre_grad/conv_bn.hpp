#pragma once
// The convolution + batch-norm passes of Inductor's pre-grad stage, by
// Inductor's names:
//   kiln-opt g.json --passes fuse_conv_bn -o out/graph.json        (folds into new weights)
//   kiln-opt g.json --passes fuse_conv_bn --pass-options '{"fuse_conv_bn": {"threads": 4}}' -o out/graph.json
//   kiln-opt g.json --passes efficient_conv_bn_eval_pass --counters
#include <memory>

#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pre_grad/efficient_conv_bn_eval.hpp"
#include "kiln/passes/pre_grad/fuse_conv_bn.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln {

inline void register_conv_bn_passes(PassRegistry& registry) {
  registry.add({"fuse_conv_bn",
                "an inference batch-norm after a convolution folds into new constant weight and bias "
                "(Inductor's pre_grad fuse_conv_bn; needs the graph's weights); options threads (default: the "
                "CPUs this process may run on), min_bytes_per_thread (default 1 MiB)",
                [](Graph& g, PassContext& ctx) { return pre_grad::fuse_conv_bn(g, ctx); },
                {"threads", "min_bytes_per_thread"}});
  auto counters = std::make_shared<Counters*>(nullptr);
  auto weights = std::make_shared<io::WeightStore*>(nullptr);
  auto pass = std::make_shared<PatternMatcherPass>(pre_grad::make_efficient_conv_bn_eval_pass(counters, weights));
  registry.add({"efficient_conv_bn_eval_pass",
                "a convolution and the inference batch-norm after it become one convolution on weights "
                "scaled in the graph (Inductor's efficient_conv_bn_eval)",
                split_cat::counting_pass_run(
                    counters, pass, [weights](PassContext* ctx) { *weights = ctx ? ctx->weights : nullptr; })});
}

}  // namespace kiln
