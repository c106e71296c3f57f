#pragma once
// split_cat_pass (Inductor's split_cat.py): the getitems of a split feeding
// cat/stack nodes are merged by SplitCatSimplifier (counting
// scmerge_split_sections_removed, scmerge_split_added, scmerge_cat_added,
// scmerge_split_removed, scmerge_cat_removed and, as Inductor 2.11 does,
// unbind_stack_pass), and a split into size-1 pieces each squeezed along the
// split dim becomes an unbind (counting split_cat_pass).
//
// The squeeze case is anchored at the split, where Inductor anchors a
// RepeatedExpr at each squeeze; kiln's counters are still Inductor's (see
// inductor_squeeze_count) wherever Inductor's pattern matches. Where the
// squeeze dim is another dim than the split's, kiln leaves the split and counts
// split_cat_pass_skipped, as it does for every simplification
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

// What Inductor 2.11 counts for `split` in this case, when its pattern
// matches. The pattern is RepeatedExpr(squeeze(getitem(split, _), dim)), tried
// at each squeeze: one match lists the root's split, getitem and squeeze, then
// the same three for every other squeeze (anchors: the squeezes reading the
// split's getitems), 3 * N nodes for N squeezes. Each anchor's getitem must
// have one user and its squeeze must give dim, by position or keyword, equal
// to the split's dim keyword (one KeywordArg "dim" for both). Its handler
// rewrites when every piece has size 1, dim is one int and every getitem user
// is a squeeze, erasing the other squeezes: one match. Otherwise it declines
// and each squeeze is tried again as a root: N matches of 3 * N nodes.
struct InductorSqueezeCount {
  std::int64_t matches = 0, nodes = 0;
};
inline std::optional<InductorSqueezeCount> inductor_squeeze_count(const Node& split) {
  namespace sd = simplify_detail;
  const Arg* split_dim = split.kwargs().find("dim");
  if (!sd::is_normalized_split(split) || split.args().size() != 2 || split.kwargs().size() != 1 || !split_dim)
    return std::nullopt;
  std::int64_t anchors = 0;
  bool all_squeezes = true;
  for (const Node* gi : split.users())
    for (const Node* u : gi->users()) {
      if (!u->is_call(torch::squeeze)) {
        all_squeezes = false;
        continue;
      }
      const Arg* d = squeeze_dim(*u);
      if (!d || gi->num_users() != 1 || !pattern::python_equal(*d, *split_dim)) return std::nullopt;
      ++anchors;
    }
  if (anchors == 0) return std::nullopt;
  const auto sections = sd::int_list(&split.args()[1]);
  bool rewrites = all_squeezes && sections && split_dim->get_if<std::int64_t>();
  if (rewrites)
    for (std::int64_t s : *sections) rewrites = rewrites && s == 1;
  const std::int64_t matches = rewrites ? 1 : anchors;
  return InductorSqueezeCount{matches, matches * 3 * anchors};
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
        Node* split_node = m.nodes()[0];
        // Read before the rewrite; the driver counts this match's own one match and node.
        const auto inductor = squeeze_detail::inductor_squeeze_count(*split_node);
        skipped(squeeze_detail::merge_split_squeeze(g, split_node, *counters));
        if (inductor && *counters) {
          (*counters)->increment("pattern_matcher_count", inductor->matches - 1);
          (*counters)->increment("pattern_matcher_nodes", inductor->nodes - static_cast<std::int64_t>(m.nodes().size()));
        }
      },
      [](const auto& m) { return squeeze_detail::matches_split_squeeze(*m.nodes()[0]); });
  return pass;
}

}  // namespace kiln::split_cat
