#pragma once
// Whether a graph's convolutions run channels-last: Inductor's
// decide_layout_opt, applied to kiln's graphs at either level (a Conv2d or
// Conv3d call_module counts, its weight read from the weight PATH.weight).
//  - no convolution: no;
//  - at least 300 nodes per convolution: no (a few convolutions in a big graph);
//  - symbolic weight shapes: no;
//  - inference (what kiln runs): each convolution is classed grouped (groups > 1
//    with more than one input channel per group), small (at most 64 channels in
//    and out), in-out (out channels * 2 <= in channels, kernel > 1) or default,
//    its flops weighted by Inductor's measured channels-last cost of the class
//    (1.358, 0.783, 0.725, 0.823): yes when the weighted flops do not exceed the flops;
//  - training: no if any convolution is grouped or in-out, or all are small.
// (Inductor's CPU build with mkldnn skips the rules and always says yes; kiln
// keeps them, which gives the same answer on ResNet-style networks and keeps
// NCHW where Inductor measured channels-last to be slower.)
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/core/module_attrs.hpp"
#include "kiln/runtime/tensor.hpp"

namespace kiln::runtime {

namespace detail {
// A Conv2d / Conv3d module of a call_module node (its weight is the weight PATH.weight), or nullptr.
inline const ModuleInfo* conv_module(const Node& n) {
  if (n.op() != OpKind::call_module) return nullptr;
  const ModuleInfo* m = n.graph().modules().find(n.target_name());
  return m && (m->class_name == "torch.nn.modules.conv.Conv2d" || m->class_name == "torch.nn.modules.conv.Conv3d") ? m : nullptr;
}
inline bool is_convolution(const Node& n) {
  if (conv_module(n)) return true;
  if (n.op() != OpKind::call_function) return false;
  const std::string_view t = n.target_name();
  return t == "aten.convolution.default" || t == "torch.conv2d" || t == "torch.nn.functional.conv2d" ||
         t == "torch.conv3d" || t == "torch.nn.functional.conv3d" || t == "aten.conv2d.default" || t == "aten.conv3d.default";
}
}  // namespace detail

// The decision for `g`; a convolution's weight shape comes from the weight
// node's meta, else from `weights` (a get_attr's value, or a
// placeholder's bound to a weight).
inline bool decide_channels_last(const Graph& g, const Weights& weights = {}, bool inference = true) {
  std::vector<const Node*> convs;
  for (const Node* n : g.nodes())
    if (detail::is_convolution(*n)) convs.push_back(n);
  if (convs.empty()) return false;
  if (g.size() >= 300 * convs.size()) return false;
  enum Class { grouped, small, in_out, plain };
  double flops[4] = {0, 0, 0, 0};
  bool any_grouped = false, any_in_out = false, all_small = true;
  for (const Node* n : convs) {
    const ModuleInfo* module = detail::conv_module(*n);
    if (!module && (n->args().size() < 2 || !n->arg(1).node())) return false;
    auto shape_of = [&](const Node* v) -> std::optional<std::vector<std::int64_t>> {
      std::vector<std::int64_t> s;
      if (const TensorMeta* t = v->meta.val.tensor()) {
        for (const Dim& d : t->shape) {
          if (!is_static(d)) return std::nullopt;  // symbolic shapes: Inductor says no
          s.push_back(std::get<std::int64_t>(d));
        }
        return s;
      }
      if (v->op() == OpKind::get_attr || v->op() == OpKind::placeholder)
        if (auto it = weights.find(v->target_name()); it != weights.end()) return it->second.shape();
      return std::nullopt;
    };
    std::optional<std::vector<std::int64_t>> w;
    std::int64_t groups = 1;
    if (module) {
      if (auto it = weights.find(module->path + ".weight"); it != weights.end()) w = it->second.shape();
      try {
        const Arg* g = ModuleAttrs(*module).find("groups");
        if (g && g->get_if<std::int64_t>()) groups = *g->get_if<std::int64_t>();
      } catch (const Error&) {
        return false;  // its kernel reports the table's error
      }
    } else {
      w = shape_of(n->arg(1).node());
    }
    if (!w || w->size() < 3) return false;
    const bool aten = n->target_name() == "aten.convolution.default";
    const std::size_t groups_pos = aten ? 8 : 6;
    if (module) {
      // groups came from the module's attrs
    } else if (n->args().size() > groups_pos) {
      if (const auto* gi = n->arg(groups_pos).get_if<std::int64_t>()) groups = *gi;
    } else if (const Arg* a = n->kwargs().find("groups")) {
      if (const auto* gi = a->get_if<std::int64_t>()) groups = *gi;
    }
    const std::vector<std::int64_t>& s = *w;
    const bool is_grouped = groups > 1 && s[1] > 1;
    const bool is_small = s[0] <= 64 && s[1] <= 64;
    const bool is_in_out = s[0] * 2 <= s[1] && s[2] > 1;
    any_grouped |= is_grouped;
    any_in_out |= is_in_out;
    all_small &= is_small;
    // Flops: 2 * output elements * (in channels per group * kernel size), from the output's meta when known.
    double f = 0;
    if (const TensorMeta* out = n->meta.val.tensor(); out && out->numel()) {
      double k = static_cast<double>(s[1]);
      for (std::size_t d = 2; d < s.size(); ++d) k *= static_cast<double>(s[d]);
      f = 2.0 * static_cast<double>(*out->numel()) * k;
    }
    flops[is_grouped ? grouped : is_small ? small : is_in_out ? in_out : plain] += f;
  }
  if (inference) {
    const double total = flops[grouped] + flops[small] + flops[in_out] + flops[plain];
    const double weighted = flops[grouped] * 1.358 + flops[small] * 0.783 + flops[in_out] * 0.725 + flops[plain] * 0.823;
    return weighted <= total;
  }
  return !any_grouped && !any_in_out && !all_small;
}

}  // namespace kiln::runtime
