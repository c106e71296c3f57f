#pragma once
// fuse_split_linear_add_pass (a pre-dispatch pass Inductor's pipeline names).
#include <algorithm>

#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

// x split along its last dim into pieces x_i of widths K_i, each piece through
// its own linear(x_i, W_i, b_i) with W_i of shape [N, K_i], and the results
// summed by a tree of adds, becomes linear(x, cat([W_0..W_{n-1}], 1),
// b_0 + ... + b_{n-1}). Equal because x . W^T splits over the columns of x:
// sum_i x_i . W_i^T = [x_0 .. x_{n-1}] . [W_0 .. W_{n-1}]^T (up to the order
// of float additions). Every piece must be used exactly once (the add tree may
// take them in any order: addition commutes), each getitem, linear and inner
// add only by the next step, and every term of the tree must have the sum's
// shape (no broadcasting); otherwise `fuse_split_linear_add_pass_skipped`.
// Counts `fuse_split_linear_add_pass`.
inline PatternMatcherPass make_fuse_split_linear_add_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("fuse_split_linear_add_pass");
  const auto is_add = [](const Node& n) {
    if (!d::is_any(n, {aten::add_Tensor, torch::add, pyop::add}) || n.args().size() != 2) return false;
    if (const Arg* alpha = n.kwargs().find("alpha"); alpha && d::int_of(alpha) != std::optional<std::int64_t>(1))
      return false;
    return n.kwargs().size() <= (n.kwargs().find("alpha") ? 1u : 0u) && n.args()[0].node() && n.args()[1].node();
  };
  pass.register_pattern(
      pattern::CallFunctionVarArgs({aten::add_Tensor, torch::add, pyop::add}, pattern::MULTIPLE),
      [count = d::Count{counters}, is_add](auto& m, Graph& g, Node*) {
        Node* root = m.nodes()[0];
        if (!is_add(*root)) return;
        // The add tree under `top`: its adds and its terms (whatever is not an
        // add of the same shape), and the split whose pieces the terms' linears
        // read when every term is such a linear of one split.
        struct Tree {
          std::vector<Node*> inner, terms;
          Node* source = nullptr;
        };
        auto tree_of = [&is_add](Node* top) -> std::optional<Tree> {
          Tree t{{top}, {}, nullptr};
          for (std::size_t i = 0; i < t.inner.size(); ++i)
            for (const Arg& a : t.inner[i]->args()) {
              Node* n = a.node();
              (is_add(*n) && d::static_shape(n) == d::static_shape(top) ? t.inner : t.terms).push_back(n);
            }
          if (t.terms.size() < 2) return std::nullopt;
          for (Node* n : t.terms) {
            if (!d::is_linear(*n) || n->args().empty()) return std::nullopt;
            Node* s = d::getitem_source(n->args()[0].node());
            if (!s || !d::is_split(*s) || (t.source && s != t.source)) return std::nullopt;
            t.source = s;
          }
          return t;
        };
        // An inner add of a larger tree of such terms is that tree's business.
        Node* top = root;
        while (top->num_users() == 1) {
          Node* user = *top->users().begin();
          if (!is_add(*user) || d::static_shape(user) != d::static_shape(root)) break;
          top = user;
        }
        if (top != root && tree_of(top)) return;
        const auto tree = tree_of(root);
        if (!tree) return;
        const std::vector<Node*>& inner = tree->inner;
        const std::vector<Node*>& terms = tree->terms;
        Node* source = tree->source;
        const auto pieces = d::pieces_of(*source);
        const auto out = d::static_shape(root);
        if (!pieces || !out) return;
        const std::size_t n = pieces->sizes.size();
        bool ok = terms.size() == n && pieces->dim + 1 == static_cast<std::int64_t>(pieces->input_shape.size());
        std::vector<Node*> by_piece(n, nullptr);  // the linear of piece i
        for (Node* t : terms) {
          const Node* item = t->args()[0].node();
          const auto i = d::piece_index(*item, source, n);
          ok = ok && i && !by_piece[*i] && item->num_users() == 1 && t->num_users() == 1 &&
               d::static_shape(t) == out && t->args().size() <= 3;
          if (ok) by_piece[*i] = t;
        }
        for (std::size_t i = 1; ok && i < inner.size(); ++i) ok = inner[i]->num_users() == 1;
        std::int64_t width = -1;
        const DType dtype = d::tensor_of(root)->dtype;
        ArgList weights, biases;
        for (std::size_t i = 0; ok && i < n; ++i) {
          const Arg* w = d::arg_value(*by_piece[i], 1, "weight");
          const Arg* b = d::arg_value(*by_piece[i], 2, "bias");
          const auto ws = w && w->node() ? d::static_shape(w->node()) : std::nullopt;
          ok = ws && ws->size() == 2 && (*ws)[1] == pieces->sizes[i] && (width < 0 || (*ws)[0] == width) &&
               d::tensor_of(w->node())->dtype == dtype && (!b || b->is_none() || b->node());
          if (!ok) break;
          width = (*ws)[0];
          weights.push_back(*w);
          if (b && b->node()) {
            ok = d::static_shape(b->node()) == std::optional<d::Shape>(d::Shape{width});
            biases.push_back(*b);
          }
        }
        if (!ok) {
          count("fuse_split_linear_add_pass_skipped");
          return;
        }
        const bool aten_level = d::is_aten(*by_piece[0]);
        const TensorMeta& wmeta = *d::tensor_of(weights[0].node());
        Node* fused;
        {
          auto guard = g.inserting_before(root);
          Node* w = d::call_with_meta(g, aten_level ? aten::cat : torch::cat, {Arg(weights)},
                                      d::meta_like(wmeta, {width, pieces->input_shape.back()}), {{"dim", Arg(1)}});
          Node* b = biases.empty() ? nullptr : biases[0].node();
          for (std::size_t i = 1; i < biases.size(); ++i)
            b = d::call_with_meta(g, aten_level ? aten::add_Tensor : torch::add, {Arg(b), biases[i]},
                                  d::meta_like(wmeta, {width}));
          fused = d::call_with_meta(g, by_piece[0]->target(), {Arg(pieces->input), Arg(w), b ? Arg(b) : Arg()},
                                    root->meta.val);
        }
        root->replace_all_uses_with(fused);
        g.erase_node(root);
        for (std::size_t i = 1; i < inner.size(); ++i) d::erase_if_unused(g, {inner[i]});
        for (Node* t : by_piece) {
          Node* item = t->args()[0].node();
          d::erase_if_unused(g, {t, item});
        }
        d::erase_if_unused(g, {source});
        count("fuse_split_linear_add_pass");
      });
  return pass;
}

}  // namespace kiln::predispatch
