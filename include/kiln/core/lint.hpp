#pragma once
// lint(): checks a graph's invariants and throws LintError naming the first
// node and field that break one. Cheap enough to run after every pass: one
// walk, and messages are only built when something is wrong.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln {

// Reads the graph only (nothing, not even scratch space, is written), so
// several threads may lint one graph at once.
inline void lint(const Graph& g) {
  std::vector<const Node*> sorted_users;  // reused: finding a user listed twice
  std::size_t walked = 0, user_entries = 0, input_entries = 0;
  std::size_t outputs = 0;
  const Node* prev = nullptr;
  for (const Node* n : g.nodes()) {
    auto fail = [&](const std::string& what) { throw LintError("lint: node " + n->name() + ": " + what); };
    if (&n->graph() != &g) fail("belongs to another graph");
    if (n->erased()) fail("is erased but still linked");
    if (g.find_node(n->name()) != n) fail("name is not registered to this node");
    if (n->prev() != prev) fail("broken prev link");
    if (prev && !prev->is_before(*n)) fail("order key not increasing");
    if (outputs) fail("appears after the output node");
    if (n->op() == OpKind::output) ++outputs;
    if ((n->op() == OpKind::placeholder || n->op() == OpKind::get_attr) && (!n->args().empty() || !n->kwargs().empty()))
      fail("a " + std::string(op_kind_name(n->op())) + " takes no arguments");
    if (n->target().empty()) fail("empty target");
    auto check_ref = [&](auto field) {
      return [&, field](const Node* in) {
        if (in->erased()) fail(field() + " refers to erased node " + in->name());
        if (&in->graph() != &g) fail(field() + " refers to node " + in->name() + " of another graph");
        // Order keys grow along the nodes walked so far (checked above), so a
        // node that comes before `n` has the smaller key.
        if (!in->is_before(*n)) fail(field() + " refers to node " + in->name() + " which does not come before it");
      };
    };
    std::size_t arg_refs = 0, kwarg_refs = 0;
    for (std::size_t i = 0; i < n->args().size(); ++i) {
      auto check = check_ref([i] { return "args[" + std::to_string(i) + "]"; });
      for_each_node(n->args()[i], [&](const Node* in) {
        check(in);
        ++arg_refs;
      });
    }
    for (const auto& kv : n->kwargs()) {
      const std::string& key = kv.first;  // named: clang 14 cannot capture a structured binding
      auto check = check_ref([&key] { return "kwargs[" + key + "]"; });
      for_each_node(kv.second, [&](const Node* in) {
        check(in);
        ++kwarg_refs;
      });
    }
    if (const detail::FanInIndex* index = n->fan_in_index()) {
      // It must say where each input is referenced, each once, as the arguments stand.
      const auto& inputs = n->all_input_nodes();
      if (kwarg_refs != 0 || arg_refs != inputs.size() || index->size() != inputs.size())
        fail("fan-in index out of date (" + std::to_string(index->size()) + " entries, " +
             std::to_string(inputs.size()) + " inputs, " + std::to_string(arg_refs + kwarg_refs) + " references)");
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        const detail::FanInIndex::Place* at = index->find(inputs[k]);
        const Arg* ref = at && at->input == k
                             ? detail::FanInIndex::reference(std::span<const Arg>(n->args().begin(), n->args().end()), *at)
                             : nullptr;
        if (!ref || ref->node() != inputs[k])
          fail("fan-in index out of date: it has input " + std::to_string(k) + " (" + inputs[k]->name() + ") " +
               (at ? "elsewhere" : "missing"));
      }
    }
    input_entries += n->all_input_nodes().size();
    std::size_t live = 0;
    sorted_users.clear();
    for (const Node* u : n->users()) sorted_users.push_back(u);
    std::sort(sorted_users.begin(), sorted_users.end());
    if (auto twice = std::adjacent_find(sorted_users.begin(), sorted_users.end()); twice != sorted_users.end())
      fail("lists " + (*twice)->name() + " as a user twice");
    for (const Node* u : n->users()) {
      ++live;
      if (u->erased()) fail("lists erased node " + u->name() + " as a user");
      if (&u->graph() != &g) fail("lists node " + u->name() + " of another graph as a user");
      bool uses = false;
      for (const Node* in : u->all_input_nodes()) uses |= (in == n);
      if (!uses) fail("lists " + u->name() + " as a user, but it does not use this node");
    }
    if (live != n->num_users()) fail("user count out of sync");
    user_entries += live;
    ++walked;
    prev = n;
  }
  if (walked != g.size())
    throw LintError("lint: graph size " + std::to_string(g.size()) + " but " + std::to_string(walked) +
                    " nodes are linked");
  // Every user entry was checked against its user's inputs; equal totals mean
  // no input relation is missing from a user list either.
  if (user_entries != input_entries)
    throw LintError("lint: " + std::to_string(input_entries) + " input references but " +
                    std::to_string(user_entries) + " user entries: some node is missing from its input's users");
  if (outputs != 1) throw LintError("lint: graph has " + std::to_string(outputs) + " output nodes, expected exactly 1");
}

}  // namespace kiln
