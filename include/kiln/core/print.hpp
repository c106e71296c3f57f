#pragma once
// Text printing in torch.fx's style:
//   graph():
//       %x : [num_users=1] = placeholder[target=x]
//       %mm : [num_users=1] = call_function[target=aten.mm.default](args = (%x, %w), kwargs = {})
//       return (relu,)
#include <ostream>
#include <sstream>
#include <string>

#include "kiln/core/format_float.hpp"
#include "kiln/core/graph.hpp"

namespace kiln {

struct PrintOptions {
  bool show_meta = false;  // append "  # f32[16, 64]" from meta.val
};

inline std::string format_dim(const Dim& d) {
  if (const auto* i = std::get_if<std::int64_t>(&d)) return std::to_string(*i);
  return std::get<SymInt>(d).name;
}

// "f32[16, 64]"-style summary of a meta value.
inline std::string format_meta_val(const MetaVal& v) {
  if (v.is_none()) return "None";
  if (const auto* t = v.tensor()) {
    std::string s = std::string(dtype_name(t->dtype)) + "[";
    for (std::size_t i = 0; i < t->shape.size(); ++i) s += (i ? ", " : "") + format_dim(t->shape[i]);
    return s + "]";
  }
  if (const auto* i = std::get_if<std::int64_t>(&v.value())) return std::to_string(*i);
  if (const auto* s = std::get_if<SymInt>(&v.value())) return s->name;
  std::string s = "(";
  const auto& l = *v.list();
  for (std::size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + format_meta_val(l[i]);
  return s + (l.size() == 1 ? ",)" : ")");
}

inline std::string python_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "'";
}

// One argument as torch.fx prints it: nodes as %name, strings quoted, lists in [].
inline std::string format_arg(const Arg& a, bool node_percent = true) {
  struct V {
    bool pct;
    std::string operator()(None) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_float_repr(d); }
    std::string operator()(const std::string& s) const { return python_quote(s); }
    std::string operator()(const ArgList& l) const {
      std::string s = "[";
      for (std::size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + format_arg(l[i], pct);
      return s + "]";
    }
    std::string operator()(Node* n) const { return (pct ? "%" : "") + n->name(); }
    std::string operator()(DType d) const { return "torch." + std::string(dtype_name(d)); }
    std::string operator()(const Device& d) const { return "device(type=" + python_quote(d.name) + ")"; }
    std::string operator()(const EnumConst& e) const { return e.name; }
    std::string operator()(const Slice& s) const {
      return "slice(" + format_arg(s.parts.at(0), pct) + ", " + format_arg(s.parts.at(1), pct) + ", " +
             format_arg(s.parts.at(2), pct) + ")";
    }
    std::string operator()(const SymInt& s) const { return s.name; }
    std::string operator()(const ArgDict& d) const {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : d) {
        s += (first ? "" : ", ") + k + ": " + format_arg(v, pct);
        first = false;
      }
      return s + "}";
    }
    std::string operator()(const Repr& r) const { return r.text; }
  };
  return std::visit(V{node_percent}, a.value());
}

inline std::string format_node(const Node& n, const PrintOptions& opt = {}) {
  std::string s;
  if (n.op() == OpKind::output) {
    const Arg& result = n.args().empty() ? Arg() : n.args()[0];
    if (const auto* l = result.list()) {
      s = "return (";
      for (std::size_t i = 0; i < l->size(); ++i) s += (i ? ", " : "") + format_arg((*l)[i], false);
      s += l->size() == 1 ? ",)" : ")";
    } else {
      s = "return " + format_arg(result, false);
    }
    return s;
  }
  s = "%" + n.name() + " : [num_users=" + std::to_string(n.num_users()) + "] = " + std::string(op_kind_name(n.op())) +
      "[target=" + std::string(n.target_name()) + "]";
  if (n.op() != OpKind::placeholder && n.op() != OpKind::get_attr) {
    s += "(args = (";
    for (std::size_t i = 0; i < n.args().size(); ++i) s += (i ? ", " : "") + format_arg(n.args()[i]);
    s += n.args().size() == 1 ? ",)" : ")";
    s += ", kwargs = " + format_arg(Arg(n.kwargs())) + ")";
  }
  if (opt.show_meta && !n.meta.val.is_none()) s += "  # " + format_meta_val(n.meta.val);
  return s;
}

inline void print_graph(std::ostream& os, const Graph& g, const PrintOptions& opt = {}) {
  os << "graph():\n";
  for (const Node* n : g.nodes()) os << "    " << format_node(*n, opt) << "\n";
}

inline std::string to_string(const Graph& g, const PrintOptions& opt = {}) {
  std::ostringstream os;
  print_graph(os, g, opt);
  return os.str();
}

inline std::ostream& operator<<(std::ostream& os, const Graph& g) {
  print_graph(os, g);
  return os;
}

}  // namespace kiln
