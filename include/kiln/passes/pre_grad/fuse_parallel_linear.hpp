#pragma once
// fuse_parallel_linear_pass (a pre-dispatch pass Inductor's pipeline names).
#include <algorithm>

#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

// Linears that read the same input x, linear(x, W_i, b_i) with W_i of shape
// [N_i, K], become one linear(x, cat([W_1..W_k], 0), cat([b_1..b_k], 0)) whose
// result is split along its last dim into [N_1..N_k]; piece i replaces linear
// i. Equal because output column j of a linear is x . W[j] + b[j], and
// stacking the weights' rows stacks the output columns in the same order.
// The weights (and biases) may be any nodes, placeholders or get_attr: the
// cats are built in the graph, before the first linear of the group, so
// only linears whose weights and biases are defined before that point, or
// are get_attr nodes (moved up to it), join it. A group needs 2-D weights of one K and dtype, and either a bias on
// every linear or on none (two groups otherwise). Counts
// `fuse_parallel_linear_pass` per group fused.
inline PatternMatcherPass make_fuse_parallel_linear_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("fuse_parallel_linear_pass");
  pass.register_pattern(
      pattern::CallFunctionVarArgs({aten::linear, F::linear}, pattern::MULTIPLE),
      [count = d::Count{counters}](auto& m, Graph& g, Node*) {
        Node* root = m.nodes()[0];
        struct Operands {
          Node* weight;
          Node* bias;
          std::int64_t n;
        };
        // The weight, bias and N of a linear of x, or nullopt when it cannot join.
        auto operands = [](const Node& lin, Node* x) -> std::optional<Operands> {
          if (lin.args().empty() || lin.args()[0].node() != x || lin.args().size() > 3) return std::nullopt;
          const Arg* w = d::arg_value(lin, 1, "weight");
          const Arg* b = d::arg_value(lin, 2, "bias");
          if (!w || !w->node() || (b && !b->is_none() && !b->node())) return std::nullopt;
          const auto ws = d::static_shape(w->node());
          if (!ws || ws->size() != 2) return std::nullopt;
          Node* bias = b && !b->is_none() ? b->node() : nullptr;
          if (bias) {
            const auto bs = d::static_shape(bias);
            if (!bs || *bs != d::Shape{(*ws)[0]}) return std::nullopt;
          }
          return Operands{w->node(), bias, (*ws)[0]};
        };
        Node* x = root->args().empty() ? nullptr : root->args()[0].node();
        const auto xs = d::static_shape(x);
        const auto root_ops = operands(*root, x);
        if (!x || !xs || xs->empty() || !root_ops) return;
        const auto k = d::static_shape(root_ops->weight)->at(1);
        const DType dtype = d::tensor_of(root_ops->weight)->dtype;
        const bool with_bias = root_ops->bias != nullptr;
        std::vector<Node*> group;
        for (Node* u : x->users()) {
          if (u->target_name() != root->target_name() || u->op() != OpKind::call_function || !d::static_shape(u)) continue;
          const auto ops = operands(*u, x);
          if (!ops || (ops->bias != nullptr) != with_bias || d::static_shape(ops->weight)->at(1) != k ||
              d::tensor_of(ops->weight)->dtype != dtype || (ops->bias && d::tensor_of(ops->bias)->dtype != dtype))
            continue;
          group.push_back(u);
        }
        std::sort(group.begin(), group.end(), [](const Node* a, const Node* b) { return a->is_before(*b); });
        // The group is decided once, at its last linear (the first one the reverse walk meets).
        if (group.empty() || group.back() != root) return;
        // Only linears whose operands exist before the first one can be computed
        // there; a get_attr reads no node, so one defined later moves up to it.
        auto available = [](Node* operand, Node* first) {
          return operand->op() == OpKind::get_attr || operand->is_before(*first);
        };
        while (group.size() >= 2) {
          Node* first = group.front();
          const auto late = std::find_if(group.begin(), group.end(), [&](Node* u) {
            const auto ops = operands(*u, x);
            return !available(ops->weight, first) || (ops->bias && !available(ops->bias, first));
          });
          if (late == group.end()) break;
          if (*late == first) group.erase(group.begin());
          else group.erase(late);
          count("fuse_parallel_linear_pass_skipped");
        }
        if (group.size() < 2) return;
        const bool aten_level = d::is_aten(*root);
        ArgList weights, biases, sizes;
        std::int64_t total = 0;
        for (Node* u : group) {
          const auto ops = operands(*u, x);
          weights.push_back(Arg(ops->weight));
          if (ops->bias) biases.push_back(Arg(ops->bias));
          sizes.push_back(Arg(ops->n));
          total += ops->n;
        }
        const TensorMeta& wmeta = *d::tensor_of(root_ops->weight);
        const OpRef cat = aten_level ? aten::cat : torch::cat;
        std::vector<Node*> replacements;
        for (Node* u : group) {
          const auto ops = operands(*u, x);
          for (Node* operand : {ops->weight, ops->bias})
            if (operand && !operand->is_before(*group.front())) g.move_before(group.front(), operand);
        }
        {
        auto guard = g.inserting_before(group.front());
        Node* w = d::call_with_meta(g, cat, {Arg(weights)}, d::meta_like(wmeta, {total, k}), {{"dim", Arg(0)}});
        Node* b = with_bias ? d::call_with_meta(g, cat, {Arg(biases)}, d::meta_like(wmeta, {total}), {{"dim", Arg(0)}})
                            : nullptr;
        d::Shape out_shape = *xs;
        out_shape.back() = total;
        const std::int64_t last = static_cast<std::int64_t>(out_shape.size()) - 1;
        Node* fused = d::call_with_meta(g, root->target(), {Arg(x), Arg(w), b ? Arg(b) : Arg()},
                                        d::meta_like(*d::tensor_of(root), out_shape));
        MetaVal::List parts;
        for (Node* u : group) parts.push_back(u->meta.val);
        Node* split = d::call_with_meta(g, aten_level ? aten::split_with_sizes : torch::split, {Arg(fused), Arg(sizes)},
                                        MetaVal(std::move(parts)), {{"dim", Arg(last)}});
        for (std::size_t i = 0; i < group.size(); ++i) {
          Node* piece =
              d::call_with_meta(g, pyop::getitem, {Arg(split), Arg(static_cast<std::int64_t>(i))}, group[i]->meta.val);
          replacements.push_back(piece);
        }
        }
        for (std::size_t i = 0; i < group.size(); ++i) {
          group[i]->replace_all_uses_with(replacements[i]);
          g.erase_node(group[i]);
        }
        count("fuse_parallel_linear_pass");
      });
  return pass;
}

}  // namespace kiln::predispatch
