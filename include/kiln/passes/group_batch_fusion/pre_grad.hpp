#pragma once
// The pre-grad (torch-level) fusions of Inductor's group_batch_fusion.py, with
// its keys, rewrites and counter names:
//   batch_linear      same-shaped F.linear's -> stack + transpose + bmm/baddbmm + unbind
//   batch_linear_lhs  F.linear's of one input -> cat(weights) + mm/addmm + split
//   batch_layernorm   F.layer_norm's -> one layer_norm on a stack, weight mul, bias add, unbind
//   batch_tanh, batch_sigmoid, batch_relu         stack + op + unbind
//   batch_detach, batch_nan_to_num, batch_clamp, batch_dropout   likewise, with the op's arguments
// Where Inductor's rewrite computes something else than the graph did, kiln's
// does not (each is a test): an in-place relu whose input is read elsewhere is
// not fused (the batched relu would no longer write that input), and the
// math ops keep positional arguments (Inductor's key and rewrite drop them,
// so clamp(x, 0, 1) lost its bounds).
#include <memory>
#include <vector>

#include "kiln/ops/functional.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/group_batch_fusion/fusion.hpp"

namespace kiln::gbf {

namespace detail {

inline ArgList node_list(const std::vector<Node*>& nodes) {
  ArgList l;
  for (Node* n : nodes) l.push_back(Arg(n));
  return l;
}
inline std::vector<const TensorMeta*> metas(const std::vector<Node*>& nodes) {
  std::vector<const TensorMeta*> out;
  for (Node* n : nodes) out.push_back(tensor_of(n));
  return out;
}
inline bool all_tensors(const std::vector<const TensorMeta*>& m) {
  for (const TensorMeta* t : m)
    if (!t) return false;
  return !m.empty();
}
// torch.stack(nodes, dim) with its meta, at the insertion point.
inline Node* stack(Graph& g, const std::vector<Node*>& nodes, std::int64_t dim) {
  Node* s = g.call_function(torch::stack, {Arg(node_list(nodes))}, ArgDict{{"dim", Arg(dim)}});
  const auto m = metas(nodes);
  if (all_tensors(m)) s->meta.val = stacked(m, dim);
  return s;
}
// Each node of `subset` gives way to item(i), created right after `source`
// (so the items end up in reverse order, as Inductor's do), which takes over
// its users and its meta; then the node is erased.
// (All items are made first and the uses replaced in one batch, which leaves
// the graph as Inductor's item-by-item loop does, but edits a user that many
// of the nodes share, such as the cat of all towers, once.)
template <class MakeItem>
std::vector<Node*> replace_by_items(Graph& g, Node* source, std::span<Node* const> subset, MakeItem&& item) {
  std::vector<Node*> replacements;
  for (std::size_t i = 0; i < subset.size(); ++i) {
    auto guard = g.inserting_after(source);
    replacements.push_back(item(static_cast<std::int64_t>(i)));
  }
  Node::replace_all_uses_of(subset, replacements);
  for (std::size_t i = 0; i < subset.size(); ++i) {
    replacements[i]->meta = subset[i]->meta;
    g.erase_node(subset[i]);
  }
  return replacements;
}
inline std::vector<Node*> replace_by_getitems(Graph& g, Node* list, std::span<Node* const> subset) {
  return replace_by_items(g, list, subset, [&](std::int64_t i) { return g.call_function(pyop::getitem, {Arg(list), Arg(i)}); });
}
// op(stack) -> unbind -> getitems: the rewrite of every batched unary op.
inline std::vector<Node*> batch_unary(Graph& g, std::span<Node* const> subset, OpRef op, const ArgList& extra_args,
                        const ArgDict& kwargs) {
  std::vector<Node*> inputs;
  for (Node* n : subset) inputs.push_back(node_arg(*n, 0, "input"));
  Node* unbind;
  {
    auto guard = g.inserting_before(subset[0]);
    Node* stacked_inputs = stack(g, inputs, 0);
    ArgList args{Arg(stacked_inputs)};
    for (const Arg& a : extra_args) args.push_back(a);
    Node* batched = g.call_function(op, std::move(args), kwargs);
    batched->meta.val = stacked_inputs->meta.val;
    unbind = g.call_function(torch::unbind, {Arg(batched)}, ArgDict{{"dim", Arg(0)}});
    if (const TensorMeta* t = tensor_of(batched)) unbind->meta.val = unbound(*t, 0);
  }
  return replace_by_getitems(g, unbind, subset);
}

// Inductor's _is_mutable_node: a target named like an in-place op (mul_, iadd).
inline bool is_mutating_target(const Node& n) {
  const std::string_view t = n.target_name();
  if (!t.empty() && t.back() == '_') return true;
  return t.starts_with("operator.i") || t.starts_with("_operator.i");
}

// is_linear_node_can_be_fused: 2-D input and weight with metas, no user that mutates the result.
inline bool linear_can_be_fused(const Node& n) {
  const Node* input = node_arg(n, 0, "input");
  const Node* weight = node_arg(n, 1, "weight");
  const TensorMeta* ti = tensor_of(input);
  const TensorMeta* tw = tensor_of(weight);
  if (!meta_valid(&n) || !ti || !tw || ti->rank() != 2 || tw->rank() != 2) return false;
  for (const Node* u : n.users())
    if (is_mutating_target(*u)) return false;
  return true;
}

}  // namespace detail

class BatchLinear final : public Fusion {
 public:
  BatchLinear() : Fusion("batch_linear", true) {}
  bool matches_calls_only() const override { return true; }
  bool may_match_target(OpRef t) const override { return t.hash == F::linear.hash; }
  std::optional<std::string> match(const Node& n) const override {
    if (!n.is_call(F::linear) || !detail::linear_can_be_fused(n)) return std::nullopt;
    const Node* input = node_arg(n, 0, "input");
    const Node* weight = node_arg(n, 1, "weight");
    const Arg* bias = arg_value(n, 2, "bias");
    // Linears fed by one split are grouped together (Inductor's _getitem_args).
    const Node* split = input->is_call(pyop::getitem) ? input->args()[0].node() : nullptr;
    return Key(name())
        .add(split)
        .add_shape(*tensor_of(input))
        .add_shape(*tensor_of(weight))
        .add(!bias || bias->is_none())
        .add(users_text(n, options.fuse_nodes_with_same_users))
        .str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    std::vector<Node*> inputs, weights, biases;
    for (Node* n : subset) {
      inputs.push_back(node_arg(*n, 0, "input"));
      weights.push_back(node_arg(*n, 1, "weight"));
      if (Node* b = node_arg(*n, 2, "bias")) biases.push_back(b);
    }
    Node* unbind;
    {
      auto guard = g.inserting_before(subset[0]);
      Node* stack_inputs = detail::stack(g, inputs, 0);
      Node* stack_weights = detail::stack(g, weights, 0);
      Node* transposed = g.call_function(torch::transpose, {Arg(stack_weights), Arg(1), Arg(2)});
      transposed->meta.val = transposed_meta(stack_weights);
      Node* product;
      if (biases.empty()) {
        product = g.call_function(torch::bmm, {Arg(stack_inputs), Arg(transposed)});
      } else {
        Node* stack_biases = detail::stack(g, biases, 0);
        Node* unsqueezed = g.call_function(torch::unsqueeze, {Arg(stack_biases), Arg(1)});
        if (const TensorMeta* t = tensor_of(stack_biases)) unsqueezed->meta.val = unsqueezed_meta(*t);
        product = g.call_function(torch::baddbmm, {Arg(unsqueezed), Arg(stack_inputs), Arg(transposed)});
      }
      const TensorMeta* x = tensor_of(stack_inputs);
      const TensorMeta* w = tensor_of(transposed);
      if (x && w) product->meta.val = contiguous({x->shape[0], x->shape[1], w->shape[2]}, x->dtype);
      unbind = g.call_function(torch::unbind, {Arg(product)}, ArgDict{{"dim", Arg(0)}});
      if (const TensorMeta* t = tensor_of(product)) unbind->meta.val = unbound(*t, 0);
    }
    return detail::replace_by_getitems(g, unbind, subset);
  }

 private:
  static MetaVal transposed_meta(const Node* n) {
    const TensorMeta* t = tensor_of(n);
    return t ? transposed(*t, 1, 2) : MetaVal{};
  }
  static MetaVal unsqueezed_meta(const TensorMeta& t) { return unsqueezed(t, 1); }
};

class BatchLinearLHS final : public Fusion {
 public:
  BatchLinearLHS() : Fusion("batch_linear_lhs", true) {}
  bool matches_calls_only() const override { return true; }
  bool may_match_target(OpRef t) const override { return t.hash == F::linear.hash; }
  std::optional<std::string> match(const Node& n) const override {
    if (!n.is_call(F::linear) || !detail::linear_can_be_fused(n)) return std::nullopt;
    const Arg* bias = arg_value(n, 2, "bias");
    return Key(name()).add(!bias || bias->is_none()).add(node_arg(n, 0, "input")).str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    Node* input = node_arg(*subset[0], 0, "input");
    std::vector<Node*> weights, biases;
    ArgList sections;
    std::int64_t total = 0;
    bool static_sizes = true;
    for (Node* n : subset) {
      Node* w = node_arg(*n, 1, "weight");
      weights.push_back(w);
      if (Node* b = node_arg(*n, 2, "bias")) biases.push_back(b);
      const Dim& rows = tensor_of(w)->shape[0];
      sections.push_back(is_static(rows) ? Arg(std::get<std::int64_t>(rows)) : Arg(std::get<SymInt>(rows)));
      if (is_static(rows)) total += std::get<std::int64_t>(rows);
      else static_sizes = false;
    }
    const TensorMeta& x = *tensor_of(input);
    Node* split;
    {
      auto guard = g.inserting_before(subset[0]);
      Node* cat_weights = g.call_function(torch::cat, {Arg(detail::node_list(weights))}, ArgDict{{"dim", Arg(0)}});
      const TensorMeta& w0 = *tensor_of(weights[0]);
      if (static_sizes) cat_weights->meta.val = contiguous({total, w0.shape[1]}, w0.dtype);
      Node* transposed_weights = g.call_function(torch::transpose, {Arg(cat_weights), Arg(0), Arg(1)});
      if (const TensorMeta* t = tensor_of(cat_weights)) transposed_weights->meta.val = transposed(*t, 0, 1);
      Node* product;
      if (!biases.empty()) {
        Node* cat_biases = g.call_function(torch::cat, {Arg(detail::node_list(biases))}, ArgDict{{"dim", Arg(0)}});
        if (static_sizes) cat_biases->meta.val = contiguous({total}, w0.dtype);
        product = g.call_function(torch::addmm, {Arg(cat_biases), Arg(input), Arg(transposed_weights)});
      } else {
        product = g.call_function(torch::mm, {Arg(input), Arg(transposed_weights)});
      }
      if (static_sizes) product->meta.val = contiguous({x.shape[0], total}, x.dtype);
      split = g.call_function(torch::split, {Arg(product), Arg(sections)}, ArgDict{{"dim", Arg(1)}});
      if (const TensorMeta* p = tensor_of(product)) {
        MetaVal::List parts;
        for (Node* w : weights) {
          TensorMeta part{{x.shape[0], tensor_of(w)->shape[0]}, x.dtype, p->stride};
          parts.emplace_back(std::move(part));
        }
        split->meta.val = MetaVal(std::move(parts));
      }
    }
    return detail::replace_by_getitems(g, split, subset);
  }
};

class BatchLayernorm final : public Fusion {
 public:
  BatchLayernorm() : Fusion("batch_layernorm", true) {}
  // The weight mul and the bias add after the batched layer-norm.
  std::int64_t extra_steps(std::span<Node* const> subset) const override {
    const Node& n = *subset.front();
    return (node_arg(n, 2, "weight") ? 1 : 0) + (node_arg(n, 3, "bias") ? 1 : 0);
  }
  bool matches_calls_only() const override { return true; }
  bool may_match_target(OpRef t) const override { return t.hash == F::layer_norm.hash; }
  std::optional<std::string> match(const Node& n) const override {
    if (!n.is_call(F::layer_norm)) return std::nullopt;
    const Node* input = node_arg(n, 0, "input");
    const Node* weight = node_arg(n, 2, "weight");
    const Node* bias = node_arg(n, 3, "bias");
    if (!tensor_of(input) || !meta_valid(weight) || !meta_valid(bias)) return std::nullopt;
    const Arg* shape = arg_value(n, 1, "normalized_shape");
    const Arg* eps = arg_value(n, 4, "eps");
    auto shape_or_empty = [](const Node* x) {
      const TensorMeta* t = tensor_of(x);
      return t ? shape_text(*t) : std::string();
    };
    return Key(name())
        .add_shape(*tensor_of(input))
        .add(shape_or_empty(weight))
        .add(shape_or_empty(bias))
        .add(shape ? format_arg(*shape) : "None")
        .add(eps ? format_arg(*eps) : "None")
        .add(users_text(n, options.fuse_nodes_with_same_users))
        .str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    std::vector<Node*> inputs, weights, biases;
    for (Node* n : subset) {
      inputs.push_back(node_arg(*n, 0, "input"));
      if (Node* w = node_arg(*n, 2, "weight")) weights.push_back(w);
      if (Node* b = node_arg(*n, 3, "bias")) biases.push_back(b);
    }
    const Node& last = *subset.back();
    const Arg normalized_shape = *arg_value(last, 1, "normalized_shape");
    const Arg* eps_arg = arg_value(last, 4, "eps");
    const Arg eps = eps_arg && !eps_arg->is_none() ? *eps_arg : Arg(1e-5);
    const std::int64_t rank = normalized_shape.list() ? static_cast<std::int64_t>(normalized_shape.list()->size()) : 1;
    const std::int64_t stack_dim = -1 - rank;
    Node* unbind;
    {
      auto guard = g.inserting_before(subset[0]);
      Node* stack_input = detail::stack(g, inputs, stack_dim);
      Node* stack_weight = weights.empty() ? nullptr : detail::stack(g, weights, 0);
      Node* stack_bias = biases.empty() ? nullptr : detail::stack(g, biases, 0);
      Node* out = g.call_function(F::layer_norm, {Arg(stack_input), normalized_shape}, ArgDict{{"eps", eps}});
      out->meta.val = stack_input->meta.val;
      auto elementwise = [&](OpRef op, Node* params) {
        Node* r = g.call_function(op, {Arg(params), Arg(out)});
        const TensorMeta* a = tensor_of(params);
        const TensorMeta* b = tensor_of(out);
        if (a && b) r->meta.val = broadcast(*a, *b);
        return r;
      };
      if (stack_weight) out = elementwise(torch::mul, stack_weight);
      if (stack_bias) out = elementwise(torch::add, stack_bias);
      unbind = g.call_function(torch::unbind, {Arg(out)}, ArgDict{{"dim", Arg(stack_dim)}});
      if (const TensorMeta* t = tensor_of(out)) unbind->meta.val = unbound(*t, stack_dim);
    }
    return detail::replace_by_getitems(g, unbind, subset);
  }
};

// batch_tanh, batch_sigmoid, batch_relu.
class BatchPointwise final : public Fusion {
 public:
  BatchPointwise(std::string name, OpRef op) : Fusion(std::move(name), true), op_(op) {}
  bool matches_calls_only() const override { return true; }
  bool may_match_target(OpRef t) const override { return t.hash == op_.hash; }
  std::optional<std::string> match(const Node& n) const override {
    if (!n.is_call(op_) || !meta_valid(&n)) return std::nullopt;
    const Node* input = node_arg(n, 0, "input");
    const TensorMeta* t = tensor_of(input);
    if (!t) return std::nullopt;
    const bool inplace = is_inplace(n);
    // An in-place op on a stack writes the stack, not its input: only where
    // nothing else reads the input is that the same.
    if (inplace && input->num_users() > 1) return std::nullopt;
    const Node* parent = options.fuse_nodes_with_same_parent ? input : nullptr;
    return Key(name())
        .add_shape(*t)
        .add(inplace)
        .add(parent ? std::string(parent->target_name()) : std::string())
        .str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    ArgDict kwargs;
    if (op_ == F::relu) kwargs.set("inplace", Arg(is_inplace(*subset[0])));
    return detail::batch_unary(g, subset, op_, {}, kwargs);
  }

 private:
  static bool is_inplace(const Node& n) {
    const Arg* a = arg_value(n, 1, "inplace");
    const bool* b = a ? a->get_if<bool>() : nullptr;
    return b && *b;
  }
  OpRef op_;
};

// batch_detach, batch_nan_to_num, batch_clamp, batch_dropout: the key has the
// op's other arguments and the first user's target.
class BatchMath final : public Fusion {
 public:
  BatchMath(std::string name, OpRef op) : Fusion(std::move(name), true), op_(op) {}
  bool matches_calls_only() const override { return true; }
  bool may_match_target(OpRef t) const override { return t.hash == op_.hash; }
  std::optional<std::string> match(const Node& n) const override {
    if (!n.is_call(op_) || !meta_valid(&n) || n.num_users() == 0) return std::nullopt;
    const TensorMeta* t = tensor_of(node_arg(n, 0, "input"));
    if (!t) return std::nullopt;
    ArgList rest(n.args().begin() + std::min<std::size_t>(1, n.args().size()), n.args().end());
    return Key(name())
        .add_shape(*t)
        .add(format_arg(Arg(rest)))
        .add(format_arg(Arg(n.kwargs())))
        .add(std::string((*n.users().begin())->target_name()))
        .str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    const Node& first = *subset[0];
    ArgList rest(first.args().begin() + std::min<std::size_t>(1, first.args().size()), first.args().end());
    return detail::batch_unary(g, subset, op_, rest, first.kwargs());
  }

 private:
  OpRef op_;
};

// Every pre-grad fusion, in Inductor's registration order.
inline std::vector<std::unique_ptr<Fusion>> pre_grad_fusions() {
  std::vector<std::unique_ptr<Fusion>> f;
  f.push_back(std::make_unique<BatchLinearLHS>());
  f.push_back(std::make_unique<BatchLinear>());
  f.push_back(std::make_unique<BatchLayernorm>());
  f.push_back(std::make_unique<BatchPointwise>("batch_tanh", torch::tanh));
  f.push_back(std::make_unique<BatchPointwise>("batch_sigmoid", torch::sigmoid));
  f.push_back(std::make_unique<BatchPointwise>("batch_relu", F::relu));
  f.push_back(std::make_unique<BatchMath>("batch_detach", torch::detach));
  f.push_back(std::make_unique<BatchMath>("batch_nan_to_num", torch::nan_to_num));
  f.push_back(std::make_unique<BatchMath>("batch_clamp", torch::clamp));
  f.push_back(std::make_unique<BatchMath>("batch_dropout", F::dropout));
  return f;
}

}  // namespace kiln::gbf
