#pragma once
// split_cat_pass (Inductor's split_cat.py): the getitems of a split feeding
// cat/stack nodes are merged by SplitCatSimplifier (counting
// scmerge_split_sections_removed, scmerge_split_added, scmerge_cat_added,
// scmerge_split_removed, scmerge_cat_removed and, as Inductor 2.11 does,
// unbind_stack_pass), and a split into size-1 pieces each squeezed along the
// split dim becomes an unbind (counting split_cat_pass).
//
// The squeeze case is anchored at the split (Inductor anchors a RepeatedExpr
// at each squeeze), so such a match counts one pattern_matcher_node, not
// three per piece. Where Inductor's squeeze rewrite would unbind along a
// squeeze dim other than the split dim (a different tensor), kiln leaves it
// and counts split_cat_pass_skipped, as it does for every simplification
// SplitCatSimplifier declines as unsafe.
#include <map>
#include <memory>
#include <optional>

#include "kiln/passes/split_cat/split_cat_simplifier.hpp"

namespace kiln::split_cat {

namespace squeeze_detail {

// torch.squeeze(x, dim) or torch.squeeze(x, dim=dim): its dim argument.
inline const Arg* squeeze_dim(const Node& sq) {
  if (!sq.is_call(torch::squeeze)) return nullptr;
  if (sq.args().size() == 2 && sq.kwargs().size() == 0) return &sq.args()[1];
  if (sq.args().size() == 1 && sq.kwargs().size() == 1) return sq.kwargs().find("dim");
  return nullptr;
}

// The shape Inductor's squeeze pattern matches: a normalized split(x, sizes,
// dim=d) whose getitems each have one user, a squeeze with one shared dim.
inline bool matches_split_squeeze(const Node& split) {
  namespace sd = simplify_detail;
  if (!sd::is_normalized_split(split) || split.args().size() != 2 || split.kwargs().size() != 1 ||
      !split.kwargs().find("dim"))
    return false;
  const Arg* dim = nullptr;
  bool any = false;
  for (const Node* gi : split.users()) {
    bool squeezed = false;
    for (const Node* u : gi->users()) squeezed |= squeeze_dim(*u) != nullptr;
    if (!squeezed) continue;
    if (gi->num_users() != 1) return false;
    const Arg* d = squeeze_dim(**gi->users().begin());
    if (dim && !pattern::python_equal(*dim, *d)) return false;
    dim = d;
    any = true;
  }
  return any;
}

// split -> getitem -> squeeze(dim = split dim) for every piece of size 1: one unbind.
inline SimplifyOutcome merge_split_squeeze(Graph& g, Node* split, Counters* counters) {
  namespace sd = simplify_detail;
  const auto sections = sd::int_list(&split->args()[1]);
  if (!sections) return SimplifyOutcome::declined;
  for (std::int64_t s : *sections)
    if (s != 1) return SimplifyOutcome::declined;
  const Arg* squeeze_dim_arg = nullptr;
  for (const Node* gi : split->users())
    for (const Node* u : gi->users()) {
      if (!u->is_call(torch::squeeze)) return SimplifyOutcome::declined;
      const Arg* d = squeeze_dim(*u);  // every squeeze names the one dim
      if (!d || (squeeze_dim_arg && !pattern::python_equal(*d, *squeeze_dim_arg))) return SimplifyOutcome::declined;
      squeeze_dim_arg = d;
    }
  if (!squeeze_dim_arg || !squeeze_dim_arg->get_if<std::int64_t>()) return SimplifyOutcome::declined;  // a list of dims
  // kiln's checks: the squeeze removes the split dim, so piece i is unbind(x, d)[i].
  Node* input = split->args()[0].node();
  const auto in_shape = sd::static_shape(input);
  const auto split_dim = detail::int_of(split->kwargs().find("dim"));
  if (!in_shape || !split_dim) return SimplifyOutcome::unsafe;
  const auto d = sd::normalized_dim(*split_dim, in_shape->size());
  const auto e = sd::normalized_dim(*squeeze_dim_arg->get_if<std::int64_t>(), in_shape->size());
  if (!d || !e || *d != *e || static_cast<std::int64_t>(sections->size()) != (*in_shape)[static_cast<std::size_t>(*d)])
    return SimplifyOutcome::unsafe;

  const DType dtype = detail::tensor_of(input)->dtype;
  sd::Shape piece = *in_shape;
  piece.erase(piece.begin() + *d);
  MetaVal::List metas(sections->size(), MetaVal(sd::tensor_meta(piece, dtype)));
  Node* unbind;
  {
    auto guard = g.inserting_after(split);
    unbind = g.call_function(torch::unbind, {Arg(input)}, {{"dim", Arg(*d)}});
    unbind->meta.val = MetaVal(std::move(metas));
  }
  std::map<std::int64_t, Node*> by_index;
  for (Node* gi : split->users()) by_index[*detail::int_of(&gi->args()[1])] = gi;
  for (auto it = by_index.rbegin(); it != by_index.rend(); ++it) {
    Node* gi = it->second;
    if (gi->num_users() == 0) {  // an unread piece (Inductor stops on it)
      g.erase_node(gi);
      continue;
    }
    Node* squeeze = *gi->users().begin();
    detail::replace_by_getitem(g, squeeze, unbind, it->first, MetaVal(sd::tensor_meta(piece, dtype)));
    g.erase_node(gi);
  }
  g.erase_node(split);
  if (counters) counters->increment("split_cat_pass");
  return SimplifyOutcome::rewritten;
}

}  // namespace squeeze_detail

inline PatternMatcherPass make_split_cat_pass(std::shared_ptr<Counters*> counters) {
  namespace sd = simplify_detail;
  using namespace pattern;
  PatternMatcherPass pass("split_cat_pass");
  auto skipped = [counters](SimplifyOutcome o) {
    if (o == SimplifyOutcome::unsafe && *counters) (*counters)->increment("split_cat_pass_skipped");
  };

  // cat/stack of getitems of one normalized split (Inductor's three spellings).
  auto split = CallFunction(torch::split, Ignored(), kw<"split_sections">, kwarg<"dim">(kw<"dim">), MULTIPLE);
  auto getitems = ListOf(CallFunction(pyop::getitem, split, Ignored(), MULTIPLE), true);
  auto simplify = [counters, skipped](auto& m, Graph& g, Node*) {
    Node* split_node = sd::matched(m, torch::split);
    skipped(SplitCatSimplifier(split_node, false, *counters).run(g));
  };
  auto normalized = [](const auto& m) {
    const Node* split_node = sd::matched(m, torch::split);
    return split_node && sd::is_normalized_split(*split_node);
  };
  const OpSet joins{torch::cat, torch::stack};
  pass.register_pattern(CallFunction(joins, getitems, Ignored(), MULTIPLE), simplify, normalized);
  pass.register_pattern(CallFunction(joins, getitems, kwarg<"dim">(Ignored()), MULTIPLE), simplify, normalized);
  pass.register_pattern(CallFunction(joins, kwarg<"tensors">(getitems), kwarg<"dim">(Ignored()), MULTIPLE), simplify,
                        normalized);

  // split -> getitem -> squeeze: an unbind.
  pass.register_pattern(
      CallFunctionVarArgs(torch::split, MULTIPLE),
      [counters, skipped](auto& m, Graph& g, Node*) {
        skipped(squeeze_detail::merge_split_squeeze(g, m.nodes()[0], *counters));
      },
      [](const auto& m) { return squeeze_detail::matches_split_squeeze(*m.nodes()[0]); });
  return pass;
}

}  // namespace kiln::split_cat
