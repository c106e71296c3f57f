#pragma once
// The state of one match attempt: what Inductor keeps in MatchContext and the
// growing Match (pattern_to_node, captured kwargs and args, matched nodes, the
// exclusive-argument set), laid out flat for a pattern type known at compile
// time. One state per registered pattern is reused across attempts, so a failed
// attempt allocates nothing once the vectors have grown.
#include <array>
#include <cstdint>
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

  std::array<Slot, kSlots> slots{};
  std::array<const kiln::Arg*, kCaptures> captures{};
  std::vector<kiln::Arg> args;            // Arg() captures, depth first
  std::vector<Node*> nodes;               // matched nodes, children before parents
  std::vector<const kiln::Arg*> exclusive;
  ArgDict var_kwargs;                     // kwargs captured by CallFunctionVarArgs
  const PositionInfo* info = nullptr;     // kSlots entries
  std::string* explain = nullptr;         // when set: the first failure's reason goes here

  void reset() {
    slots.fill(Slot{});
    captures.fill(nullptr);
    args.clear();
    nodes.clear();
    exclusive.clear();
    if (!var_kwargs.empty()) var_kwargs = ArgDict{};
  }

  // Records why matching failed (only when explaining) and returns false.
  template <class MakeMessage>
  bool fail(MakeMessage&& make) {
    if (explain && explain->empty()) *explain = make();
    return false;
  }

  Slot& slot(std::size_t pos) { return slots[info[pos].canon]; }

  // Binds capture `name` to `value`; a name bound before must bind an equal value.
  template <FixedString Name>
  bool bind(const kiln::Arg& value) {
    constexpr std::size_t i = Captures::of(Name.view());
    static_assert(i != kNoName);
    if (const kiln::Arg* prev = captures[i]) {
      if (python_equal(*prev, value)) return true;
      return fail([&] { return "kwarg mismatch: '" + std::string(Name.view()) + "' is bound to two different values"; });
    }
    captures[i] = &value;
    return true;
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
