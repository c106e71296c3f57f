#pragma once
// merge_splits_pass (Inductor's split_cat.py): a split of one piece of a
// split along the same dim becomes one split whose sections hold the inner
// split's in place of that piece; the outer getitems are renumbered and the
// inner ones read the new split. Counts merge_splits_pass. Unlike Inductor it
// makes getitems only for the pieces that are read, and where the sections do
// not add up or the meta it needs is missing it leaves the graph and counts
// merge_splits_pass_skipped.
#include <memory>
#include <vector>

#include "kiln/passes/split_cat/split_cat_simplifier.hpp"

namespace kiln::split_cat {

namespace merge_splits_detail {

inline SimplifyOutcome merge(Graph& g, Node* next, Counters* counters) {
  namespace sd = simplify_detail;
  if (next->num_users() == 0) return SimplifyOutcome::declined;
  Node* piece = next->args()[0].node();
  Node* first = piece->args()[0].node();
  Node* input = first->args()[0].node();
  const auto first_sections = sd::int_list(&first->args()[1]);
  const auto next_sections = sd::int_list(&next->args()[1]);
  const auto index = detail::int_of(&piece->args()[1]);
  const auto dim = detail::int_of(first->kwargs().find("dim"));
  const auto in_shape = sd::static_shape(input);
  if (!first_sections || !next_sections || !index || !dim || !in_shape) return SimplifyOutcome::unsafe;
  const auto d = sd::normalized_dim(*dim, in_shape->size());
  if (!d || *index >= static_cast<std::int64_t>(first_sections->size())) return SimplifyOutcome::unsafe;
  std::int64_t inner = 0;
  for (std::int64_t s : *next_sections) inner += s;
  if (inner != (*first_sections)[static_cast<std::size_t>(*index)]) return SimplifyOutcome::unsafe;

  std::vector<std::int64_t> sections(first_sections->begin(), first_sections->begin() + *index);
  sections.insert(sections.end(), next_sections->begin(), next_sections->end());
  sections.insert(sections.end(), first_sections->begin() + *index + 1, first_sections->end());
  const DType dtype = detail::tensor_of(input)->dtype;
  MetaVal::List metas;
  for (std::int64_t s : sections) {
    sd::Shape shape = *in_shape;
    shape[static_cast<std::size_t>(*d)] = s;
    metas.emplace_back(sd::tensor_meta(shape, dtype));
  }
  Node* split;
  {
    auto guard = g.inserting_before(first);
    split = g.call_function(torch::split, {Arg(input), sd::ints(sections)}, {{"dim", Arg(*d)}});
  }
  split->meta.val = MetaVal(metas);
  const auto grown = static_cast<std::int64_t>(next_sections->size()) - 1;
  for (Node* gi : first->user_list()) {
    if (gi == piece) continue;
    const std::int64_t j = *detail::int_of(&gi->args()[1]);
    gi->set_args({Arg(split), Arg(j < *index ? j : j + grown)});
  }
  for (Node* gi : next->user_list()) {
    const std::int64_t j = *index + *detail::int_of(&gi->args()[1]);
    detail::replace_by_getitem(g, gi, split, j, metas[static_cast<std::size_t>(j)]);
  }
  g.erase_node(next);
  g.erase_node(piece);
  g.erase_node(first);
  if (counters) counters->increment("merge_splits_pass");
  return SimplifyOutcome::rewritten;
}

}  // namespace merge_splits_detail

inline PatternMatcherPass make_merge_splits_pass(std::shared_ptr<Counters*> counters) {
  namespace sd = simplify_detail;
  using namespace pattern;
  PatternMatcherPass pass("merge_splits_pass");
  auto first = CallFunction(torch::split, kw<"first_split_input">, kw<"first_split_sections">,
                            kwarg<"dim">(kw<"dim">), MULTIPLE);
  auto next = CallFunction(torch::split, CallFunction(pyop::getitem, first, Ignored()), kw<"next_split_sections">,
                           kwarg<"dim">(kw<"dim">), MULTIPLE);
  pass.register_pattern(
      next,
      [counters](auto&, Graph& g, Node* root) {
        if (merge_splits_detail::merge(g, root, *counters) == SimplifyOutcome::unsafe && *counters)
          (*counters)->increment("merge_splits_pass_skipped");
      },
      [](const auto& m) {
        for (const Node* n : m.nodes())
          if (n->is_call(torch::split) && !sd::is_normalized_split(*n)) return false;
        return true;
      });
  return pass;
}

}  // namespace kiln::split_cat
