#pragma once
// What the split/cat passes share: argument lookups as Inductor's
// get_arg_value, replacing a node by a canonical call, and registering a
// pattern pass whose handlers count under the family's own counter names.
#include <memory>
#include <optional>
#include <string>

#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern/python_equal.hpp"

namespace kiln::split_cat {

namespace detail {

inline const Arg* arg_value(const Node& n, std::size_t i, std::string_view name = {}) {
  if (n.args().size() > i) return &n.args()[i];
  return name.empty() ? nullptr : n.kwargs().find(name);
}
inline const TensorMeta* tensor_of(const Node* n) { return n ? n->meta.val.tensor() : nullptr; }
inline std::optional<std::int64_t> int_of(const Arg* a) {
  if (!a) return std::nullopt;
  if (const auto* i = a->get_if<std::int64_t>()) return *i;
  return std::nullopt;
}
// Replaces `old` by a call of `op` made right after it, which takes its users and meta.
inline Node* replace_by_call(Graph& g, Node* old, OpRef op, ArgList args, ArgDict kwargs) {
  Node* fresh;
  {
    auto guard = g.inserting_after(old);
    fresh = g.call_function(op, std::move(args), std::move(kwargs));
  }
  old->replace_all_uses_with(fresh);
  fresh->meta = old->meta;
  g.erase_node(old);
  return fresh;
}
// Whether `n` is already call_function `op` with exactly these arguments.
inline bool is_call_as(const Node& n, OpRef op, const ArgList& args, const ArgDict& kwargs) {
  return n.is_call(op) && pattern::python_equal(Arg(n.args().to_list()), Arg(args)) &&
         pattern::python_equal(Arg(n.kwargs()), Arg(kwargs));
}
// A split's input node, its size argument and its dim (Inductor's
// _get_split_args_default: dim 0 when absent); nullopt when one is missing.
struct SplitArgs {
  Node* input;
  const Arg* size;
  std::int64_t dim;
};
inline std::optional<SplitArgs> split_args(const Node& split) {
  const char* size_key = split.op() == OpKind::call_method ? "split_size" : "split_size_or_sections";
  const Arg* input = arg_value(split, 0, "tensor");
  const Arg* size = arg_value(split, 1, size_key);
  std::optional<std::int64_t> dim = 0;
  if (const Arg* a = arg_value(split, 2, "dim"); a && !a->is_none()) dim = int_of(a);
  if (!input || !input->node() || !size || !dim) return std::nullopt;
  return SplitArgs{input->node(), size, *dim};
}
inline bool all_static(const TensorMeta& t) {
  for (const Dim& d : t.shape)
    if (!is_static(d)) return false;
  return true;
}

}  // namespace detail

// A pattern pass whose handlers count through `slot`, registered by name.
inline void register_counting_pass(PassRegistry& registry, std::string name, std::string description,
                                   PatternMatcherPass (*make)(std::shared_ptr<Counters*>)) {
  auto slot = std::make_shared<Counters*>(nullptr);
  auto pass = std::make_shared<PatternMatcherPass>(make(slot));
  registry.add({std::move(name), std::move(description), [slot, pass](Graph& g, PassContext& ctx) {
                  *slot = &ctx.counters;
                  const std::size_t n = pass->apply(g, &ctx.counters);
                  *slot = nullptr;
                  return n > 0;
                }});
}

}  // namespace kiln::split_cat
