#pragma once
// efficient_conv_bn_eval_pass (Inductor's efficient_conv_bn_eval.py): an
// inference batch-norm after a convolution becomes one convolution whose
// weight and bias are scaled in the graph on every run:
//
//   c  = gamma * rsqrt(running_var + eps)           [C]
//   W' = W * c.reshape(C, 1, ...)                   [C, Cin/groups, k...]
//   b' = beta + c * (b - running_mean)              [C]
//   y  = conv(x, W', b', ...)
//
// Unlike fuse_conv_bn it needs no constants (the parameters may be inputs that
// change, as when fine-tuning with frozen statistics), so it reads and creates
// no weights: the scaling is graph nodes of the batch-norm's own level (torch.*
// for a torch-level graph, aten.* for an aten one). Inductor writes it as one
// call of a Python helper; kiln spells it out, so the executor and later
// passes see ordinary ops, each with its meta. Forms: the functional and aten
// calls of conv_bn_common.hpp and, when the caller gives weights (to tell
// whether the conv module has a bias), call_module Conv{N}d + BatchNorm{N}d,
// whose parameters become get_attr nodes of `<path>.weight` and the rest. The
// convolution's output must have no other user. Counts `efficient_conv_bn_eval`
// per rewrite, beside the pattern pass's own counts.
#include <memory>
#include <optional>
#include <string>

#include "kiln/io/weight_store.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/pre_grad/conv_bn_common.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::pre_grad {

namespace efficient_detail {

// The ops that compute the scaled weight and bias, at one IR level.
struct ScalingOps {
  OpRef add_scalar, add, sub, mul, mul_scalar, rsqrt, reshape;
};
inline ScalingOps torch_ops() {
  return {OpRef("torch.add"), OpRef("torch.add"), OpRef("torch.sub"), OpRef("torch.mul"),
          OpRef("torch.mul"), OpRef("torch.rsqrt"), OpRef("torch.reshape")};
}
inline ScalingOps aten_ops() {
  return {OpRef("aten.add.Scalar"), OpRef("aten.add.Tensor"), OpRef("aten.sub.Tensor"), OpRef("aten.mul.Tensor"),
          OpRef("aten.mul.Scalar"), OpRef("aten.rsqrt.default"), OpRef("aten.reshape.default")};
}

using split_cat::detail::call_with_meta;

// The parameters of one conv + batch-norm pair as graph values (null: None).
struct Params {
  Node* weight = nullptr;  // the convolution's
  Node* bias = nullptr;
  Node* gamma = nullptr;
  Node* beta = nullptr;
  Node* mean = nullptr;
  Node* var = nullptr;
  double eps = 1e-5;
};

// Emits W' and b' at the insertion point; nullopt (nothing emitted) when the
// conv weight's meta lacks a static shape.
inline std::optional<std::pair<Node*, Node*>> emit_scaled(Graph& g, const ScalingOps& ops, const Params& p) {
  const TensorMeta* wm = p.weight->meta.val.tensor();
  if (!wm || wm->rank() < 1 || !wm->numel()) return std::nullopt;
  const std::int64_t channels = std::get<std::int64_t>(wm->shape[0]);
  const TensorMeta vec{{channels}, wm->dtype, std::vector<Dim>{1}};
  std::vector<Dim> column_shape(wm->rank(), std::int64_t(1));
  column_shape[0] = channels;
  ArgList column_args;
  for (const Dim& d : column_shape) column_args.push_back(Arg(std::get<std::int64_t>(d)));
  std::vector<Dim> column_stride(wm->rank(), std::int64_t(1));
  const TensorMeta column{column_shape, wm->dtype, column_stride};
  TensorMeta scaled_weight = *wm;

  Node* shifted = call_with_meta(g, ops.add_scalar, {Arg(p.var), Arg(p.eps)}, vec);
  Node* coeff = call_with_meta(g, ops.rsqrt, {Arg(shifted)}, vec);
  if (p.gamma) coeff = call_with_meta(g, ops.mul, {Arg(p.gamma), Arg(coeff)}, vec);
  Node* coeff_column = call_with_meta(g, ops.reshape, {Arg(coeff), Arg(std::move(column_args))}, column);
  Node* weight = call_with_meta(g, ops.mul, {Arg(p.weight), Arg(coeff_column)}, scaled_weight);
  Node* centred = p.bias ? call_with_meta(g, ops.sub, {Arg(p.bias), Arg(p.mean)}, vec)
                         : call_with_meta(g, ops.mul_scalar, {Arg(p.mean), Arg(-1.0)}, vec);
  Node* bias = call_with_meta(g, ops.mul, {Arg(coeff), Arg(centred)}, vec);
  if (p.beta) bias = call_with_meta(g, ops.add, {Arg(p.beta), Arg(bias)}, vec);
  return std::pair{weight, bias};
}

// The arguments of `conv` with weight and bias replaced.
inline std::pair<ArgList, ArgDict> with_weight_and_bias(const Node& conv, Node* weight, Node* bias) {
  ArgList args = conv.args().to_list();
  ArgDict kwargs = conv.kwargs();
  if (args.size() > 1) args[1] = Arg(weight);
  else kwargs.set("weight", Arg(weight));
  if (args.size() > 2) args[2] = Arg(bias);
  else if (args.size() == 2 && !kwargs.contains("bias")) args.push_back(Arg(bias));
  else kwargs.set("bias", Arg(bias));
  return {std::move(args), std::move(kwargs)};
}

inline void rewrite_function_form(Graph& g, Node* root, Counters* counters) {
  const auto bn = inference_batch_norm_call(root);
  if (!bn) return;
  const auto conv = conv_call(bn->input);
  if (!conv || conv->node->num_users() != 1 || !only_output_used(*bn)) return;
  const bool aten = root->target_name().starts_with("aten.");
  const Params params{conv->weight, conv->bias, bn->weight, bn->bias, bn->running_mean, bn->running_var, bn->eps};
  auto guard = g.inserting_before(root);  // the parameters may be defined after the convolution
  const auto scaled = emit_scaled(g, aten ? aten_ops() : torch_ops(), params);
  if (!scaled) return;
  auto [args, kwargs] = with_weight_and_bias(*conv->node, scaled->first, scaled->second);
  Node* fused = g.call_function(conv->node->target(), std::move(args), std::move(kwargs));
  fused->meta = conv->node->meta;
  replace_batch_norm(g, *bn, fused);
  g.erase_node(conv->node);
  if (counters) counters->increment("efficient_conv_bn_eval");
}

inline void rewrite_module_form(Graph& g, Node* root, Counters* counters, io::WeightStore* weights) {
  std::string why;
  const auto pair = module_conv_bn(g, root, why);
  if (!pair || !weights || pair->conv->num_users() != 1) return;
  const std::string cpath(pair->conv->target_name()), bpath(root->target_name());
  const io::WeightTensor* conv_weight = weights->find(cpath + ".weight");
  if (!conv_weight || !weights->contains(bpath + ".running_mean") || !weights->contains(bpath + ".running_var")) return;
  auto guard = g.inserting_before(root);
  auto param = [&](const std::string& name) -> Node* {
    const io::WeightTensor* t = weights->find(name);
    if (!t) return nullptr;
    TensorMeta m;
    m.dtype = t->dtype;
    for (auto d : t->shape) m.shape.push_back(d);
    return g.get_attr(name, m);
  };
  Params params;
  params.weight = param(cpath + ".weight");
  params.bias = param(cpath + ".bias");
  params.gamma = param(bpath + ".weight");
  params.beta = param(bpath + ".bias");
  params.mean = param(bpath + ".running_mean");
  params.var = param(bpath + ".running_var");
  params.eps = pair->eps;
  const auto scaled = emit_scaled(g, torch_ops(), params);
  if (!scaled) return;  // (a weight from the store always has a static shape)
  ArgList args{Arg(pair->input), Arg(scaled->first), Arg(scaled->second)};
  for (const Arg& a : pair->conv_args) args.push_back(a);
  Node* fused = g.call_function(OpRef("torch.nn.functional.conv" + std::to_string(pair->dims) + "d"), std::move(args));
  fused->meta = pair->conv->meta;
  root->replace_all_uses_with(fused);
  g.erase_node(root);
  g.erase_node(pair->conv);
  if (counters) counters->increment("efficient_conv_bn_eval");
}

}  // namespace efficient_detail

// The pattern pass: every batch-norm call and module is a candidate; the
// handler checks the rest. `counters` and `weights` are filled per run.
inline PatternMatcherPass make_efficient_conv_bn_eval_pass(std::shared_ptr<Counters*> counters,
                                                           std::shared_ptr<io::WeightStore*> weights) {
  PatternMatcherPass pass("efficient_conv_bn_eval_pass");
  pattern::OpSet batch_norms;
  for (std::size_t i = 0; i < kBatchNormTargets; ++i) batch_norms.add(pattern::OpTarget(OpRef(batch_norm_target(i))));
  pass.register_pattern(pattern::CallFunctionVarArgs(batch_norms, pattern::MULTIPLE),
                        [counters](auto& m, Graph& g, Node*) { efficient_detail::rewrite_function_form(g, m.nodes()[0], *counters); });
  const pattern::OpSet modules{pattern::OpTarget(module_class("torch.nn.modules.batchnorm.BatchNorm1d")),
                      pattern::OpTarget(module_class("torch.nn.modules.batchnorm.BatchNorm2d")),
                      pattern::OpTarget(module_class("torch.nn.modules.batchnorm.BatchNorm3d"))};
  pass.register_pattern(pattern::CallModuleVarArgs(modules, pattern::MULTIPLE),
                        [counters, weights](auto& m, Graph& g, Node*) {
                          efficient_detail::rewrite_module_form(g, m.nodes()[0], *counters, *weights);
                        });
  return pass;
}

}  // namespace kiln::pre_grad
