#pragma once
// `detail::FanInIndex`: for a node of many inputs (the cat of every tower),
// where each input sits: its place in the node's input list and the argument
// that references it. Node::replace_all_uses_of then edits such a node in time
// proportional to the inputs it replaces instead of its whole fan-in.
//
// An index exists only for a node whose every node reference appears once, as
// a positional argument or an element of a positional list argument, and not
// in its keywords (a cat's list, a stack's): there each input has one place.
// The Graph owns the indexes; the node's edits keep one up to date or drop it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "kiln/core/arg.hpp"
#include "kiln/core/node_args.hpp"
#include "kiln/core/node_map.hpp"

namespace kiln::detail {

class FanInIndex {
 public:
  // A node of fewer inputs is edited by reading them all: building and keeping
  // an index would cost more than it saves.
  static constexpr std::size_t kMinInputs = 256;
  static constexpr std::uint32_t kTopLevel = 0xffffffff;
  struct Place {
    std::uint32_t input = 0;           // the position in the node's input list
    std::uint32_t arg = 0;             // args[arg] is the reference ...
    std::uint32_t element = kTopLevel;  // ... or args[arg][element], in a list
  };

  // The index of a node with these arguments and inputs (in first-use order,
  // as Node keeps them), or nullptr where some input has no single place.
  static std::unique_ptr<FanInIndex> of(const NodeArgs& args, const ArgDict& kwargs, std::span<Node* const> inputs) {
    for (const auto& kv : kwargs)
      if (holds_node(kv.second)) return nullptr;
    auto index = std::make_unique<FanInIndex>(inputs.size());
    std::uint32_t next_input = 0;
    // Records `n` as the next input in first-use order; false where it is
    // not the input expected there (a node referenced before: the inputs are
    // distinct, so a node recorded is never recorded again).
    auto add = [&](const Node* n, std::uint32_t arg, std::uint32_t element) {
      if (next_input == inputs.size() || inputs[next_input] != n) return false;
      index->places_.get(n) = Place{next_input++, arg, element};
      return true;
    };
    for (std::uint32_t i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      if (const Node* n = a.node()) {
        if (!add(n, i, kTopLevel)) return nullptr;
      } else if (const ArgList* list = a.get_if<ArgList>()) {
        for (std::uint32_t j = 0; j < list->size(); ++j) {
          const Arg& x = (*list)[j];
          if (const Node* n = x.node()) {
            if (!add(n, i, j)) return nullptr;
          } else if (!x.is_scalar() && holds_node(x)) {
            return nullptr;  // a node deeper down
          }
        }
      } else if (!a.is_scalar() && holds_node(a)) {
        return nullptr;  // in a dict or slice
      }
    }
    if (next_input != inputs.size()) return nullptr;
    return index;
  }

  explicit FanInIndex(std::size_t expected) : places_(expected) {}

  // The argument `p` says references its input: args[p.arg], or element
  // p.element of that list; nullptr where `args` has no such argument.
  // (Arg or const Arg: replace_all_uses_of writes through it, lint reads.)
  template <class A>
  static A* reference(std::span<A> args, const Place& p) {
    if (p.arg >= args.size()) return nullptr;
    A& a = args[p.arg];
    if (p.element == kTopLevel) return &a;
    auto* list = a.template get_if<ArgList>();
    return list && p.element < list->size() ? &(*list)[p.element] : nullptr;
  }

  std::size_t size() const { return places_.size(); }
  const Place* find(const Node* n) const { return places_.find(n); }
  bool contains(const Node* n) const { return places_.contains(n); }
  // `to` takes `from`'s place (the node's reference to `from` now names `to`,
  // which was no input of it).
  void move(const Node* from, const Node* to) {
    if (from == to) return;
    const Place p = *places_.find(from);
    places_.erase(from);
    places_.get(to) = p;
  }

 private:
  NodeMap<Place> places_;
};

}  // namespace kiln::detail
