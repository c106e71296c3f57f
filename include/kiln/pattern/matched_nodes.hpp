#pragma once
// MatchedNodes: what every match (compiled Match<P> or RuntimeMatch) says about
// the graph it matched in: the matched nodes, children before parents
// (Inductor's m.nodes), the output nodes, and erase_nodes(). Not a template,
// so each pattern type does not compile its own copy.
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln::pattern {

class MatchedNodes {
 public:
  // Every matched node, children before parents; the last is the root's.
  const std::vector<Node*>& nodes() const { return nodes_; }
  // The nodes matched by the pattern's outputs (one, or several for a
  // MultiOutputPattern; nullptr for a None output).
  const std::vector<Node*>& output_nodes() const { return outputs_; }
  Node* output_node() const {
    for (Node* n : outputs_)
      if (n) return n;
    throw Error("output_node: the match has no output node");
  }
  Graph& graph() const { return *graph_; }

  // The matched nodes whose target is `op`.
  std::vector<Node*> filter_nodes(OpRef op) const {
    std::vector<Node*> out;
    for (Node* n : nodes_)
      if (n->target() == op) out.push_back(n);
    return out;
  }

  // Erases the matched nodes that nothing uses any more, parents first.
  void erase_nodes() {
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
      if (!(*it)->erased() && (*it)->num_users() == 0) graph_->erase_node(*it);
  }

 protected:
  std::vector<Node*> nodes_;
  std::vector<Node*> outputs_;
  Graph* graph_ = nullptr;
};

}  // namespace kiln::pattern
