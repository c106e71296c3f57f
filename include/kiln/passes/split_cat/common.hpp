#pragma once
// What the split/cat and pre-grad passes share: argument lookups as
// Inductor's get_arg_value, making a call with its meta or in place of a node,
// and registering pattern passes whose handlers count under the family's own
// counter names.
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops/operator.hpp"
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
// `dim` in [-rank, rank) made non-negative; nullopt when out of range.
inline std::optional<std::int64_t> normalized_dim(std::int64_t dim, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (dim < -r || dim >= r) return std::nullopt;
  return dim < 0 ? dim + r : dim;
}
// A call of `op` at the graph's insertion point, with `meta` as its meta.val.
inline Node* call_with_meta(Graph& g, OpRef op, ArgList args, MetaVal meta, ArgDict kwargs = {}) {
  Node* n = g.call_function(op, std::move(args), std::move(kwargs));
  n->meta.val = std::move(meta);
  return n;
}
// getitem(source, index) made right after `source`, with `meta`, taking the
// users of `old` (which is erased).
inline Node* replace_by_getitem(Graph& g, Node* old, Node* source, std::int64_t index, MetaVal meta) {
  Node* item;
  {
    auto guard = g.inserting_after(source);
    item = g.call_function(pyop::getitem, {Arg(source), Arg(index)});
  }
  item->meta.val = std::move(meta);
  old->replace_all_uses_with(item);
  g.erase_node(old);
  return item;
}
// Erases `nodes` (in the order given) where nothing uses them any more;
// null and already erased ones are skipped.
inline void erase_if_unused(Graph& g, std::initializer_list<Node*> nodes) {
  for (Node* n : nodes)
    if (n && !n->erased() && n->num_users() == 0) g.erase_node(n);
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
// (python_equal of the two lists, compared in place: a cat of 30,000 tensors
// would otherwise copy its arguments twice for a no.)
inline bool is_call_as(const Node& n, OpRef op, const ArgList& args, const ArgDict& kwargs) {
  if (!n.is_call(op) || n.args().size() != args.size()) return false;
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!pattern::python_equal(n.args()[i], args[i])) return false;
  return pattern::python_equal(Arg(n.kwargs()), Arg(kwargs));
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
// A shape of known sizes; nullopt when a dimension is symbolic or meta is absent.
using Shape = std::vector<std::int64_t>;
inline std::optional<Shape> static_shape(const Node* n) {
  const TensorMeta* t = tensor_of(n);
  if (!t || !all_static(*t)) return std::nullopt;
  Shape s;
  for (const Dim& d : t->shape) s.push_back(std::get<std::int64_t>(d));
  return s;
}

}  // namespace detail

// The node helpers the pre-grad families reuse; they take them all with
// `using namespace split_cat::node_helpers;`.
namespace node_helpers {
using detail::arg_value;
using detail::call_with_meta;
using detail::erase_if_unused;
using detail::int_of;
using detail::normalized_dim;
using detail::Shape;
using detail::static_shape;
using detail::tensor_of;
}  // namespace node_helpers

// The run function of a pattern pass whose handlers count through `slot`:
// the slot points at the run's counters only while the pass runs. `bind` sets
// the pass's other per-run inputs (weights, options): it is called with the
// run's context before and with null after, so nothing outlives the run.
template <class Bind>
inline auto counting_pass_run(std::shared_ptr<Counters*> slot, std::shared_ptr<PatternMatcherPass> pass, Bind bind) {
  return [slot = std::move(slot), pass = std::move(pass), bind = std::move(bind)](Graph& g, PassContext& ctx) {
    bind(&ctx);
    *slot = &ctx.counters;
    const std::size_t n = pass->apply(g, &ctx.counters);
    *slot = nullptr;
    bind(nullptr);
    return n > 0;
  };
}

using MakeCountingPass = PatternMatcherPass (*)(std::shared_ptr<Counters*>);

// A pattern pass whose handlers count through `slot`, registered by name.
inline void register_counting_pass(PassRegistry& registry, std::string name, std::string description,
                                   MakeCountingPass make) {
  auto slot = std::make_shared<Counters*>(nullptr);
  auto pass = std::make_shared<PatternMatcherPass>(make(slot));
  registry.add({std::move(name), std::move(description), counting_pass_run(slot, pass, [](PassContext*) {})});
}

// One row of a family's registration table.
struct CountingPass {
  std::string name;
  std::string description;
  MakeCountingPass make;
};
// Registers each pass of the table, in order.
inline void register_counting_passes(PassRegistry& registry, std::initializer_list<CountingPass> passes) {
  for (const CountingPass& p : passes) register_counting_pass(registry, p.name, p.description, p.make);
}

}  // namespace kiln::split_cat
