#pragma once
// RepeatedExpr(inner): `inner` matches here, and also at every other node it
// could anchor on (Inductor's RepeatedExpr), e.g. every getitem of one split:
//
//   RepeatedExpr(CallFunction(pyop::getitem,
//                             CallFunction(torch::split, kw<"x">, Ignored(), users(MULTIPLE)),
//                             Ignored()))
//
// After `inner` matches at the node, its own entry is dropped and its
// find_anchor_nodes walks from what its children matched (here: the split) to
// every other user with the same kind and target (here: each other getitem;
// the node itself starts out as searched, as in Inductor 2.11, so it is not
// matched twice). Each must match `inner` in a fresh context, as Inductor's
// MatchContext([self]) is: no slots from the outer match, a fresh exclusive
// set, and `inner` not an output, so the users rule applies to it everywhere.
// One failing anchor fails the whole RepeatedExpr. Captures must agree across
// all of them. Match::nodes() lists the first match's nodes, then each anchor
// match's (Inductor's order, so shared nodes such as the split repeat), and
// pattern_matcher_nodes counts them so.
//
// The users rule at the root: as a root, the RepeatedExpr's own position is
// the pattern output, and `inner` (one position below) is not, so the node the
// pattern is tried at must itself satisfy inner's users count (Inductor:
// ctx.outputs is [RepeatedExpr], never the inner pattern).
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/pattern/call.hpp"
#include "kiln/pattern/list_of.hpp"  // detail::sub_match

namespace kiln::pattern {

template <class Inner>
struct RepeatedPattern : PatternTag, PatternIdentity {
  static_assert(requires { Inner::kind; }, "RepeatedExpr: the inner pattern must be a call pattern");
  Inner inner;

  // Its own position (the pattern output when it is the root), then inner's.
  static constexpr std::size_t size = 1 + Inner::size;
  using captures = typename Inner::captures;
  static constexpr bool has_positional = Inner::has_positional;

  // What a pass indexes the pattern under: inner's kind and targets (Inductor's fns).
  OpKind root_kind() const { return Inner::kind; }
  const OpSet& root_fns() const { return inner.fns; }
  bool match_fns(const Node* n) const { return inner.match_fns(n); }
  bool has_multiple_users() const { return false; }  // PatternExpr's default

  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    Node* n = v.node();
    if (!n) return st.fail([&] { return describe_value(v) + ": expected a node for RepeatedExpr"; });
    return match_node<Pos>(n, st, &v);
  }

  // `fits`: inner's kind and target are known to fit `n`.
  template <std::size_t Pos, class S>
  bool match_node(Node* n, S& st, const kiln::Arg* via = nullptr, bool fits = false) const {
    constexpr std::size_t In = Pos + 1;
    if (const Slot& own = st.slot(Pos); own.set) {
      if (own.node == n) return true;
      return st.fail([&] { return "node " + n->name() + ": repeated pattern differs (RepeatedExpr)"; });
    }
    if (!inner.template match_node<In>(n, st, via, fits)) return false;
    st.slot(In) = Slot{};  // ctx.pattern_to_node.pop(inner_pattern)

    // The anchor walk reads only the outer slots, which the anchor matches
    // below do not change, so collecting first is what Python's generator does.
    std::vector<Node*> anchors;
    std::vector<Node*> searched{n};
    inner.template find_anchor_nodes<In>(st, searched, [&](Node* a) { anchors.push_back(a); });

    const auto outer_slots = st.slots;
    std::vector<const kiln::Arg*> outer_exclusive;
    outer_exclusive.swap(st.exclusive);
    bool ok = true;
    for (Node* a : anchors) {
      // MatchContext([self]): an empty pattern_to_node and exclusive set.
      st.slots.fill(Slot{});
      st.exclusive.clear();
      if (detail::sub_match(st, [&] { return inner.template match_node<In>(a, st, nullptr); }) !=
          detail::SubMatch::matched) {
        ok = false;
        break;
      }
    }
    st.slots = outer_slots;
    st.exclusive.swap(outer_exclusive);
    if (!ok) return false;
    st.set_slot(st.slot(Pos), n, via);
    return true;
  }

  // PatternExpr's default: only the node it matched already.
  template <std::size_t Pos, class S, class Yield>
  void find_anchor_nodes(S& st, std::vector<Node*>&, Yield&& yield) const {
    const Slot& s = st.slot(Pos);
    if (s.set && s.node) yield(s.node);
  }

  template <std::size_t Pos>
  void plan(PositionInfo* info) const {
    info[Pos].id = id;
    inner.template plan<Pos + 1>(info);
  }
  void describe(std::string& out) const {
    out += "RepeatedExpr(";
    inner.describe(out);
    out += ")";
  }
};

template <class Inner>
  requires is_pattern_v<Inner>
RepeatedPattern<std::remove_cvref_t<Inner>> RepeatedExpr(Inner&& inner) {
  RepeatedPattern<std::remove_cvref_t<Inner>> p;
  p.inner = std::forward<Inner>(inner);
  return p;
}

}  // namespace kiln::pattern
