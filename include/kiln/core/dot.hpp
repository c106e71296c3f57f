#pragma once
// to_dot(): the graph in Graphviz's DOT language, one box per node (name, kind,
// target and shape) and one edge per data dependency.
#include <string>

#include "kiln/core/print.hpp"

namespace kiln {

inline std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

inline std::string to_dot(const Graph& g) {
  std::string s = "digraph \"" + dot_escape(g.name()) + "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const Node* n : g.nodes()) {
    std::string label = n->name() + "\\n" + std::string(op_kind_name(n->op()));
    if (n->op() != OpKind::output && n->op() != OpKind::placeholder) label += "\\n" + dot_escape(n->target_name());
    if (!n->meta.val.is_none()) label += "\\n" + dot_escape(format_meta_val(n->meta.val));
    const char* style = n->op() == OpKind::placeholder || n->op() == OpKind::get_attr ? ", style=rounded"
                        : n->op() == OpKind::output                                  ? ", style=bold"
                                                                                      : "";
    s += "  \"" + dot_escape(n->name()) + "\" [label=\"" + label + "\"" + style + "];\n";
  }
  for (const Node* n : g.nodes())
    for (const Node* in : n->all_input_nodes())
      s += "  \"" + dot_escape(in->name()) + "\" -> \"" + dot_escape(n->name()) + "\";\n";
  return s + "}\n";
}

}  // namespace kiln
