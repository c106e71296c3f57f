#pragma once
// How a call pattern's keyword children meet a node's keyword arguments.
//
// Inductor's rule (_TargetArgsExpr._match), kiln's default: the node has as
// many positional arguments as the pattern has positional children (checked
// first, by the caller). Then
//  - if the node has FEWER kwargs than the pattern has keyword children, its
//    call is normalized through the op's schema (torch.fx's normalize_function):
//    the parameters after its positional ones become kwargs in schema order,
//    given or defaulted; no schema, an unknown kwarg or a missing required
//    parameter is no match;
//  - otherwise its kwargs that the pattern does not name are dropped;
// and the names left must be the pattern's keyword names in the same order
// (Inductor compares the flattened argument structure, where order counts).
//
// KeywordRule::normalize is kiln's looser rule, an option: a keyword child is
// looked up by name among the kwargs, then among extra positional arguments
// through the schema, then the schema's default; order does not matter.
#include <span>
#include <vector>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/core/node.hpp"
#include "kiln/core/op_schema.hpp"

namespace kiln::pattern {

enum class KeywordRule : std::uint8_t {
  inductor,   // Inductor 2.11's rule (the default)
  normalize,  // look every keyword child up by name, through the schema; order-free
};

namespace detail {
// Keeps the first reason given, as the matchers' explanations do.
inline void keyword_rule_why(std::string* why, const std::string& text) {
  if (why && why->empty()) *why = text;
}
[[gnu::noinline]] inline bool keyword_structure_differs(const Node* n, std::span<const std::string_view> names,
                                                        std::span<const std::string_view> found, std::string* why) {
  if (why && why->empty()) {
    auto join = [](auto list) {
      std::string s = "(";
      for (std::size_t i = 0; i < list.size(); ++i) s += (i ? ", " : "") + std::string(list[i]);
      return s + ")";
    };
    *why = "node " + n->name() + ": args_structure: keyword arguments " + join(found) + ", the pattern wants " +
           join(names);
  }
  return false;
}
}  // namespace detail

// Inductor's rule: fills out[i] with the node's value for keyword child
// names[i] (a kwarg of the node, or a schema default), or returns false and,
// when `why` is given, says why. The values stay valid while the node and the
// schema registry are unchanged.
inline bool keyword_values(const Node* n, std::span<const std::string_view> names, const kiln::Arg** out,
                           std::string* why) {
  const ArgDict& kwargs = n->kwargs();
  constexpr std::size_t kInline = 8;  // keyword children per pattern, in practice
  std::string_view found_inline[kInline];
  std::vector<std::string_view> found_heap;
  std::string_view* found = found_inline;
  if (names.size() > kInline) {
    found_heap.resize(names.size());
    found = found_heap.data();
  }
  std::size_t count = 0;
  // Records name `k` (value `v`) if the pattern names it; false once more
  // names are found than the pattern has, which cannot line up.
  auto keep = [&](std::string_view k, const kiln::Arg* v) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] != k) continue;
      if (count == names.size()) return false;
      found[count] = k;
      out[count] = v;
      ++count;
      return true;
    }
    return true;
  };
  bool fits = true;
  if (kwargs.size() < names.size()) {
    const OpSchema* schema = n->op() == OpKind::call_function ? OpSchemaRegistry::instance().find(n->target()) : nullptr;
    if (!schema) {
      detail::keyword_rule_why(why, "node " + n->name() + ": function_mismatch: " + std::to_string(kwargs.size()) +
                               " keyword arguments, fewer than the pattern's " + std::to_string(names.size()) +
                               ", and no schema of " + std::string(n->target_name()) + " to normalize them");
      return false;
    }
    const std::size_t nargs = n->args().size();
    // Binding as Python would: every kwarg must be a parameter not given positionally.
    for (const auto& [k, v] : kwargs) {
      const int idx = schema->index_of(k);
      if (idx < 0 || static_cast<std::size_t>(idx) < nargs) {
        detail::keyword_rule_why(why, "node " + n->name() + ": function_mismatch: '" + k + "' does not bind to the schema of " +
                                 std::string(n->target_name()));
        return false;
      }
    }
    if (nargs > schema->params.size() ||
        (nargs > 0 && schema->params[nargs - 1].keyword_only)) {
      detail::keyword_rule_why(why, "node " + n->name() + ": function_mismatch: too many positional arguments for the schema of " +
                               std::string(n->target_name()));
      return false;
    }
    for (std::size_t i = nargs; i < schema->params.size() && fits; ++i) {
      const OpParam& p = schema->params[i];
      const kiln::Arg* v = kwargs.find(p.name);
      if (!v) v = p.default_value ? &*p.default_value : nullptr;
      if (!v) {
        detail::keyword_rule_why(why, "node " + n->name() + ": function_mismatch: no value for '" + p.name + "' of " +
                                 std::string(n->target_name()));
        return false;
      }
      fits = keep(p.name, v);
    }
  } else {
    for (const auto& [k, v] : kwargs) {
      if (!keep(k, &v)) {
        fits = false;
        break;
      }
    }
  }
  bool same = fits && count == names.size();
  for (std::size_t i = 0; same && i < count; ++i) same = found[i] == names[i];
  if (same) return true;
  return detail::keyword_structure_differs(n, names, {found, count}, why);
}

// kiln's KeywordRule::normalize for one name: the node's kwarg, else the
// positional argument in that parameter's place (at or after `first_extra`),
// else the schema default; nullptr when none.
inline const kiln::Arg* keyword_value_normalized(const Node* n, std::string_view name, std::size_t first_extra) {
  if (const kiln::Arg* v = n->kwargs().find(name)) return v;
  const OpSchema* schema = OpSchemaRegistry::instance().find(n->target());
  if (!schema) return nullptr;
  const int idx = schema->index_of(name);
  if (idx < 0) return nullptr;
  const auto i = static_cast<std::size_t>(idx);
  const OpParam& p = schema->params[i];
  if (!p.keyword_only && i < n->args().size() && i >= first_extra) return &n->args()[i];
  return p.default_value ? &*p.default_value : nullptr;
}

// Under KeywordRule::normalize, whether a node's positional arguments past the
// pattern's `num_positional` are all schema parameters that `names` name (so
// none goes unmatched).
inline bool extra_args_named(const Node* n, std::size_t num_positional, std::span<const std::string_view> names) {
  const OpSchema* schema = OpSchemaRegistry::instance().find(n->target());
  if (!schema) return false;
  for (std::size_t i = num_positional; i < n->args().size(); ++i) {
    if (i >= schema->params.size() || schema->params[i].keyword_only) return false;
    bool named = false;
    for (std::string_view k : names) named |= k == schema->params[i].name;
    if (!named) return false;
  }
  return true;
}

}  // namespace kiln::pattern
