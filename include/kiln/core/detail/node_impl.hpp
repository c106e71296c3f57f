#pragma once
// The definitions of Node's members that need no Graph (core/node.hpp declares
// them; the ones that need the Graph are in core/detail/node_graph_ops.hpp).
// Included by core/node.hpp: not a header to include on its own.
#include "kiln/core/node.hpp"

namespace kiln {

namespace detail {
// Whether `a` holds a null node reference anywhere (for_each_node skips those).
inline bool has_null_node(const Arg& a) {
  if (a.is_node()) return a.node() == nullptr;
  if (const auto* l = a.get_if<ArgList>()) return std::any_of(l->begin(), l->end(), has_null_node);
  if (const auto* d = a.get_if<ArgDict>())
    return std::any_of(d->begin(), d->end(), [](const auto& kv) { return has_null_node(kv.second); });
  if (const auto* s = a.get_if<Slice>()) return std::any_of(s->parts.begin(), s->parts.end(), has_null_node);
  return false;
}
}  // namespace detail

template <class Args>
inline void Node::collect_inputs(const Args& args, const ArgDict& kwargs, InputNodes& out) {
  out.clear();
  // Only for a large fan-in (a cat of many): constructing and destroying even an
  // empty set costs more than the rest of linking a small node's inputs.
  std::optional<detail::NodeSet> seen;
  auto add = [&](Node* n) {
    if (out.size() < 16) {
      for (Node* m : out)
        if (m == n) return;
      out.push_back(n);
      if (out.size() == 16) {
        seen.emplace(64);
        for (Node* m : out) seen->insert(m);
      }
    } else if (seen->insert(n)) {
      out.push_back(n);
    }
  };
  for (const auto& a : args) {
    if (Node* n = a.node()) add(n);
    else if (!a.is_scalar()) for_each_node(a, add);
  }
  for (const auto& [k, a] : kwargs) for_each_node(a, add);
}

inline void Node::displace_last_user_of(Node* input) {
  if (input->live_users_ == 0) return;
  for (std::size_t k = input->users_.size(); k-- > 0;)
    if (Node* last = input->users_[k]) {
      if (last->last_user_of_all_inputs_) last->last_user_of_all_inputs_ = false;  // (a read, not a store, on every edge made)
      return;
    }
}

inline void Node::add_user_to(Node* input) {
  displace_last_user_of(input);
  input_slots_.push_back(static_cast<std::uint32_t>(input->users_.size()));
  input->users_.push_back(this);
  ++input->live_users_;
}

inline void Node::join_users_of(std::size_t i) {
  Node* input = inputs_[i];
  displace_last_user_of(input);
  input_slots_[i] = static_cast<std::uint32_t>(input->users_.size());
  input->users_.push_back(this);
  ++input->live_users_;
}

inline bool Node::is_last_user_of(std::size_t i) const {
  const Node* input = inputs_[i];
  for (std::size_t k = input->users_.size(); k-- > 0;)
    if (input->users_[k]) return input->users_[k] == this;
  return false;
}

inline void Node::remove_from_users_of(std::size_t i) {
  Node* input = inputs_[i];
  input->users_[input_slots_[i]] = nullptr;
  --input->live_users_;
  if (input->users_.size() > 32 && input->users_.size() > 2 * std::size_t(input->live_users_)) input->compact_users();
}

inline void Node::compact_users() {
  std::size_t w = 0;
  for (std::size_t r = 0; r < users_.size(); ++r) {
    Node* u = users_[r];
    if (!u) continue;
    for (std::size_t j = 0; j < u->inputs_.size(); ++j)
      if (u->inputs_[j] == this) u->input_slots_[j] = static_cast<std::uint32_t>(w);
    users_[w++] = u;
  }
  users_.truncate(w);
}

inline void Node::check_input(const Node* n) const {
  if (n != nullptr && n->graph_ == graph_ && !n->erased_) [[likely]]
    return;
  reject_input(n);
}

[[gnu::cold, gnu::noinline]] inline void Node::reject_input(const Node* n) const {
  if (n == nullptr) throw GraphError("node " + name_ + ": argument refers to a null node");
  if (n->graph_ != graph_)
    throw GraphError("node " + name_ + ": argument refers to node " + n->name_ + " of another graph");
  if (n->erased_) throw GraphError("node " + name_ + ": argument refers to erased node " + n->name_);
}

inline void Node::set_args_and_kwargs(ArgList args, ArgDict kwargs) { set_inputs(std::move(args), std::move(kwargs)); }

template <class List>
inline void Node::set_inputs(List&& args, ArgDict&& kwargs) {
  // Check everything before changing anything, so a bad argument leaves the node as it was.
  auto check = [this](const Arg& a) {
    if (const NodeRef* r = a.node_ref()) return check_input(r->node);
    if (a.is_scalar()) return;
    if (detail::has_null_node(a)) check_input(nullptr);
    for_each_node(a, [this](const Node* n) { check_input(n); });
  };
  for (const auto& a : args) check(a);
  for (const auto& [k, a] : kwargs) check(a);
  forget_fan_in_index();
  if constexpr (std::is_same_v<std::remove_cvref_t<List>, ArgList>) args_.assign(std::move(args));
  else args_.assign(args.begin(), args.end());
  const bool had_keywords = kwargs_ != nullptr;
  if (kwargs.empty()) kwargs_.reset();
  else if (kwargs_) *kwargs_ = std::move(kwargs);
  else kwargs_ = std::make_unique<ArgDict>(std::move(kwargs));
  if (had_keywords != (kwargs_ != nullptr)) keywords_changed(had_keywords);
  relink_inputs();
}

inline void Node::relink_inputs() {
  // A node being created (no inputs yet) whose arguments are node references
  // and scalars, few and without kwargs, as nearly every one is: join each
  // input's users as it is found.
  // (An argument that owns nothing is a node reference or a scalar: no nested nodes.)
  const auto flat = [](const Arg& a) { return a.owns_nothing(); };
  if (inputs_.empty() && !kwargs_ && args_.size() <= 16 && std::all_of(args_.begin(), args_.end(), flat)) {
    for (const Arg& a : args_) {
      Node* n = a.node();
      if (!n || std::find(inputs_.begin(), inputs_.end(), n) != inputs_.end()) continue;
      inputs_.push_back(n);
      add_user_to(n);
    }
    return;
  }
  // As torch.fx does: leave every old input's user list, then join the new
  // inputs' lists at the end, so an edited node becomes its inputs' last user.
  // Passes that walk users (anchors, fusion searches) then see Inductor's order.
  // The vectors keep their capacity, so an edit allocates nothing.
  for (std::size_t i = 0; i < inputs_.size(); ++i) remove_from_users_of(i);
  input_slots_.clear();
  collect_inputs(args_, kwargs(), inputs_);
  for (Node* n : inputs_) add_user_to(n);
}

inline void Node::clear_inputs() {
  forget_fan_in_index();
  for (std::size_t i = 0; i < inputs_.size(); ++i) remove_from_users_of(i);
  inputs_.clear();
  input_slots_.clear();
  args_.clear();
  if (kwargs_) {
    kwargs_.reset();
    keywords_changed(true);
  }
}

inline bool Node::is_impure() const {
  switch (op_) {
    case OpKind::placeholder:
    case OpKind::output:
      return true;
    case OpKind::get_attr:
      return false;
    case OpKind::call_function:
      return OpRegistry::instance().traits(target()).impure();
    case OpKind::call_method:
      return is_mutating();  // a method ending in '_' mutates self (x.add_(y))
    case OpKind::call_module:
      return true;  // modules are opaque: keep them
  }
  return true;
}

inline bool Node::is_mutating() const {
  if (op_ == OpKind::call_function) return OpRegistry::instance().traits(target()).mutates;
  if (op_ == OpKind::call_method) return !target_name_.empty() && target_name_.back() == '_';
  return false;
}

inline Node::NodeList Node::replace_all_uses_with(Node* replacement, const std::function<bool(Node*)>& filter) {
  NodeList changed;
  if (replacement == this) return changed;
  check_input(replacement);
  // Editing a user changes users_, so walk a copy: the result's list, which
  // then keeps only the users changed.
  changed.reserve(live_users_);
  for (Node* u : users()) changed.push_back(u);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < changed.size(); ++i) {
    Node* u = changed[i];
    if (filter && !filter(u)) continue;
    u->replace_checked_input(this, replacement);
    changed[kept++] = u;
  }
  changed.truncate(kept);
  return changed;
}

namespace detail {
// Replaces references to `from` by `to` inside `a`, in place.
inline void replace_node_refs(Arg& a, const Node* from, Node* to) {
  if (a.is_node()) {
    if (a.node() == from) a = Arg(to);
  } else if (a.is_scalar()) {
    return;  // most arguments that are no node: nothing nested to look through
  } else if (auto* l = a.get_if<ArgList>()) {
    for (auto& x : *l) replace_node_refs(x, from, to);
  } else if (auto* d = a.get_if<ArgDict>()) {
    for (auto&& [k, x] : *d) replace_node_refs(x, from, to);
  } else if (auto* s = a.get_if<Slice>()) {
    for (auto& x : s->parts) replace_node_refs(x, from, to);
  }
}
}  // namespace detail

inline void Node::replace_all_uses_of(std::span<Node* const> from, std::span<Node* const> to) {
  if (from.size() != to.size()) throw GraphError("replace_all_uses_of: as many replacements as nodes are needed");
  // replaced: from[i] -> i, the first i of each (its replacement to[i]).
  detail::NodeMap<std::size_t> replaced(from.size());
  detail::NodeSet targets(from.size());
  bool distinct_targets = true;
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[i]) continue;
    from[i]->check_input(to[i]);
    bool first = false;
    std::size_t& at = replaced.get(from[i], &first);
    if (first) at = i;
    distinct_targets &= targets.insert(to[i]);
  }
  auto replacement = [&](const Node* n) { return to[*replaced.find(n)]; };
  // Chains (a -> b, b -> c) and replacements that use what they replace would
  // need the calls' order: make them one by one.
  bool tangled = false;
  for (Node* t : to) {
    tangled |= replaced.contains(t);
    for (const Node* in : t->inputs_) tangled |= replaced.contains(in);
  }
  if (tangled) {
    for (std::size_t i = 0; i < from.size(); ++i) from[i]->replace_all_uses_with(to[i]);
    return;
  }
  // The calls one by one would edit users in this order: call i walks
  // from[i]'s users as its list stands then, where the users edited by
  // earlier calls have moved to the end (an edited node becomes its inputs'
  // last user), in the order of their last edit. Each edit key is (call, place).
  // A user of thousands of inputs (the cat of every tower) reads each
  // input's user list, in nodes all over memory: ask for them ahead.
  auto prefetch_users_of_input = [](const Node* u, std::size_t k) {
    constexpr std::size_t kAhead = 8;
    if (k + kAhead < u->inputs_.size()) detail::prefetch(&u->inputs_[k + kAhead]->users_);
  };
  // Each edited user's key, and its place in `edited` (which `rejoin` follows).
  struct Edit {
    std::pair<std::size_t, std::size_t> key;
    std::size_t index = 0;
    std::uint32_t last_use = 0;  // 1 + this user's newest entry in `uses` (0: none)
  };
  // Each (call, user) pair, chained per user: a user with an index of its
  // inputs finds what it replaces there instead of reading all its inputs.
  struct Use {
    std::uint32_t call;
    std::uint32_t previous;  // 1 + the user's previous entry (0: none)
  };
  std::size_t user_count = 0;
  for (std::size_t i = 0; i < from.size(); ++i) user_count += from[i]->live_users_;
  detail::NodeMap<Edit> edits(user_count);
  std::vector<Use> uses;
  uses.reserve(user_count);
  auto key = [&](const Node* u) { return edits.find(u)->key; };
  std::vector<Node*> edited;  // in order of first edit
  std::vector<Node*> fresh, again;
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[i]) continue;
    fresh.clear();
    again.clear();
    for (Node* u : from[i]->users()) {
      bool first = false;
      Edit& e = edits.get(u, &first);
      (first ? fresh : again).push_back(u);
      uses.push_back(Use{static_cast<std::uint32_t>(i), e.last_use});
      e.last_use = static_cast<std::uint32_t>(uses.size());
    }
    std::sort(again.begin(), again.end(), [&](Node* a, Node* b) { return key(a) < key(b); });
    std::size_t place = 0;
    for (Node* u : fresh) {
      Edit& e = edits.get(u);
      e.key = {i, place++};
      e.index = edited.size();
      edited.push_back(u);
    }
    for (Node* u : again) edits.get(u).key = {i, place++};
  }
  // Rewrite each user's arguments once. Where no replacement was an input of
  // the user already (so no two inputs merge), each replaced input is swapped
  // in place, which keeps first-use order; otherwise its inputs are collected
  // again. `rejoin[Edit::index]` lists the inputs whose user lists u must join again.
  std::vector<SmallVector<std::uint32_t, 4>> rejoin(edited.size());
  for (Node* u : edited) {
    const Edit& edit = *edits.find(u);
    SmallVector<std::uint32_t, 4>& again_at = rejoin[edit.index];
    detail::FanInIndex* index = u->fan_in_state_ == kFanInIndexed ? u->mutable_fan_in_index() : nullptr;
    if (index) {
      // The replaced inputs, from the chain of uses (a node named twice in
      // `from` comes twice: only its first visit finds it in the index).
      auto for_each_replaced = [&](auto&& fn) {
        for (std::uint32_t at = edit.last_use; at != 0; at = uses[at - 1].previous) fn(from[uses[at - 1].call]);
      };
      bool merges = !distinct_targets;
      for_each_replaced([&](const Node* in) { merges |= index->contains(replacement(in)); });
      if (merges) {
        u->drop_fan_in_index();
        index = nullptr;
      } else if (u->last_user_of_all_inputs_) {
        // Last of every list, as the loop below would find it: only the
        // replaced inputs change, in their places.
        for_each_replaced([&](const Node* in) {
          const detail::FanInIndex::Place* found = index->find(in);
          if (!found) return;
          const detail::FanInIndex::Place at = *found;
          Node* by = replacement(in);
          *detail::FanInIndex::reference(u->args_.mut(), at) = Arg(by);
          u->remove_from_users_of(at.input);
          u->inputs_[at.input] = by;
          again_at.push_back(at.input);
          index->move(in, by);
        });
        std::sort(again_at.begin(), again_at.end());
        continue;
      }
    }
    auto rewrite = [&](Arg& a, auto& self) -> void {
      if (a.is_node()) {
        if (replaced.contains(a.node())) a = Arg(replacement(a.node()));
      } else if (a.is_scalar()) {
        return;
      } else if (auto* l = a.get_if<ArgList>()) {
        for (auto& x : *l) self(x, self);
      } else if (auto* d = a.get_if<ArgDict>()) {
        for (auto&& [k, x] : *d) self(x, self);
      } else if (auto* sl = a.get_if<Slice>()) {
        for (auto& x : sl->parts) self(x, self);
      }
    };
    for (Arg& a : u->args_.mut()) rewrite(a, rewrite);
    if (u->kwargs_)
      for (auto&& [k, a] : *u->kwargs_) rewrite(a, rewrite);
    bool merges = !distinct_targets;
    for (std::size_t k = 0; k < u->inputs_.size() && !merges; ++k)
      if (replaced.contains(u->inputs_[k]))
        for (const Node* v : replacement(u->inputs_[k])->users()) merges |= v == u;
    if (merges) {
      if (index) u->drop_fan_in_index();
      for (std::size_t k = 0; k < u->inputs_.size(); ++k) u->remove_from_users_of(k);
      collect_inputs(u->args_, u->kwargs(), u->inputs_);
      u->input_slots_.clear();
      for (std::size_t k = 0; k < u->inputs_.size(); ++k) u->input_slots_.push_back(0);
      for (std::size_t k = 0; k < u->inputs_.size(); ++k) again_at.push_back(static_cast<std::uint32_t>(k));
      u->index_fan_in_if_large();
      continue;
    }
    const bool known_last = u->last_user_of_all_inputs_;  // (then the inputs' lists are not read)
    for (std::size_t k = 0; k < u->inputs_.size(); ++k) {
      if (!known_last) prefetch_users_of_input(u, k);
      Node* in = u->inputs_[k];
      if (replaced.contains(in)) {
        u->remove_from_users_of(k);
        u->inputs_[k] = replacement(in);
        if (index) index->move(in, u->inputs_[k]);
        again_at.push_back(static_cast<std::uint32_t>(k));
      } else if (!known_last && !u->is_last_user_of(k)) {
        u->remove_from_users_of(k);  // it moves to the end of this list
        again_at.push_back(static_cast<std::uint32_t>(k));
      }
    }
    u->index_fan_in_if_large();
  }
  // Join in the order of each user's last edit: where the calls leave them.
  std::sort(edited.begin(), edited.end(), [&](Node* a, Node* b) { return key(a) < key(b); });
  // The inputs whose lists the users before have joined in this loop: the
  // only lists where a user can have stopped being last since the loop above.
  std::vector<const Node*> joined;
  for (Node* u : edited) {
    SmallVector<std::uint32_t, 4>& again_at = rejoin[edits.find(u)->index];
    // An input this user was last of already stays last, unless a user
    // edited before this one has just joined after it.
    auto rejoin_unless_last = [&](std::size_t k) {
      const auto k32 = static_cast<std::uint32_t>(k);
      if (!std::binary_search(again_at.begin(), again_at.end(), k32) && !u->is_last_user_of(k)) {
        u->remove_from_users_of(k);
        const std::size_t at = static_cast<std::size_t>(std::lower_bound(again_at.begin(), again_at.end(), k32) - again_at.begin());
        again_at.push_back(k32);
        std::rotate(again_at.begin() + at, again_at.end() - 1, again_at.end());
      }
    };
    // With one user edited, nothing joined a list since the loop above found
    // it the last user there (a cat of thousands, once per fused set).
    if (edited.size() > 1) {
      const detail::FanInIndex* index = u->fan_in_index();
      if (index && joined.size() < u->inputs_.size()) {
        for (const Node* in : joined)
          if (const detail::FanInIndex::Place* at = index->find(in)) rejoin_unless_last(at->input);
      } else {
        for (std::size_t k = 0; k < u->inputs_.size(); ++k) {
          prefetch_users_of_input(u, k);
          rejoin_unless_last(k);
        }
      }
    }
    for (std::size_t k : again_at) {
      u->join_users_of(k);
      if (edited.size() > 1) joined.push_back(u->inputs_[k]);
    }
    // Now last everywhere: a user edited later that joins after it clears this.
    u->last_user_of_all_inputs_ = true;
  }
}

inline void Node::replace_input_with(Node* old_input, Node* new_input) {
  check_input(new_input);
  replace_checked_input(old_input, new_input);
}

inline void Node::replace_checked_input(Node* old_input, Node* new_input) {
  for (Arg& a : args_.mut()) detail::replace_node_refs(a, old_input, new_input);
  if (kwargs_)
    for (auto&& [k, a] : *kwargs_) detail::replace_node_refs(a, old_input, new_input);
  // The new inputs are the old ones (distinct, in order of first use) with
  // old_input replaced: new_input takes its place, or, if it was an input
  // already, keeps the earlier of the two places. So they need not be
  // collected from the arguments again, whatever the fan-in (a cat of
  // thousands whose inputs are replaced one by one stays linear); the user
  // lists are rejoined as relink_inputs does.
  const std::size_t count = inputs_.size();
  for (std::size_t i = 0; i < count; ++i) remove_from_users_of(i);
  input_slots_.clear();
  Node** in = inputs_.data();
  const std::size_t none = count;
  std::size_t old_at = none, new_at = none;
  for (std::size_t i = 0; i < count; ++i) {
    if (in[i] == old_input) old_at = i;
    else if (in[i] == new_input) new_at = i;
  }
  if (old_at != none) {
    if (new_at == none) {
      in[old_at] = new_input;
      // The one reference to old_input (if indexed) now names new_input, in the same place.
      if (fan_in_state_ == kFanInIndexed) [[unlikely]]
        mutable_fan_in_index()->move(old_input, new_input);
    } else {
      forget_fan_in_index();  // two references to new_input now: no single place
      const std::size_t drop = std::max(old_at, new_at);
      in[std::min(old_at, new_at)] = new_input;
      std::copy(in + drop + 1, in + count, in + drop);
      inputs_.truncate(count - 1);
    }
  }
  for (std::size_t i = 0; i < inputs_.size(); ++i) add_user_to(in[i]);
}

}  // namespace kiln
