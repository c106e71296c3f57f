#pragma once
// Mutation regions, as Inductor 2.11's PatternMatcherPass uses them: a new
// region starts at every mutation op, and a match whose nodes lie in more than
// one region is dropped (a rewrite must not move work across an in-place write).
//
// Which nodes count as mutation ops follows Inductor's is_mutation_op: an
// operator overload (aten.relu_.default) by its schema (kiln: OpTraits::mutates);
// a Python callable or a method by its name (`relu_`, `_set_grad_enabled`,
// `manual_seed`, `_enter_autocast`, but not `__setitem__`); any other node when
// it has a non-None `out` keyword argument.
//
// Region ids are computed when apply() starts and, for nodes a handler
// creates, on first use from the nearest older node, as Inductor does. A graph
// without mutation ops (the common case) costs a look at its (kind, target)
// pairs and nothing per node; should a handler add the first one, the regions
// are then computed from the graph as it is at that point. Unless compute()
// was called, the first same_region() computes them: apply() asks only once a
// pattern has matched, before any handler has changed the graph, so the ids are
// those of the graph apply() started with, and a pass that matches nothing
// (most steps of a pipeline) never looks. The look reads only the nodes with
// keywords of targets that may take an `out` keyword (the graph counts them).
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>

#include "kiln/core/graph.hpp"

namespace kiln {

namespace detail {
constexpr bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
// Inductor's _mutation_op_re, (?<!_)(_$|_[.]|(\b|_)(set|enter|exit|seed)(\b|_))(?!_),
// searched in a callable's or method's name.
constexpr bool mutation_op_name(std::string_view s) {
  const std::size_t n = s.size();
  auto lone_underscore = [&](std::size_t i) { return s[i] == '_' && (i == 0 || s[i - 1] != '_'); };
  for (std::size_t i = 0; i < n; ++i) {
    // `_` at the end, or `_.`, not after another `_` (and `.` not before one).
    if (lone_underscore(i) && (i + 1 == n || (s[i + 1] == '.' && (i + 2 == n || s[i + 2] != '_')))) return true;
  }
  for (std::string_view word : {std::string_view("set"), std::string_view("enter"), std::string_view("exit"),
                                std::string_view("seed")}) {
    for (std::size_t i = s.find(word); i != std::string_view::npos; i = s.find(word, i + 1)) {
      const std::size_t j = i + word.size();
      // Left: a word boundary (nothing or a non-word character before), or a
      // lone `_`. Right: a word boundary, or `_` not followed by another `_`.
      const bool left = i == 0 || !is_word_char(s[i - 1]) || lone_underscore(i - 1);
      const bool right = j == n || !is_word_char(s[j]) || (s[j] == '_' && (j + 1 == n || s[j + 1] != '_'));
      if (left && right) return true;
    }
  }
  return false;
}

// Whether nodes of this kind and target mutate by their target alone.
inline bool mutating_target(OpKind op, std::string_view target) {
  if (op == OpKind::call_function) {
    if (is_overload_name(target)) return OpRegistry::instance().traits(OpRef(target)).mutates;
    return mutation_op_name(target.substr(target.rfind('.') + 1));  // the callable's __name__
  }
  return op == OpKind::call_method && mutation_op_name(target);
}
// Whether nodes of this kind and target can mutate through an `out` kwarg
// (Inductor looks at it for every node that is no operator overload).
inline bool out_kwarg_counts(OpKind op, std::string_view target) {
  return op == OpKind::call_method || op == OpKind::call_module ||
         (op == OpKind::call_function && !is_overload_name(target));
}
inline bool has_out_kwarg(const Node* n) {
  const kiln::Arg* out = n->kwargs().find("out");
  return out && !out->is_none();
}
}  // namespace detail

// Inductor's is_mutation_op.
inline bool is_mutation_op(const Node* n) {
  if (detail::mutating_target(n->op(), n->target_name())) return true;
  return detail::out_kwarg_counts(n->op(), n->target_name()) && detail::has_out_kwarg(n);
}

class MutationRegions {
 public:
  // Finds out whether `g` has a mutation op and, if so, numbers every node's region.
  void compute(const Graph& g) {
    computed_ = true;
    ids_.clear();
    targets_seen_ = g.target_kinds_seen();
    active_ = has_mutation_op(g);
    if (!active_) return;
    ids_.reserve(g.size() * 2);
    std::uint32_t id = 0;
    for (const Node* n : g.nodes()) {
      if (is_mutation_op(n)) ++id;
      ids_.emplace(n, id);
    }
  }

  // Whether region ids are kept per node (keyed by address: the pass must not
  // reuse erased nodes' memory meanwhile). False until they are computed.
  bool active() const { return active_; }
  bool computed() const { return computed_; }

  // Whether every node of a match lies in one region (computing the regions
  // of `g` as it is now, on the first call without compute()).
  bool same_region(std::span<Node* const> nodes, const Graph& g) {
    if (!computed_) compute(g);
    if (!active_) {
      if (g.target_kinds_seen() == targets_seen_) return true;
      compute(g);  // a handler made a new kind of node: it may mutate
      if (!active_) return true;
    }
    std::int64_t first = -1;
    for (const Node* n : nodes) {
      const std::int64_t r = region_of(n);
      if (first < 0) first = r;
      else if (r != first) return false;
    }
    return true;
  }

 private:
  static bool has_mutation_op(const Graph& g) {
    bool found = false;
    g.for_each_target([&](OpKind op, OpRef target, std::size_t count) {
      if (found || count == 0) return;
      if (detail::mutating_target(op, target.name)) {
        found = true;
      } else if (detail::out_kwarg_counts(op, target.name) && g.count_nodes_with_kwargs(op, target) != 0) {
        g.for_each_node(op, target, [&](const Node* n) { found = found || detail::has_out_kwarg(n); });
      }
    });
    return found;
  }

  // A node created since compute(): walk back to a node with an id (or the
  // graph's first node, region 0), then forward, counting mutation ops and
  // remembering each id on the way (Inductor's get_mutation_region_id).
  std::uint32_t region_of(const Node* n) {
    const Node* p = n;
    auto it = ids_.find(p);
    if (it != ids_.end()) return it->second;
    while (it == ids_.end() && p->prev()) it = ids_.find(p = p->prev());
    const std::uint32_t start = it == ids_.end() ? 0 : it->second;
    if (it == ids_.end()) ids_.emplace(p, start);
    std::uint32_t id = start;
    while (p != n) {
      p = p->next();
      if (is_mutation_op(p)) ++id;
      ids_[p] = id;
    }
    return id;
  }

  std::unordered_map<const Node*, std::uint32_t> ids_;
  std::size_t targets_seen_ = 0;
  bool computed_ = false;
  bool active_ = false;
};

}  // namespace kiln
