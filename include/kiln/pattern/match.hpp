#pragma once
// Match<P>: a successful match of pattern type P, and PatternPlan<P>, a pattern
// prepared for matching (its position tables and a reusable match state).
//
// Captures are typed: m.get<"x">() is an array index fixed at compile time, and
// asking for a name the pattern does not bind does not compile.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/pattern/call.hpp"
#include "kiln/pattern/matched_nodes.hpp"

namespace kiln::pattern {

// Instantiated for a name the pattern does not bind: the diagnostic shows the
// name and those the pattern binds (see capture_name), with clang as with g++.
template <class Name, class PatternBinds>
struct binds_no_capture_named {
  static_assert(sizeof(Name) == 0,
                "Match::get<\"name\">: this pattern binds no KeywordArg or ExclusiveKeywordArg with that name");
  static constexpr std::size_t index = 0;
};
template <class Captures, FixedString Name>
constexpr std::size_t capture_index() {
  constexpr std::size_t i = Captures::of(Name.view());
  if constexpr (i == kNoName) return binds_no_capture_named<spelled_name_t<Name>, typename spelled_names<typename Captures::list>::type>::index;
  else return i;
}

template <class P>
class Match : public MatchedNodes {
 public:
  using Captures = NameIndex<typename P::captures>;
  static constexpr std::size_t kCaptures = Captures::distinct();

  // The value captured as `Name` (a node reference or a constant).
  template <FixedString Name>
  const kiln::Arg& get() const {
    return captures_[capture_index<Captures, Name>()];
  }
  // The node captured as `Name`; an error if that capture is a constant.
  template <FixedString Name>
  Node* node() const {
    const kiln::Arg& a = get<Name>();
    if (Node* n = a.node()) return n;
    throw Error("Match::node<\"" + std::string(Name.view()) + "\">: the capture is " + describe_value(a) + ", not a node");
  }
  static constexpr auto capture_names() { return Captures::distinct_names(); }

  // Arg() captures in depth-first order (ListOf bundles each element's into a list).
  const std::vector<kiln::Arg>& args() const { return args_; }
  // Keyword arguments passed through by a VarArgs pattern.
  const ArgDict& var_kwargs() const { return var_kwargs_; }

  // Splices in a replacement: `build(graph)` creates nodes (before the output
  // node) and returns the one that takes the output's place; its users are
  // moved over and the matched nodes that became unused are erased.
  template <class Build>
  Node* replace_with_graph(Build&& build) {
    Node* out = output_node();
    Node* replacement;
    {
      auto guard = graph_->inserting_before(out);
      replacement = build(*graph_);
    }
    if (replacement == nullptr) throw Error("Match::replace_with_graph: the builder returned no node");
    if (replacement->meta.val.is_none()) replacement->meta.val = out->meta.val;
    out->replace_all_uses_with(replacement);
    erase_nodes();
    return replacement;
  }

 private:
  template <class>
  friend class PatternPlan;
  std::array<kiln::Arg, kCaptures> captures_{};
  std::vector<kiln::Arg> args_;
  ArgDict var_kwargs_;
};

template <class P>
class PatternPlan {
  static_assert(RootPattern<P>, "a pattern to match must start at a node: a call pattern or MultiOutputPattern, "
                                "with the members kiln/pattern/element.hpp lists");

 public:
  using Result = Match<P>;

  explicit PatternPlan(P p) : pattern_(std::move(p)) {
    pattern_.template plan<0>(info_.data());
    if constexpr (requires { P::marks_outputs; }) {
      // MultiOutputPattern marked its outputs in plan().
    } else {
      info_[0].output = true;
    }
    // Pattern outputs are exempt from the users rule.
    for (std::size_t i = 0; i < P::size; ++i)
      if (info_[i].output) info_[i].users = -1;
    // Positions holding the same pattern object share the first one's slot.
    for (std::size_t i = 0; i < P::size; ++i) {
      info_[i].canon = static_cast<std::uint32_t>(i);
      if (info_[i].id == 0) continue;
      for (std::size_t j = 0; j < i; ++j)
        if (info_[j].id == info_[i].id) {
          info_[i].canon = static_cast<std::uint32_t>(j);
          break;
        }
    }
    state_.info = info_.data();
    for (std::size_t i = 0; i < P::size; ++i) state_.slot_of[i] = &state_.slots[info_[i].canon];
  }
  // The state points into the plan itself.
  PatternPlan(const PatternPlan&) = delete;
  PatternPlan& operator=(const PatternPlan&) = delete;

  const P& pattern() const { return pattern_; }
  std::string describe() const {
    std::string s;
    pattern_.describe(s);
    return s;
  }

  // Whether the pattern can match at `n` (its root's kind and target), cheaply.
  bool root_accepts(const Node* n) const { return pattern_.match_fns(n); }

  // Matches the pattern with its root at `n`. On failure, `why` (if given)
  // receives the reason along the failing path.
  std::optional<Result> match(Node* n, std::string* why = nullptr) {
    if (!try_match(n, why)) return std::nullopt;
    return result(n->graph());
  }

  // The allocation-free part: true when the pattern matches at `n`; the match
  // stays in the plan's state until the next call (see result()). A caller
  // that found `n` by the root's kind and target (PatternMatcherPass's index)
  // says so with `root_fits`, and the root's own check of them is skipped.
  bool try_match(Node* n, std::string* why = nullptr, bool root_fits = false) {
    state_.reset();
    state_.explain = why;
    if (why) why->clear();
    return pattern_.template match_node<0>(n, state_, nullptr, root_fits);
  }

  // The nodes of the last successful try_match, children before parents.
  std::span<Node* const> matched_nodes() const { return state_.matched_nodes(); }

  // Moves the last successful try_match out of the reusable state.
  Result result(Graph& g) {
    Result m;
    take_result(m, g);
    return m;
  }
  // The same into an existing Match, reusing its storage (PatternMatcherPass
  // keeps one per pattern, so applying a match allocates nothing). The state
  // and `m` trade their argument vectors (the next try_match clears the
  // state's), so those are not copied and both keep their capacity.
  void take_result(Result& m, Graph& g) {
    for (std::size_t i = 0; i < Result::kCaptures; ++i) {
      if (state_.captures[i]) m.captures_[i] = *state_.captures[i];
      else m.captures_[i] = kiln::Arg();
    }
    // Only Arg() and VarArgs patterns capture arguments (VarArgs ones keyword ones too).
    if constexpr (P::has_positional) {
      m.args_.swap(state_.args);
      if (!state_.var_kwargs.empty() || !m.var_kwargs_.empty()) std::swap(m.var_kwargs_, state_.var_kwargs);
    }
    state_.copy_nodes_to(m.nodes_);
    if constexpr (requires { P::output_positions; }) {
      // MultiOutputPattern: info.output marks every position exempt from the
      // users rule (outputs by object), so it lists its outputs' places itself.
      m.outputs_.clear();
      for (std::size_t i : P::output_positions) m.outputs_.push_back(state_.slots[info_[i].canon].matched_node());
    } else {
      // Any other pattern has one output, its root (position 0, its own slot);
      // stored in place when the Match has its one entry from before.
      Node* root = state_.slots[0].matched_node();
      if (m.outputs_.size() == 1) m.outputs_[0] = root;
      else m.outputs_.assign(1, root);
    }
    m.graph_ = &g;
  }

 private:
  P pattern_;
  std::array<PositionInfo, P::size> info_{};
  MatchState<P> state_;
};

// One-off matching, without keeping a plan: match(pattern, node).
template <class P>
std::optional<Match<P>> match(const P& pattern, Node* n, std::string* why = nullptr) {
  PatternPlan<P> plan(pattern);
  return plan.match(n, why);
}

// The pattern as text, in Inductor's repr style.
template <class P>
std::string describe(const P& pattern) {
  std::string s;
  pattern.describe(s);
  return s;
}

}  // namespace kiln::pattern

namespace kiln::pattern {
// get<"x">(m) / node<"x">(m): the same as m.get<"x">(), spelled so that a generic
// handler ([](auto& m) { ... }) needs no `m.template get<"x">()`.
template <FixedString Name, class P>
const kiln::Arg& get(const Match<P>& m) {
  return m.template get<Name>();
}
template <FixedString Name, class P>
Node* node(const Match<P>& m) {
  return m.template node<Name>();
}
}  // namespace kiln::pattern
