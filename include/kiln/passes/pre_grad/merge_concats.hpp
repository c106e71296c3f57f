#pragma once
// merge_concats_pass (a pre-dispatch pass Inductor's pipeline names).
#include <functional>

#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

// cat([..., cat([a, b], d), ...], d) becomes cat([..., a, b, ...], d): along
// one dim, concatenation is associative, so splicing an inner cat's list into
// the outer list in its place lays out the same elements in the same order
// (an inner cat listed twice is spliced twice). Nested cats are flattened all
// the way down. An inner cat is spliced only where the outer cat is its only
// user (otherwise it would still be computed: counted
// `merge_concats_pass_skipped`), where its dim is the same after
// normalization, and where every tensor has the outer result's rank and dtype
// (cat promotes dtypes and accepts 1-D empty tensors of another rank).
// Counts `merge_concats_pass` per outer cat rewritten.
inline PatternMatcherPass make_merge_concats_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("merge_concats_pass");
  pass.register_pattern(
      pattern::CallFunctionVarArgs({aten::cat, torch::cat, ops::torch_concat}, pattern::MULTIPLE),
      [count = d::Count{counters}](auto& m, Graph& g, Node*) {
        Node* node = m.nodes()[0];
        const auto outer = d::cat_of(*node);
        const TensorMeta* out = d::tensor_of(node);
        if (!outer || !out) return;
        auto same_kind = [&](const Node* t) {
          const TensorMeta* tm = d::tensor_of(t);
          return tm && tm->rank() == out->rank() && tm->dtype == out->dtype;
        };
        bool skipped = false;
        std::vector<Node*> spliced;
        ArgList flat;
        std::function<void(const ArgList&)> flatten = [&](const ArgList& list) {
          for (const Arg& a : list) {
            Node* t = a.node();
            const auto inner = t && d::is_cat(*t) ? d::cat_of(*t) : std::nullopt;
            bool splice = inner && inner->dim == outer->dim && same_kind(t);
            if (splice)
              for (const Arg& x : inner->tensors) splice = splice && same_kind(x.node());
            if (splice && t->num_users() != 1) {
              skipped = true;
              splice = false;
            }
            if (!splice) {
              flat.push_back(a);
              continue;
            }
            spliced.push_back(t);
            flatten(inner->tensors);
          }
        };
        flatten(outer->tensors);
        if (skipped) count("merge_concats_pass_skipped");
        if (spliced.empty()) return;
        split_cat::detail::replace_by_call(g, node, node->target(), {Arg(flat)}, {{"dim", Arg(outer->dim)}});
        // Outer cats first: each inner cat is unused once the one holding it is gone.
        for (Node* t : spliced) d::erase_if_unused(g, {t});
        count("merge_concats_pass");
      });
  return pass;
}

}  // namespace kiln::predispatch
