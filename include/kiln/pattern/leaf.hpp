#pragma once
// The leaf patterns of Inductor's pattern language:
//   Arg()                  matches anything; passed to the handler positionally
//   Ignored()              matches anything; not passed on
//   KeywordArg<"x">()      matches anything; captured as "x" (kw<"x"> is the short form)
//   ExclusiveKeywordArg<"x">()  like KeywordArg, but no two exclusive args may bind the same value
// and the ones kiln adds for C++: a constant (any value an Arg holds, compared
// with Python's ==) and list(...), a literal list whose elements are patterns
// or constants matched element by element.
#include <string>
#include <utility>

#include "kiln/pattern/element.hpp"
#include "kiln/pattern/identity.hpp"
#include "kiln/pattern/match_state.hpp"

namespace kiln::pattern {

// Every pattern type derives from this tag; constants do not. Keyword children
// (kwarg<"name">(...)) pass through factories unchanged too.
struct PatternTag {};
struct ChildTag {};
template <class T>
inline constexpr bool is_pattern_v = std::is_base_of_v<PatternTag, std::remove_cvref_t<T>>;
template <class T>
inline constexpr bool passes_as_child_v = is_pattern_v<T> || std::is_base_of_v<ChildTag, std::remove_cvref_t<T>>;

// Matches a leaf at position Pos: Inductor's "already matched this object" rule,
// then the leaf's own check, then recording the value for later anchors.
template <std::size_t Pos, class S, class Check>
inline bool match_leaf_at(S& st, const kiln::Arg& v, Check&& check) {
  Slot& s = st.slot(Pos);
  if (s.set) {
    const Node* before = s.matched_node();
    if (before ? v.node() == before : (s.value && python_equal(*s.value, v))) return true;
    return st.fail([&] { return describe_value(v) + ": repeated pattern differs"; });
  }
  if (!check()) return false;
  // Only the value's address: a leaf that checks nothing (Ignored) then reads
  // nothing of an argument that may not be in the cache.
  st.set_slot(s, nullptr, &v);
  return true;
}

// What the four leaves share: one position, the captures they bind, and a
// plan that records only their identity.
template <class Captures, bool Positional>
struct LeafPattern : PatternTag, PatternIdentity {
  static constexpr std::size_t size = 1;
  using captures = Captures;
  static constexpr bool has_positional = Positional;
  template <std::size_t Pos>
  void plan(PositionInfo* info) const { info[Pos].id = id; }
};

struct ArgPattern : LeafPattern<NameList<>, /*Positional=*/true> {
  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    return match_leaf_at<Pos>(st, v, [&] {
      st.add_arg(v);
      return true;
    });
  }
  void describe(std::string& out) const { out += "Arg()"; }
};

struct IgnoredPattern : LeafPattern<NameList<>, false> {
  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    return match_leaf_at<Pos>(st, v, [] { return true; });
  }
  void describe(std::string& out) const { out += "Ignored()"; }
};

template <FixedString Name>
struct KeywordArg : LeafPattern<NameList<Name>, false> {
  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    return match_leaf_at<Pos>(st, v, [&] { return st.template bind<Name>(v); });
  }
  void describe(std::string& out) const { out += "KeywordArg('" + std::string(Name.view()) + "')"; }
};

template <FixedString Name>
struct ExclusiveKeywordArg : LeafPattern<NameList<Name>, false> {
  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    return match_leaf_at<Pos>(st, v, [&] {
      for (const kiln::Arg* seen : st.exclusive)
        if (python_equal(*seen, v))
          return st.fail([&] { return describe_value(v) + ": exclusive arg appears twice"; });
      st.add_exclusive(&v);
      return st.template bind<Name>(v);
    });
  }
  void describe(std::string& out) const { out += "ExclusiveKeywordArg('" + std::string(Name.view()) + "')"; }
};

// A constant child: the node's argument must equal it (Python ==) and must not be a node.
struct Constant {
  kiln::Arg value;
  static constexpr std::size_t size = 0;
  using captures = NameList<>;
  static constexpr bool has_positional = false;
  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    if (v.is_node() || !python_equal(v, value))
      return st.fail([&] { return "constant_args: " + describe_value(v) + " != " + format_arg(value); });
    return true;
  }
  template <std::size_t Pos>
  void plan(PositionInfo*) const {}
  void describe(std::string& out) const { out += format_arg(value); }
};

// Wraps a child given to a pattern factory: patterns stay as they are, anything
// else becomes a Constant. A child that is neither is refused here, at the
// factory call, with a message rather than deep in the matcher: a node (a
// constant never equals a node, so such a child could never match) or a value
// no Arg holds.
template <class T>
auto as_child(T&& t) {
  using U = std::remove_cvref_t<T>;
  if constexpr (passes_as_child_v<T> || std::is_same_v<U, Constant>) {
    static_assert(!is_pattern_v<T> || PatternElement<U>,
                  "a pattern child must provide the members of a pattern element (kiln/pattern/element.hpp)");
    return std::forward<T>(t);
  } else {
    static_assert(!std::is_convertible_v<U, const Node*>,
                  "a Node* is not a pattern child: a pattern matches any node of its shape; capture it with "
                  "kw<\"name\"> and compare in extra_check");
    static_assert(std::is_constructible_v<kiln::Arg, T>,
                  "not a pattern child: give a pattern (CallFunction, kw<\"x\">, Ignored(), list(...), ...) or a "
                  "constant an Arg holds (bool, int, double, string, DType, ArgList, ...)");
    Constant c{kiln::Arg(std::forward<T>(t))};
    if (holds_node(c.value))
      throw Error("a pattern constant cannot hold a node reference (" + format_arg(c.value) +
                  "): capture the value with kw<\"name\"> instead");
    return c;
  }
}
template <class T>
using child_t = decltype(as_child(std::declval<T>()));

// Sum of the sizes of the first I types: the offset of child I's positions.
template <std::size_t I, class... Ts>
constexpr std::size_t offset_of() {
  constexpr std::size_t sizes[] = {Ts::size..., 0};
  std::size_t o = 0;
  for (std::size_t k = 0; k < I; ++k) o += sizes[k];
  return o;
}

// Children stored by plain inheritance (cheaper to compile than std::tuple).
template <std::size_t I, class T>
struct ChildHolder {
  T child;
};
template <class Seq, class... Ts>
struct ChildrenImpl;
template <std::size_t... Is, class... Ts>
struct ChildrenImpl<std::index_sequence<Is...>, Ts...> : ChildHolder<Is, Ts>... {
  ChildrenImpl() = default;
  explicit ChildrenImpl(Ts... ts) : ChildHolder<Is, Ts>{std::move(ts)}... {}
  template <std::size_t I, class T>
  static const T& get_impl(const ChildHolder<I, T>& h) { return h.child; }
  template <std::size_t I>
  const auto& get() const { return get_impl<I>(*this); }
};
template <class... Ts>
using Children = ChildrenImpl<std::index_sequence_for<Ts...>, Ts...>;

// Inductor compares a call's arguments as flattened pytrees once a pattern
// argument is a list, tuple or dict (a literal list child, or a constant that
// is one): then a node's list or dict argument is flattened too, so it meets
// a pattern leaf (KeywordArg, Ignored, a call, ...) only where the pattern has a
// container as well. These say which children take part and whether a value
// is a container there.
template <class... Ts>
struct ListPattern;
template <class T>
inline constexpr bool is_list_pattern_v = false;
template <class... Ts>
inline constexpr bool is_list_pattern_v<ListPattern<Ts...>> = true;
inline bool is_container(const kiln::Arg& v) { return v.is_list() || v.get_if<ArgDict>() != nullptr; }
// The failure of that rule, worded once for compiled and runtime patterns.
[[gnu::cold]] inline std::string container_meets_leaf(const kiln::Arg& v) {
  return "args_structure: " + describe_value(v) + " where the pattern has a leaf";
}
// Whether child type C is a pattern leaf (nothing it compares as a structure)
// that must not meet a container in pytree mode: not a literal list, not a constant.
template <class C>
inline constexpr bool is_structure_leaf_v = !is_list_pattern_v<C> && !std::is_same_v<C, Constant>;

// list(a, b, ...): a literal list argument, matched element-wise (Inductor's
// pytree structure match: the node's list must have exactly this length, and
// an element the pattern has as a leaf must not be a list or dict itself).
template <class... Ts>
struct ListPattern : PatternTag {
  Children<Ts...> items;
  static constexpr std::size_t size = (std::size_t{0} + ... + Ts::size);
  using captures = concat_names_t<typename Ts::captures...>;
  static constexpr bool has_positional = (false || ... || Ts::has_positional);

  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    const ArgList* l = v.list();
    if (!l || l->size() != sizeof...(Ts))
      return st.fail([&] {
        return "args_structure: " + describe_value(v) + " is not a list of " + std::to_string(sizeof...(Ts));
      });
    return match_items<Pos>(*l, st, std::index_sequence_for<Ts...>{});
  }
  template <std::size_t Pos>
  void plan(PositionInfo* info) const { plan_items<Pos>(info, std::index_sequence_for<Ts...>{}); }
  void describe(std::string& out) const {
    out += "[";
    describe_items(out, std::index_sequence_for<Ts...>{});
    out += "]";
  }
  // f.template operator()<Q>(item) for every item at its position Q: Inductor
  // flattens a list child, so its items count one by one (anchors).
  template <std::size_t Pos, class F>
  void visit_items(F&& f) const {
    visit_items_impl<Pos>(f, std::index_sequence_for<Ts...>{});
  }

 private:
  template <std::size_t Pos, class F, std::size_t... Is>
  void visit_items_impl(F& f, std::index_sequence<Is...>) const {
    (f.template operator()<Pos + offset_of<Is, Ts...>()>(items.template get<Is>()), ...);
  }
  template <std::size_t Pos, class S, std::size_t... Is>
  bool match_items(const ArgList& l, S& st, std::index_sequence<Is...>) const {
    return (match_item<Pos + offset_of<Is, Ts...>(), Is>(l[Is], st) && ...);
  }
  template <std::size_t P, std::size_t I, class S>
  bool match_item(const kiln::Arg& v, S& st) const {
    const auto& item = items.template get<I>();
    if constexpr (is_structure_leaf_v<std::remove_cvref_t<decltype(item)>>) {
      if (is_container(v)) return st.fail([&] { return container_meets_leaf(v); });
    }
    return item.template match<P>(v, st);
  }
  template <std::size_t Pos, std::size_t... Is>
  void plan_items(PositionInfo* info, std::index_sequence<Is...>) const {
    (items.template get<Is>().template plan<Pos + offset_of<Is, Ts...>()>(info), ...);
  }
  template <std::size_t... Is>
  void describe_items(std::string& out, std::index_sequence<Is...>) const {
    ((out += (Is ? ", " : ""), items.template get<Is>().describe(out)), ...);
  }
};

// ---- the user-facing spellings ----

inline ArgPattern Arg() { return {}; }
inline IgnoredPattern Ignored() { return {}; }
// kw<"x">: the KeywordArg named "x". One object per name, which is harmless: a
// name bound twice must bind the same value anyway.
template <FixedString Name>
inline const KeywordArg<Name> kw{};
template <class... Ts>
ListPattern<child_t<Ts>...> list(Ts&&... items) {
  ListPattern<child_t<Ts>...> p;
  p.items = Children<child_t<Ts>...>(as_child(std::forward<Ts>(items))...);
  return p;
}

}  // namespace kiln::pattern
