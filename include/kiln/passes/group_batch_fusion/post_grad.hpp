#pragma once
// The post-grad (aten-level) fusions of Inductor's group_batch_fusion.py:
//   batch_linear_post_grad  mm / addmm (default alpha, beta) of static 2-D shapes -> bmm + select (+ bias add)
//   batch_aten_add, _sub, _mul, _div   same shapes and dtypes -> one op on unsqueeze+cat stacks, select back
//   batch_aten_tanh, _sigmoid, _relu   likewise for one input
//   group_linear  mm / addmm (default alpha, beta) of 2-D shapes, every size even and at most
//                 max_fuse_tensor_size_group_linear -> one kiln.grouped_mm (Inductor: fbgemm's gmm) + getitems
// Stacks are unsqueeze(dim=0) + cat (Inductor's decompose_stack), and the
// targets are Inductor's own (aten.cat, aten.select: packets), so the nodes a
// fusion leaves compare one for one. Where Inductor's rewrite loses an
// argument, kiln's keeps it: sub's alpha.
#include <memory>
#include <vector>

#include "kiln/ops/aten.hpp"
#include "kiln/ops/kiln_ops.hpp"
#include "kiln/passes/group_batch_fusion/pre_grad.hpp"
#include "kiln/pattern/python_equal.hpp"

namespace kiln::gbf {

namespace detail {

// unsqueeze(x, dim=0) for each, then cat(dim=0): a [N, ...] stack.
inline Node* decompose_stack(Graph& g, const std::vector<Node*>& inputs) {
  ArgList parts;
  std::vector<const TensorMeta*> metas_of_parts;
  for (Node* in : inputs) {
    Node* u = g.call_function(aten::packets::unsqueeze, {Arg(in)}, ArgDict{{"dim", Arg(0)}});
    if (const TensorMeta* t = tensor_of(in)) u->meta.val = unsqueezed(*t, 0);
    parts.push_back(Arg(u));
    metas_of_parts.push_back(tensor_of(in));
  }
  Node* cat = g.call_function(aten::packets::cat, {Arg(std::move(parts))}, ArgDict{{"dim", Arg(0)}});
  if (all_tensors(metas_of_parts)) cat->meta.val = stacked(metas_of_parts, 0);
  return cat;
}
inline std::vector<Node*> replace_by_selects(Graph& g, Node* batched, std::span<Node* const> subset) {
  return replace_by_items(g, batched, subset, [&](std::int64_t i) {
    Node* s = g.call_function(aten::packets::select, {Arg(batched), Arg(0), Arg(i)});
    if (const TensorMeta* t = tensor_of(batched)) s->meta.val = selected(*t, 0);
    return s;
  });
}
inline bool static_2d(const Node* n) {
  const TensorMeta* t = tensor_of(n);
  return t && t->rank() == 2 && is_static(t->shape[0]) && is_static(t->shape[1]);
}
inline std::int64_t dim_of(const Node* n, std::size_t i) { return std::get<std::int64_t>(tensor_of(n)->shape[i]); }
inline bool kwarg_is_default(const Node& n, std::string_view key, const Arg& default_value) {
  const Arg* a = n.kwargs().find(key);
  return !a || pattern::python_equal(*a, default_value);
}
// "aten.mm" and any of its overloads (Inductor's CallFunctionVarArgs(aten.mm)).
inline bool is_mm(const Node& n) {
  const std::string_view t = n.target_name();
  return n.op() == OpKind::call_function && (t == "aten.mm" || t.starts_with("aten.mm."));
}

}  // namespace detail

class BatchLinearPostGrad final : public Fusion {
 public:
  BatchLinearPostGrad() : Fusion("batch_linear_post_grad", false) {}
  // Each node's bias add stays a step of its own.
  std::int64_t extra_steps(std::span<Node* const> subset) const override {
    std::int64_t adds = 0;
    for (const Node* n : subset) adds += n->args().size() == 3;
    return adds;
  }
  std::optional<std::string> match(const Node& n) const override {
    Node *input, *weight;
    if (detail::is_mm(n) && n.args().size() == 2) {
      input = n.args()[0].node();
      weight = n.args()[1].node();
    } else if (n.is_call(aten::addmm) && n.args().size() == 3 && detail::kwarg_is_default(n, "beta", Arg(1)) &&
               detail::kwarg_is_default(n, "alpha", Arg(1))) {
      input = n.args()[1].node();
      weight = n.args()[2].node();
    } else {
      return std::nullopt;
    }
    if (!detail::static_2d(input) || !detail::static_2d(weight)) return std::nullopt;
    return Key(name())
        .add(std::to_string(detail::dim_of(input, 0)))
        .add(std::to_string(detail::dim_of(input, 1)))
        .add(std::to_string(detail::dim_of(weight, 1)))
        .add(n.args().size() == 3)
        .add(users_text(n, options.fuse_nodes_with_same_users))
        .str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    std::vector<Node*> inputs, weights;
    std::vector<Arg> biases;
    for (Node* n : subset) {
      const bool addmm = n->args().size() == 3;
      biases.push_back(addmm ? n->args()[0] : Arg());
      inputs.push_back(n->args()[addmm ? 1 : 0].node());
      weights.push_back(n->args()[addmm ? 2 : 1].node());
    }
    Node* bmm;
    {
      auto guard = g.inserting_before(subset.back());
      Node* fused_inputs = detail::decompose_stack(g, inputs);
      Node* fused_weights = detail::decompose_stack(g, weights);
      bmm = g.call_function(aten::packets::bmm, {Arg(fused_inputs), Arg(fused_weights)});
      const TensorMeta& x = *tensor_of(inputs[0]);
      bmm->meta.val = contiguous({static_cast<std::int64_t>(subset.size()), x.shape[0], tensor_of(weights[0])->shape[1]}, x.dtype);
    }
    std::vector<Node*> replacements;
    for (std::size_t i = 0; i < subset.size(); ++i) {
      Node* replacement;
      {
        // Both nodes go right after bmm, so the add lands before its select,
        // as Inductor leaves it; the search sorts the graph once it is done.
        auto guard = g.inserting_after(bmm);
        Node* select = g.call_function(aten::packets::select, {Arg(bmm), Arg(0), Arg(static_cast<std::int64_t>(i))});
        select->meta.val = selected(*tensor_of(bmm), 0);
        replacement = select;
        if (!biases[i].is_none()) {
          Node* bias = biases[i].node();
          const TensorMeta* tb = tensor_of(bias);
          const TensorMeta* ts = tensor_of(select);
          if (options.shape_broadcast_batch_linear && tb && ts) {
            const MetaVal shape = broadcast(*tb, *ts);
            ArgList size;
            for (const Dim& d : shape.tensor()->shape)
              size.push_back(is_static(d) ? Arg(std::get<std::int64_t>(d)) : Arg(std::get<SymInt>(d)));
            Node* b = g.call_function(aten::broadcast_to, {biases[i]}, ArgDict{{"size", Arg(std::move(size))}});
            b->meta.val = shape;
            replacement = g.call_function(aten::add_Tensor, {Arg(b), Arg(select)});
          } else {
            replacement = g.call_function(aten::packets::add, {biases[i], Arg(select)});
          }
          if (tb && ts) replacement->meta.val = broadcast(*tb, *ts);
        }
      }
      subset[i]->replace_all_uses_with(replacement);
      replacement->meta = subset[i]->meta;
      g.erase_node(subset[i]);
      replacements.push_back(replacement);
    }
    return replacements;
  }
};

class GroupLinear final : public Fusion {
 public:
  GroupLinear() : Fusion("group_linear", false) {}
  std::optional<std::string> match(const Node& n) const override {
    const bool mm = n.is_call(aten::mm) && n.args().size() == 2;
    const bool addmm = n.is_call(aten::addmm) && n.args().size() == 3 && detail::kwarg_is_default(n, "beta", Arg(1)) &&
                       detail::kwarg_is_default(n, "alpha", Arg(1));
    if (!mm && !addmm) return std::nullopt;
    const std::size_t first = addmm ? 1 : 0;
    for (std::size_t i = first; i < first + 2; ++i) {
      const TensorMeta* t = tensor_of(n.args()[i].node());
      if (!t || t->rank() != 2) return std::nullopt;
      for (const Dim& d : t->shape) {
        if (!is_static(d)) return std::nullopt;
        const std::int64_t v = std::get<std::int64_t>(d);
        if (v % 2 != 0 || v > options.max_fuse_tensor_size_group_linear) return std::nullopt;
      }
    }
    return Key(name()).add(mm).str();  // Inductor's (group_linear, bias is None)
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    ArgList inputs, weights, biases;
    MetaVal::List results;
    for (Node* n : subset) {
      const bool addmm = n->args().size() == 3;
      if (addmm) biases.push_back(n->args()[0]);
      inputs.push_back(n->args()[addmm ? 1 : 0]);
      weights.push_back(n->args()[addmm ? 2 : 1]);
      results.push_back(n->meta.val);
    }
    Node* fused;
    {
      auto guard = g.inserting_before(subset[0]);
      fused = g.call_function(kops::grouped_mm,
                              {Arg(std::move(inputs)), Arg(std::move(weights)), biases.empty() ? Arg() : Arg(std::move(biases))});
      fused->meta.val = MetaVal(std::move(results));
    }
    return detail::replace_by_getitems(g, fused, subset);
  }
};

// batch_aten_add, _sub, _mul, _div.
class BatchMathPostGrad final : public Fusion {
 public:
  BatchMathPostGrad(std::string name, OpRef op) : Fusion(std::move(name), false), op_(op) {}
  bool matches_calls_only() const override { return true; }
  bool may_match_target(OpRef t) const override { return t.hash == op_.hash; }
  std::optional<std::string> match(const Node& n) const override {
    if (!n.is_call(op_) || n.args().size() != 2) return std::nullopt;
    const Node* input = n.args()[0].node();
    const Node* other = n.args()[1].node();
    const TensorMeta* a = tensor_of(input);
    const TensorMeta* b = tensor_of(other);
    if (!a || !b || a->shape != b->shape) return std::nullopt;
    const Arg* alpha = n.kwargs().find("alpha");
    const Arg* rounding = n.kwargs().find("rounding_mode");
    std::string parent;
    if (options.fuse_nodes_with_same_parent) {
      if (input->is_call(aten::packets::select)) parent = "%" + input->args()[0].node()->name();
      else if (other->is_call(aten::packets::select)) parent = "%" + other->args()[0].node()->name();
    }
    return Key(name())
        .add_shape(*a)
        .add(dtype_name(a->dtype))
        .add(dtype_name(b->dtype))
        .add(alpha ? format_arg(*alpha) : "1")
        .add(rounding ? format_arg(*rounding) : "None")
        .add(parent)
        .str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    std::vector<Node*> inputs, others;
    for (Node* n : subset) {
      inputs.push_back(n->args()[0].node());
      others.push_back(n->args()[1].node());
    }
    const Node& first = *subset[0];
    ArgDict kwargs;
    if (op_ == aten::add_Tensor) {
      const Arg* alpha = first.kwargs().find("alpha");
      kwargs.set("alpha", alpha ? *alpha : Arg(1));
    } else if (const Arg* alpha = first.kwargs().find("alpha"); alpha && !pattern::python_equal(*alpha, Arg(1))) {
      kwargs.set("alpha", *alpha);  // sub's alpha (Inductor drops it)
    }
    Node* batched;
    {
      auto guard = g.inserting_before(subset[0]);
      Node* stack_inputs = detail::decompose_stack(g, inputs);
      Node* stack_others = detail::decompose_stack(g, others);
      batched = g.call_function(op_, {Arg(stack_inputs), Arg(stack_others)}, std::move(kwargs));
      batched->meta.val = stack_inputs->meta.val;
    }
    return detail::replace_by_selects(g, batched, subset);
  }

 private:
  OpRef op_;
};

// batch_aten_tanh, _sigmoid, _relu.
class BatchUnaryPostGrad final : public Fusion {
 public:
  BatchUnaryPostGrad(std::string name, OpRef op) : Fusion(std::move(name), false), op_(op) {}
  bool matches_calls_only() const override { return true; }
  bool may_match_target(OpRef t) const override { return t.hash == op_.hash; }
  std::optional<std::string> match(const Node& n) const override {
    if (!n.is_call(op_) || !meta_valid(&n)) return std::nullopt;
    const Node* input = node_arg(n, 0, "input");
    const TensorMeta* t = tensor_of(input);
    if (!t) return std::nullopt;
    const Arg* inplace = n.kwargs().find("inplace");
    return Key(name())
        .add_shape(*t)
        .add(inplace ? format_arg(*inplace) : "False")
        .add(options.fuse_nodes_with_same_parent ? std::string(input->target_name()) : std::string())
        .str();
  }
  std::vector<Node*> fuse(Graph& g, std::span<Node* const> subset) const override {
    std::vector<Node*> inputs;
    for (Node* n : subset) inputs.push_back(node_arg(*n, 0, "input"));
    Node* batched;
    {
      auto guard = g.inserting_before(subset[0]);
      Node* stack_inputs = detail::decompose_stack(g, inputs);
      batched = g.call_function(op_, {Arg(stack_inputs)});
      batched->meta.val = stack_inputs->meta.val;
    }
    return detail::replace_by_selects(g, batched, subset);
  }

 private:
  OpRef op_;
};

// Every post-grad fusion, in Inductor's registration order.
inline std::vector<std::unique_ptr<Fusion>> post_grad_fusions() {
  std::vector<std::unique_ptr<Fusion>> f;
  f.push_back(std::make_unique<BatchLinearPostGrad>());
  f.push_back(std::make_unique<GroupLinear>());
  f.push_back(std::make_unique<BatchUnaryPostGrad>("batch_aten_tanh", aten::tanh));
  f.push_back(std::make_unique<BatchUnaryPostGrad>("batch_aten_sigmoid", aten::sigmoid));
  f.push_back(std::make_unique<BatchUnaryPostGrad>("batch_aten_relu", aten::relu));
  f.push_back(std::make_unique<BatchMathPostGrad>("batch_aten_add", aten::add_Tensor));
  f.push_back(std::make_unique<BatchMathPostGrad>("batch_aten_sub", aten::sub_Tensor));
  f.push_back(std::make_unique<BatchMathPostGrad>("batch_aten_div", aten::div_Tensor));
  f.push_back(std::make_unique<BatchMathPostGrad>("batch_aten_mul", aten::mul_Tensor));
  return f;
}

}  // namespace kiln::gbf
