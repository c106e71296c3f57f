#pragma once
// Whether a graph's convolutions run channels-last: Inductor's
// decide_layout_opt rules, applied to kiln's graphs at either level.
//  - no convolution: no;
//  - at least 300 nodes per convolution: no (a few convolutions in a big graph);
//  - a grouped convolution with more than one input channel per group: no;
//  - an "in-out" convolution (out channels * 2 <= in channels, kernel > 1): no;
//  - every convolution small (at most 64 channels in and out): no;
//  - else yes.
// (Inductor's CPU build with mkldnn skips the rules and always says yes; kiln
// keeps them, which gives the same answer on ResNet-style networks and keeps
// NCHW where the rules found channels-last slower.)
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/runtime/tensor.hpp"

namespace kiln::runtime {

namespace detail {
inline bool is_convolution(const Node& n) {
  if (n.op() != OpKind::call_function) return false;
  const std::string_view t = n.target_name();
  return t == "aten.convolution.default" || t == "torch.conv2d" || t == "torch.nn.functional.conv2d" ||
         t == "torch.conv3d" || t == "torch.nn.functional.conv3d";
}
}  // namespace detail

// The decision for `g`; a convolution's weight shape comes from the weight
// node's meta, else from `weights` (a get_attr's value).
inline bool decide_channels_last(const Graph& g, const Weights& weights = {}) {
  std::vector<const Node*> convs;
  for (const Node* n : g.nodes())
    if (detail::is_convolution(*n)) convs.push_back(n);
  if (convs.empty()) return false;
  if (g.size() >= 300 * convs.size()) return false;
  bool all_small = true;
  for (const Node* n : convs) {
    if (n->args().size() < 2 || !n->arg(1).node()) return false;
    const Node* w = n->arg(1).node();
    std::vector<std::int64_t> shape;
    if (const TensorMeta* t = w->meta.val.tensor()) {
      for (const Dim& d : t->shape) {
        if (!is_static(d)) return false;  // symbolic shapes: Inductor says no
        shape.push_back(std::get<std::int64_t>(d));
      }
    } else if (w->op() == OpKind::get_attr) {
      auto it = weights.find(w->target_name());
      if (it == weights.end()) return false;
      shape = it->second.shape();
    } else {
      return false;
    }
    if (shape.size() < 3) return false;  // conv1d: no channels-last
    std::int64_t groups = 1;
    const bool aten = n->target_name() == "aten.convolution.default";
    const std::size_t groups_pos = aten ? 8 : 6;
    if (n->args().size() > groups_pos) {
      if (const auto* gi = n->arg(groups_pos).get_if<std::int64_t>()) groups = *gi;
    } else if (const Arg* a = n->kwargs().find("groups")) {
      if (const auto* gi = a->get_if<std::int64_t>()) groups = *gi;
    }
    if (groups > 1 && shape[1] > 1) return false;
    if (shape[0] * 2 <= shape[1] && shape[2] > 1) return false;
    if (!(shape[0] <= 64 && shape[1] <= 64)) all_small = false;
  }
  return !all_small;
}

}  // namespace kiln::runtime
