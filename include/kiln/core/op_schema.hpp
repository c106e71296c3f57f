#pragma once
// Op schemas: parameter names, which are keyword-only, and defaults. The pattern
// matcher uses them to normalize a node's arguments to a pattern's keyword
// children (Inductor calls torch.fx's normalize_function for this): an argument
// given positionally is found under its schema name, and one not given at all
// takes its default. Declared in one line per op, in a Python-like signature:
//   declare_op_schema(aten::add_Tensor, "self, other, *, alpha=1");
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/core/arg.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/op_ref.hpp"

namespace kiln {

struct OpParam {
  std::string name;
  std::optional<Arg> default_value;
  bool keyword_only = false;
};

struct OpSchema {
  std::vector<OpParam> params;
  // Index of parameter `name`, or -1.
  int index_of(std::string_view name) const {
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].name == name) return static_cast<int>(i);
    return -1;
  }
};

namespace detail {
// Parses a default value: ints, floats, None, True, False, 'strings', [lists].
inline Arg parse_schema_default(std::string_view s, std::string_view op, std::string_view param) {
  auto trim = [](std::string_view x) {
    while (!x.empty() && x.front() == ' ') x.remove_prefix(1);
    while (!x.empty() && x.back() == ' ') x.remove_suffix(1);
    return x;
  };
  s = trim(s);
  auto bad = [&] {
    return Error("op schema of " + std::string(op) + ": cannot read the default of '" + std::string(param) +
                 "': " + std::string(s));
  };
  if (s == "None") return Arg();
  if (s == "True") return Arg(true);
  if (s == "False") return Arg(false);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front())
    return Arg(std::string(s.substr(1, s.size() - 2)));
  if (!s.empty() && s.front() == '[') {
    if (s.back() != ']') throw bad();
    ArgList items;
    std::string_view body = trim(s.substr(1, s.size() - 2));
    while (!body.empty()) {
      auto comma = body.find(',');
      items.push_back(parse_schema_default(body.substr(0, comma), op, param));
      if (comma == std::string_view::npos) break;
      body = trim(body.substr(comma + 1));
    }
    return Arg(std::move(items));
  }
  std::string text(s);
  try {
    std::size_t used = 0;
    if (text.find_first_of(".eE") == std::string::npos || text == "inf") {
      long long v = std::stoll(text, &used);
      if (used == text.size()) return Arg(static_cast<std::int64_t>(v));
    }
    double d = std::stod(text, &used);
    if (used == text.size()) return Arg(d);
  } catch (const std::exception&) {
  }
  throw bad();
}
}  // namespace detail

// "self, other, *, alpha=1" -> schema.
inline OpSchema parse_op_schema(std::string_view op, std::string_view signature) {
  OpSchema schema;
  bool keyword_only = false;
  int depth = 0;
  std::size_t start = 0;
  auto flush = [&](std::string_view piece) {
    while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    while (!piece.empty() && piece.back() == ' ') piece.remove_suffix(1);
    if (piece.empty()) return;
    if (piece == "*") {
      keyword_only = true;
      return;
    }
    OpParam p;
    p.keyword_only = keyword_only;
    auto eq = piece.find('=');
    std::string_view name = piece.substr(0, eq);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    p.name = std::string(name);
    if (eq != std::string_view::npos) p.default_value = detail::parse_schema_default(piece.substr(eq + 1), op, p.name);
    schema.params.push_back(std::move(p));
  };
  for (std::size_t i = 0; i <= signature.size(); ++i) {
    const char c = i < signature.size() ? signature[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      flush(signature.substr(start, i - start));
      start = i + 1;
    }
  }
  return schema;
}

class OpSchemaRegistry {
 public:
  static OpSchemaRegistry& instance() {
    static OpSchemaRegistry r;
    return r;
  }
  bool declare(OpRef op, std::string_view signature) {
    OpSchema s = parse_op_schema(op.name, signature);
    std::unique_lock lock(mutex_);
    schemas_[op.hash] = std::move(s);
    return true;
  }
  // The schema of `op`, or nullptr when none was declared. The pointer stays
  // valid until the same op is declared again.
  const OpSchema* find(OpRef op) const {
    std::shared_lock lock(mutex_);
    auto it = schemas_.find(op.hash);
    return it == schemas_.end() ? nullptr : &it->second;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint64_t, OpSchema> schemas_;
};

inline bool declare_op_schema(OpRef op, std::string_view signature) {
  return OpSchemaRegistry::instance().declare(op, signature);
}

}  // namespace kiln

// One line per op: KILN_DECLARE_OP_SCHEMA(aten::add_Tensor, "self, other, *, alpha=1");
#define KILN_OP_SCHEMA_CAT2(a, b) a##b
#define KILN_OP_SCHEMA_CAT(a, b) KILN_OP_SCHEMA_CAT2(a, b)
#define KILN_DECLARE_OP_SCHEMA(op, signature)                                                \
  inline const bool KILN_OP_SCHEMA_CAT(kiln_op_schema_registered_, __LINE__) [[maybe_unused]] = \
      ::kiln::declare_op_schema(op, signature)
