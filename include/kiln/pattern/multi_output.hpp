#pragma once
// MultiOutputPattern(out0, out1, ...): a pattern with several outputs
// (Inductor's MultiOutputPattern), e.g. two ops that read one shared producer:
//
//   auto x = CallFunction(aten::relu, kw<"a">, users(2));
//   MultiOutputPattern(CallFunction(aten::sigmoid, x), CallFunction(aten::tanh, x))
//
// It is a root pattern only. out0 (a call pattern) is matched at the node the
// pattern is tried at; each later output is then found from the nodes already
// matched: its find_anchor_nodes offers the users of those nodes whose kind and
// target fit, and the first candidate that matches is taken. A candidate that
// fails is undone before the next is tried. std::nullopt (or NoOutput{}) stands
// for Inductor's None: an output the pattern does not look for, listed as
// nullptr in Match::output_nodes().
//
// Every output is exempt from the users rule. Inductor decides that by object
// (`self in ctx.outputs`), so an output that also occurs inside another output
// is exempt there too: plan() marks every position that holds an output object.
#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/pattern/call.hpp"
#include "kiln/pattern/list_of.hpp"  // detail::sub_match

namespace kiln::pattern {

// Inductor's None in a MultiOutputPattern's outputs. It takes a position so
// that Match::output_nodes() has an entry (nullptr) for it.
struct NoOutput {
  static constexpr std::size_t size = 1;
  using captures = NameList<>;
  static constexpr bool has_positional = false;
  template <std::size_t Pos>
  void plan(PositionInfo*) const {}
  void describe(std::string& out) const { out += "None"; }
};

template <class T>
inline constexpr bool is_no_output_v =
    std::is_same_v<std::remove_cvref_t<T>, NoOutput> || std::is_same_v<std::remove_cvref_t<T>, std::nullopt_t>;

template <class T>
auto as_output(T&& t) {
  if constexpr (is_no_output_v<T>) {
    return NoOutput{};
  } else {
    static_assert(is_pattern_v<T>, "MultiOutputPattern: each output must be a pattern or std::nullopt");
    return std::remove_cvref_t<T>(std::forward<T>(t));
  }
}
template <class T>
using output_t = decltype(as_output(std::declval<T>()));

namespace detail {
// The position of each output in the pattern tree (out0 at 0), in output order.
template <class... Os>
struct OutputOffsets {
  template <std::size_t... Is>
  static constexpr std::array<std::size_t, sizeof...(Os)> get(std::index_sequence<Is...>) {
    return {offset_of<Is, Os...>()...};
  }
};
}  // namespace detail

template <class... Os>
struct MultiOutputs : PatternTag, PatternIdentity {
  using First = std::tuple_element_t<0, std::tuple<Os...>>;
  static_assert(requires { First::kind; } && !std::is_same_v<First, NoOutput>,
                "MultiOutputPattern: the first output must be a call pattern (it is matched at the root node)");

  Children<Os...> outputs;

  static constexpr std::size_t size = (std::size_t{0} + ... + Os::size);
  using captures = concat_names_t<typename Os::captures...>;
  static constexpr bool has_positional = (false || ... || Os::has_positional);
  static constexpr OpKind kind = First::kind;
  // PatternPlan: the outputs are marked by plan(), not by position 0 alone.
  static constexpr bool marks_outputs = true;
  // PatternPlan::result: where each output sits, in output order.
  static constexpr std::array<std::size_t, sizeof...(Os)> output_positions =
      detail::OutputOffsets<Os...>::get(std::index_sequence_for<Os...>{});

  // What a pass indexes the pattern under: out0's kind and targets (Inductor's fns).
  OpKind root_kind() const { return kind; }
  const OpSet& root_fns() const { return outputs.template get<0>().fns; }
  bool match_fns(const Node* n) const { return outputs.template get<0>().match_fns(n); }

  // `fits`: out0's kind and target are known to fit `n`.
  template <std::size_t Pos, class S>
  bool match_node(Node* n, S& st, const kiln::Arg* via = nullptr, bool fits = false) const {
    static_assert(Pos == 0, "MultiOutputPattern is a root pattern");
    if (!outputs.template get<0>().template match_node<Pos>(n, st, via, fits)) return false;
    return match_rest<Pos>(st, std::make_index_sequence<sizeof...(Os) - 1>{});
  }

  // Not usable as a child: Inductor matches it only from the top.
  template <std::size_t Pos, class S>
  bool match(const kiln::Arg&, S&) const {
    static_assert(Pos != Pos, "MultiOutputPattern cannot be the child of another pattern");
    return false;
  }

  template <std::size_t Pos>
  void plan(PositionInfo* info) const {
    static_assert(Pos == 0, "MultiOutputPattern is a root pattern");
    plan_outputs<Pos>(info, std::index_sequence_for<Os...>{});
    // The users-rule exemption goes with the object: mark every position that
    // holds the same pattern object as an output (ids are set by now).
    for (std::size_t q : output_positions) {
      const std::uint32_t id = info[Pos + q].id;
      for (std::size_t i = Pos; i < Pos + size; ++i)
        if (i == Pos + q || (id != 0 && info[i].id == id)) info[i].output = true;
    }
  }

  void describe(std::string& out) const {
    out += "MultiOutputPattern([";
    describe_outputs(out, std::index_sequence_for<Os...>{});
    out += "])";
  }

 private:
  template <std::size_t Pos, class S, std::size_t... Js>
  bool match_rest(S& st, std::index_sequence<Js...>) const {
    return (match_output<Pos + offset_of<Js + 1, Os...>(), Js + 1>(st) && ...);
  }

  // Inductor's _match_from_anchors for output I (at position P).
  template <std::size_t P, std::size_t I, class S>
  bool match_output(S& st) const {
    using O = std::remove_cvref_t<decltype(outputs.template get<I>())>;
    const O& o = outputs.template get<I>();
    if constexpr (std::is_same_v<O, NoOutput>) {
      return true;
    } else if constexpr (!requires { o.template match_node<P>(static_cast<Node*>(nullptr), st, nullptr); }) {
      // A leaf-like output (KeywordArg, ListOf, ...) anchors only on what it
      // matched already, and matching it there again trivially succeeds.
      if (st.slot(P).set) return true;
      return st.fail([&] { return "output " + std::to_string(I) + ": no anchor found"; });
    } else {
      // The candidates are collected first: Python's generator reads
      // pattern_to_node only between candidates, after each failed one is
      // reverted, so it sees the same state as this up-front walk.
      std::vector<Node*> candidates;
      std::vector<Node*> searched;
      o.template find_anchor_nodes<P>(st, searched, [&](Node* c) { candidates.push_back(c); });
      if (candidates.empty())
        return st.fail([&] {
          return "output " + std::to_string(I) + ": no anchor found for " + describe_of(o);
        });
      const auto prior = st.slots;
      const bool explained = st.explain && !st.explain->empty();
      for (Node* c : candidates) {
        // Inductor reports the last candidate's failure.
        if (st.explain && !explained) st.explain->clear();
        const auto r = detail::sub_match(st, [&] { return o.template match_node<P>(c, st, nullptr); });
        if (r == detail::SubMatch::matched) return true;
        if (r == detail::SubMatch::conflict) return false;
        // Revert the partial match's slots. As in Inductor, the exclusive set
        // is not reverted: a failed candidate's exclusive args stay taken.
        st.slots = prior;
      }
      return false;
    }
  }

  template <std::size_t Pos, std::size_t... Is>
  void plan_outputs(PositionInfo* info, std::index_sequence<Is...>) const {
    (outputs.template get<Is>().template plan<Pos + offset_of<Is, Os...>()>(info), ...);
  }
  template <std::size_t... Is>
  void describe_outputs(std::string& out, std::index_sequence<Is...>) const {
    ((out += (Is ? ", " : ""), outputs.template get<Is>().describe(out)), ...);
  }
  template <class O>
  static std::string describe_of(const O& o) {
    std::string s;
    o.describe(s);
    return s;
  }
};

// MultiOutputPattern(out0, out1, ...): out0 must be a call pattern; later
// outputs may be std::nullopt (or NoOutput{}).
template <class First, class... Rest>
MultiOutputs<output_t<First>, output_t<Rest>...> MultiOutputPattern(First&& first, Rest&&... rest) {
  MultiOutputs<output_t<First>, output_t<Rest>...> p;
  p.outputs = Children<output_t<First>, output_t<Rest>...>(as_output(std::forward<First>(first)),
                                                          as_output(std::forward<Rest>(rest))...);
  return p;
}

}  // namespace kiln::pattern
