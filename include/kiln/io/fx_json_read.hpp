#pragma once
// Reading fx-graph-json (docs/FX_GRAPH_JSON.md) into a kiln::Graph.
//
//   kiln::io::GraphFile f = kiln::io::read_fx_json("graph.json.gz");
//   kiln::Graph& g = f.graph;
//
// The parser is written for this one format: a single pass over the text that
// builds Args, metas and nodes as it goes, without a JSON DOM in between (a DOM
// parse alone of a 180,000-node graph takes longer than the whole read should).
// It is still a complete, strict JSON parser: anything that is not JSON, or not
// this format, is a FormatError naming the source, the node and the field:
//   graph.json: node 'mm' (#3): args[1]: reference to unknown node 'w2'
// The graph is built in a local Graph that is destroyed on error, so nothing
// half-built escapes.
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/io/errors.hpp"
#include "kiln/io/detail/json_lexer.hpp"
#include "kiln/io/graph_file.hpp"
#include "kiln/io/gzip.hpp"

namespace kiln::io {

namespace detail {

// Node name -> (node, position in the document). Open addressing over 8-byte
// slots, with the entries in document order beside it: lookups in a
// 180,000-entry std::unordered_map cost several cache misses each, and most
// references point at recently added nodes, whose entries are still cached.
// Keys view the nodes' own name strings, which stay put while the graph lives.
class NodeNameTable {
 public:
  struct Entry {
    Node* node = nullptr;
    std::size_t index = 0;
  };

  void reserve(std::size_t n) {
    entries_.reserve(n);
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > slots_.size()) rehash(cap);
  }
  const Entry* find(std::string_view name) const {
    if (slots_.empty()) return nullptr;
    const Slot s = slots_[probe(name, hash(name))];
    return s.pos ? &entries_[s.pos - 1].entry : nullptr;
  }
  // Adds `name` (a view that must outlive the table); false if it is present.
  bool insert(std::string_view name, Entry e) {
    if (2 * (entries_.size() + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    const std::uint64_t h = hash(name);
    Slot& s = slots_[probe(name, h)];
    if (s.pos) return false;
    entries_.push_back({name.data(), name.size(), e});
    s = Slot{static_cast<std::uint32_t>(h >> 32), static_cast<std::uint32_t>(entries_.size())};
    return true;
  }

 private:
  struct Slot {
    std::uint32_t tag = 0;  // high half of the hash
    std::uint32_t pos = 0;  // 1 + index into entries_; 0: empty
  };
  struct Named {
    const char* data;
    std::size_t size;
    Entry entry;
  };
  static std::uint64_t hash(std::string_view s) {
    std::uint64_t h = hash_op_name(s);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
  }
  // The slot holding `name`, or the empty slot where it would go.
  std::size_t probe(std::string_view name, std::uint64_t h) const {
    const std::size_t mask = slots_.size() - 1;
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot s = slots_[i];
      if (!s.pos) return i;
      if (s.tag == tag) {
        const Named& e = entries_[s.pos - 1];
        if (std::string_view(e.data, e.size) == name) return i;
      }
    }
  }
  void rehash(std::size_t cap) {
    slots_.assign(cap, Slot{});
    const std::size_t mask = cap - 1;
    for (std::size_t k = 0; k < entries_.size(); ++k) {
      const std::uint64_t h = hash(std::string_view(entries_[k].data, entries_[k].size));
      std::size_t i = h & mask;
      while (slots_[i].pos) i = (i + 1) & mask;
      slots_[i] = Slot{static_cast<std::uint32_t>(h >> 32), static_cast<std::uint32_t>(k + 1)};
    }
  }

  std::vector<Slot> slots_;
  std::vector<Named> entries_;
};

class FxJsonParser : JsonLexer<FxJsonParser> {
 public:
  FxJsonParser(std::string_view text, std::string_view source) : JsonLexer(text), source_(source) {
    arg_scratch_.resize(kMaxDepth + 2);
  }

  GraphFile parse() {
    GraphFile out;
    skip_ws();
    if (p_ == end_) fail("empty document (expected an fx-graph-json object)");
    if (*p_ != '{') fail("not an fx-graph-json document: it does not start with '{' (found " + describe_char() + ")");
    ++p_;
    bool seen_format = false, seen_version = false, seen_name = false, seen_nodes = false, seen_weights = false,
         seen_modules = false;
    for_each_member("a field name", [&](std::string_view key) {
      if (is(key, "format")) {
        once(seen_format, key);
        PathScope ps(*this, "format");
        std::string_view v = expect_string_value("the string \"fx-graph-json\"");
        if (v != "fx-graph-json")
          fail("expected \"fx-graph-json\", got \"" + std::string(v) + "\" (this is not an fx-graph-json document)");
      } else if (is(key, "version")) {
        once(seen_version, key);
        PathScope ps(*this, "version");
        skip_ws();
        if (p_ == end_ || !(*p_ == '-' || is_digit(*p_))) fail("expected the integer 1, got " + describe_value());
        Number n = parse_number();
        if (n.is_float || n.i != 1)
          fail("unsupported version " + std::string(n.text) + " (this reader reads version 1)");
      } else if (is(key, "name")) {
        once(seen_name, key);
        PathScope ps(*this, "name");
        out.graph.set_name(std::string(expect_string_value("a string")));
      } else if (is(key, "nodes")) {
        once(seen_nodes, key);
        parse_nodes(out.graph);
      } else if (is(key, "weights")) {
        once(seen_weights, key);
        parse_weights(out.weights);
      } else if (is(key, "modules")) {
        once(seen_modules, key);
        parse_modules(out.graph.modules());
      } else {
        fail("unknown top-level field '" + std::string(key) +
             "' (expected format, version, name, nodes, weights, modules)");
      }
    });
    skip_ws();
    if (p_ != end_) syntax("unexpected data after the end of the document");
    if (!seen_format) fail("the graph has no field 'format' (is this an fx-graph-json document?)");
    if (!seen_version) fail("the graph has no field 'version'");
    if (!seen_name) fail("the graph has no field 'name' (the top-level object's, beside 'nodes')");
    if (!seen_nodes) fail("the graph has no field 'nodes'");
    return out;
  }

 private:
  friend class JsonLexer<FxJsonParser>;  // its errors are reported through fail(), with the node and field

  // ---------------------------------------------------------------- errors

  struct PathElem {
    enum Kind : std::uint8_t { field, index, key } kind;
    std::string_view text;
    std::size_t i = 0;
  };
  // Pushes one step of the field path for the lifetime of the scope.
  struct PathScope {
    FxJsonParser& p;
    PathScope(FxJsonParser& parser, std::string_view field) : PathScope(parser, PathElem{PathElem::field, field, 0}) {}
    PathScope(FxJsonParser& parser, PathElem e) : p(parser) {
      // Depth is bounded by kMaxDepth checks; the margin covers the fixed levels.
      if (p.path_len_ == p.path_.size()) p.fail("nesting too deep");
      p.path_[p.path_len_++] = e;
    }
    ~PathScope() { --p.path_len_; }
    PathScope(const PathScope&) = delete;
    PathScope& operator=(const PathScope&) = delete;
  };

  // The field path below the current node (or from the top when outside nodes).
  // A deep one keeps its first and last elements around a count of the rest:
  // "args[0][0][0][0][0][0] ...(240 more)... [0][0][0][0][0][0][1]".
  std::string format_path() const {
    constexpr std::size_t kEnds = 6;
    const std::size_t first = in_node_ ? path_base_ : 0;
    const std::size_t count = path_len_ - first;
    std::string s;
    for (std::size_t k = first; k < path_len_; ++k) {
      const std::size_t at = k - first;
      if (count > 3 * kEnds && at == kEnds) {
        s += " ...(" + std::to_string(count - 2 * kEnds) + " more)... ";
        k = path_len_ - kEnds - 1;
        continue;
      }
      const PathElem& e = path_[k];
      switch (e.kind) {
        case PathElem::field:
          if (!s.empty() && s.back() != ' ') s += '.';
          s += e.text;
          break;
        case PathElem::index:
          s += '[' + std::to_string(e.i) + ']';
          break;
        case PathElem::key:
          s += "['" + std::string(e.text) + "']";
          break;
      }
    }
    return s;
  }
  static std::string node_label(std::size_t index, std::string_view name) {
    if (name.empty()) return "node #" + std::to_string(index);
    return "node '" + std::string(name) + "' (#" + std::to_string(index) + ")";
  }
  std::string where() const {
    std::string s(source_);
    s += ": ";
    if (in_node_) s += node_label(node_index_, node_name_) + ": ";
    if (std::string path = format_path(); !path.empty()) s += path + ": ";
    return s;
  }

  // A dangling or forward reference is only known to be one or the other once
  // the named node turns up (or the nodes end), so the first one is held here
  // and reported as soon as that is decided, before any later error.
  struct PendingRef {
    bool active = false;
    std::size_t node_index = 0;
    std::string node_name;
    std::string path;
    std::string ref;
  };
  std::string pending_prefix() const {
    return std::string(source_) + ": " + node_label(pending_.node_index, pending_.node_name) + ": " +
           (pending_.path.empty() ? "" : pending_.path + ": ");
  }
  void throw_pending_if_any() const {
    if (!pending_.active) return;
    if (const auto* e = nodes_by_name_.find(pending_.ref))
      throw FormatError(pending_prefix() + "reference to node '" + pending_.ref + "' (#" +
                        std::to_string(e->index) +
                        "), which comes later (nodes must be in topological order)");
    throw FormatError(pending_prefix() + "reference to unknown node '" + pending_.ref + "'");
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw_pending_if_any();
    throw FormatError(where() + what);
  }
  void once(bool& seen, std::string_view key) {
    if (seen) fail("duplicate field '" + std::string(key) + "'");
    seen = true;
  }

  // ---------------------------------------------------------------- ARG

  Arg parse_arg(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_ws();
    if (p_ >= end_) expected("a value");
    switch (*p_) {
      case '"': return Arg(std::string(parse_string(str_buf_)));
      case '[': return Arg(parse_arg_list(depth));
      case '{': return parse_arg_object(depth);
      case 't': if (consume_literal("true")) return Arg(true); break;
      case 'f': if (consume_literal("false")) return Arg(false); break;
      case 'n': if (consume_literal("null")) return Arg(None{}); break;
      default:
        if (*p_ == '-' || is_digit(*p_)) {
          Number n = parse_number();
          return n.is_float ? Arg(n.d) : Arg(n.i);
        }
    }
    expected("a value");
  }

  // The list at p_ ('[').
  ArgList parse_arg_list(int depth) {
    ++p_;
    // Elements gather in a per-depth buffer, so the list is allocated once at its size.
    std::vector<Arg>& tmp = arg_scratch_[static_cast<std::size_t>(depth)];
    const std::size_t base = tmp.size();
    for_each_item([&](std::size_t i) {
      PathScope ps(*this, PathElem{PathElem::index, {}, i});
      tmp.push_back(parse_arg(depth + 1));
    });
    ArgList out(std::make_move_iterator(tmp.begin() + static_cast<std::ptrdiff_t>(base)),
                std::make_move_iterator(tmp.end()));
    tmp.resize(base);
    return out;
  }

  // The object at p_ ('{') as an ArgDict: kwargs, and the inside of {"dict": ...}.
  ArgDict parse_arg_dict(int depth) {
    ++p_;
    ArgDict d;
    for_each_member("a string key", [&](std::string_view k) {
      std::string key(k);
      if (d.contains(key)) fail("duplicate key '" + key + "'");
      PathScope ps(*this, PathElem{PathElem::key, key, 0});
      Arg v = parse_arg(depth + 1);
      d.set(std::move(key), std::move(v));
    });
    return d;
  }

  enum class ObjKind { node, dtype, device, enum_, sym, repr, float_, slice, dict };
  static std::optional<ObjKind> arg_object_kind(std::string_view key) {
    if (is(key, "node")) return ObjKind::node;
    if (is(key, "dtype")) return ObjKind::dtype;
    if (is(key, "device")) return ObjKind::device;
    if (is(key, "enum")) return ObjKind::enum_;
    if (is(key, "sym")) return ObjKind::sym;
    if (is(key, "repr")) return ObjKind::repr;
    if (is(key, "float")) return ObjKind::float_;
    if (is(key, "slice")) return ObjKind::slice;
    if (is(key, "dict")) return ObjKind::dict;
    return std::nullopt;
  }

  // The one-key object at p_ ('{'): {"node": ...}, {"dtype": ...}, ...
  Arg parse_arg_object(int depth) {
    ++p_;
    skip_ws();
    if (p_ < end_ && *p_ == '}')
      fail("{} is not an ARG (an ARG object has exactly one key: node, dtype, device, enum, float, slice, sym, dict "
           "or repr)");
    if (p_ >= end_ || *p_ != '"') expected("a string key");
    const std::string_view key = parse_string(key_buf_);
    const std::optional<ObjKind> kind = arg_object_kind(key);
    if (!kind)
      fail("unknown ARG object {\"" + std::string(key) +
           "\": ...} (expected one of node, dtype, device, enum, float, slice, sym, dict, repr)");
    const std::string key_name(key);
    expect(':', "':' after an object key");
    skip_ws();
    auto string_value = [&]() -> std::string_view {
      if (p_ >= end_ || *p_ != '"') fail("{\"" + key_name + "\": ...} needs a string, got " + describe_value());
      return parse_string(str_buf_);
    };
    Arg result;
    switch (*kind) {
      case ObjKind::node: result = resolve_ref(string_value()); break;
      case ObjKind::dtype: {
        std::string_view s = string_value();
        auto dt = dtype_from_name(s);
        if (!dt) fail("unknown dtype '" + std::string(s) + "' in {\"dtype\": ...}");
        result = Arg(*dt);
        break;
      }
      case ObjKind::device: result = Arg(Device{std::string(string_value())}); break;
      case ObjKind::enum_: result = Arg(EnumConst{std::string(string_value())}); break;
      case ObjKind::sym: result = Arg(SymInt{std::string(string_value())}); break;
      case ObjKind::repr: result = Arg(Repr{std::string(string_value())}); break;
      case ObjKind::float_: {
        std::string_view s = string_value();
        if (s == "inf") result = Arg(std::numeric_limits<double>::infinity());
        else if (s == "-inf") result = Arg(-std::numeric_limits<double>::infinity());
        else if (s == "nan") result = Arg(std::numeric_limits<double>::quiet_NaN());
        else fail("{\"float\": ...} must be \"inf\", \"-inf\" or \"nan\", got \"" + std::string(s) + "\"");
        break;
      }
      case ObjKind::slice: {
        if (p_ >= end_ || *p_ != '[')
          fail("{\"slice\": ...} needs a list [start, stop, step], got " + describe_value());
        PathScope ps(*this, "slice");
        Slice s;
        s.parts = parse_arg_list(depth + 1);
        if (s.parts.size() != 3)
          fail("needs exactly 3 items (start, stop, step), got " + std::to_string(s.parts.size()));
        result = Arg(std::move(s));
        break;
      }
      case ObjKind::dict: {
        if (p_ >= end_ || *p_ != '{') fail("{\"dict\": ...} needs an object, got " + describe_value());
        PathScope ps(*this, "dict");
        result = Arg(parse_arg_dict(depth + 1));
        break;
      }
    }
    skip_ws();
    if (p_ < end_ && *p_ == ',')
      fail("an ARG object has exactly one key, but {\"" + key_name + "\": ...} has more");
    expect('}', "'}' closing the ARG object");
    return result;
  }

  Arg resolve_ref(std::string_view name) {
    if (const auto* e = nodes_by_name_.find(name)) return Arg(e->node);
    if (!pending_.active) {
      pending_.active = true;
      pending_.node_index = node_index_;
      pending_.node_name = std::string(node_name_);
      pending_.path = format_path();
      pending_.ref = std::string(name);
    }
    return Arg(None{});  // the graph is discarded once the pending error is thrown
  }

  // ---------------------------------------------------------------- meta

  // `what`: "size" or "stride", neither of which a tensor has negative.
  Dim parse_dim(const char* what) {
    skip_ws();
    if (p_ < end_ && (*p_ == '-' || is_digit(*p_))) {
      Number n = parse_number();
      if (n.is_float) fail("expected an integer or {\"sym\": NAME}, got the float " + std::string(n.text));
      if (n.i < 0) fail(std::string("a tensor's ") + what + " is never negative, got " + std::string(n.text));
      return Dim(n.i);
    }
    if (p_ < end_ && *p_ == '{') {
      ++p_;
      skip_ws();
      if (p_ < end_ && *p_ == '"' && parse_string(key_buf_) == "sym") {
        expect(':', "':' after an object key");
        skip_ws();
        if (p_ >= end_ || *p_ != '"') fail("{\"sym\": ...} needs a string, got " + describe_value());
        SymInt s{std::string(parse_string(str_buf_))};
        expect('}', "'}' closing {\"sym\": ...}");
        return Dim(std::move(s));
      }
      fail("expected an integer or {\"sym\": NAME}, got another object");
    }
    fail("expected an integer or {\"sym\": NAME}, got " + describe_value());
  }
  std::vector<Dim> parse_dims(const char* what) {
    skip_ws();
    if (p_ >= end_ || *p_ != '[') fail("expected a list of sizes, got " + describe_value());
    ++p_;
    // Gathered in a reused buffer, so the result is allocated once at its size.
    dim_scratch_.clear();
    for_each_item([&](std::size_t i) {
      PathScope ps(*this, PathElem{PathElem::index, {}, i});
      dim_scratch_.push_back(parse_dim(what));
    });
    return std::vector<Dim>(std::make_move_iterator(dim_scratch_.begin()), std::make_move_iterator(dim_scratch_.end()));
  }

  TensorMeta parse_tensor_meta_members(std::string_view first_key) {
    TensorMeta t;
    bool seen_shape = false, seen_dtype = false, seen_stride = false;
    auto member = [&](std::string_view key) {
      if (is(key, "shape")) {
        once(seen_shape, key);
        PathScope ps(*this, "shape");
        t.shape = parse_dims("size");
      } else if (is(key, "dtype")) {
        once(seen_dtype, key);
        PathScope ps(*this, "dtype");
        std::string_view s = expect_string_value("a dtype name");
        auto dt = dtype_from_name(s);
        if (!dt) fail("unknown dtype '" + std::string(s) + "'");
        t.dtype = *dt;
      } else if (is(key, "stride")) {
        once(seen_stride, key);
        PathScope ps(*this, "stride");
        t.stride = parse_dims("stride");
      } else {
        fail("unknown field '" + std::string(key) + "' in a TENSOR_META (it has shape, dtype and stride)");
      }
    };
    // The first key was read by the caller to tell a TENSOR_META from {"sym": ...}.
    expect(':', "':' after an object key");
    skip_ws();
    member(first_key);
    skip_ws();
    if (p_ < end_ && *p_ == ',') {
      ++p_;
      // for_each_member expects to be just after '{'; a ',' position works the same
      // except that an immediate '}' would be a trailing comma, which JSON forbids.
      skip_ws();
      if (p_ < end_ && *p_ == '}') expected("a field name");
      for_each_member("a field name", member);
    } else {
      expect('}', "',' or '}'");
    }
    if (!seen_shape) fail("a TENSOR_META needs \"shape\"");
    if (!seen_dtype) fail("a TENSOR_META needs \"dtype\"");
    return t;
  }

  MetaVal parse_meta_val(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_ws();
    if (p_ >= end_) expected("a value");
    const char c = *p_;
    if (c == 'n' && consume_literal("null")) return MetaVal{};
    if (c == '-' || is_digit(c)) {
      Number n = parse_number();
      if (!n.is_float) return MetaVal(n.i);
      fail("expected a TENSOR_META, a list of them, an integer or {\"sym\": NAME}; got the float " +
           std::string(n.text));
    }
    if (c == '[') {
      ++p_;
      MetaVal::List items;
      for_each_item([&](std::size_t i) {
        PathScope ps(*this, PathElem{PathElem::index, {}, i});
        items.push_back(parse_meta_val(depth + 1));
      });
      return MetaVal(std::move(items));
    }
    if (c == '{') {
      ++p_;
      skip_ws();
      if (p_ < end_ && *p_ == '}') fail("a TENSOR_META needs \"shape\" and \"dtype\"; got {}");
      if (p_ >= end_ || *p_ != '"') expected("a field name");
      std::string_view key = parse_string(key_buf_);
      if (is(key, "sym")) {
        expect(':', "':' after an object key");
        skip_ws();
        if (p_ >= end_ || *p_ != '"') fail("{\"sym\": ...} needs a string, got " + describe_value());
        SymInt s{std::string(parse_string(str_buf_))};
        skip_ws();
        if (p_ < end_ && *p_ == ',') fail("{\"sym\": ...} has exactly one key");
        expect('}', "'}' closing {\"sym\": ...}");
        return MetaVal(std::move(s));
      }
      return shared_tensor_meta(parse_tensor_meta_members(key));
    }
    fail("expected a TENSOR_META, a list of them, an integer or {\"sym\": NAME}; got " + describe_value());
  }

  // A tensor meta equal to one read recently shares its value (MetaVal is copy on
  // write, so no node sees another's edits). A graph's activations have a handful
  // of shapes: sharing saves a third of a large graph's memory, and erasing a node
  // then drops a reference instead of freeing a value and its two vectors.
  MetaVal shared_tensor_meta(TensorMeta t) {
    for (const MetaVal& m : recent_tensor_metas_)
      if (const TensorMeta* r = m.tensor(); r && *r == t) return m;
    MetaVal v(std::move(t));
    recent_tensor_metas_[next_recent_tensor_meta_++ % recent_tensor_metas_.size()] = v;
    return v;
  }

  void parse_meta(NodeMeta& meta) {
    PathScope ps(*this, "meta");
    skip_ws();
    if (p_ >= end_ || *p_ != '{') fail("expected an object, got " + describe_value());
    ++p_;
    meta.present = true;
    bool seen_val = false;
    for_each_member("a field name", [&](std::string_view key) {
      if (is(key, "val")) {
        once(seen_val, key);
        PathScope vs(*this, "val");
        meta.val = parse_meta_val(0);
        return;
      }
      std::string k(key);
      for (const auto& [name, raw] : meta.extra_json)
        if (name == k) fail("duplicate field '" + k + "'");
      PathScope ks(*this, PathElem{PathElem::field, k, 0});
      const char* start = p_;
      skip_value(0);
      meta.extra_json.emplace_back(std::move(k), compact_json(start, p_));
    });
  }

  // ---------------------------------------------------------------- nodes

  static bool is_valid_node_name(std::string_view s) {
    if (s.empty() || is_digit(s[0])) return false;
    for (char c : s)
      if (!(is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) return false;
    return true;
  }

  void parse_nodes(Graph& g) {
    PathScope ps(*this, "nodes");
    skip_ws();
    if (p_ >= end_ || *p_ != '[') fail("expected a list of nodes, got " + describe_value());
    ++p_;
    // About 150 bytes per node in practice; reserving avoids rehashing a large table.
    const std::size_t estimate = static_cast<std::size_t>(end_ - p_) / 160 + 16;
    nodes_by_name_.reserve(estimate);
    g.reserve(estimate);
    for_each_item([&](std::size_t i) { parse_node(g, i); });
    if (pending_.active) throw_pending_if_any();
    if (!output_) fail("no output node (the last node must have op \"output\")");
  }

  void parse_node(Graph& g, std::size_t index) {
    in_node_ = true;  // messages now start with the node label instead of "nodes[i]"
    node_index_ = index;
    node_name_ = {};
    path_base_ = path_len_;
    if (p_ >= end_ || *p_ != '{') {
      if (p_ >= end_) expected("a node object");
      fail("a node must be an object, got " + describe_value());
    }
    ++p_;
    std::string name_buf, target_buf;
    std::string_view name, target;
    OpKind op = OpKind::call_function;
    bool seen_name = false, seen_op = false, seen_target = false, seen_args = false, seen_kwargs = false,
         seen_meta = false;
    ArgList args;
    ArgDict kwargs;
    NodeMeta meta;
    meta.present = false;
    for_each_member("a field name", [&](std::string_view key) {
      if (is(key, "name")) {
        once(seen_name, key);
        PathScope ps(*this, "name");
        if (p_ >= end_ || *p_ != '"') fail("expected a string, got " + describe_value());
        name = parse_string(name_buf);
        node_name_ = name;
      } else if (is(key, "op")) {
        once(seen_op, key);
        PathScope ps(*this, "op");
        std::string_view s = expect_string_value("a string");
        auto k = op_kind_from_name(s);
        if (!k)
          fail("unknown op kind '" + std::string(s) +
               "' (expected placeholder, get_attr, call_function, call_method, call_module or output)");
        op = *k;
      } else if (is(key, "target")) {
        once(seen_target, key);
        PathScope ps(*this, "target");
        if (p_ >= end_ || *p_ != '"') fail("expected a string, got " + describe_value());
        target = parse_string(target_buf);
      } else if (is(key, "args")) {
        once(seen_args, key);
        PathScope ps(*this, "args");
        if (p_ >= end_ || *p_ != '[') fail("expected a list, got " + describe_value());
        args = parse_arg_list(0);
      } else if (is(key, "kwargs")) {
        once(seen_kwargs, key);
        PathScope ps(*this, "kwargs");
        if (p_ >= end_ || *p_ != '{') fail("expected an object, got " + describe_value());
        kwargs = parse_arg_dict(0);
      } else if (is(key, "meta")) {
        once(seen_meta, key);
        parse_meta(meta);
      } else {
        fail("unknown field '" + std::string(key) + "' (a node has name, op, target, args, kwargs and meta)");
      }
    });
    if (!seen_name) fail("missing field 'name'");
    if (!seen_op) fail("missing field 'op'");
    if (!seen_target) fail("missing field 'target'");
    if (!seen_args) fail("missing field 'args'");
    if (!seen_kwargs) fail("missing field 'kwargs'");
    if (pending_.active && pending_.node_index == index) {
      pending_.node_name = std::string(name);
      if (pending_.ref == name)
        throw FormatError(pending_prefix() + "reference to the node itself ('" + pending_.ref + "')");
    }
    if (output_) {
      if (op == OpKind::output)
        fail("more than one output node (the first is " + node_label(output_index_, output_->name()) + ")");
      fail("comes after the output " + node_label(output_index_, output_->name()) +
           "; the output node must be last");
    }
    if (op == OpKind::output && args.size() != 1) {
      PathScope ps(*this, "args");
      fail("an output node takes exactly one argument (the list of returned values), got " +
           std::to_string(args.size()));
    }
    {
      PathScope ps(*this, "name");
      if (!is_valid_node_name(name))
        fail("'" + std::string(name) +
             "' is not a valid node name (letters, digits and '_', not starting with a digit)");
      if (const auto* e = nodes_by_name_.find(name))
        fail("duplicate node name '" + std::string(name) + "' (already used by node #" + std::to_string(e->index) +
             ")");
    }
    Node* n = nullptr;
    try {
      const OpRef t = OpRegistry::instance().intern(target);
      n = g.create_node(op, t, std::move(args), std::move(kwargs), name);
    } catch (const kiln::Error& e) {
      fail(e.what());
    }
    if (n->name() != name) {
      PathScope ps(*this, "name");
      fail("the graph renamed node '" + std::string(name) + "' to '" + n->name() + "'");
    }
    n->meta = std::move(meta);
    nodes_by_name_.insert(n->name(), {n, index});
    if (pending_.active && pending_.ref == n->name()) throw_pending_if_any();
    if (op == OpKind::output) {
      output_ = n;
      output_index_ = index;
    }
    in_node_ = false;
    node_name_ = {};
  }

  // ---------------------------------------------------------------- weights

  void parse_weights(WeightsTable& table) {
    PathScope ps(*this, "weights");
    skip_ws();
    if (p_ >= end_ || *p_ != '{') fail("expected an object {ATTR: {\"file\": PATH}, ...}, got " + describe_value());
    ++p_;
    for_each_member("an attribute name", [&](std::string_view k) {
      std::string attr(k);
      if (find_weight(table, attr)) fail("duplicate entry '" + attr + "'");
      PathScope es(*this, PathElem{PathElem::key, attr, 0});
      if (p_ >= end_ || *p_ != '{') fail("expected an object {\"file\": PATH}, got " + describe_value());
      ++p_;
      std::optional<std::string> file;
      for_each_member("a field name", [&](std::string_view field) {
        if (field != "file") fail("unknown field '" + std::string(field) + "' (an entry is {\"file\": PATH})");
        if (file) fail("duplicate field 'file'");
        PathScope fs(*this, "file");
        file = std::string(expect_string_value("a string (a .npy path relative to the JSON file)"));
      });
      if (!file) fail("missing \"file\" (an entry is {\"file\": PATH})");
      table.emplace_back(std::move(attr), std::move(*file));
    });
  }

  // ---------------------------------------------------------------- modules

  // {PATH: {"class": QUALIFIED_NAME, OTHER: any JSON, ...}, ...}: the other
  // members are kept as compact JSON text, in order, for the writer.
  [[gnu::cold]] void parse_modules(ModuleTable& table) {
    PathScope ps(*this, "modules");
    skip_ws();
    if (p_ >= end_ || *p_ != '{')
      fail("expected an object {MODULE_PATH: {\"class\": NAME, ...}, ...}, got " + describe_value());
    ++p_;
    for_each_member("a module path", [&](std::string_view k) {
      const std::string path(k);  // outlives the scope, which views it
      PathScope es(*this, PathElem{PathElem::key, path, 0});
      if (path.empty()) fail("a module path must not be empty");
      if (table.find(path)) fail("duplicate entry '" + path + "'");
      ModuleInfo info;
      info.path = path;
      if (p_ >= end_ || *p_ != '{') fail("expected an object {\"class\": NAME, ...}, got " + describe_value());
      ++p_;
      bool seen_class = false;
      for_each_member("a field name", [&](std::string_view field) {
        if (field == "class") {
          once(seen_class, field);
          PathScope fs(*this, "class");
          info.class_name = std::string(expect_string_value("a string (the module's fully qualified class name)"));
          if (info.class_name.empty()) fail("expected a fully qualified class name, got \"\"");
          return;
        }
        std::string name(field);
        for (const auto& [other, text] : info.fields)
          if (other == name) fail("duplicate field '" + name + "'");
        PathScope fs(*this, name);
        const char* b = p_;
        skip_value(1);
        info.fields.emplace_back(std::move(name), compact_json(b, p_));
      });
      if (!seen_class) fail("missing field 'class'");
      try {
        table.set(std::move(info));
      } catch (const kiln::Error& e) {
        fail(e.what());
      }
    });
  }

  // ---------------------------------------------------------------- state

  std::string_view source_;

  std::array<MetaVal, 8> recent_tensor_metas_;  // see shared_tensor_meta
  std::size_t next_recent_tensor_meta_ = 0;
  std::vector<std::vector<Arg>> arg_scratch_;
  std::vector<Dim> dim_scratch_;
  NodeNameTable nodes_by_name_;
  Node* output_ = nullptr;
  std::size_t output_index_ = 0;

  bool in_node_ = false;
  std::size_t node_index_ = 0;
  std::string_view node_name_;
  // The field path of the value being parsed (a fixed stack: pushed and popped
  // for every value, so it must cost next to nothing).
  std::array<PathElem, 2 * kMaxDepth + 16> path_{};
  std::size_t path_len_ = 0;
  std::size_t path_base_ = 0;  // where the current node's part of path_ starts
  PendingRef pending_;
};

}  // namespace detail

// Parses an fx-graph-json document held in memory. `source_name` prefixes error
// messages. Weight paths stay relative (base_dir is empty).
inline GraphFile parse_fx_json(std::string_view text, std::string_view source_name = "<string>") {
  return detail::FxJsonParser(text, source_name).parse();
}

// Reads an fx-graph-json file, plain or gzip-compressed (decided by its first
// bytes, not its name; a compressed one may hold at most `max_decompressed`
// bytes). base_dir is the file's directory.
inline GraphFile read_fx_json(const std::filesystem::path& path,
                              std::size_t max_decompressed = kDefaultMaxDecompressedBytes) {
  const std::string text = read_file(path, max_decompressed);
  GraphFile f = parse_fx_json(text, path.string());
  f.base_dir = std::filesystem::absolute(path).parent_path();
  return f;
}

}  // namespace kiln::io
