#pragma once
// The aten-level split/cat passes of Inductor's post-grad list (split_cat.py):
// normalization_aten_pass and unbind_stack_aten_pass.
#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::split_cat {

// normalization_aten_pass: aten.split.Tensor and aten.split_with_sizes to
// aten.split_with_sizes(x, [sizes], dim=d) with the sizes read from meta and
// d non-negative, and aten.cat.default to aten.cat.default(tensors, dim=d),
// d non-negative. Counts `normalization_aten_pass` per split rewritten (one
// already canonical is left) and, as Inductor does, per cat every time.
// Inductor makes a split by size into [size] * pieces, which is wrong where
// the last piece is shorter (10 by 4 is [4, 4, 2]); kiln reads every piece.
inline PatternMatcherPass make_normalization_aten_pass(std::shared_ptr<Counters*> counters) {
  namespace d = predispatch::detail;
  PatternMatcherPass pass("normalization_aten_pass");
  const d::Count count{counters};
  pass.register_pattern(
      pattern::CallFunctionVarArgs({aten::split_Tensor, aten::split_with_sizes}, pattern::MULTIPLE),
      [count](auto& m, Graph& g, Node*) {
        Node* node = m.nodes()[0];
        const auto pieces = d::pieces_of(*node);
        if (!pieces) return;
        ArgList sizes;
        for (std::int64_t s : pieces->sizes) sizes.push_back(Arg(s));
        const ArgList args{Arg(pieces->input), Arg(sizes)};
        const ArgDict kwargs{{"dim", Arg(pieces->dim)}};
        if (detail::is_call_as(*node, aten::split_with_sizes, args, kwargs)) return;
        detail::replace_by_call(g, node, aten::split_with_sizes, args, kwargs);
        count("normalization_aten_pass");
      });
  pass.register_pattern(pattern::CallFunctionVarArgs(aten::cat, pattern::MULTIPLE), [count](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    const auto call = d::cat_of(*node);
    if (!call) return;
    for (const Arg& t : call->tensors)
      if (t.node()->meta.val.is_none()) return;
    detail::replace_by_call(g, node, aten::cat, {Arg(call->tensors)}, {{"dim", Arg(call->dim)}});
    count("normalization_aten_pass");
  });
  return pass;
}

// unbind_stack_aten_pass: cat([unsqueeze(select(x, d, 0), d), ...,
// unsqueeze(select(x, d, n-1), d)], d) with n = x.shape[d] becomes x: each
// select takes slice i of x along d, unsqueeze puts it back as a size-1 dim
// at d, and the cat along d lays slices 0..n-1 out in order, which is x.
// Inductor checks the selects' dim against the cat's (as written, not
// normalized) and that their indices run from 0, but not the unsqueeze's dim
// nor that every slice of x is taken (cat of slices 0..2 of a size-5 dim is
// not x), and compares targets with the aten.select packet, so on a graph of
// aten.select.int it never fires; kiln checks all of it, normalized, for
// either spelling. A select or unsqueeze with another user, or a selection
// reordered, repeated or partial is declined: `unbind_stack_aten_pass_skipped`.
// Counts `unbind_stack_aten_pass`.
inline PatternMatcherPass make_unbind_stack_aten_pass(std::shared_ptr<Counters*> counters) {
  namespace d = predispatch::detail;
  PatternMatcherPass pass("unbind_stack_aten_pass");
  pass.register_pattern(
      pattern::CallFunctionVarArgs({aten::cat, aten::packets::cat}, pattern::MULTIPLE),
      [count = d::Count{counters}](auto& m, Graph& g, Node*) {
        Node* cat = m.nodes()[0];
        const Arg* tensors = d::arg_value(*cat, 0, "tensors");
        if (!tensors || !tensors->list() || tensors->list()->empty()) return;
        std::vector<Node*> unsqueezes, selects;
        for (const Arg& a : *tensors->list()) {
          Node* u = a.node();
          if (!u || !d::is_any(*u, {aten::unsqueeze, aten::packets::unsqueeze}) || u->args().empty()) return;
          Node* s = u->args()[0].node();
          if (!s || !d::is_any(*s, {aten::select_int, aten::packets::select}) || s->args().size() < 3) return;
          unsqueezes.push_back(u);
          selects.push_back(s);
        }
        Node* x = selects[0]->args()[0].node();
        const auto xs = d::static_shape(x);
        const auto out = d::static_shape(cat);
        const auto cat_dim = d::int_arg(*cat, 1, "dim", 0);
        if (!xs || !out || !cat_dim) return;
        const auto dim = d::normalized_dim(*cat_dim, xs->size());
        bool ok = dim && out == xs && static_cast<std::int64_t>(selects.size()) == (*xs)[*dim];
        for (std::size_t i = 0; ok && i < selects.size(); ++i) {
          const auto sd = d::int_arg(*selects[i], 1, "dim", -1);
          const auto si = d::int_arg(*selects[i], 2, "index", -1);
          const auto ud = d::int_arg(*unsqueezes[i], 1, "dim", -1);
          ok = selects[i]->args()[0].node() == x && sd && si && ud && d::normalized_dim(*sd, xs->size()) == dim &&
               d::normalized_dim(*ud, xs->size()) == dim &&
               d::normalized_dim(*si, static_cast<std::size_t>((*xs)[*dim])) == static_cast<std::int64_t>(i) &&
               unsqueezes[i]->num_users() == 1 && selects[i]->num_users() == 1;
        }
        if (!ok) {
          count("unbind_stack_aten_pass_skipped");
          return;
        }
        cat->replace_all_uses_with(x);
        g.erase_node(cat);
        for (std::size_t i = 0; i < selects.size(); ++i) d::erase_if_unused(g, {unsqueezes[i], selects[i]});
        count("unbind_stack_aten_pass");
      });
  return pass;
}

}  // namespace kiln::split_cat
