#pragma once
// remove_noop (the no-ops Inductor removes: pre_grad's remove_noop pass slot
// and post_grad's remove_noop_ops registry, at both the torch-function and the
// aten level): a node whose value is its input's is replaced by that input.
// A node qualifies when its meta equals its source's (shape, dtype, strides
// where recorded; Inductor's same_meta) and it is
//   - a view or reshape to the same shape (view, reshape, expand, flatten,
//     squeeze, narrow, slice, alias, view_as, ...), contiguous of a tensor
//     whose strides are recorded,
//   - a cast to the dtype it has (to, _to_copy, convert_element_type, float(), ...),
//   - a clone, a copy, a cat of one tensor, a repeat or tile by ones, a pad
//     by zeros,
//   - add or sub of zero, mul or div by one, pow by one,
//   - floor, ceil, round or trunc of an integer tensor.
// Removing a copy makes the node alias its source, so copies are left in a
// graph with in-place ops; as in Inductor, no removal makes an output alias an
// input or another output. Inductor counts nothing; kiln counts `remove_noop`.
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "kiln/passes/pre_grad/common.hpp"

namespace kiln::pre_grad {

namespace detail {

// The name a node's op is known by: the target, "Tensor.<m>" for a method.
inline std::string op_key(const Node& n) {
  if (n.op() == OpKind::call_method) return "Tensor." + std::string(n.target_name());
  return std::string(n.target_name());
}

enum class NoopKind { none, view, copy, add, sub, mul, div, pow, rounding, pad, cat, aten_copy };

inline NoopKind noop_kind(std::string_view key) {
  static const std::unordered_map<std::string_view, NoopKind> table = [] {
    std::unordered_map<std::string_view, NoopKind> t;
    for (std::string_view k :
         {"Tensor.view", "aten.view.default", "aten.view.dtype", "Tensor.reshape", "torch.reshape",
          "aten.reshape.default", "aten._unsafe_view.default", "Tensor.expand", "aten.expand.default",
          "Tensor.expand_as", "torch.broadcast_to", "Tensor.broadcast_to", "aten.broadcast_to.default",
          "Tensor.view_as", "Tensor.reshape_as", "torch.flatten", "Tensor.flatten", "aten.flatten.using_ints",
          "torch.squeeze", "Tensor.squeeze", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
          "aten.alias.default", "aten.slice.Tensor", "torch.narrow", "Tensor.narrow", "aten.narrow.default",
          "Tensor.contiguous"})
      t.emplace(k, NoopKind::view);
    for (std::string_view k :
         {"torch.clone", "Tensor.clone", "aten.clone.default", "Tensor.to", "aten._to_copy.default",
          "prims.convert_element_type.default", "Tensor.float", "Tensor.double", "Tensor.half", "Tensor.bfloat16",
          "Tensor.int", "Tensor.long", "Tensor.bool", "Tensor.type_as", "Tensor.repeat", "aten.repeat.default",
          "torch.tile", "Tensor.tile"})
      t.emplace(k, NoopKind::copy);
    for (std::string_view k : {"torch.add", "Tensor.add", "operator.add", "aten.add.Tensor", "aten.add.Scalar"})
      t.emplace(k, NoopKind::add);
    for (std::string_view k : {"torch.sub", "Tensor.sub", "operator.sub", "aten.sub.Tensor", "aten.sub.Scalar"})
      t.emplace(k, NoopKind::sub);
    for (std::string_view k : {"torch.mul", "Tensor.mul", "operator.mul", "aten.mul.Tensor", "aten.mul.Scalar"})
      t.emplace(k, NoopKind::mul);
    for (std::string_view k : {"torch.div", "Tensor.div", "operator.truediv", "aten.div.Tensor", "aten.div.Scalar"})
      t.emplace(k, NoopKind::div);
    for (std::string_view k : {"torch.pow", "Tensor.pow", "operator.pow", "aten.pow.Tensor_Scalar"})
      t.emplace(k, NoopKind::pow);
    for (std::string_view k : {"torch.floor", "Tensor.floor", "aten.floor.default", "torch.ceil", "Tensor.ceil",
                               "aten.ceil.default", "torch.round", "Tensor.round", "aten.round.default", "torch.trunc",
                               "Tensor.trunc", "aten.trunc.default"})
      t.emplace(k, NoopKind::rounding);
    t.emplace("aten.constant_pad_nd.default", NoopKind::pad);
    t.emplace("torch.nn.functional.pad", NoopKind::pad);
    t.emplace("torch.cat", NoopKind::cat);
    t.emplace("aten.cat.default", NoopKind::cat);
    t.emplace("aten.copy.default", NoopKind::aten_copy);
    return t;
  }();
  auto it = table.find(key);
  return it == table.end() ? NoopKind::none : it->second;
}

inline bool is_number(const Arg* a, double value) {
  if (!a) return false;
  if (const auto* i = a->get_if<std::int64_t>()) return static_cast<double>(*i) == value;
  if (const auto* d = a->get_if<double>()) return *d == value;
  return false;
}

// Whether the graph mutates anything in place (a method or op named with a
// trailing underscore, an operator.i* or setitem, inplace=True, out=).
inline bool has_in_place_ops(const Graph& g) {
  for (const Node* n : g.nodes()) {
    if (n->op() != OpKind::call_function && n->op() != OpKind::call_method) continue;
    std::string_view name = n->target_name();
    if (n->op() == OpKind::call_function) {
      if (name.starts_with("operator.i") || name == "operator.setitem") return true;
      if (name.starts_with("aten.") || name.starts_with("prims.")) {  // aten.add_.Tensor: the op's name
        name.remove_prefix(name.find('.') + 1);
        name = name.substr(0, name.find('.'));
      }
    }
    if (name.ends_with("_") && !name.ends_with("__")) return true;
    if (name.find("setitem") != std::string_view::npos) return true;
    if (const Arg* a = n->kwargs().find("inplace"); a && a->get_if<bool>() && *a->get_if<bool>()) return true;
    if (const Arg* a = n->kwargs().find("out"); a && !a->is_none()) return true;
  }
  return false;
}

// Whether a node's op may return a view of its input (the base name of its op
// among the view ops), so that its value may share an input's or output's storage.
inline bool may_be_view(const Node& n) {
  std::string_view name = n.target_name();
  if (n.op() == OpKind::call_function) {
    if (name.starts_with("aten.") || name.starts_with("prims.")) {
      name.remove_prefix(name.find('.') + 1);
      name = name.substr(0, name.find('.'));
    } else if (const auto dot = name.rfind('.'); dot != std::string_view::npos) {
      name.remove_prefix(dot + 1);
    }
  } else if (n.op() != OpKind::call_method) {
    return n.op() == OpKind::placeholder || n.op() == OpKind::get_attr;
  }
  static const std::unordered_set<std::string_view> views{
      "view", "reshape", "_unsafe_view", "_reshape_alias", "expand", "expand_as", "broadcast_to", "view_as",
      "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "narrow", "slice", "alias", "contiguous",
      "permute", "transpose", "t", "T", "mT", "movedim", "swapaxes", "select", "getitem", "detach", "split",
      "split_with_sizes", "chunk", "unbind", "as_strided", "diagonal", "to", "type_as", "float", "double",
      "half", "int", "long", "bool"};
  return views.count(name) > 0;
}

struct Noop {
  Node* source = nullptr;
  bool copy = false;  // the node makes new storage (removing it creates an alias)
};

// The source whose value `n` has, when `n` is a no-op.
inline Noop noop_source(const Node& n) {
  if (n.op() != OpKind::call_function && n.op() != OpKind::call_method) return {};
  const NoopKind kind = noop_kind(op_key(n));
  if (kind == NoopKind::none) return {};
  const TensorMeta* out = tensor_of(&n);
  if (!out) return {};
  const Arg* first = arg_value(n, 0, n.op() == OpKind::call_method ? "self" : "input");
  Node* src = first ? first->node() : nullptr;
  bool copy = kind != NoopKind::view;
  switch (kind) {
    case NoopKind::view:
      if (op_key(n) == "Tensor.contiguous") {  // a no-op only for a tensor known to be contiguous
        const TensorMeta* in = tensor_of(src);
        if (!in || !in->stride || *in->stride != gbf::contiguous_strides(in->shape)) return {};
      }
      break;
    case NoopKind::copy:
    case NoopKind::rounding:
      if (kind == NoopKind::rounding && (is_floating_point(out->dtype) || n.args().size() > 1 || !n.kwargs().empty()))
        return {};
      if (const Arg* c = n.kwargs().find("memory_format"); c && !c->is_none()) return {};
      for (std::size_t i = 1; i < n.args().size(); ++i)  // .to(device) and the like: not decided from meta
        if (op_key(n) == "Tensor.to" && !n.args()[i].get_if<DType>()) return {};
      break;
    case NoopKind::add:
    case NoopKind::sub:
    case NoopKind::mul:
    case NoopKind::div:
    case NoopKind::pow: {
      const double unit = kind == NoopKind::add || kind == NoopKind::sub ? 0.0 : 1.0;
      const Arg* second = arg_value(n, 1, kind == NoopKind::pow ? "exponent" : "other");
      if (kind == NoopKind::div)
        if (const Arg* m = n.kwargs().find("rounding_mode"); m && !m->is_none()) return {};
      if (is_number(second, unit)) break;
      // operator.add(0, x), operator.mul(1, x): the scalar on the left.
      const bool commutes = n.target_name() == "operator.add" || n.target_name() == "operator.mul";
      if (commutes && n.args().size() == 2 && is_number(&n.args()[0], unit) && n.args()[1].node()) {
        src = n.args()[1].node();
        break;
      }
      return {};
    }
    case NoopKind::pad: {
      const Arg* pads = arg_value(n, 1, "pad");
      if (!pads || !pads->is_list()) return {};
      for (const Arg& p : *pads->list())
        if (!is_number(&p, 0)) return {};
      break;
    }
    case NoopKind::cat: {
      const Arg* tensors = arg_value(n, 0, "tensors");
      if (!tensors || !tensors->is_list() || tensors->list()->size() != 1) return {};
      src = tensors->list()->front().node();
      break;
    }
    case NoopKind::aten_copy: src = n.args().size() >= 2 ? n.args()[1].node() : nullptr; break;
    case NoopKind::none: return {};
  }
  const TensorMeta* in = tensor_of(src);
  if (!in || !same_meta(*out, *in)) return {};
  return Noop{src, copy};
}

}  // namespace detail

// Returns how many nodes were removed.
inline std::size_t remove_noop(Graph& g) {
  namespace d = detail;
  const bool mutation = d::has_in_place_ops(g);
  std::unordered_set<const Node*> outputs;
  const Node* output = g.output_node();
  if (output)
    for (const Node* n : output->all_input_nodes()) outputs.insert(n);
  std::size_t removed = 0;
  for (Node* n : g.node_list()) {
    if (n->erased()) continue;
    const d::Noop noop = d::noop_source(*n);
    if (!noop.source || (noop.copy && mutation)) continue;
    // An output must not become an input or another output (or a view of one).
    if (outputs.count(n)) {
      const Node* s = noop.source;
      if (outputs.count(s) || d::may_be_view(*s)) continue;
    }
    n->replace_all_uses_with(noop.source);
    if (outputs.erase(n)) outputs.insert(noop.source);
    g.erase_node(n);
    ++removed;
  }
  return removed;
}

}  // namespace kiln::pre_grad
