#pragma once
// normalization_pass (Inductor's split_cat.py): split, unbind, cat and stack
// to one canonical call each (torch.split(x, [sizes], dim=d) with the sizes
// read from meta, torch.unbind(x, dim=d), torch.cat(tensors, dim=d),
// torch.stack(tensors, dim=d), every dim made non-negative), and the method
// forms of squeeze, reshape, clamp and detach to their torch functions, so
// that the split/cat passes after it meet one spelling. As in Inductor, each
// split, unbind, cat and stack rewritten counts `normalization_pass` (unbind
// and stack even when they were canonical already), and every match counts
// `pattern_matcher_count`; nodes without the meta a rewrite needs are left.
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/ops/torch.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::split_cat {



// The pattern pass; `counters` (when set) receives normalization_pass.
inline PatternMatcherPass make_normalization_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  using pattern::CallFunctionVarArgs, pattern::CallMethodVarArgs, pattern::MULTIPLE;
  auto count = [counters] {
    if (*counters) (*counters)->increment("normalization_pass");
  };
  PatternMatcherPass pass("normalization_pass");

  auto split = [count](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    const std::optional<d::SplitArgs> split_args = d::split_args(*node);
    if (!split_args) return;
    std::optional<std::int64_t> dim = split_args->dim;
    const MetaVal::List* parts = node->meta.val.list();
    const TensorMeta* in = d::tensor_of(split_args->input);
    if (!parts || !in) return;
    if (*dim < 0) *dim += static_cast<std::int64_t>(in->rank());
    ArgList sections;
    for (const MetaVal& p : *parts) {
      const TensorMeta* t = p.tensor();
      if (!t || static_cast<std::size_t>(*dim) >= t->rank() || !is_static(t->shape[static_cast<std::size_t>(*dim)])) return;
      sections.push_back(Arg(std::get<std::int64_t>(t->shape[static_cast<std::size_t>(*dim)])));
    }
    const ArgList args{Arg(split_args->input), Arg(sections)};
    const ArgDict kwargs{{"dim", Arg(*dim)}};
    if (d::is_call_as(*node, torch::split, args, kwargs)) return;
    d::replace_by_call(g, node, torch::split, args, kwargs);
    count();
  };
  pass.register_pattern(CallFunctionVarArgs(torch::split, MULTIPLE), split);
  pass.register_pattern(CallMethodVarArgs("split", MULTIPLE), split);

  auto unbind = [count](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    const Arg* input = d::arg_value(*node, 0, "input");
    const Arg* dim_arg = d::arg_value(*node, 1, "dim");
    if (!dim_arg || dim_arg->is_none()) dim_arg = node->kwargs().find("axis");
    std::optional<std::int64_t> dim = dim_arg && !dim_arg->is_none() ? d::int_of(dim_arg) : std::optional<std::int64_t>(0);
    const TensorMeta* in = input ? d::tensor_of(input->node()) : nullptr;
    if (!in || !dim) return;
    if (*dim < 0) *dim += static_cast<std::int64_t>(in->rank());
    d::replace_by_call(g, node, torch::unbind, {*input}, {{"dim", Arg(*dim)}});
    count();
  };
  pass.register_pattern(CallFunctionVarArgs(torch::unbind, MULTIPLE), unbind);
  pass.register_pattern(CallMethodVarArgs("unbind", MULTIPLE), unbind);

  // cat and stack: a list of tensors and a dim, from the result's rank.
  auto list_and_dim = [](const Node& node, bool axis) -> std::optional<std::pair<ArgList, std::int64_t>> {
    const Arg* tensors = d::arg_value(node, 0, "tensors");
    const Arg* dim_arg = d::arg_value(node, 1, "dim");
    if (axis && (!dim_arg || dim_arg->is_none())) dim_arg = node.kwargs().find("axis");
    std::optional<std::int64_t> dim = dim_arg && !dim_arg->is_none() ? d::int_of(dim_arg) : std::optional<std::int64_t>(0);
    if (!tensors || !tensors->list() || !dim) return std::nullopt;
    const TensorMeta* out = d::tensor_of(&node);
    if (!out) return std::nullopt;
    for (const Arg& t : *tensors->list())
      if (!t.node() || t.node()->meta.val.is_none()) return std::nullopt;
    if (*dim < 0) *dim += static_cast<std::int64_t>(out->rank());
    return std::pair{*tensors->list(), *dim};
  };
  pass.register_pattern(CallFunctionVarArgs({torch::cat, OpRef("torch.concat")}, MULTIPLE),
                        [count, list_and_dim](auto& m, Graph& g, Node*) {
                          Node* node = m.nodes()[0];
                          auto found = list_and_dim(*node, true);
                          if (!found) return;
                          ArgList args;  // (a braced list would copy the tensors once more)
                          args.emplace_back(std::move(found->first));
                          const ArgDict kwargs{{"dim", Arg(found->second)}};
                          if (d::is_call_as(*node, torch::cat, args, kwargs)) return;
                          d::replace_by_call(g, node, torch::cat, std::move(args), kwargs);
                          count();
                        });
  pass.register_pattern(CallFunctionVarArgs(torch::stack, MULTIPLE), [count, list_and_dim](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    auto found = list_and_dim(*node, false);
    if (!found) return;
    ArgList args;
    args.emplace_back(std::move(found->first));
    d::replace_by_call(g, node, torch::stack, std::move(args), {{"dim", Arg(found->second)}});
    count();
  });

  // Method forms to torch functions (no counter of their own, as in Inductor).
  pass.register_pattern(CallMethodVarArgs("squeeze", MULTIPLE), [](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    if (node->args().size() == 0) return;
    std::optional<Arg> dim;
    if (const Arg* k = node->kwargs().find("dim")) dim = *k;
    else if (node->args().size() == 2) dim = node->args()[1];
    else if (node->args().size() > 2) dim = Arg(ArgList(node->args().begin() + 1, node->args().end()));
    if (dim && dim->list() && dim->list()->size() == 1) dim = dim->list()->front();
    ArgDict kwargs;
    if (dim) kwargs.set("dim", *dim);
    d::replace_by_call(g, node, torch::squeeze, {node->args()[0]}, std::move(kwargs));
  });
  pass.register_pattern(CallMethodVarArgs("reshape", MULTIPLE), [](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    const TensorMeta* t = d::tensor_of(node);
    if (!t || !d::all_static(*t) || node->args().size() == 0) return;
    ArgList shape;
    for (const Dim& x : t->shape) shape.push_back(Arg(std::get<std::int64_t>(x)));
    d::replace_by_call(g, node, torch::reshape, {node->args()[0], Arg(shape)}, {});
  });
  auto clamp = [](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    const TensorMeta* t = d::tensor_of(node);
    if (!t || !d::all_static(*t)) return;
    if (node->args().size() > 1) {
      const Arg* lo = d::arg_value(*node, 1, "min");
      const Arg* hi = d::arg_value(*node, 2, "max");
      d::replace_by_call(g, node, torch::clamp, {node->args()[0]},
                         {{"min", lo ? *lo : Arg()}, {"max", hi ? *hi : Arg()}});
    } else {
      d::replace_by_call(g, node, torch::clamp, node->args().to_list(), node->kwargs());
    }
  };
  pass.register_pattern(CallMethodVarArgs("clamp", MULTIPLE), clamp);
  pass.register_pattern(CallFunctionVarArgs(torch::clamp, MULTIPLE), clamp);
  pass.register_pattern(CallMethodVarArgs("detach", MULTIPLE), [](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    const TensorMeta* t = d::tensor_of(node);
    if (!t || !d::all_static(*t)) return;
    d::replace_by_call(g, node, torch::detach, node->args().to_list(), {});
  });
  return pass;
}

}  // namespace kiln::split_cat
