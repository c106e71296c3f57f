#pragma once
// Patterns from example graphs: Inductor's fx_to_pattern and gen_pattern.
//
//   kiln::Graph search = ...;  // built in C++ or read with kiln::io::read_fx_json
//   RuntimePattern p = gen_pattern(search);
//
// Each placeholder becomes a KeywordArg named after it (by `argnames` when
// given; else its target with a trailing _N removed, as Inductor de-mangles
// x_1 to x), or an ExclusiveKeywordArg for a name in `exclusive_arg_names`.
// Each call_function node becomes a call element of its target whose users
// count is the node's number of users in the example; its constant arguments
// stay constants unless `ignore_types` turns them into Ignored (getitem's index
// never is) or `scalar_workaround` turns a value into a KeywordArg. The output
// node's values are the pattern's outputs: one node, or several (a
// MultiOutputPattern). Like Inductor, call_method, call_module and get_attr
// nodes are refused.
#include <algorithm>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/pattern/python_equal.hpp"
#include "kiln/pattern/runtime_pattern.hpp"

namespace kiln::pattern {

// Which constant types fx_to_pattern turns into Ignored (Inductor's ignore_types).
struct IgnoreTypes {
  bool ints = false;     // Python int (not bool)
  bool floats = false;
  bool lists = false;    // a non-empty argument list whose items all became Ignored
  bool devices = false;
  bool dtypes = false;
  // gen_pattern's: (int, float, list, torch.device, torch.dtype).
  static IgnoreTypes all() { return {true, true, true, true, true}; }
};

struct FxToPatternOptions {
  IgnoreTypes ignore_types{};
  // Names of the placeholders in order (Inductor: the search function's parameter names).
  std::vector<std::string> argnames{};
  std::vector<std::string> exclusive_arg_names{};
  // name -> value: an argument equal to the value becomes KeywordArg(name) (Inductor's dropout_p workaround).
  std::vector<std::pair<std::string, kiln::Arg>> scalar_workaround{};
};

// The capture name each placeholder of `g` gets, in order.
inline std::vector<std::string> fx_arg_names(const Graph& g, const std::vector<std::string>& argnames = {}) {
  static const std::regex mangled("_[0-9]+$");
  std::vector<std::string> out;
  for (const Node* n : g.find_nodes(OpKind::placeholder)) {
    const std::string target(n->target_name());
    const std::size_t i = out.size();
    if (i < argnames.size()) {
      out.push_back(argnames[i]);
    } else if (!argnames.empty()) {
      // Inductor names the extra placeholders of a joint graph (tangents_1, ...) by their target.
      if (target.rfind("tangent", 0) != 0)
        throw Error("fx_to_pattern: placeholder " + n->name() + " has no name in argnames (" +
                    std::to_string(argnames.size()) + " given) and is not a tangent");
      out.push_back(target);
    } else {
      out.push_back(std::regex_replace(target, mangled, ""));
    }
  }
  return out;
}

namespace detail {

class FxToPattern {
 public:
  FxToPattern(const Graph& g, const FxToPatternOptions& o) : g_(g), o_(o) {
    for (std::size_t i = 0; i < o.scalar_workaround.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (python_equal(o.scalar_workaround[i].second, o.scalar_workaround[j].second))
          throw Error("fx_to_pattern: scalar_workaround gives '" + o.scalar_workaround[j].first + "' and '" +
                      o.scalar_workaround[i].first + "' the same value");
  }

  RuntimePattern run() {
    const std::vector<std::string> names = fx_arg_names(g_, o_.argnames);
    std::size_t argnum = 0;
    const Node* output = nullptr;
    for (const Node* n : g_.nodes()) {
      switch (n->op()) {
        case OpKind::placeholder: {
          const std::string& name = names[argnum++];
          const bool exclusive =
              std::find(o_.exclusive_arg_names.begin(), o_.exclusive_arg_names.end(), name) != o_.exclusive_arg_names.end();
          env_[n] = exclusive ? r_.exclusive_keyword_arg(name) : r_.keyword_arg(name);
          break;
        }
        case OpKind::call_function:
          env_[n] = call(n);
          break;
        case OpKind::output:
          output = n;
          break;
        default:
          throw Error("fx_to_pattern: node " + n->name() + " is a " + std::string(op_kind_name(n->op())) + " (" +
                      std::string(n->target_name()) +
                      "); an example graph may hold only placeholders and call_function nodes, as in Inductor");
      }
    }
    if (!output || output->args().size() != 1) throw Error("fx_to_pattern: the example graph has no output value");
    set_outputs(output);
    return std::move(r_);
  }

 private:
  using Ref = RuntimePattern::Ref;

  Ref call(const Node* n) {
    // getitem's index selects the output: it is never ignored.
    const bool getitem = n->target_name() == "operator.getitem";
    std::vector<Ref> args;
    for (const kiln::Arg& a : n->args()) args.push_back(top_level(n, "args", a, getitem));
    RuntimePattern::KeywordChildren kwargs;
    for (const auto& [k, a] : n->kwargs()) kwargs.emplace_back(k, top_level(n, k.c_str(), a, getitem));
    return r_.call(OpKind::call_function, OpSet(n->target()), std::move(args), std::move(kwargs),
                   Users{static_cast<int>(n->num_users())});
  }

  // A top-level argument: converted item by item, then (with `lists` ignored) a
  // list whose items all became Ignored is Ignored itself.
  Ref top_level(const Node* n, const char* field, const kiln::Arg& a, bool getitem) {
    Ref c = convert(n, field, a, getitem);
    const auto& e = r_[c];
    if (o_.ignore_types.lists && e.kind == ElementKind::list && !e.args.empty() &&
        std::all_of(e.args.begin(), e.args.end(), [&](Ref i) { return r_[i].kind == ElementKind::ignored; }))
      return r_.ignored();
    return c;
  }

  Ref convert(const Node* n, const char* field, const kiln::Arg& a, bool getitem) {
    if (Node* in = a.node()) {
      auto it = env_.find(in);
      if (it == env_.end())
        throw Error("fx_to_pattern: node " + n->name() + " (" + field + ") refers to " + in->name() +
                    ", which is not earlier in the example graph");
      return it->second;
    }
    const bool number = a.is<std::int64_t>() || a.is<double>() || a.is<bool>();
    if (number)
      for (const auto& [name, value] : o_.scalar_workaround)
        if (python_equal(a, value)) return r_.keyword_arg(name);
    const IgnoreTypes& t = o_.ignore_types;
    if ((a.is<std::int64_t>() && t.ints && !getitem) || (a.is<double>() && t.floats) || (a.is<Device>() && t.devices) ||
        (a.is<DType>() && t.dtypes))
      return r_.ignored();
    if (const ArgList* l = a.list()) {
      std::vector<Ref> items;
      for (const kiln::Arg& x : *l) items.push_back(convert(n, field, x, getitem));
      return r_.list(std::move(items));
    }
    bool holds_node = false;
    for_each_node(a, [&](Node*) { holds_node = true; });
    if (holds_node)
      throw Error("fx_to_pattern: node " + n->name() + " (" + field +
                  "): a dict or slice argument that refers to nodes cannot be a pattern constant");
    return r_.constant(a);
  }

  void set_outputs(const Node* output) {
    const kiln::Arg& result = output->args()[0];
    std::vector<std::optional<Ref>> outs;
    std::vector<const Node*> nodes;
    collect_outputs(result, nodes);
    if (nodes.empty()) throw Error("fx_to_pattern: the example graph's output holds no node");
    if (nodes[0]->op() != OpKind::call_function)
      throw Error("fx_to_pattern: the first output, " + nodes[0]->name() +
                  ", is not a call_function node (Inductor's MultiOutputPattern needs a call first)");
    for (const Node* n : nodes) outs.push_back(env_.at(n));
    r_.set_outputs(std::move(outs));
  }
  // The output's leaves (pytree.tree_leaves): nodes in order; None is no leaf.
  void collect_outputs(const kiln::Arg& a, std::vector<const Node*>& nodes) const {
    if (const Node* n = a.node()) {
      nodes.push_back(n);
    } else if (const ArgList* l = a.list()) {
      for (const kiln::Arg& x : *l) collect_outputs(x, nodes);
    } else if (!a.is_none()) {
      throw Error("fx_to_pattern: the example graph returns a constant (" + format_arg(a) + "), not a node");
    }
  }

  const Graph& g_;
  const FxToPatternOptions& o_;
  RuntimePattern r_;
  std::unordered_map<const Node*, Ref> env_;
};

}  // namespace detail

// Inductor's fx_to_pattern: constants kept unless `options.ignore_types` says otherwise.
inline RuntimePattern fx_to_pattern(const Graph& example, const FxToPatternOptions& options = {}) {
  return detail::FxToPattern(example, options).run();
}

// Inductor's gen_pattern: fx_to_pattern ignoring ints, floats, lists, devices and
// dtypes, so that shapes burnt into the example do not restrict the pattern.
inline RuntimePattern gen_pattern(const Graph& example, FxToPatternOptions options = {}) {
  options.ignore_types = IgnoreTypes::all();
  return fx_to_pattern(example, options);
}

}  // namespace kiln::pattern
