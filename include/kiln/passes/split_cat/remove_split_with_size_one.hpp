#pragma once
// remove_split_with_size_one_pass (Inductor's split_cat.py).
#include <memory>
#include <vector>

#include "kiln/ops/torch.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::split_cat {

// remove_split_with_size_one_pass: a split into one piece is its input. As
// Inductor's, but where the piece is taken by several getitems (Inductor
// removes the first and then fails on the split) every one is replaced, and a
// split used other than through getitem(split, 0) is left.
inline PatternMatcherPass make_remove_split_with_size_one_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("remove_split_with_size_one_pass");
  auto handler = [counters](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    const std::optional<d::SplitArgs> split_args = d::split_args(*node);
    if (!split_args) return;
    const MetaVal::List* parts = node->meta.val.list();
    if (!parts || parts->size() != 1 || node->num_users() == 0) return;
    const std::vector<Node*> users = node->user_list();
    for (const Node* u : users) {
      if (!u->is_call(OpRef("operator.getitem")) || u->args().size() != 2) return;
      const auto i = d::int_of(&u->args()[1]);
      if (!i || (*i != 0 && *i != -1)) return;
    }
    for (Node* u : users) {
      u->replace_all_uses_with(split_args->input);
      g.erase_node(u);
    }
    g.erase_node(node);
    if (*counters) (*counters)->increment("remove_split_with_size_one_pass");
  };
  pass.register_pattern(pattern::CallFunctionVarArgs(torch::split, pattern::MULTIPLE), handler);
  pass.register_pattern(pattern::CallMethodVarArgs("split", pattern::MULTIPLE), handler);
  return pass;
}

}  // namespace kiln::split_cat
