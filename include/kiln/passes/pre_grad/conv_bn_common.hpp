#pragma once
// What fuse_conv_bn and efficient_conv_bn_eval share: reading a convolution and
// an inference batch-norm call in each of their forms (torch.nn.functional /
// torch.* as traced at the torch level, aten overloads as traced at the aten
// level) into one description, so a pass decides once for every spelling.
#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kiln/core/graph.hpp"

namespace kiln::pre_grad {

// An argument by position, else by keyword; nullptr when given neither way.
inline const Arg* arg_or_kwarg(const Node& n, std::size_t i, std::string_view key) {
  if (n.args().size() > i) return &n.args()[i];
  return n.kwargs().find(key);
}
// The node an argument refers to; nullptr for None, absent or a non-node value.
inline Node* node_of(const Arg* a) { return a ? a->node() : nullptr; }

// A non-transposed convolution call whose weight is a node.
struct ConvCall {
  Node* node = nullptr;
  Node* input = nullptr;
  Node* weight = nullptr;
  Node* bias = nullptr;  // null: no bias
  // Where weight and bias sit (position, else keyword), to replace them.
  std::size_t weight_pos = 1, bias_pos = 2;
};

namespace detail {
struct ConvForm {
  std::string_view target;
  std::optional<std::size_t> transposed_pos;  // aten.convolution's `transposed`
};
inline constexpr ConvForm kConvForms[] = {
    {"torch.nn.functional.conv1d", {}}, {"torch.nn.functional.conv2d", {}}, {"torch.nn.functional.conv3d", {}},
    {"torch.conv1d", {}},               {"torch.conv2d", {}},               {"torch.conv3d", {}},
    {"aten.conv1d.default", {}},        {"aten.conv2d.default", {}},        {"aten.conv3d.default", {}},
    {"aten.conv1d.padding", {}},        {"aten.conv2d.padding", {}},        {"aten.conv3d.padding", {}},
    {"aten.convolution.default", 6},
};
}  // namespace detail

inline std::optional<ConvCall> conv_call(Node* n) {
  if (!n || n->op() != OpKind::call_function) return std::nullopt;
  const detail::ConvForm* form = nullptr;
  for (const auto& f : detail::kConvForms)
    if (n->target_name() == f.target) form = &f;
  if (!form) return std::nullopt;
  if (form->transposed_pos) {
    const Arg* t = arg_or_kwarg(*n, *form->transposed_pos, "transposed");
    const bool* b = t ? t->get_if<bool>() : nullptr;
    if (!b || *b) return std::nullopt;  // a transposed convolution's channels sit elsewhere
  }
  ConvCall c;
  c.node = n;
  c.input = node_of(arg_or_kwarg(*n, 0, "input"));
  c.weight = node_of(arg_or_kwarg(*n, 1, "weight"));
  const Arg* bias = arg_or_kwarg(*n, 2, "bias");
  if (bias && !bias->is_none() && !bias->node()) return std::nullopt;
  c.bias = node_of(bias);
  if (!c.input || !c.weight) return std::nullopt;
  return c;
}

// An inference batch-norm call: training is false (or the overload has no training).
struct BatchNormCall {
  Node* node = nullptr;
  Node* input = nullptr;
  // Each null when None (weight: ones, bias: zeros); running stats are required.
  Node* weight = nullptr;
  Node* bias = nullptr;
  Node* running_mean = nullptr;
  Node* running_var = nullptr;
  double eps = 1e-5;
  // The aten overloads return (out, save_mean, save_invstd, ...): the value is getitem 0.
  bool returns_tuple = false;
};

namespace detail {
struct BatchNormForm {
  std::string_view target;
  // Positions of weight, bias, running_mean, running_var, training (none: always inference), eps.
  std::size_t weight, bias, mean, var;
  std::optional<std::size_t> training;
  std::size_t eps;
  bool returns_tuple;
  std::string_view eps_key = "eps";
};
inline constexpr BatchNormForm kBatchNormForms[] = {
    {"torch.nn.functional.batch_norm", 3, 4, 1, 2, 5, 7, false},
    {"torch.batch_norm", 1, 2, 3, 4, 5, 7, false},
    {"aten.batch_norm.default", 1, 2, 3, 4, 5, 7, false},
    {"aten._native_batch_norm_legit_no_training.default", 1, 2, 3, 4, {}, 6, true},
    {"aten._native_batch_norm_legit.default", 1, 2, 3, 4, 5, 7, true},
    {"aten.native_batch_norm.default", 1, 2, 3, 4, 5, 7, true},
    {"aten.cudnn_batch_norm.default", 1, 2, 3, 4, 5, 7, true, "epsilon"},
};
inline std::optional<double> number_of(const Arg* a) {
  if (!a) return std::nullopt;
  if (const double* d = a->get_if<double>()) return *d;
  if (const std::int64_t* i = a->get_if<std::int64_t>()) return static_cast<double>(*i);
  return std::nullopt;
}
// An argument that must be None or a node; false for anything else.
inline bool optional_node(const Arg* a, Node*& out) {
  out = node_of(a);
  return !a || a->is_none() || out;
}
}  // namespace detail

// The names of the batch-norm call_function targets conv_bn passes look at.
inline constexpr std::string_view batch_norm_target(std::size_t i) { return detail::kBatchNormForms[i].target; }
inline constexpr std::size_t kBatchNormTargets = std::size(detail::kBatchNormForms);

inline std::optional<BatchNormCall> inference_batch_norm_call(Node* n) {
  if (!n || n->op() != OpKind::call_function) return std::nullopt;
  const detail::BatchNormForm* form = nullptr;
  for (const auto& f : detail::kBatchNormForms)
    if (n->target_name() == f.target) form = &f;
  if (!form) return std::nullopt;
  const bool functional = form->target == "torch.nn.functional.batch_norm";
  if (form->training) {
    const Arg* t = arg_or_kwarg(*n, *form->training, "training");
    const bool* b = t ? t->get_if<bool>() : nullptr;
    if (t ? (!b || *b) : !functional) return std::nullopt;  // F.batch_norm's training defaults to False
  }
  BatchNormCall bn;
  bn.node = n;
  bn.returns_tuple = form->returns_tuple;
  bn.input = node_of(arg_or_kwarg(*n, 0, "input"));
  if (!detail::optional_node(arg_or_kwarg(*n, form->weight, "weight"), bn.weight) ||
      !detail::optional_node(arg_or_kwarg(*n, form->bias, "bias"), bn.bias))
    return std::nullopt;
  bn.running_mean = node_of(arg_or_kwarg(*n, form->mean, "running_mean"));
  bn.running_var = node_of(arg_or_kwarg(*n, form->var, "running_var"));
  const Arg* eps = arg_or_kwarg(*n, form->eps, form->eps_key);
  if (eps) {
    const auto e = detail::number_of(eps);
    if (!e) return std::nullopt;
    bn.eps = *e;
  } else if (!functional) {
    return std::nullopt;
  }
  if (!bn.input || !bn.running_mean || !bn.running_var) return std::nullopt;
  return bn;
}

// Whether every use of a batch-norm's value is its output: the node itself for
// the tensor forms, getitem(bn, 0) for the tuple forms (whose statistics
// outputs must be unused: a getitem of them that nothing reads, as make_fx
// leaves one for each, is no use).
inline bool only_output_used(const BatchNormCall& bn) {
  if (!bn.returns_tuple) return true;
  for (const Node* u : bn.node->users()) {
    if (!u->is_call(OpRef("operator.getitem")) || u->args().size() != 2) return false;
    const std::int64_t* i = u->args()[1].get_if<std::int64_t>();
    if (!i || (*i != 0 && u->num_users() != 0)) return false;
  }
  return true;
}

// Replaces every use of the batch-norm's output by `value` and erases it (and its getitems).
inline void replace_batch_norm(Graph& g, const BatchNormCall& bn, Node* value) {
  if (bn.returns_tuple) {
    for (Node* u : bn.node->user_list()) {
      u->replace_all_uses_with(value);
      g.erase_node(u);
    }
  } else {
    bn.node->replace_all_uses_with(value);
  }
  g.erase_node(bn.node);
}

namespace conv_bn_detail {

// A module's entry in the modules table as JSON ("attrs" and the rest); null when absent.
inline nlohmann::json module_attrs(const Graph& g, const Node& n) {
  const ModuleInfo* m = g.modules().find(n.target_name());
  if (!m) return nullptr;
  for (const auto& [key, text] : m->fields)
    if (key == "attrs") return nlohmann::json::parse(text, nullptr, false);
  return nlohmann::json::object();
}
inline int module_dims(const Graph& g, const Node& n, std::string_view prefix) {
  const ModuleInfo* m = g.modules().find(n.target_name());
  if (!m) return 0;
  for (int d = 1; d <= 3; ++d)
    if (m->class_name == std::string(prefix) + std::to_string(d) + "d") return d;
  return 0;
}
inline Arg arg_from_json(const nlohmann::json& j) {
  if (j.is_array()) {
    ArgList l;
    for (const auto& e : j) l.push_back(arg_from_json(e));
    return Arg(std::move(l));
  }
  if (j.is_string()) return Arg(j.get<std::string>());
  if (j.is_boolean()) return Arg(j.get<bool>());
  if (j.is_number_integer()) return Arg(j.get<std::int64_t>());
  if (j.is_number()) return Arg(j.get<double>());
  return Arg();
}

}  // namespace conv_bn_detail

// A call_module Conv{N}d whose only argument feeds a call_module BatchNorm{N}d
// (classes from the graph's modules table), with what a functional call of the
// convolution needs from the table's attrs.
struct ModuleConvBatchNorm {
  Node* conv = nullptr;
  Node* input = nullptr;  // the convolution's input
  int dims = 2;
  ArgList conv_args;  // stride, padding, dilation, groups
  double eps = 1e-5;
};

// nullopt when `bn` is no such pair; `why` says why when it is one kiln cannot rewrite.
inline std::optional<ModuleConvBatchNorm> module_conv_bn(const Graph& g, Node* bn, std::string& why) {
  namespace d = conv_bn_detail;
  if (!bn || bn->op() != OpKind::call_module) return std::nullopt;
  const int dims = d::module_dims(g, *bn, "torch.nn.modules.batchnorm.BatchNorm");
  Node* conv = bn->args().empty() ? nullptr : bn->args()[0].node();
  if (!dims || !conv || conv->op() != OpKind::call_module || d::module_dims(g, *conv, "torch.nn.modules.conv.Conv") != dims)
    return std::nullopt;
  ModuleConvBatchNorm p;
  p.conv = conv;
  p.dims = dims;
  p.input = conv->args().empty() ? nullptr : conv->args()[0].node();
  if (!p.input || conv->args().size() != 1 || !conv->kwargs().empty() || bn->args().size() != 1 || !bn->kwargs().empty()) {
    why = "the modules are not called with one tensor each";
    return std::nullopt;
  }
  const nlohmann::json bn_attrs = d::module_attrs(g, *bn), conv_attrs = d::module_attrs(g, *conv);
  if (!bn_attrs.is_object() || !conv_attrs.is_object()) {
    why = "the modules table has no attrs for " + bn->name() + " or " + conv->name();
    return std::nullopt;
  }
  if (bn_attrs.value("training", false) || !bn_attrs.value("track_running_stats", true)) {
    why = "module " + std::string(bn->target_name()) + " uses batch statistics";
    return std::nullopt;
  }
  if (conv_attrs.value("padding_mode", std::string("zeros")) != "zeros") {
    why = "module " + std::string(conv->target_name()) + " pads other than with zeros";
    return std::nullopt;
  }
  for (const char* key : {"stride", "padding", "dilation", "groups"}) {
    if (!conv_attrs.contains(key)) {
      why = "module " + std::string(conv->target_name()) + " has no '" + key + "' in its attrs";
      return std::nullopt;
    }
    p.conv_args.push_back(d::arg_from_json(conv_attrs.at(key)));
  }
  const auto eps = bn_attrs.find("eps");
  if (eps != bn_attrs.end() && eps->is_number()) p.eps = eps->get<double>();
  return p;
}

}  // namespace kiln::pre_grad
