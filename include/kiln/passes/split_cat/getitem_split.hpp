#pragma once
// The sub-patterns the merging split/cat passes start from (Inductor's
// getitem_split and reshape_getitem_split): a list some of whose elements are
// getitems of a torch.split with a list of sections and a `dim` keyword, the
// form normalization_pass leaves. As in Inductor, the getitem may have any
// number of users; the handlers decide what may be rewritten.
#include <algorithm>
#include <vector>

#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/pattern.hpp"

namespace kiln::split_cat::detail {

inline auto torch_split_with_sections() {
  using namespace pattern;
  return CallFunction(torch::split, Ignored(), kw<"split_sections">, kwarg<"dim">(kw<"dim">), MULTIPLE);
}
inline auto getitem_of_split() {
  using namespace pattern;
  return CallFunction(pyop::getitem, torch_split_with_sections(), Ignored(), MULTIPLE);
}
// ListOf(getitem(split(...), _), partial=True)
inline auto getitem_split() { return pattern::ListOf(getitem_of_split(), true); }
// ListOf(reshape(getitem(split(...), _), shape), partial=True)
inline auto reshape_getitem_split() {
  using namespace pattern;
  return ListOf(CallFunction(torch::reshape, getitem_of_split(), pattern::Arg(), MULTIPLE), true);
}

// The nodes a cat/stack of split pieces reaches through them: the users of
// the split's getitems, each once, in the order met.
inline std::vector<Node*> next_users(const Node* split) {
  std::vector<Node*> out;
  for (const Node* getitem : split->users())
    for (Node* u : getitem->users())
      if (std::find(out.begin(), out.end(), u) == out.end()) out.push_back(u);
  return out;
}
inline Node* split_in(const std::vector<Node*>& matched) {
  for (Node* n : matched)
    if (n->is_call(torch::split)) return n;
  return nullptr;
}

}  // namespace kiln::split_cat::detail
