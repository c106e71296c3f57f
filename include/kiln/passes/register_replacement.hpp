#pragma once
// register_replacement: a search graph and a replacement graph made into one
// pattern entry of a PatternMatcherPass (Inductor's register_replacement).
//
//   kiln::register_replacement(search, replace, pass);
//
// The search graph becomes a pattern as Inductor's gen_pattern makes it (ints,
// floats, lists, devices and dtypes ignored unless options.pattern says otherwise);
// a match is replaced by the replacement graph, whose placeholders are bound,
// in order, to the captures named after the search graph's placeholders (as
// Inductor's normalize_args takes the search function's argument names).
// Everything is checked at registration: a search placeholder that nothing
// uses (Inductor fails on it at match time: "Not all inputs to pattern found"),
// a replacement with another number of placeholders, or with nodes it cannot
// inline, is an error then, not when a match is being rewritten.
//
// Not carried over from Inductor: re-tracing both functions with each match's
// shapes (kiln inlines the replacement example as it is) and the specific
// pattern check that this re-tracing feeds.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern/from_graph.hpp"
#include "kiln/pattern/replace_with_graph.hpp"

namespace kiln {

struct ReplacementOptions {
  // How the search graph becomes a pattern; ignore_types starts as gen_pattern's.
  pattern::FxToPatternOptions pattern{.ignore_types = pattern::IgnoreTypes::all()};
  std::function<CheckResult(const pattern::RuntimeMatch&)> extra_check{};  // bool or a reason (check_result.hpp)
  PatternOptions pass{};  // prepend, name (default: the pattern's text)
};

// Registers the replacement in `pass` and returns the search pattern.
inline pattern::RuntimePattern register_replacement(const Graph& search, const Graph& replace, PatternMatcherPass& pass,
                                                    ReplacementOptions options = {}) {
  pattern::RuntimePattern p = pattern::fx_to_pattern(search, options.pattern);
  std::vector<std::string> argnames = pattern::fx_arg_names(search, options.pattern.argnames);
  const std::vector<Node*> placeholders = search.find_nodes(OpKind::placeholder);
  for (std::size_t i = 0; i < placeholders.size(); ++i)
    if (placeholders[i]->num_users() == 0)
      throw Error("register_replacement: search placeholder " + placeholders[i]->name() + " ('" + argnames[i] +
                  "') is not used, so no match could bind it");
  const auto checked = pattern::detail::check_replacement(replace);
  if (checked.placeholders.size() != argnames.size())
    throw Error("register_replacement: the replacement graph has " + std::to_string(checked.placeholders.size()) +
                " placeholders, the search graph " + std::to_string(argnames.size()));
  // The pass keeps the replacement: a copy of its own, shared by the handler's copies.
  auto repl = std::make_shared<const Graph>(replace.clone());
  auto handler = [repl, argnames = std::move(argnames)](pattern::RuntimeMatch& m) {
    std::vector<kiln::Arg> args;
    args.reserve(argnames.size());
    for (const std::string& name : argnames) args.push_back(m.get(name));
    pattern::replace_with_graph(m, *repl, args);
  };
  if (options.extra_check)
    pass.register_runtime_pattern(p, std::move(handler), std::move(options.extra_check), std::move(options.pass));
  else
    pass.register_runtime_pattern(p, std::move(handler), std::move(options.pass));
  return p;
}

}  // namespace kiln
