#pragma once
// ListOf(pattern, partial = false): a list argument whose every element matches
// `pattern` (Inductor's ListOf), e.g. the inputs of a cat:
//
//   CallFunction(aten::cat, ListOf(CallFunction(aten::relu, Arg())), 1)
//
// Inductor matches each element in a child MatchContext of its own: a fresh
// pattern_to_node that keeps only the multi-user patterns matched so far (so a
// shared producer, such as one split feeding every element, is the same node
// in all of them), a fresh exclusive-argument set, and its own Match whose
// kwargs must agree with the others' when merged. kiln has one flat MatchState,
// so ListOf reproduces those contexts by saving, filtering and restoring it.
//
// Also here: the sub-match helper that ListOf, MultiOutputPattern and
// RepeatedExpr share (each runs parts of the pattern as separate Inductor
// Match objects that may fail and be discarded).
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/pattern/call.hpp"

namespace kiln::pattern {

namespace detail {

enum class SubMatch { failed, conflict, matched };

// Runs `body` the way Inductor runs a sub-match that builds its own Match: its
// captures start empty, and only when it succeeds are they merged into the
// outer ones, where a name bound on both sides must bind equal values (Python
// ==, Match.extend's "kwarg mismatch"). A failed body leaves no captures,
// nodes, args or var_kwargs behind. Slots and the exclusive set are the
// caller's business: each construct treats them differently.
//
// Inductor raises a mismatch out of Match.extend, ending the whole match even
// inside a partial ListOf or an anchor search; callers report `conflict` so
// they can fail outright instead of skipping to the next element or anchor.
template <class S, class Body>
SubMatch sub_match(S& st, Body&& body) {
  const auto outer = st.captures;
  const std::size_t nodes = st.node_count;
  const std::size_t args = st.args.size();
  const ArgDict var_kwargs = st.var_kwargs;  // empty for all but VarArgs patterns: no allocation
  auto undo = [&] {
    st.captures = outer;
    st.node_count = nodes;
    st.args.erase(st.args.begin() + static_cast<std::ptrdiff_t>(args), st.args.end());
    if (!(st.var_kwargs == var_kwargs)) st.var_kwargs = var_kwargs;
  };
  st.captures.fill(nullptr);
  if (!body()) {
    undo();
    return SubMatch::failed;
  }
  for (std::size_t i = 0; i < S::kCaptures; ++i) {
    const kiln::Arg* mine = st.captures[i];
    if (mine && outer[i] && !python_equal(*outer[i], *mine)) {
      undo();
      st.fail([&] {
        return "kwarg mismatch: '" + std::string(S::Captures::distinct_names()[i]) +
               "' is bound to two different values";
      });
      return SubMatch::conflict;
    }
  }
  // The first binding is kept, as MatchState::bind keeps it.
  for (std::size_t i = 0; i < S::kCaptures; ++i)
    if (outer[i]) st.captures[i] = outer[i];
  return SubMatch::matched;
}

// Inductor's filter_multi_user_patterns: forget every slot except those of
// patterns declared with users > 1 or MULTIPLE. Slots live at canonical
// positions, and every position of an object carries the same multi_user bit.
template <class S>
void keep_multi_user_slots(S& st) {
  for (std::size_t i = 0; i < S::kSlots; ++i)
    if (!st.info[i].multi_user) st.slots[i] = Slot{};
}

// Match.bundle(): the args captured from `begin` on become one list argument
// (nothing when there are none).
inline void bundle_args(std::vector<kiln::Arg>& args, std::size_t begin) {
  if (args.size() <= begin) return;
  const auto first = args.begin() + static_cast<std::ptrdiff_t>(begin);
  ArgList bundled(std::make_move_iterator(first), std::make_move_iterator(args.end()));
  args.erase(first, args.end());
  args.emplace_back(std::move(bundled));
}

}  // namespace detail

template <class P>
struct ListOfPattern : PatternTag, PatternIdentity {
  static_assert(is_pattern_v<P>, "ListOf: the element pattern must be a pattern, not a constant");
  P pattern;
  bool partial = false;

  // Its own position (Inductor records the list in pattern_to_node, so the same
  // ListOf object used twice must see equal lists), then the element pattern's.
  static constexpr std::size_t size = 1 + P::size;
  using captures = typename P::captures;
  static constexpr bool has_positional = P::has_positional;

  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    if (const Slot& own = st.slot(Pos); own.set) {
      if (own.value && python_equal(*own.value, v)) return true;
      return st.fail([&] { return describe_value(v) + ": repeated pattern differs (ListOf)"; });
    }
    if (!match_elements<Pos>(v, st)) return false;
    st.set_slot(st.slot(Pos), v.node(), &v);
    return true;
  }

  // Inductor's default find_anchor_nodes yields the matched list itself, which
  // is not a node, so a ListOf offers no anchors; the nodes its elements matched
  // were in child contexts and are not visible outside either.
  template <std::size_t Pos, class S, class Yield>
  void find_anchor_nodes(S&, std::vector<Node*>&, Yield&&) const {}

  template <std::size_t Pos>
  void plan(PositionInfo* info) const {
    info[Pos].id = id;
    pattern.template plan<Pos + 1>(info);
  }
  void describe(std::string& out) const {
    out += "ListOf(";
    pattern.describe(out);
    if (partial) out += ", partial=True";  // Inductor's repr leaves it out; it changes what matches
    out += ")";
  }

 private:
  template <std::size_t Pos, class S>
  bool match_elements(const kiln::Arg& v, S& st) const {
    const ArgList* items = v.list();
    if (!items || items->empty())
      return st.fail([&] { return "non_list: " + describe_value(v) + " is not a non-empty list"; });

    // Nothing an element matches is visible after the ListOf (the child
    // contexts are dropped), and the outer exclusive set is untouched by them.
    const auto outer_slots = st.slots;
    std::vector<const kiln::Arg*> outer_exclusive;
    outer_exclusive.swap(st.exclusive);
    const std::size_t args_begin = st.args.size();

    detail::keep_multi_user_slots(st);
    bool matched = false;
    bool failed = false;
    for (std::size_t i = 0; i < items->size() && !failed; ++i) {
      const bool explained = st.explain && !st.explain->empty();
      st.exclusive.clear();
      const std::size_t element_args = st.args.size();
      const auto r = detail::sub_match(st, [&] { return pattern.template match<Pos + 1>((*items)[i], st); });
      // The next element starts from this one's multi-user matches, even when
      // this one failed (Inductor filters the child context either way).
      detail::keep_multi_user_slots(st);
      if (r == detail::SubMatch::matched) {
        matched = true;
        detail::bundle_args(st.args, element_args);  // child_match.bundle()
      } else if (r == detail::SubMatch::conflict) {
        failed = true;
      } else if (!partial) {
        if (st.explain && !explained && !st.explain->empty())
          st.explain->insert(0, "list[" + std::to_string(i) + "]: ");
        failed = true;
      } else if (st.explain && !explained) {
        st.explain->clear();  // a skipped element is not why anything failed
      }
    }
    st.slots = outer_slots;
    st.exclusive.swap(outer_exclusive);
    if (failed) return false;
    if (!matched) return st.fail([] { return std::string("list: no_match"); });
    detail::bundle_args(st.args, args_begin);  // m.bundle()
    return true;
  }
};

// ListOf(pattern) / ListOf(pattern, true): `partial` skips the elements that do
// not match, but at least one must.
template <class P>
  requires is_pattern_v<P>
ListOfPattern<std::remove_cvref_t<P>> ListOf(P&& pattern, bool partial = false) {
  ListOfPattern<std::remove_cvref_t<P>> p;
  p.pattern = std::forward<P>(pattern);
  p.partial = partial;
  return p;
}

}  // namespace kiln::pattern
