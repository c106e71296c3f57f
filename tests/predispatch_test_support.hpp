#pragma once
// Graph building and checking for the pre-dispatch and aten split/cat suites:
// nodes with meta, running one pass by name, and the numeric check of the
// original graph against the rewritten one.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/executor/numeric_check.hpp"

namespace kiln::test {

using Sizes = std::vector<std::int64_t>;

inline TensorMeta f32(const Sizes& shape) {
  return TensorMeta{std::vector<Dim>(shape.begin(), shape.end()), DType::float32, std::nullopt};
}
inline Node* input(Graph& g, std::string_view name, const Sizes& shape) { return g.placeholder(name, f32(shape)); }
inline Node* call(Graph& g, OpRef op, ArgList args, const Sizes& shape, ArgDict kwargs = {}) {
  Node* n = g.call_function(op, std::move(args), std::move(kwargs));
  n->meta.val = f32(shape);
  return n;
}
// A split-like call whose result is one piece per shape in `pieces`.
inline Node* multi(Graph& g, OpRef op, ArgList args, const std::vector<Sizes>& pieces, ArgDict kwargs = {}) {
  Node* n = g.call_function(op, std::move(args), std::move(kwargs));
  MetaVal::List parts;
  for (const Sizes& p : pieces) parts.push_back(MetaVal(f32(p)));
  n->meta.val = MetaVal(std::move(parts));
  return n;
}
inline Node* item(Graph& g, Node* source, std::int64_t i) {
  Node* n = g.call_function(pyop::getitem, {Arg(source), Arg(i)});
  const auto& parts = *source->meta.val.list();
  const std::int64_t k = i < 0 ? i + static_cast<std::int64_t>(parts.size()) : i;
  n->meta.val = parts.at(static_cast<std::size_t>(k));
  return n;
}
inline ArgList list(std::initializer_list<Node*> nodes) {
  ArgList l;
  for (Node* n : nodes) l.push_back(Arg(n));
  return l;
}

// Runs the named passes on `g` (linted after each) and returns the counters.
inline Counters run_passes(Graph& g, const std::vector<std::string>& names, nlohmann::json options = nlohmann::json::object()) {
  static const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.set_options(std::move(options));
  pm.run(g, names);
  lint(g);
  return pm.counters();
}
inline std::size_t count_calls(const Graph& g, OpRef op) { return g.find_nodes(OpKind::call_function, op).size(); }

// Runs `name` on a copy of `g`, checks the copy's outputs against g's on the
// same random inputs, and returns the counters; the copy replaces g.
inline Counters run_checked(Graph& g, const std::vector<std::string>& names, runtime::Weights weights = {},
                            nlohmann::json options = nlohmann::json::object()) {
  Graph original = g.clone();
  runtime::NumericCheck check(original, weights);
  Counters c = run_passes(g, names, std::move(options));
  const runtime::NumericReport r = check.compare(g);
  INFO(r.summary());
  CHECK(r.ok);
  return c;
}

}  // namespace kiln::test
