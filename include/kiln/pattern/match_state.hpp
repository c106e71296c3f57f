#pragma once
// The state of one match attempt: what Inductor keeps in MatchContext and the
// growing Match (pattern_to_node, captured kwargs and args, matched nodes, the
// exclusive-argument set), laid out flat for a pattern type known at compile
// time. One state per registered pattern is reused across attempts, so a failed
// attempt allocates nothing once the vectors have grown.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/node.hpp"
#include "kiln/pattern/fixed_string.hpp"
#include "kiln/pattern/python_equal.hpp"

namespace kiln::pattern {

// What the plan knows about each position of a pattern tree (computed once
// when the pattern is registered, by walking the pattern object).
struct PositionInfo {
  std::uint32_t id = 0;      // identity of the pattern object at this position
  std::uint32_t canon = 0;   // first position holding the same object
  bool multi_user = false;   // a call pattern declared with users > 1 or MULTIPLE
  bool output = false;       // exempt from the users rule (a pattern output)
  // The users rule here, with the output exemption folded in (by the plan,
  // once outputs are marked): how many users the node must have, -1 for any.
  std::int32_t users = -1;
};

// The value matched at one position (Inductor's pattern_to_node entry).
struct Slot {
  Node* node = nullptr;               // for call patterns
  const kiln::Arg* value = nullptr;   // for leaves: the argument value (not read while matching)
  bool set = false;
  // The node matched here: a call pattern's, or the node a leaf's value refers to.
  Node* matched_node() const { return node ? node : (value ? value->node() : nullptr); }
};

template <class Root>
struct MatchState {
  using Captures = NameIndex<typename Root::captures>;
  static constexpr std::size_t kSlots = Root::size;
  static constexpr std::size_t kCaptures = Captures::distinct();

  // What an attempt records. Everything goes through the recording functions
  // below, which note that something was recorded: most attempts fail before
  // anything is (on the root's arguments' kinds and targets, or a users count),
  // and reset() then has nothing to clear.
  std::array<Slot, kSlots> slots{};
  std::array<const kiln::Arg*, kCaptures> captures{};
  std::vector<kiln::Arg> args;            // Arg() captures, depth first
  std::vector<const kiln::Arg*> exclusive;
  ArgDict var_kwargs;                     // kwargs captured by CallFunctionVarArgs
  // The matched nodes, children before parents, are the first node_count of
  // `nodes`, which is kept as long as its capacity so that appending is a
  // plain store: the compiler does not inline push_back (growth and all) into
  // every call pattern, and calling it costs more than the store.
  std::vector<Node*> nodes;
  std::size_t node_count = 0;
  bool recorded = false;

  const PositionInfo* info = nullptr;     // kSlots entries
  std::string* explain = nullptr;         // when set: the first failure's reason goes here

  void reset() {
    if (!recorded) return;
    slots.fill(Slot{});
    captures.fill(nullptr);
    exclusive.clear();
    if constexpr (Root::has_positional) {  // only Arg() and VarArgs patterns record these
      args.clear();
      if (!var_kwargs.empty()) var_kwargs = ArgDict{};
    }
    node_count = 0;
    recorded = false;
  }

  // Records why matching failed (only when explaining) and returns false.
  template <class MakeMessage>
  bool fail(MakeMessage&& make) {
    if (explain && explain->empty()) *explain = make();
    return false;
  }

  // Each position's slot (positions holding one pattern object share the
  // first one's), set up by the plan: one load, where info[pos].canon takes
  // two and an index computation for every pattern element tried.
  std::array<Slot*, kSlots> slot_of{};
  Slot& slot(std::size_t pos) { return *slot_of[pos]; }

  // ---- recording ----

  // What slot `s` matched: a call pattern's node, and the argument value it
  // was reached through (nullptr at the root or an anchor).
  void set_slot(Slot& s, Node* node, const kiln::Arg* value) {
    s.node = node;
    s.value = value;
    s.set = true;
    recorded = true;
  }

  void add_node(Node* n) {
    if (node_count == nodes.size()) [[unlikely]] grow_nodes();
    nodes[node_count++] = n;
    recorded = true;
  }
  [[gnu::noinline]] void grow_nodes() { nodes.resize(std::max<std::size_t>(8, 2 * nodes.size())); }

  void add_arg(const kiln::Arg& a) {
    args.push_back(a);
    recorded = true;
  }
  void add_exclusive(const kiln::Arg* a) {
    exclusive.push_back(a);
    recorded = true;
  }
  // A VarArgs node's kwarg joins the match's keyword arguments, as in Inductor
  // (Match.kwargs.update): a capture or another VarArgs kwarg of the same name
  // must hold an equal value.
  bool add_var_kwarg(const std::string& key, const kiln::Arg& a) {
    const kiln::Arg* prev = var_kwargs.find(key);
    if (!prev) {
      const std::size_t i = Captures::of(key);
      if (i != kNoName) prev = captures[i];
    }
    if (prev && !python_equal(*prev, a))
      return fail([&] { return "kwarg mismatch: '" + key + "' is bound to two different values"; });
    var_kwargs.set(key, a);
    recorded = true;
    return true;
  }

  // Binds capture `name` to `value`; a name bound before must bind an equal value.
  template <FixedString Name>
  bool bind(const kiln::Arg& value) {
    constexpr std::size_t i = Captures::of(Name.view());
    static_assert(i != kNoName);
    auto mismatch = [&] {
      return fail([&] { return "kwarg mismatch: '" + std::string(Name.view()) + "' is bound to two different values"; });
    };
    if (const kiln::Arg* prev = captures[i]) return python_equal(*prev, value) || mismatch();
    if constexpr (Root::has_positional) {  // only patterns with VarArgs (or Arg()) hold var kwargs
      // A VarArgs node's kwarg of this name (Inductor has one kwargs namespace) must agree.
      if (!var_kwargs.empty())
        if (const kiln::Arg* v = var_kwargs.find(Name.view()); v && !python_equal(*v, value)) return mismatch();
    }
    captures[i] = &value;
    recorded = true;
    return true;
  }

  // ---- reading ----

  std::span<Node* const> matched_nodes() const { return {nodes.data(), node_count}; }
  // Copies the matched nodes into `out`: in place when it has their number
  // already (the same pattern's last match mostly had), without a call.
  void copy_nodes_to(std::vector<Node*>& out) const {
    if (out.size() != node_count) out.resize(node_count);
    for (std::size_t i = 0; i < node_count; ++i) out[i] = nodes[i];
  }
};

// Text of an argument value for failure messages: node names or the value.
inline std::string describe_value(const kiln::Arg& v);

}  // namespace kiln::pattern

#include "kiln/core/print.hpp"

namespace kiln::pattern {
inline std::string describe_value(const kiln::Arg& v) {
  if (Node* n = v.node()) return "node " + n->name();
  return "constant " + format_arg(v);
}
}  // namespace kiln::pattern
