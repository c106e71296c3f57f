#pragma once
// What a convolution or matrix product can take into its own primitive from
// the ops that follow it, where the graph allows (each op the only user of
// the one before): an inference batch-norm with constant parameters (folded
// into the weights and bias), then relu / gelu / ... (eltwise post-ops) and a
// residual add of a tensor already computed (a sum post-op: the addend is
// placed in the destination first, in place when nothing else reads it).
// This is where lowering does what oneDNN's own examples do by hand. The ops
// may be call_module nodes too (BatchNorm2d, ReLU, ... of a symbolic_trace graph).
#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/core/module_attrs.hpp"
#include "kiln/kernels/onednn/common.hpp"

namespace kiln::kernels::onednn {

struct Epilogue {
  // y = x * scale[c] + shift[c] per output channel (a folded batch-norm).
  std::vector<float> scale, shift;
  bool has_affine() const { return !scale.empty(); }
  dnnl::post_ops post_ops;
  std::optional<runtime::ValueId> addend;  // the residual the sum post-op adds
  const Node* addend_node = nullptr;
  const Node* add_node = nullptr;  // the add folded in as the sum post-op
  // The ops folded, in order; the last one's result is the primitive's output.
  std::vector<const Node*> nodes;
  // For a tuple-valued op among them (aten.native_batch_norm), its getitem(0).
  std::vector<const Node*> tuple_nodes;
  const Node* last() const { return nodes.empty() ? nullptr : nodes.back(); }
};

namespace detail {

inline bool target_is(const Node* n, std::initializer_list<std::string_view> names) {
  if (!n || n->op() != OpKind::call_function) return false;
  for (auto t : names)
    if (n->target_name() == t) return true;
  return false;
}

// The module of a call_module node, or nullptr.
inline const ModuleInfo* module_of(const Node& n) {
  return n.op() == OpKind::call_module ? n.graph().modules().find(n.target_name()) : nullptr;
}
inline bool module_is(const ModuleInfo* m, std::initializer_list<std::string_view> classes) {
  if (!m) return false;
  for (auto c : classes)
    if (m->class_name == c) return true;
  return false;
}

// Records in `e` the per-channel scale and shift of an inference batch-norm
// with these statistics and parameters (weight and bias optional), and `bn`
// among the folded nodes; false, leaving `e` as it was, when they do not fit.
inline bool record_batch_norm(Epilogue& e, const Node& bn, std::int64_t channels, const runtime::Tensor& mean,
                              const runtime::Tensor& var, const std::optional<runtime::Tensor>& weight,
                              const std::optional<runtime::Tensor>& bias, double eps) {
  for (const auto* t : {&mean, &var}) if (t->dtype() != DType::float32 || t->numel() != channels) return false;
  if ((weight && weight->numel() != channels) || (bias && bias->numel() != channels)) return false;
  e.scale.resize(channels);
  e.shift.resize(channels);
  for (std::int64_t c = 0; c < channels; ++c) {
    const double g = weight ? weight->data<float>()[c] : 1.0;
    const double inv = g / std::sqrt(static_cast<double>(var.data<float>()[c]) + eps);
    e.scale[c] = static_cast<float>(inv);
    e.shift[c] = static_cast<float>((bias ? bias->data<float>()[c] : 0.0) - mean.data<float>()[c] * inv);
  }
  e.nodes.push_back(&bn);
  return true;
}

// A module's attributes, or nullopt when the table's entry cannot be read
// (the module's own kernel then reports it).
inline std::optional<ModuleAttrs> attrs_of(const ModuleInfo& m) {
  try {
    return ModuleAttrs(m);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// An eval-mode BatchNormNd module with running statistics and constant
// parameters (the weights PATH.running_mean, ...): records its scale and shift
// in `e` as fold_batch_norm does and returns true, else false.
inline bool fold_batch_norm_module(const runtime::LowerContext& ctx, const Node& bn, const ModuleInfo& m,
                                   std::int64_t channels, Epilogue& e) {
  const std::optional<ModuleAttrs> read = attrs_of(m);
  if (!read) return false;
  const ModuleAttrs& attrs = *read;
  auto flag = [&](const char* name) {
    const Arg* a = attrs.find(name);
    return a && a->get_if<bool>() ? std::optional<bool>(*a->get_if<bool>()) : std::nullopt;
  };
  const auto tracked = flag("track_running_stats"), affine = flag("affine");
  const Arg* eps_arg = attrs.find("eps");
  if (!tracked || !*tracked || !affine || !eps_arg || bn.args().size() != 1 || !bn.kwargs().empty()) return false;
  const double* eps = eps_arg->get_if<double>();
  if (!eps) return false;
  auto param = [&](const char* name) -> std::optional<runtime::Tensor> {
    const auto v = ctx.weight(m.path + "." + name);
    return v ? ctx.constant(*v) : std::nullopt;
  };
  const auto mean = param("running_mean"), var = param("running_var");
  std::optional<runtime::Tensor> weight, bias;
  if (!mean || !var) return false;
  if (*affine && (!(weight = param("weight")) || !(bias = param("bias")))) return false;
  return record_batch_norm(e, bn, channels, *mean, *var, weight, bias, *eps);
}

// The only user of `n` that uses it, ignoring getitems nobody reads.
inline const Node* only_user(const Node* n) {
  const Node* found = nullptr;
  for (const Node* u : n->users()) {
    if (u->num_users() == 0 && target_is(u, {"operator.getitem"})) continue;  // an unread getitem
    if (found) return nullptr;
    found = u;
  }
  return found;
}

// The constant tensor behind argument `pos`/`kw` of `n`, if it is a lowered constant.
inline std::optional<runtime::Tensor> constant_arg(const runtime::LowerContext& ctx, const Node& n, std::size_t pos,
                                                   std::string_view kw) {
  const Arg* a = pos < n.args().size() ? &n.arg(pos) : n.kwargs().find(kw);
  if (!a || !a->node() || !ctx.is_lowered(a->node())) return std::nullopt;
  const runtime::Lowered& l = ctx.lowered(a->node());
  if (!l.is_tensor()) return std::nullopt;
  return ctx.constant(l.id);
}


// An inference batch-norm with constant statistics and parameters: records in
// `e` the per-channel scale and shift it applies and returns true, else false.
inline bool fold_batch_norm(const runtime::LowerContext& ctx, const Node& bn, std::int64_t channels, Epilogue& e) {
  // (input, weight, bias, mean, var, eps) positions per form.
  std::size_t w, b, m, v, eps_pos;
  std::string_view eps_kw = "eps";
  bool tuple = false;
  if (const ModuleInfo* mod = module_of(bn)) {
    if (!module_is(mod, {"torch.nn.modules.batchnorm.BatchNorm1d", "torch.nn.modules.batchnorm.BatchNorm2d",
                         "torch.nn.modules.batchnorm.BatchNorm3d"}))
      return false;
    return fold_batch_norm_module(ctx, bn, *mod, channels, e);
  }
  if (target_is(&bn, {"torch.nn.functional.batch_norm"})) {
    // F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    m = 1, v = 2, w = 3, b = 4, eps_pos = 7;
    const Arg* training = bn.args().size() > 5 ? &bn.arg(5) : bn.kwargs().find("training");
    if (training && training->get_if<bool>() && *training->get_if<bool>()) return false;
  } else if (target_is(&bn, {"aten._native_batch_norm_legit_no_training.default"})) {
    w = 1, b = 2, m = 3, v = 4, eps_pos = 6;  // (input, weight, bias, mean, var, momentum, eps)
    tuple = true;
  } else if (target_is(&bn, {"aten.native_batch_norm.default", "aten.batch_norm.default"})) {
    // (input, weight, bias, running_mean, running_var, training, momentum, eps[, cudnn])
    w = 1, b = 2, m = 3, v = 4, eps_pos = 7;
    const Arg* training = bn.args().size() > 5 ? &bn.arg(5) : bn.kwargs().find("training");
    if (!training || !training->get_if<bool>() || *training->get_if<bool>()) return false;
    tuple = bn.target_name() == "aten.native_batch_norm.default";
  } else {
    return false;
  }
  auto mean = constant_arg(ctx, bn, m, "running_mean");
  auto var = constant_arg(ctx, bn, v, "running_var");
  if (!mean || !var) return false;
  const Arg* wa = w < bn.args().size() ? &bn.arg(w) : bn.kwargs().find("weight");
  const Arg* ba = b < bn.args().size() ? &bn.arg(b) : bn.kwargs().find("bias");
  std::optional<runtime::Tensor> weight, bias;
  if (wa && !wa->is_none() && !(weight = constant_arg(ctx, bn, w, "weight"))) return false;
  if (ba && !ba->is_none() && !(bias = constant_arg(ctx, bn, b, "bias"))) return false;
  // A tuple form folds only where its getitem(0) alone is read; checked before
  // anything is recorded, so that `e` stays as it was when the fold is refused.
  const Node* first = nullptr;
  if (tuple) {
    for (const Node* u : bn.users()) {
      if (!target_is(u, {"operator.getitem"})) return false;
      const auto i = item_index(*u);
      if (!i) return false;
      if (*i == 0) first = u;
      else if (u->num_users() > 0) return false;
    }
    if (!first) return false;
  }
  if (!record_batch_norm(e, bn, channels, *mean, *var, weight, bias, number_arg(bn, eps_pos, eps_kw).value_or(1e-5)))
    return false;
  if (first) e.tuple_nodes.push_back(first);
  return true;
}

// An element-wise op as a oneDNN eltwise post-op: the algorithm and its alpha and beta.
struct Eltwise {
  dnnl::algorithm alg;
  float alpha = 0.0f, beta = 0.0f;
};

// A number given at `pos` or as `kw`, else `fallback`; nullopt when it is not a number.
inline std::optional<double> number_or(const Node& n, std::size_t pos, std::string_view kw, double fallback) {
  const Arg* a = given_arg(n, pos, kw);
  return a ? as_number(*a) : fallback;
}

// hardtanh(x, min, max) = clamp(x, min, max) (ReLU6: min 0, max 6), as oneDNN's clip.
inline std::optional<Eltwise> clip_of(std::optional<double> lo, std::optional<double> hi) {
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  return Eltwise{dnnl::algorithm::eltwise_clip, static_cast<float>(*lo), static_cast<float>(*hi)};
}

inline std::optional<Eltwise> eltwise_of(const Node& n) {
  using A = dnnl::algorithm;
  if (const ModuleInfo* m = module_of(n)) {
    if (n.args().size() != 1 || !n.kwargs().empty()) return std::nullopt;
    if (module_is(m, {"torch.nn.modules.activation.ReLU"})) return Eltwise{A::eltwise_relu};
    if (module_is(m, {"torch.nn.modules.activation.Sigmoid"})) return Eltwise{A::eltwise_logistic};
    if (module_is(m, {"torch.nn.modules.activation.Tanh"})) return Eltwise{A::eltwise_tanh};
    if (module_is(m, {"torch.nn.modules.activation.SiLU"})) return Eltwise{A::eltwise_swish, 1.0f};
    if (module_is(m, {"torch.nn.modules.activation.ReLU6"})) return clip_of(0.0, 6.0);
    if (module_is(m, {"torch.nn.modules.activation.Hardswish"})) return Eltwise{A::eltwise_hardswish};
    const std::optional<ModuleAttrs> attrs = attrs_of(*m);
    if (!attrs) return std::nullopt;
    if (module_is(m, {"torch.nn.modules.activation.Hardtanh"})) {
      auto num = [&](std::string_view k) -> std::optional<double> {
        const Arg* a = attrs->find(k);
        return a ? as_number(*a) : std::nullopt;
      };
      return clip_of(num("min_val"), num("max_val"));
    }
    if (module_is(m, {"torch.nn.modules.activation.GELU"})) {
      const Arg* approx = attrs->find("approximate");
      const auto* s = approx ? approx->get_if<std::string>() : nullptr;
      if (!approx || (s && *s == "none")) return Eltwise{A::eltwise_gelu_erf};
      if (s && *s == "tanh") return Eltwise{A::eltwise_gelu_tanh};
    }
    return std::nullopt;
  }
  if (target_is(&n, {"aten.relu.default", "aten.relu_.default", "torch.relu", "torch.relu_",
                     "torch.nn.functional.relu"}))
    return Eltwise{A::eltwise_relu};
  if (target_is(&n, {"aten.sigmoid.default", "torch.sigmoid"})) return Eltwise{A::eltwise_logistic};
  if (target_is(&n, {"aten.tanh.default", "torch.tanh"})) return Eltwise{A::eltwise_tanh};
  if (target_is(&n, {"aten.silu.default", "aten.silu_.default", "torch.nn.functional.silu"}))
    return Eltwise{A::eltwise_swish, 1.0f};
  if (target_is(&n, {"aten.hardtanh.default", "aten.hardtanh_.default", "torch.nn.functional.hardtanh"}))
    return clip_of(number_or(n, 1, "min_val", -1.0), number_or(n, 2, "max_val", 1.0));
  if (target_is(&n, {"torch.nn.functional.relu6"})) return clip_of(0.0, 6.0);
  // x * relu6(x + 3) / 6 (MobileNetV3's activation)
  if (target_is(&n, {"aten.hardswish.default", "aten.hardswish_.default", "torch.nn.functional.hardswish"}))
    return Eltwise{A::eltwise_hardswish};
  if (target_is(&n, {"aten.gelu.default", "torch.nn.functional.gelu"})) {
    const Arg* approx = n.args().size() > 1 ? &n.arg(1) : n.kwargs().find("approximate");
    const auto* s = approx ? approx->get_if<std::string>() : nullptr;
    if (!s || *s == "none") return Eltwise{A::eltwise_gelu_erf};
    if (*s == "tanh") return Eltwise{A::eltwise_gelu_tanh};
    return std::nullopt;
  }
  return std::nullopt;
}

// A residual add of `from` and another tensor: that tensor's node, or nullptr.
inline const Node* residual_addend(const Node& add, const Node* from) {
  if (!target_is(&add, {"aten.add.Tensor", "aten.add_.Tensor", "operator.add", "torch.add"})) return nullptr;
  if (add.args().size() != 2) return nullptr;
  if (const Arg* alpha = add.kwargs().find("alpha")) {
    const auto* i = alpha->get_if<std::int64_t>();
    const auto* d = alpha->get_if<double>();
    if (!(i && *i == 1) && !(d && *d == 1.0)) return nullptr;
  }
  const Node* a = add.arg(0).node();
  const Node* b = add.arg(1).node();
  if (!a || !b || a == b) return nullptr;
  // add_ writes its first argument: fold it only when nothing else reads that.
  if (add.target_name() == "aten.add_.Tensor" && a->num_users() != 1) return nullptr;
  if (a == from) return b;
  if (b == from) return a;
  return nullptr;
}

}  // namespace detail

// The epilogue that can follow `producer`, whose output has `channels`
// channels in dim 1 and layout `out` (the sum post-op needs the addend to have
// the same shape). `allow_affine` is false where the producer cannot take a
// folded batch-norm (its weights are not constants).
inline Epilogue find_epilogue(const runtime::LowerContext& ctx, const Node& producer, const runtime::Layout& out,
                              std::int64_t channels, bool allow_affine) {
  Epilogue e;
  if (!ctx.may_fuse_users()) return e;
  const Node* cur = &producer;
  auto step = [&](const Node* n) { return n ? detail::only_user(n) : nullptr; };
  const Node* next = step(cur);
  if (allow_affine && next && detail::fold_batch_norm(ctx, *next, channels, e)) {
    cur = e.tuple_nodes.empty() ? next : e.tuple_nodes.back();
    next = step(cur);
  }
  // eltwise* then at most one residual add, then eltwise*.
  bool summed = false;
  while (next) {
    if (auto op = detail::eltwise_of(*next)) {
      e.post_ops.append_eltwise(1.0f, op->alg, op->alpha, op->beta);
    } else if (const Node* other = detail::residual_addend(*next, cur); other && !summed && ctx.is_lowered(other)) {
      const runtime::Lowered& l = ctx.lowered(other);
      if (!l.is_tensor() || ctx.layout(l.id).shape != out.shape || ctx.layout(l.id).dtype != out.dtype) break;
      e.post_ops.append_sum(1.0f);
      e.addend = l.id;
      e.addend_node = other;
      e.add_node = next;
      summed = true;
    } else {
      break;
    }
    e.nodes.push_back(next);
    cur = next;
    next = step(cur);
  }
  return e;
}

}  // namespace kiln::kernels::onednn
