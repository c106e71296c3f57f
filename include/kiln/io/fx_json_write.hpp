#pragma once
// Writing a kiln::Graph as fx-graph-json (docs/FX_GRAPH_JSON.md).
//
//   kiln::io::write_fx_json(g, "out.json.gz", file.weights);   // gzip by suffix
//   std::string text = kiln::io::to_fx_json(g);
//
// The text is what Python's json.dumps(doc, separators=(",", ":")) writes for
// the same document (key order name, op, target, args, kwargs, meta; floats as
// repr() prints them; non-ASCII as \uXXXX), so a graph read from such a file is
// written back byte for byte. Other spellings of the same document come back in
// that form: whitespace, key order, numbers such as 1E5 or 1.50 (but not 1.0 vs
// 1: ints and floats stay apart), needless escapes, "val": null, "val" after
// other meta keys (it is written first), an empty "weights" object, a trailing
// newline. Other meta keys are written as read, less whitespace between tokens.
// A graph that could not be read back (no output node, or not last; a node used
// before it is defined) is refused with a GraphError.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_set>

#include "kiln/core/format_float.hpp"
#include "kiln/core/graph.hpp"
#include "kiln/io/graph_file.hpp"
#include "kiln/io/gzip.hpp"

namespace kiln::io {

namespace detail {

class FxJsonWriter {
 public:
  explicit FxJsonWriter(const Graph& g) : g_(g) {}

  std::string write(const WeightsTable& weights) {
    out_.reserve(g_.size() * 192 + 256);
    out_ += "{\"format\":\"fx-graph-json\",\"version\":1,\"name\":";
    str(g_.name());
    out_ += ",\"nodes\":[";
    const Node* last = g_.back();
    if (!last || last->op() != OpKind::output)
      throw GraphError("to_fx_json: graph '" + g_.name() +
                       "' does not end with an output node (fx-graph-json requires one, last)");
    bool first = true;
    for (const Node* n : g_.nodes()) {
      cur_ = n;
      if (n->op() == OpKind::output && n != last) fail("is an output node but not the last node");
      if (!first) out_ += ',';
      first = false;
      node(*n);
    }
    cur_ = nullptr;
    out_ += ']';
    if (!weights.empty()) {
      out_ += ",\"weights\":{";
      std::unordered_set<std::string_view> seen;
      for (std::size_t i = 0; i < weights.size(); ++i) {
        const auto& [attr, file] = weights[i];
        if (!seen.insert(attr).second) throw GraphError("to_fx_json: weights: duplicate entry '" + attr + "'");
        if (i) out_ += ',';
        str(attr);
        out_ += ":{\"file\":";
        str(file);
        out_ += '}';
      }
      out_ += '}';
    }
    if (!g_.modules().empty()) {
      // The "class" first, then the other members as they were read.
      out_ += ",\"modules\":{";
      bool first_module = true;
      for (const ModuleInfo& m : g_.modules().entries()) {
        if (!first_module) out_ += ',';
        first_module = false;
        str(m.path);
        out_ += ":{\"class\":";
        str(m.class_name);
        for (const auto& [name, text] : m.fields) {
          out_ += ',';
          str(name);
          out_ += ':';
          out_ += text;
        }
        out_ += '}';
      }
      out_ += '}';
    }
    out_ += '}';
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::string s = "to_fx_json: ";
    if (cur_) s += "node '" + cur_->name() + "': ";
    if (field_) {
      s += field_;
      s += field_is_key_ ? "['" + std::string(field_key_) + "']" : "[" + std::to_string(field_index_) + "]";
      s += ": ";
    }
    throw GraphError(s + what);
  }

  void node(const Node& n) {
    out_ += "{\"name\":";
    str(n.name());
    out_ += ",\"op\":\"";
    out_ += op_kind_name(n.op());
    out_ += "\",\"target\":";
    str(n.target_name());
    out_ += ",\"args\":[";
    field_ = "args";
    for (std::size_t i = 0; i < n.args().size(); ++i) {
      if (i) out_ += ',';
      field_index_ = i;
      arg(n.args()[i]);
    }
    out_ += "],\"kwargs\":{";
    field_ = "kwargs";
    field_is_key_ = true;
    bool first = true;
    for (const auto& [k, a] : n.kwargs()) {
      if (!first) out_ += ',';
      first = false;
      field_key_ = k;
      str(k);
      out_ += ':';
      arg(a);
    }
    field_ = nullptr;
    field_is_key_ = false;
    out_ += '}';
    const NodeMeta& m = n.meta;
    if (m.present || !m.val.is_none() || !m.extra_json.empty()) {
      out_ += ",\"meta\":{";
      bool any = false;
      if (!m.val.is_none()) {
        out_ += "\"val\":";
        meta_val(m.val);
        any = true;
      }
      for (const auto& [k, raw] : m.extra_json) {
        if (k == "val") fail("meta: extra_json holds the key 'val', which is meta.val's");
        if (raw.empty()) fail("meta: extra_json['" + k + "'] is empty (it must hold JSON text)");
        if (any) out_ += ',';
        any = true;
        str(k);
        out_ += ':';
        out_ += raw;
      }
      out_ += '}';
    }
    out_ += '}';
  }

  void integer(std::int64_t v) {
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, res.ptr);
  }

  void floating(double d) {
    if (std::isnan(d)) out_ += "{\"float\":\"nan\"}";
    else if (std::isinf(d)) out_ += d > 0 ? "{\"float\":\"inf\"}" : "{\"float\":\"-inf\"}";
    else out_ += format_float_repr(d);
  }

  void arg(const Arg& a) {
    a.visit([&](const auto& v) { arg_value(v); });
  }
  void arg_value(None) { out_ += "null"; }
  void arg_value(bool b) { out_ += b ? "true" : "false"; }
  void arg_value(std::int64_t i) { integer(i); }
  void arg_value(double d) { floating(d); }
  void arg_value(const std::string& s) { str(s); }
  void arg_value(const ArgList& l) {
    out_ += '[';
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (i) out_ += ',';
      arg(l[i]);
    }
    out_ += ']';
  }
  void arg_value(const NodeRef& ref) {
    Node* in = ref.node;
    if (in == nullptr) fail("a null node reference");
    if (&in->graph() != &g_) fail("refers to node '" + in->name() + "' of another graph");
    if (in->erased()) fail("refers to erased node '" + in->name() + "'");
    if (!in->is_before(*cur_))
      fail("refers to node '" + in->name() +
           "', which does not come before it (run stable_topological_sort before writing)");
    out_ += "{\"node\":";
    str(in->name());
    out_ += '}';
  }
  void arg_value(DType d) {
    out_ += "{\"dtype\":\"";
    out_ += dtype_name(d);
    out_ += "\"}";
  }
  void arg_value(const Device& d) { tagged("device", d.name); }
  void arg_value(const EnumConst& e) { tagged("enum", e.name); }
  void arg_value(const Repr& r) { tagged("repr", r.text); }
  void arg_value(const SymInt& s) { tagged("sym", s.name); }
  void arg_value(const Slice& s) {
    if (s.parts.size() != 3) fail("a slice has " + std::to_string(s.parts.size()) + " parts, expected 3");
    out_ += "{\"slice\":";
    arg_value(s.parts);
    out_ += '}';
  }
  void arg_value(const ArgDict& d) {
    out_ += "{\"dict\":{";
    bool first = true;
    for (const auto& [k, a] : d) {
      if (!first) out_ += ',';
      first = false;
      str(k);
      out_ += ':';
      arg(a);
    }
    out_ += "}}";
  }
  void tagged(const char* key, const std::string& value) {
    out_ += "{\"";
    out_ += key;
    out_ += "\":";
    str(value);
    out_ += '}';
  }

  // `field`: "shape" or "stride", neither of which a tensor has negative.
  void dims(const std::vector<Dim>& ds, const char* field) {
    out_ += '[';
    for (std::size_t i = 0; i < ds.size(); ++i) {
      if (i) out_ += ',';
      if (const auto* v = std::get_if<std::int64_t>(&ds[i])) {
        if (*v < 0)
          fail(std::string("meta.val.") + field + "[" + std::to_string(i) + "]: a tensor's " +
               (field[1] == 'h' ? "size" : "stride") + " is never negative, got " + std::to_string(*v));
        integer(*v);
      } else {
        tagged("sym", std::get<SymInt>(ds[i]).name);
      }
    }
    out_ += ']';
  }
  void meta_val(const MetaVal& v) {
    struct Visitor {
      FxJsonWriter& w;
      void operator()(std::monostate) const { w.out_ += "null"; }
      void operator()(const TensorMeta& t) const {
        w.out_ += "{\"shape\":";
        w.dims(t.shape, "shape");
        w.out_ += ",\"dtype\":\"";
        w.out_ += dtype_name(t.dtype);
        w.out_ += '"';
        if (t.stride) {
          w.out_ += ",\"stride\":";
          w.dims(*t.stride, "stride");
        }
        w.out_ += '}';
      }
      void operator()(std::int64_t i) const { w.integer(i); }
      void operator()(const SymInt& s) const { w.tagged("sym", s.name); }
      void operator()(const MetaVal::List& l) const {
        w.out_ += '[';
        for (std::size_t i = 0; i < l.size(); ++i) {
          if (i) w.out_ += ',';
          w.meta_val(l[i]);
        }
        w.out_ += ']';
      }
    };
    std::visit(Visitor{*this}, v.value());
  }

  // A JSON string as json.dumps(ensure_ascii=True) writes it.
  void str(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    auto u_escape = [&](std::uint32_t unit) {
      char b[6] = {'\\', 'u', hex[(unit >> 12) & 15], hex[(unit >> 8) & 15], hex[(unit >> 4) & 15], hex[unit & 15]};
      out_.append(b, 6);
    };
    out_ += '"';
    std::size_t i = 0;
    const std::size_t n = s.size();
    while (i < n) {
      std::size_t run = i;
      while (run < n) {
        const auto c = static_cast<unsigned char>(s[run]);
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') break;
        ++run;
      }
      out_.append(s.data() + i, run - i);
      i = run;
      if (i == n) break;
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        switch (c) {
          case '"': out_ += "\\\""; break;
          case '\\': out_ += "\\\\"; break;
          case '\n': out_ += "\\n"; break;
          case '\r': out_ += "\\r"; break;
          case '\t': out_ += "\\t"; break;
          case '\b': out_ += "\\b"; break;
          case '\f': out_ += "\\f"; break;
          default: u_escape(c);
        }
        ++i;
        continue;
      }
      // A UTF-8 sequence; the 3-byte form of a lone surrogate (which the reader
      // makes from a lone \udXXX escape) is accepted and escaped back.
      std::uint32_t cp = 0;
      int len = 0;
      if (c >= 0xc2 && c <= 0xdf) cp = c & 0x1f, len = 2;
      else if (c >= 0xe0 && c <= 0xef) cp = c & 0x0f, len = 3;
      else if (c >= 0xf0 && c <= 0xf4) cp = c & 0x07, len = 4;
      else fail("invalid UTF-8 in string \"" + printable(s) + "\"");
      if (n - i < static_cast<std::size_t>(len)) fail("truncated UTF-8 in string \"" + printable(s) + "\"");
      for (int k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xc0) != 0x80) fail("invalid UTF-8 in string \"" + printable(s) + "\"");
        cp = (cp << 6) | (b & 0x3f);
      }
      if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        fail("overlong or out-of-range UTF-8 in string \"" + printable(s) + "\"");
      if (cp >= 0x10000) {
        cp -= 0x10000;
        u_escape(0xd800 + (cp >> 10));
        u_escape(0xdc00 + (cp & 0x3ff));
      } else {
        u_escape(cp);
      }
      i += static_cast<std::size_t>(len);
    }
    out_ += '"';
  }
  static std::string printable(std::string_view s) {
    std::string out;
    for (char c : s) out += (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f) ? c : '?';
    return out;
  }

  const Graph& g_;
  const Node* cur_ = nullptr;
  const char* field_ = nullptr;  // "args" or "kwargs" while writing them, for messages
  std::size_t field_index_ = 0;
  bool field_is_key_ = false;
  std::string_view field_key_;
  std::string out_;
};

}  // namespace detail

// The fx-graph-json text of `g`; `weights` becomes the "weights" object (left
// out when empty).
inline std::string to_fx_json(const kiln::Graph& g, const WeightsTable& weights = {}) {
  return detail::FxJsonWriter(g).write(weights);
}

// Writes `g` to `path`, gzip-compressed when the path ends in ".gz".
// `gzip_level`: 1 (fastest) .. 9 (smallest); 6 is zlib's and gzip(1)'s default.
inline void write_fx_json(const kiln::Graph& g, const std::filesystem::path& path, const WeightsTable& weights = {},
                          int gzip_level = Z_DEFAULT_COMPRESSION) {
  write_file(path, to_fx_json(g, weights), has_gz_suffix(path), gzip_level);
}

}  // namespace kiln::io
