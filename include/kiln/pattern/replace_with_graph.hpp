#pragma once
// Splicing a replacement graph in at a match: Inductor's
// ReplacementPatternEntry.replace_with_graph and Match.replace_by_example.
//
//   replace_with_graph(m, replacement, args);   // args bind its placeholders, in order
//   replace_by_example(m, replacement);         // placeholders bound to m's captures by name
//
// The replacement's call_function nodes are created before the first of the
// match's output nodes in graph order (the output node, for one), its
// placeholders standing for `args`. Each matched output's uses then go to the
// corresponding replacement output (uses by the new nodes themselves are kept);
// a replacement that returns several values for one matched node that has
// getitem users replaces each getitem by the value it selects. A new output
// node without meta.val takes the old node's. Finally the matched nodes that
// nothing uses any more are erased (Match.erase_nodes).
//
// The replacement graph is checked before anything changes: only placeholders,
// call_function nodes and an output; as many placeholders as arguments; outputs
// that line up with the match's. A bad one is an error and the graph is left as
// it was. (Inductor re-traces the replacement with the match's shapes; kiln
// inlines the example as it is, so its meta.val, which describes the example's
// shapes, is not copied.)
#include <algorithm>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/pattern/from_graph.hpp"  // fx_arg_names
#include "kiln/pattern/runtime_matcher.hpp"

namespace kiln::pattern {

namespace detail {

// A replacement graph's placeholders and result, after checking what it holds.
struct CheckedReplacement {
  std::vector<const Node*> placeholders;
  std::vector<const Node*> calls;  // in graph order
  const kiln::Arg* result = nullptr;  // the output node's value
};

inline CheckedReplacement check_replacement(const Graph& repl) {
  CheckedReplacement c;
  std::vector<const Node*> seen;
  for (const Node* n : repl.nodes()) {
    // Every node's inputs come earlier (creating the copies relies on it).
    auto check_input = [&](Node* in) {
      if (std::find(seen.begin(), seen.end(), in) == seen.end())
        throw Error("replace_with_graph: replacement node " + n->name() + " uses " + in->name() + ", which is not before it");
    };
    for (const kiln::Arg& a : n->args()) for_each_node(a, check_input);
    for (const auto& [k, a] : n->kwargs()) for_each_node(a, check_input);
    seen.push_back(n);
    if (n->op() == OpKind::placeholder) c.placeholders.push_back(n);
    else if (n->op() == OpKind::call_function) c.calls.push_back(n);
    else if (n->op() == OpKind::output) c.result = n->args().size() == 1 ? &n->args()[0] : nullptr;
    else
      throw Error("replace_with_graph: replacement node " + n->name() + " is a " + std::string(op_kind_name(n->op())) +
                  " (" + std::string(n->target_name()) +
                  "); a replacement graph may hold only placeholders, call_function nodes and its output");
  }
  if (!c.result) throw Error("replace_with_graph: the replacement graph has no output value");
  return c;
}

// The index of a getitem user (Inductor's maybe_getitem), or -1 for any other user.
inline std::int64_t getitem_index(const Node* u) {
  if (u->op() != OpKind::call_function || u->target_name() != "operator.getitem" || u->args().size() != 2) return -1;
  const std::int64_t* i = u->args()[1].get_if<std::int64_t>();
  return i ? *i : -1;
}

class ReplaceWithGraph {
 public:
  ReplaceWithGraph(Graph& g, const Graph& repl, std::span<const kiln::Arg> args) : g_(g), c_(check_replacement(repl)) {
    if (c_.placeholders.size() != args.size())
      throw Error("replace_with_graph: the replacement graph has " + std::to_string(c_.placeholders.size()) +
                  " placeholders, " + std::to_string(args.size()) + " arguments were given");
    for (std::size_t i = 0; i < args.size(); ++i) {
      for_each_node(args[i], [&](Node* n) {
        if (n->erased() || &n->graph() != &g)
          throw Error("replace_with_graph: argument " + std::to_string(i) + " (for placeholder " +
                      c_.placeholders[i]->name() + ") refers to a node that is not in the graph");
      });
      env_[c_.placeholders[i]] = args[i];
    }
  }

  // Checks that `outputs` (the match's) line up with the replacement's result, as
  // Inductor's replace() would walk them, before anything changes.
  void check(const std::vector<Node*>& outputs) const {
    const std::vector<kiln::Arg> results = result_values();
    if (results.size() == outputs.size()) {
      for (std::size_t i = 0; i < outputs.size(); ++i) check_one(outputs[i], results[i]);
    } else if (outputs.size() == 1) {
      check_one(outputs[0], *c_.result);
    } else {
      throw Error("replace_with_graph: the replacement returns " + std::to_string(results.size()) +
                  " values for the match's " + std::to_string(outputs.size()) + " outputs");
    }
  }

  std::vector<Node*> apply(const std::vector<Node*>& outputs) {
    Node* anchor = nullptr;  // the first output in graph order
    for (Node* o : outputs)
      if (o && (!anchor || o->is_before(*anchor))) anchor = o;
    {
      auto guard = g_.inserting_before(anchor);
      for (const Node* n : c_.calls) {
        ArgList args;
        for (const kiln::Arg& a : n->args()) args.push_back(substitute(a));
        ArgDict kwargs;
        for (const auto& [k, a] : n->kwargs()) kwargs.set(k, substitute(a));
        Node* made = g_.call_function(n->target(), std::move(args), std::move(kwargs));
        added_.push_back(made);
        env_[n] = kiln::Arg(made);
      }
    }
    const std::vector<kiln::Arg> results = result_values();
    if (results.size() == outputs.size()) {
      for (std::size_t i = 0; i < outputs.size(); ++i) replace(outputs[i], substitute(results[i]));
    } else {
      replace(outputs[0], substitute(*c_.result));
    }
    return added_;
  }

 private:
  // The output's values: one node stands for a list of one (Inductor wraps a Node).
  std::vector<kiln::Arg> result_values() const {
    if (const ArgList* l = c_.result->list()) return *l;
    return {*c_.result};
  }

  // What a value of the replacement graph becomes in the graph: its placeholders' arguments, its new nodes.
  kiln::Arg substitute(const kiln::Arg& a) const {
    if (Node* n = a.node()) return env_.at(n);
    if (const ArgList* l = a.list()) {
      ArgList out;
      for (const kiln::Arg& x : *l) out.push_back(substitute(x));
      return out;
    }
    if (const ArgDict* d = a.get_if<ArgDict>()) {
      ArgDict out;
      for (const auto& [k, x] : *d) out.set(k, substitute(x));
      return out;
    }
    return a;
  }
  // The same before any node is created: what kind of value it will be.
  kiln::Arg resolve(const kiln::Arg& a) const {
    if (Node* n = a.node()) {
      auto it = env_.find(n);
      return it != env_.end() ? it->second : a;  // a call node stays a (replacement) node
    }
    return a;
  }

  void check_one(const Node* old, const kiln::Arg& value) const {
    const kiln::Arg v = resolve(value);
    if (!old) {
      if (!v.is_none()) throw Error("replace_with_graph: a replacement value for a None output must be None");
      return;
    }
    if (v.is_node()) return;
    const ArgList* l = v.list();
    if (!l)
      throw Error("replace_with_graph: node " + old->name() + " would be replaced by the constant " + format_arg(v) +
                  "; only a node can take its place");
    for (const Node* u : old->users()) {
      const std::int64_t i = getitem_index(u);
      if (i < 0 || static_cast<std::size_t>(i) >= l->size())
        throw Error("replace_with_graph: node " + old->name() + " is replaced by " + std::to_string(l->size()) +
                    " values, but its user " + u->name() + " is not a getitem of one of them");
      check_one(u, (*l)[static_cast<std::size_t>(i)]);
    }
  }

  // Inductor's replace(old, new).
  void replace(Node* old, const kiln::Arg& value) {
    if (!old) return;
    if (Node* n = value.node()) {
      if (n->meta.val.is_none()) n->meta.val = old->meta.val;
      old->replace_all_uses_with(n, [&](Node* u) { return std::find(added_.begin(), added_.end(), u) == added_.end(); });
      if (old->num_users() == 0) g_.erase_node(old);
      return;
    }
    const ArgList& l = *value.list();
    for (Node* u : old->user_list()) replace(u, l[static_cast<std::size_t>(getitem_index(u))]);
    g_.erase_node(old);
  }

  Graph& g_;
  CheckedReplacement c_;
  std::unordered_map<const Node*, kiln::Arg> env_;
  std::vector<Node*> added_;
};

}  // namespace detail

// Inlines `replacement` at match `m` with `args` bound to its placeholders in
// order; returns the nodes created. Works for compiled and runtime matches.
template <class M>
std::vector<Node*> replace_with_graph(M& m, const Graph& replacement, std::span<const kiln::Arg> args) {
  detail::ReplaceWithGraph r(m.graph(), replacement, args);
  const std::vector<Node*> outputs = m.output_nodes();
  r.check(outputs);
  std::vector<Node*> added = r.apply(outputs);
  m.erase_nodes();
  return added;
}

// replace_with_graph with the replacement's placeholders bound to the match's
// captures by name: `argnames[i]` for the i-th placeholder (register_replacement
// passes the search graph's), by default the placeholders' own names de-mangled
// as fx_to_pattern names them.
inline std::vector<Node*> replace_by_example(RuntimeMatch& m, const Graph& replacement,
                                             const std::vector<std::string>& argnames = {}) {
  const std::vector<std::string> names = argnames.empty() ? fx_arg_names(replacement) : argnames;
  std::vector<kiln::Arg> args;
  for (const std::string& name : names) args.push_back(m.get(name));
  return replace_with_graph(m, replacement, args);
}

}  // namespace kiln::pattern
