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

// Inductor's short dtype names (torch.utils._dtype_abbrs.dtype_abbrs): "f32", "bf16", "b8".
constexpr std::string_view dtype_abbr(DType d) {
  switch (d) {
    case DType::float32: return "f32";
    case DType::float64: return "f64";
    case DType::float16: return "f16";
    case DType::bfloat16: return "bf16";
    case DType::int8: return "i8";
    case DType::uint8: return "u8";
    case DType::int16: return "i16";
    case DType::int32: return "i32";
    case DType::int64: return "i64";
    case DType::bool_: return "b8";
    case DType::float8_e4m3fn: return "f8e4m3fn";
    case DType::complex64: return "c64";
  }
  return dtype_name(d);
}

// "f32[16, 64]"-style summary of a meta value.
inline std::string format_meta_val(const MetaVal& v) {
  if (v.is_none()) return "None";
  if (const auto* t = v.tensor()) {
    std::string s = std::string(dtype_abbr(t->dtype)) + "[";
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

// A string as Python's repr() writes it: in single quotes, or double quotes
// when it holds a single quote and no double one; backslashes, the quote and
// control characters escaped.
inline std::string python_str_repr(std::string_view s) {
  const char q = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, q);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == q) out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x", out += hex[u >> 4], out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + q;
}

// One argument as torch.fx's _format_arg prints it: nodes as %name, everything
// else as Python's str() (torch.float32, cpu), lists in []; except strings,
// which torch.fx prints bare (add(%x, '0') as add(%x, 0), the same as the
// integer) and kiln prints as Python's repr, as the graph's Python code has them.
inline std::string format_arg(const Arg& a, bool node_percent = true) {
  struct V {
    bool pct;
    std::string operator()(None) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_float_repr(d); }
    std::string operator()(const std::string& s) const { return python_str_repr(s); }
    std::string operator()(const ArgList& l) const {
      std::string s = "[";
      for (std::size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + format_arg(l[i], pct);
      return s + "]";
    }
    std::string operator()(const NodeRef& r) const { return (pct ? "%" : "") + r.node->name(); }
    std::string operator()(DType d) const { return "torch." + std::string(dtype_name(d)); }
    std::string operator()(const Device& d) const { return d.name; }
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
  return a.visit(V{node_percent});
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
