#pragma once
// What a pattern element provides: the protocol that CallPattern, the leaves,
// ListOf, RepeatedExpr, MultiOutputPattern and a user's own element follow,
// stated as concepts so that a type lacking a member is refused where it is
// used (as a child, or as the pattern a plan is made of) with the member named.
//
// Optional members, asked for with `requires` where they matter:
//   find_anchor_nodes<Pos>(state, searched, yield)  MultiOutputPattern's anchors (call patterns)
//   first_arg_filter()                     PatternMatcherPass's cheap pre-check (call patterns)
//   visit_items<Pos>(f)                    a list whose items count one by one (literal lists)
//   kind, fns / root_kind(), root_fns()    the root op a pass indexes the pattern under
//   marks_outputs, output_positions        several outputs (MultiOutputPattern)
#include <concepts>
#include <cstddef>
#include <string>

#include "kiln/pattern/match_state.hpp"

namespace kiln::pattern {

template <class T>
concept PatternElement = requires(const T& p, std::string& out, PositionInfo* info) {
  { T::size } -> std::convertible_to<std::size_t>;     // positions it takes in the tree (one slot each)
  typename T::captures;                                 // the NameList of the capture names it binds
  { T::has_positional } -> std::convertible_to<bool>;  // whether it may record Arg() values or VarArgs kwargs
  p.template plan<0>(info);                            // fills in its positions' PositionInfo
  p.describe(out);                                     // appends its text, in Inductor's repr
};

// An element that matches an argument value: a child.
template <class T>
concept ChildPattern = PatternElement<T> && requires(const T& p, const kiln::Arg& v, MatchState<T>& st) {
  { p.template match<0>(v, st) } -> std::same_as<bool>;
};

// An element that matches at a node: what a plan (and so a pass) starts from.
template <class T>
concept RootPattern = PatternElement<T> && requires(const T& p, Node* n, MatchState<T>& st) {
  { p.template match_node<0>(n, st, nullptr, false) } -> std::same_as<bool>;
  { p.match_fns(n) } -> std::same_as<bool>;  // the root's kind and target fit
};

}  // namespace kiln::pattern
