#pragma once
// Inductor's rule for a call pattern's keyword children (_TargetArgsExpr._match):
//
//   - when the node has fewer kwargs than the pattern has keyword children, its
//     arguments are normalized through the op schema (torch.fx's
//     normalize_function): the positional arguments stay, every later schema
//     parameter becomes a kwarg, in schema order, given or defaulted;
//   - otherwise the node's kwargs are taken as they are;
//   - either way the kwargs the pattern does not name are dropped, and the
//     names left must be the pattern's keyword names in the same order.
//
// keyword_values() applies it without building anything: out[i] receives the
// node's value for names[i] (a pointer into the node or into the schema's
// defaults). It does not check the positional argument count, which the
// caller compares with the pattern's before (Inductor does so first too).
#include <span>
#include <string>
#include <string_view>

#include "kiln/core/node.hpp"
#include "kiln/core/op_schema.hpp"

namespace kiln::pattern {

namespace detail {
[[gnu::cold, gnu::noinline]] inline bool keyword_rule_fails(const Node* n, std::string* why, const std::string& what) {
  if (why && why->empty()) *why = "node " + n->name() + ": " + what;
  return false;
}
[[gnu::cold, gnu::noinline]] inline std::string keyword_names_text(std::span<const std::string_view> names) {
  std::string s = "(";
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s + ")";
}
}  // namespace detail

inline bool keyword_values(const Node* n, std::span<const std::string_view> names, const kiln::Arg** out,
                           std::string* why) {
  const ArgDict& kwargs = n->kwargs();
  auto named = [&](std::string_view k) {
    for (std::string_view want : names)
      if (want == k) return true;
    return false;
  };
  // The kept names must arrive in the pattern's order: the j-th kept one is names[j].
  std::size_t j = 0;
  auto keep = [&](std::string_view k, const kiln::Arg* v) {
    if (j >= names.size() || names[j] != k) return false;
    out[j++] = v;
    return true;
  };
  auto structure_differs = [&] {
    return detail::keyword_rule_fails(n, why,
                                      "args_structure: its keyword arguments do not line up with the pattern's " +
                                          detail::keyword_names_text(names));
  };

  if (kwargs.size() >= names.size()) {
    for (const auto& [k, v] : kwargs)
      if (named(k) && !keep(k, &v)) return structure_differs();
    return j == names.size() || structure_differs();
  }

  // Fewer kwargs than the pattern names: normalize through the schema.
  const OpSchema* schema = OpSchemaRegistry::instance().find(n->target());
  if (!schema)
    return detail::keyword_rule_fails(n, why,
                                      "function_mismatch: it has " + std::to_string(kwargs.size()) +
                                          " keyword arguments, the pattern " + std::to_string(names.size()) +
                                          ", and " + std::string(n->target_name()) +
                                          " has no op schema to normalize them with");
  const auto& params = schema->params;
  const std::size_t nargs = n->args().size();
  // Binding the call to the signature: too many positionals, an unknown or a
  // repeated keyword, or a required parameter left out all fail it.
  if (nargs > params.size() || (nargs > 0 && params[nargs - 1].keyword_only))
    return detail::keyword_rule_fails(n, why, "function_mismatch: more positional arguments than its schema takes");
  for (const auto& [k, v] : kwargs) {
    const int idx = schema->index_of(k);
    if (idx < 0 || static_cast<std::size_t>(idx) < nargs)
      return detail::keyword_rule_fails(n, why, "function_mismatch: keyword argument '" + k + "' does not bind to its schema");
  }
  // Inductor wants at least as many normalized kwargs as the pattern names.
  if (params.size() - nargs < names.size()) return structure_differs();
  for (std::size_t i = nargs; i < params.size(); ++i) {
    const OpParam& p = params[i];
    const kiln::Arg* v = kwargs.find(p.name);
    if (!v && p.default_value) v = &*p.default_value;
    if (!v)
      return detail::keyword_rule_fails(n, why, "function_mismatch: no value for parameter '" + p.name + "'");
    if (named(p.name) && !keep(p.name, v)) return structure_differs();
  }
  return j == names.size() || structure_differs();
}

}  // namespace kiln::pattern
