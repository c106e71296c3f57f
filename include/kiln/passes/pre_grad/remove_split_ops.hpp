#pragma once
// remove_split_ops_pass (a pre-dispatch pass Inductor's pipeline names).
#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

// Two rewrites of a split or chunk of x (along d, into n pieces):
// - cat([getitem(s, 0), ..., getitem(s, n-1)], d) becomes x: the pieces
//   partition x along d in index order, so putting all of them back in that
//   order along the same dim rebuilds x exactly. Every piece must appear once
//   and in order (negative indices and dims are normalized first), the cat's
//   dim must be the split's, and each getitem must have the cat as its only
//   user; otherwise (reordered, repeated, partial, other dim, a piece used
//   elsewhere) the cat is left and `remove_split_ops_pass_skipped` counted.
// - a split into one piece: each getitem(s, 0) (or -1) is x itself. A split
//   whose list is used other than through such getitems is left (skipped).
// Counts `remove_split_ops_pass` per rewrite.
inline PatternMatcherPass make_remove_split_ops_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("remove_split_ops_pass");
  const d::Count count{counters};
  pass.register_pattern(
      pattern::CallFunctionVarArgs({aten::cat, torch::cat, ops::torch_concat}, pattern::MULTIPLE),
      [count](auto& m, Graph& g, Node*) {
        Node* cat = m.nodes()[0];
        const auto call = d::cat_of(*cat);
        if (!call || call->tensors.empty()) return;
        Node* source = d::getitem_source(call->tensors.front().node());
        if (!source) return;
        for (const Arg& t : call->tensors)
          if (d::getitem_source(t.node()) != source) return;  // not one split's pieces
        const auto pieces = d::pieces_of(*source);
        if (!pieces) return;
        bool whole = call->tensors.size() == pieces->sizes.size() && call->dim == pieces->dim &&
                     d::static_shape(cat) == std::optional<d::Shape>(pieces->input_shape) &&
                     d::tensor_of(cat)->dtype == d::tensor_of(pieces->input)->dtype;
        for (std::size_t i = 0; whole && i < call->tensors.size(); ++i) {
          const Node* item = call->tensors[i].node();
          whole = d::piece_index(*item, source, pieces->sizes.size()) == std::optional<std::size_t>(i) &&
                  item->num_users() == 1;
        }
        if (!whole) {
          count("remove_split_ops_pass_skipped");
          return;
        }
        cat->replace_all_uses_with(pieces->input);
        g.erase_node(cat);
        for (const Arg& t : call->tensors) d::erase_if_unused(g, {t.node()});
        d::erase_if_unused(g, {source});
        count("remove_split_ops_pass");
      });
  auto one_piece = [count](auto& m, Graph& g, Node*) {
    Node* source = m.nodes()[0];
    const auto pieces = d::pieces_of(*source);
    if (!pieces || pieces->sizes.size() != 1 || source->num_users() == 0) return;
    const std::vector<Node*> users = source->user_list();
    for (const Node* u : users)
      if (!d::piece_index(*u, source, 1)) {
        count("remove_split_ops_pass_skipped");
        return;
      }
    for (Node* u : users) {
      u->replace_all_uses_with(pieces->input);
      g.erase_node(u);
    }
    g.erase_node(source);
    count("remove_split_ops_pass");
  };
  pass.register_pattern(pattern::CallFunctionVarArgs({aten::split_Tensor, aten::split_with_sizes, torch::split,
                                                      ops::chunk, torch::chunk},
                                                     pattern::MULTIPLE),
                        one_piece);
  pass.register_pattern(pattern::CallMethodVarArgs("split", pattern::MULTIPLE), one_piece);  // x.split(...)
  pass.register_pattern(pattern::CallMethodVarArgs("chunk", pattern::MULTIPLE), one_piece);  // x.chunk(...)
  return pass;
}

}  // namespace kiln::predispatch
