#pragma once
// Call patterns: CallFunction, CallMethod, CallModule and their VarArgs forms.
//
//   CallFunction(aten::add_Tensor, CallFunction(aten::mm, kw<"a">, kw<"b">), kw<"c">)
//   CallFunction({aten::relu, F::relu}, Arg(), users(MULTIPLE))
//   CallFunction(aten::add_Tensor, kw<"x">, kw<"y">, kwarg<"alpha">(1))
//
// A call pattern matches a node whose kind and target fit, with exactly as many
// positional arguments as the pattern has positional children, each child
// matching the argument in its place; keyword children match the node's kwargs
// by Inductor's rule (kiln/pattern/keyword_rule.hpp: order counts, the schema
// fills in only when the node has fewer kwargs than the pattern), or by kiln's
// looser one on request: `.with_keyword_rule(KeywordRule::normalize)`. An
// interior call pattern's node must have exactly `users` users (1 unless
// stated; MULTIPLE: any number); pattern outputs are exempt.
#include <algorithm>
#include <array>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/core/module_table.hpp"
#include "kiln/core/op_packet.hpp"
#include "kiln/core/op_schema.hpp"
#include "kiln/pattern/keyword_rule.hpp"
#include "kiln/pattern/leaf.hpp"

namespace kiln::pattern {

// users(n) / MULTIPLE: how many users an interior node must have.
struct Users {
  int count = 1;  // -1: any number
};
inline constexpr Users MULTIPLE{-1};
constexpr Users users(int n) { return Users{n}; }

// kwarg<"alpha">(child): a keyword child.
template <FixedString Name, class T>
struct KwChild : ChildTag {
  T child;
  static constexpr std::size_t size = T::size;
  using captures = typename T::captures;
  static constexpr bool has_positional = T::has_positional;
  static constexpr std::string_view name = Name.view();
};
template <FixedString Name, class T>
KwChild<Name, child_t<T>> kwarg(T&& child) {
  KwChild<Name, child_t<T>> k;
  k.child = as_child(std::forward<T>(child));
  return k;
}

template <class T>
struct is_kw_child : std::false_type {};
template <FixedString N, class T>
struct is_kw_child<KwChild<N, T>> : std::true_type {};
// The parameter name of a keyword child; empty for a positional child.
template <class T>
inline constexpr std::string_view kw_child_name{};
template <FixedString N, class T>
inline constexpr std::string_view kw_child_name<KwChild<N, T>> = KwChild<N, T>::name;

// A keyword child's pattern, or the child itself.
template <class T>
struct unwrap_kw_child {
  using type = T;
};
template <FixedString N, class T>
struct unwrap_kw_child<KwChild<N, T>> {
  using type = T;
};
template <class T>
using unwrap_kw_child_t = typename unwrap_kw_child<T>::type;

// One target of a call pattern: an op (or a method name, or a module path),
// a packet of op overloads (kiln::packet), or a module class (kiln::module_class).
struct OpTarget {
  enum class Kind : std::uint8_t { op, packet, module_class };
  OpRef ref;
  Kind kind = Kind::op;
  OpTarget(OpRef op) : ref(op) {}
  OpTarget(OpPacket p) : ref(p.name, p.hash), kind(Kind::packet) {}
  OpTarget(ModuleClass c) : ref(c.name, c.hash), kind(Kind::module_class) {}
  OpTarget(const char* name) : ref(name) {}  // a method or module name
};

// The targets a call pattern accepts (Inductor's fns), any number of them.
// The first kInline ops are compared in place, which is all that most
// patterns have; further ops, packets and module classes wait in `wide_`,
// read only when none of those matched.
struct OpSet {
  static constexpr std::size_t kInline = 8;
  OpSet() = default;
  OpSet(OpTarget t) { add(t); }
  OpSet(OpRef op) : OpSet(OpTarget(op)) {}
  OpSet(OpPacket p) : OpSet(OpTarget(p)) {}
  OpSet(ModuleClass c) : OpSet(OpTarget(c)) {}
  OpSet(std::initializer_list<OpTarget> list) {
    for (const OpTarget& t : list) add(t);
  }
  // A method or module name (CallMethod("view"), CallModule("encoder.fc")).
  OpSet(const char* name) : OpSet(OpTarget(OpRef(name))) {}
  void add(OpTarget t) {
    if (t.kind == OpTarget::Kind::op && count_ < kInline) {
      ops_[count_++] = t.ref;
    } else {
      wide_.push_back(t);
      wide_flag_ = true;
    }
  }
  // Whether a node with target hash `target` is accepted; `n` is that node
  // (only a module class needs it, for its graph's module table; the hash of a
  // call_module node is its module path's).
  bool contains(std::uint64_t target, const Node* n = nullptr) const {
    return contains_exact(target) || (wide_flag_ && contains_wide(target, n));
  }
  // Whether `target` is one of the first kInline ops: a node reference's early
  // check, kept small because it is inlined into every pattern, at every node
  // (bench/README.md); the rest is asked of the node.
  bool contains_exact(std::uint64_t target) const {
    for (std::size_t i = 0; i < count_; ++i)
      if (ops_[i].hash == target) return true;
    return false;
  }
  // Whether some target is not among the inline ops (a packet, a module
  // class, or an op beyond kInline): then contains_exact may miss a member.
  bool wide() const { return wide_flag_; }
  std::size_t size() const { return count_ + wide_.size(); }
  // Every target, the inline ops first.
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t i = 0; i < count_; ++i) fn(OpTarget(ops_[i]));
    for (const OpTarget& t : wide_) fn(t);
  }
  [[gnu::cold, gnu::noinline]] std::string describe() const {
    std::vector<std::string> parts;
    for_each([&](const OpTarget& t) {
      parts.push_back(std::string(t.ref.name) + (t.kind == OpTarget::Kind::packet ? ".*" : ""));
    });
    if (parts.size() == 1) return parts[0];
    std::string s = "[";
    for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
    return s + "]";
  }

 private:
  // Out of line and cold: the inline ops are what a pattern compares at every
  // node. Declared pure (its only writes are packet_of's per-thread memo, which
  // no caller can see) so that match_fns stays pure too: a call that might
  // write memory makes GCC stop inlining each match_node into its pattern.
  [[gnu::cold, gnu::noinline, gnu::pure]] bool contains_wide(std::uint64_t target, const Node* n) const {
    for (const OpTarget& t : wide_) {
      switch (t.kind) {
        case OpTarget::Kind::op:
          if (t.ref.hash == target) return true;
          break;
        case OpTarget::Kind::packet:  // the packet itself (a node may call it) or one of its overloads
          if (t.ref.hash == target || packet_of(target) == t.ref.hash) return true;
          break;
        case OpTarget::Kind::module_class:
          if (n && n->op() == OpKind::call_module && n->graph().modules().class_hash_of(target) == t.ref.hash)
            return true;
          break;
      }
    }
    return false;
  }
  std::array<OpRef, kInline> ops_{};
  std::size_t count_ = 0;
  bool wide_flag_ = false;  // !wide_.empty(), one byte to test
  std::vector<OpTarget> wide_;
};

// Inductor's users rule: an interior call pattern's node must have exactly the
// stated number of users (any, for MULTIPLE); the pattern's outputs are exempt.
template <std::size_t Pos, class S>
bool users_rule_holds(S& st, const Node* n, Users u) {
  const std::int32_t want = st.info[Pos].users;  // u.count, or -1 at an output
  if (want < 0 || n->num_users() == static_cast<std::size_t>(want)) return true;
  if (!st.explain) return false;  // common enough not to build the message's closure first
  return st.fail([&] {
    return "node " + n->name() + ": expected " + std::to_string(u.count) + " user" + (u.count == 1 ? "" : "s") +
           ", has " + std::to_string(n->num_users());
  });
}

// A call pattern matched `n`: it joins the match's nodes (children first) and
// its slot, so later uses of the same pattern object must see the same node.
template <class S>
inline void record_matched_node(S& st, Slot& s, Node* n, const kiln::Arg* via) {
  st.add_node(n);
  st.set_slot(s, n, via);
}

// Whether a node of kind `op` (an OpKind's value) and target hash `target`
// fits a call pattern of kind Kind with targets `fns`: asked of a node, or of
// the copy of its kind and target that a reference to it carries.
template <OpKind Kind>
bool kind_and_target_fit(std::uint8_t op, std::uint64_t target, const OpSet& fns, const Node* n) {
  return op == static_cast<std::uint8_t>(Kind) && fns.contains(target, n);
}

// "node add_3: function_mismatch: it is call_function aten.mul.Tensor, the pattern
// wants CallFunction aten.add.Tensor"; out of line, shared by every call pattern.
[[gnu::noinline]] inline std::string function_mismatch_message(const Node* n, const char* pattern_kind, const OpSet& fns) {
  return "node " + n->name() + ": function_mismatch: it is " + std::string(op_kind_name(n->op())) + " " +
         std::string(n->target_name()) + ", the pattern wants " + pattern_kind + " " + fns.describe();
}

// KILN_PATTERN_DEBUG's whole failing path: a call pattern whose child failed
// puts its own step in front of the child's reason, so that the message reads
// from the root down, e.g. "add_3 = CallFunction(aten.add.Tensor) args[0] ->
// mm_2 = CallFunction(aten.mm.default) args[1] -> node b: expected 1 user, has 2".
// `keyword` names a keyword child; otherwise `index` is the positional one.
[[gnu::cold, gnu::noinline]] inline void prepend_path_step(std::string& why, const Node* n, const char* pattern_kind,
                                                            const OpSet& fns, std::size_t index,
                                                            std::string_view keyword = {}) {
  std::string step = n->name() + " = " + pattern_kind + "(" + fns.describe() + ") ";
  step += keyword.empty() ? "args[" + std::to_string(index) + "]" : "kwargs['" + std::string(keyword) + "']";
  why.insert(0, step + " -> ");
}

template <OpKind Kind>
constexpr const char* call_pattern_name() {
  if constexpr (Kind == OpKind::call_function) return "CallFunction";
  else if constexpr (Kind == OpKind::call_method) return "CallMethod";
  else return "CallModule";
}

// Positional children must come before keyword children: a C++ call has no
// other way to say which is which, and Inductor's patterns read that way too.
template <class... Cs>
constexpr bool keyword_children_last() {
  constexpr bool kw[] = {is_kw_child<Cs>::value..., false};
  bool seen_kw = false;
  for (std::size_t i = 0; i < sizeof...(Cs); ++i) {
    if (kw[i]) seen_kw = true;
    else if (seen_kw) return false;
  }
  return true;
}

// What CallPattern and CallVarArgsPattern share: the kind and targets a node
// must have, the users rule, and the early rejection from a node reference.
template <OpKind Kind>
struct CallHead : PatternTag, PatternIdentity {
  OpSet fns;
  Users user_count;
  static constexpr OpKind kind = Kind;

  bool match_fns(const Node* n) const {
    return kind_and_target_fit<Kind>(static_cast<std::uint8_t>(n->op()), n->target().hash, fns, n);
  }
  bool has_multiple_users() const { return user_count.count < 0 || user_count.count > 1; }

 protected:
  // The reference carries the node's kind and target: a wrong op is rejected
  // without reading the node (unless the pattern object at Pos matched before,
  // where match_node must report the repeat, or a failure is being explained,
  // which match_node does in words), and a right one need not be checked on
  // the node again: match_node's `fits` says the kind and target are known to
  // fit (so too where PatternMatcherPass found the root node by them).
  // With packets or module classes among the targets (fns.wide()) the
  // reference's target hash alone cannot reject: the node is asked instead
  // (match_fns), and only an exact op's hash in the reference is a fit.
  template <std::size_t Pos, class S>
  bool reference_rejected(bool fits, S& st) const {
    return !fits && !st.explain && !st.slot(Pos).set && !fns.wide();
  }
  bool reference_fits(const NodeRef& r) const {
    return r.op == static_cast<std::uint8_t>(Kind) && fns.contains_exact(r.target_hash);
  }
  // A call pattern's match(): an argument value must refer to a node, which
  // `self` (the CallPattern or CallVarArgsPattern) then matches.
  template <std::size_t Pos, class Self, class S>
  static bool match_reference(const Self& self, const kiln::Arg& v, S& st) {
    const NodeRef* r = v.node_ref();
    // A null reference never fits (its kind is none), so it is rejected with the rest.
    const bool fits = r && self.reference_fits(*r);
    if (self.template reference_rejected<Pos>(fits, st)) return false;
    if (!r || !r->node) return st.fail([&] { return describe_value(v) + ": expected a node for " + self.short_describe(); });
    return self.template match_node<Pos>(r->node, st, &v, fits);
  }

  // ", _users=MULTIPLE" or ", _users=n" unless the default of one user.
  void describe_users(std::string& out) const {
    if (user_count.count < 0) out += ", _users=MULTIPLE";
    else if (user_count.count != 1) out += ", _users=" + std::to_string(user_count.count);
  }
};

// A necessary condition for a call pattern to match at a node, cheap enough to
// ask before trying it: the node's first argument is a reference to a node of
// kind `op` with a target in `fns` (none when fns is null). It holds where the
// pattern's first child is a call pattern: that child is matched first, when
// no slot is set yet, so a reference that does not fit fails the match.
struct FirstArgFilter {
  std::uint8_t op = 0;
  const OpSet* fns = nullptr;
  bool may_match(const Node* n) const {
    if (!fns) return true;
    const auto& args = n->args();
    if (args.size() == 0) return false;
    const NodeRef* r = args.data()[0].node_ref();
    return r && r->op == op && fns->contains_exact(r->target_hash);  // fns is never wide()
  }
};

template <OpKind Kind, class... Cs>
struct CallPattern : CallHead<Kind> {
  static_assert(keyword_children_last<Cs...>(), "CallFunction: keyword children (kwarg<\"name\">(...)) must follow the positional ones");
  using CallHead<Kind>::fns;
  using CallHead<Kind>::user_count;
  using CallHead<Kind>::match_fns;
  using CallHead<Kind>::has_multiple_users;
  using PatternIdentity::id;
  Children<Cs...> children;
  KeywordRule keyword_rule = KeywordRule::inductor;
  // Inductor's pytree mode (see is_structure_leaf_v): some child is a literal
  // list or a list/dict constant. Set by the factory.
  bool pytree = false;

  static constexpr std::size_t size = 1 + (std::size_t{0} + ... + Cs::size);
  using captures = concat_names_t<typename Cs::captures...>;
  static constexpr bool has_positional = (false || ... || Cs::has_positional);
  static constexpr std::size_t num_positional = (std::size_t{0} + ... + (is_kw_child<Cs>::value ? 0 : 1));
  static constexpr std::size_t num_keyword = sizeof...(Cs) - num_positional;

  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    return this->template match_reference<Pos>(*this, v, st);
  }

  template <std::size_t Pos, class S>
  bool match_node(Node* n, S& st, const kiln::Arg* via = nullptr, bool fits = false) const {
    Slot& s = st.slot(Pos);
    // At the root (where matching starts, with every slot clear) nothing has matched yet.
    if (Pos != 0 && s.set) {
      if (s.node == n) return true;  // this pattern object already matched this node
      return st.fail([&] { return "node " + n->name() + ": repeated pattern differs (" + short_describe() + ")"; });
    }
    if (!fits && !match_fns(n))
      return st.fail([&] { return function_mismatch_message(n, call_pattern_name<Kind>(), fns); });
    const auto& args = n->args();
    if (args.size() != num_positional && !extra_args_allowed(n)) {
      return st.fail([&] {
        return "node " + n->name() + ": function_mismatch: it has " + std::to_string(args.size()) +
               " positional arguments, the pattern " + std::to_string(num_positional);
      });
    }
    if (!users_rule_holds<Pos>(st, n, user_count)) return false;
    // The node's value for each keyword child, in the children's order.
    const kiln::Arg* kw_values[num_keyword > 0 ? num_keyword : 1];
    if constexpr (num_keyword > 0) {
      if (!find_keyword_values(n, kw_values, st)) return false;
    }
    if (!match_children<Pos>(n, args.data(), kw_values, st, std::index_sequence_for<Cs...>{})) return false;
    record_matched_node(st, s, n, via);
    return true;
  }

  template <std::size_t Pos>
  void plan(PositionInfo* info) const {
    info[Pos].id = id;
    info[Pos].multi_user = has_multiple_users();
    info[Pos].users = user_count.count;
    plan_children<Pos>(info, std::index_sequence_for<Cs...>{});
  }

  // See FirstArgFilter: for a first child that is a call pattern.
  FirstArgFilter first_arg_filter() const {
    if constexpr (sizeof...(Cs) > 0) {
      using C = std::remove_cvref_t<decltype(children.template get<0>())>;
      if constexpr (requires { C::kind; }) {
        // (A child with packets or module classes is not asked: its targets
        // are not all in the reference.)
        if constexpr (std::is_base_of_v<CallHead<C::kind>, C>)
          if (!children.template get<0>().fns.wide())
            return {static_cast<std::uint8_t>(C::kind), &children.template get<0>().fns};
      }
    }
    return {};
  }

  // Calls yield(Node*) for nodes this pattern might match, found from the
  // nodes its children already matched (Inductor's find_anchor_nodes).
  template <std::size_t Pos, class S, class Yield>
  void find_anchor_nodes(S& st, std::vector<Node*>& searched, Yield&& yield) const {
    const Slot& s = st.slot(Pos);
    if (s.set) {
      if (s.node) yield(s.node);
      return;
    }
    anchor_children<Pos>(st, searched, yield, std::index_sequence_for<Cs...>{});
  }

  // This pattern with keyword children matched by `rule` (see keyword_rule.hpp).
  CallPattern with_keyword_rule(KeywordRule rule) const {
    CallPattern p = *this;
    p.keyword_rule = rule;
    return p;
  }

  std::string short_describe() const { return std::string(call_pattern_name<Kind>()) + "(" + fns.describe() + ", ...)"; }
  void describe(std::string& out) const {
    out += call_pattern_name<Kind>();
    out += "(" + fns.describe();
    describe_children(out, std::index_sequence_for<Cs...>{});
    this->describe_users(out);
    out += ")";
  }

 private:
  template <std::size_t I>
  static constexpr std::size_t positional_index() {
    constexpr bool kw[] = {is_kw_child<Cs>::value..., false};
    std::size_t k = 0;
    for (std::size_t j = 0; j < I; ++j) k += !kw[j];
    return k;
  }

  // The keyword children's names, in order.
  static constexpr std::array<std::string_view, num_keyword> keyword_names = [] {
    constexpr std::string_view all[] = {kw_child_name<Cs>..., std::string_view{}};
    std::array<std::string_view, num_keyword> out{};
    std::size_t k = 0;
    for (std::string_view name : all)
      if (!name.empty()) out[k++] = name;
    return out;
  }();
  template <std::size_t I>
  static constexpr std::size_t keyword_index() {
    constexpr bool kw[] = {is_kw_child<Cs>::value..., false};
    std::size_t k = 0;
    for (std::size_t j = 0; j < I; ++j) k += kw[j];
    return k;
  }

  // Under KeywordRule::normalize, more positional arguments than positional
  // children pass when each extra one is a schema parameter a keyword child names.
  bool extra_args_allowed(const Node* n) const {
    if constexpr (num_keyword == 0) {
      return false;
    } else {
      return keyword_rule == KeywordRule::normalize && n->args().size() > num_positional &&
             extra_args_named(n, num_positional, keyword_names);
    }
  }

  template <class S>
  bool find_keyword_values(const Node* n, const kiln::Arg** out, S& st) const {
    if (keyword_rule == KeywordRule::inductor) {
      std::string why;
      if (keyword_values(n, keyword_names, out, st.explain ? &why : nullptr)) return true;
      return st.fail([&] { return why; });
    }
    for (std::size_t i = 0; i < num_keyword; ++i) {
      out[i] = keyword_value_normalized(n, keyword_names[i], num_positional);
      if (!out[i])
        return st.fail([&] {
          return "node " + n->name() + ": function_mismatch: no keyword argument '" + std::string(keyword_names[i]) + "'";
        });
    }
    return true;
  }

  // `args`: the node's positional arguments (where they are stored is decided
  // once, not for each child); `kw`: its values for the keyword children.
  // `n`: the node this pattern is matching, named in a failure's path.
  template <std::size_t Pos, class S, std::size_t... Is>
  bool match_children(const Node* n, const kiln::Arg* args, const kiln::Arg* const* kw, S& st,
                      std::index_sequence<Is...>) const {
    return (match_child<Pos, Is>(n, args, kw, st) && ...);
  }
  template <std::size_t Pos, std::size_t I, class S>
  bool match_child(const Node* n, const kiln::Arg* args, const kiln::Arg* const* kw, S& st) const {
    using C = std::remove_cvref_t<decltype(children.template get<I>())>;
    constexpr std::size_t child_pos = Pos + 1 + offset_of<I, Cs...>();
    const auto& c = children.template get<I>();
    bool ok;
    if constexpr (is_kw_child<C>::value) {
      ok = structure_fits<unwrap_kw_child_t<C>>(*kw[keyword_index<I>()], st) &&
           c.child.template match<child_pos>(*kw[keyword_index<I>()], st);
    } else {
      ok = structure_fits<C>(args[positional_index<I>()], st) &&
           c.template match<child_pos>(args[positional_index<I>()], st);
    }
    if (!ok && st.explain) [[unlikely]]
      prepend_path_step(*st.explain, n, call_pattern_name<Kind>(), fns,
                        is_kw_child<C>::value ? keyword_index<I>() : positional_index<I>(), kw_child_name<C>);
    return ok;
  }
  // Whether any child can put the pattern in pytree mode (a compile-time
  // bound: only then is `pytree` read).
  static constexpr bool may_be_pytree = (!is_structure_leaf_v<unwrap_kw_child_t<Cs>> || ...);
  template <class C, class S>
  bool structure_fits(const kiln::Arg& v, S& st) const {
    if constexpr (may_be_pytree && is_structure_leaf_v<C>) {
      if (pytree && is_container(v))
        return st.fail([&] { return container_meets_leaf(v); });
    }
    return true;
  }

 public:
  // Sets `pytree` from the children (called by the factories).
  void find_pytree_mode() {
    if constexpr (may_be_pytree) pytree = pytree_children(std::index_sequence_for<Cs...>{});
  }

 private:
  template <std::size_t... Is>
  bool pytree_children(std::index_sequence<Is...>) const {
    return (container_child(children.template get<Is>()) || ...);
  }
  template <class C>
  static bool container_child(const C& c) {
    if constexpr (is_kw_child<C>::value) return container_child(c.child);
    else if constexpr (is_list_pattern_v<C>) return true;
    else if constexpr (std::is_same_v<C, Constant>) return is_container(c.value);
    else return false;
  }
  template <std::size_t Pos, std::size_t... Is>
  void plan_children(PositionInfo* info, std::index_sequence<Is...>) const {
    (plan_child<Pos + 1 + offset_of<Is, Cs...>()>(children.template get<Is>(), info), ...);
  }
  template <std::size_t P, class C>
  static void plan_child(const C& c, PositionInfo* info) {
    if constexpr (is_kw_child<C>::value) c.child.template plan<P>(info);
    else c.template plan<P>(info);
  }
  template <std::size_t Pos, class S, class Yield, std::size_t... Is>
  void anchor_children(S& st, std::vector<Node*>& searched, Yield& yield, std::index_sequence<Is...>) const {
    (anchor_child<Pos + 1 + offset_of<Is, Cs...>()>(children.template get<Is>(), st, searched, yield), ...);
  }
  template <std::size_t P, class C, class S, class Yield>
  void anchor_child(const C& c, S& st, std::vector<Node*>& searched, Yield& yield) const {
    auto from = [&](Node* other) {
      for (Node* u : other->users()) {
        if (std::find(searched.begin(), searched.end(), u) != searched.end()) continue;
        if (match_fns(u)) {
          searched.push_back(u);
          yield(u);
        }
      }
    };
    if constexpr (is_kw_child<C>::value) anchors_of<P>(c.child, st, searched, from);
    else anchors_of<P>(c, st, searched, from);
  }
  // Anchor candidates of a child: a call pattern searches further; a leaf
  // offers the node it matched, if any.
  template <std::size_t P, class C, class S, class F>
  static void anchors_of(const C& c, S& st, std::vector<Node*>& searched, F& from) {
    if constexpr (is_list_pattern_v<C>) {
      c.template visit_items<P>([&]<std::size_t Q>(const auto& item) { anchors_of<Q>(item, st, searched, from); });
    } else if constexpr (requires { c.template find_anchor_nodes<P>(st, searched, from); }) {
      c.template find_anchor_nodes<P>(st, searched, from);
    } else if constexpr (C::size > 0) {
      const Slot& s = st.slot(P);
      if (Node* n = s.set ? s.matched_node() : nullptr) from(n);
    }
  }
  template <std::size_t... Is>
  void describe_children(std::string& out, std::index_sequence<Is...>) const {
    (describe_child(out, children.template get<Is>()), ...);
  }
  template <class C>
  static void describe_child(std::string& out, const C& c) {
    out += ", ";
    if constexpr (is_kw_child<C>::value) {
      out += std::string(C::name) + "=";
      c.child.describe(out);
    } else {
      c.describe(out);
    }
  }
};

// CallFunctionVarArgs and friends: target and users only; every argument is
// passed to the handler (positional ones as args, keyword ones as var_kwargs).
template <OpKind Kind>
struct CallVarArgsPattern : CallHead<Kind> {
  using CallHead<Kind>::fns;
  using CallHead<Kind>::user_count;
  using CallHead<Kind>::match_fns;
  using CallHead<Kind>::has_multiple_users;
  using PatternIdentity::id;
  static constexpr std::size_t size = 1;
  using captures = NameList<>;
  static constexpr bool has_positional = true;

  template <std::size_t Pos, class S>
  bool match(const kiln::Arg& v, S& st) const {
    return this->template match_reference<Pos>(*this, v, st);
  }
  template <std::size_t Pos, class S>
  bool match_node(Node* n, S& st, const kiln::Arg* via = nullptr, bool fits = false) const {
    Slot& s = st.slot(Pos);
    if (s.set) return s.node == n || st.fail([&] { return "node " + n->name() + ": repeated pattern differs"; });
    if (!fits && !match_fns(n))
      return st.fail([&] { return "node " + n->name() + ": function_mismatch: the pattern wants " + fns.describe(); });
    if (!users_rule_holds<Pos>(st, n, user_count)) return false;
    for (const auto& a : n->args()) st.add_arg(a);
    for (const auto& [k, a] : n->kwargs())
      if (!st.add_var_kwarg(k, a)) return false;
    record_matched_node(st, s, n, via);
    return true;
  }
  template <std::size_t Pos>
  void plan(PositionInfo* info) const {
    info[Pos].id = id;
    info[Pos].multi_user = has_multiple_users();
    info[Pos].users = user_count.count;
  }
  template <std::size_t Pos, class S, class Yield>
  void find_anchor_nodes(S& st, std::vector<Node*>&, Yield&& yield) const {
    const Slot& s = st.slot(Pos);
    if (s.set && s.node) yield(s.node);
  }
  std::string short_describe() const { return std::string(call_pattern_name<Kind>()) + "VarArgs(" + fns.describe() + ")"; }
  void describe(std::string& out) const {
    out += std::string(call_pattern_name<Kind>()) + "VarArgs(" + fns.describe();
    this->describe_users(out);
    out += ")";
  }
};

// ---- factories ----


// Children, with an optional trailing users(n) / MULTIPLE.
template <OpKind Kind>
struct CallBuilder {
  template <class... Ts>
  static auto build(OpSet fns, Users u, Ts&&... ts) {
    CallPattern<Kind, child_t<Ts>...> p;
    p.fns = std::move(fns);
    p.user_count = u;
    p.children = Children<child_t<Ts>...>(as_child(std::forward<Ts>(ts))...);
    p.find_pytree_mode();
    return p;
  }
};

namespace detail {
// Splits off a trailing Users argument, if there is one.
template <OpKind Kind, class... Ts, std::size_t... Is>
auto build_without_last(OpSet fns, Users u, std::tuple<Ts...>&& t, std::index_sequence<Is...>) {
  return CallBuilder<Kind>::build(std::move(fns), u, std::get<Is>(std::move(t))...);
}
}  // namespace detail

template <OpKind Kind, class... Ts>
auto make_call_pattern(OpSet fns, Ts&&... ts) {
  if constexpr (sizeof...(Ts) > 0) {
    using Last = std::remove_cvref_t<std::tuple_element_t<sizeof...(Ts) - 1, std::tuple<Ts...>>>;
    if constexpr (std::is_same_v<Last, Users>) {
      auto t = std::forward_as_tuple(std::forward<Ts>(ts)...);
      Users u = std::get<sizeof...(Ts) - 1>(t);
      return detail::build_without_last<Kind>(std::move(fns), u, std::move(t),
                                              std::make_index_sequence<sizeof...(Ts) - 1>{});
    } else {
      return CallBuilder<Kind>::build(std::move(fns), Users{1}, std::forward<Ts>(ts)...);
    }
  } else {
    return CallBuilder<Kind>::build(std::move(fns), Users{1});
  }
}

template <class... Ts>
auto CallFunction(OpSet fns, Ts&&... children) {
  return make_call_pattern<OpKind::call_function>(std::move(fns), std::forward<Ts>(children)...);
}
template <class... Ts>
auto CallMethod(OpSet methods, Ts&&... children) {
  return make_call_pattern<OpKind::call_method>(std::move(methods), std::forward<Ts>(children)...);
}
template <class... Ts>
auto CallModule(OpSet modules, Ts&&... children) {
  return make_call_pattern<OpKind::call_module>(std::move(modules), std::forward<Ts>(children)...);
}
template <OpKind Kind>
CallVarArgsPattern<Kind> make_var_args_pattern(OpSet fns, Users u) {
  CallVarArgsPattern<Kind> p;
  p.fns = std::move(fns);
  p.user_count = u;
  return p;
}
inline CallVarArgsPattern<OpKind::call_function> CallFunctionVarArgs(OpSet fns, Users u = {}) {
  return make_var_args_pattern<OpKind::call_function>(std::move(fns), u);
}
inline CallVarArgsPattern<OpKind::call_method> CallMethodVarArgs(OpSet fns, Users u = {}) {
  return make_var_args_pattern<OpKind::call_method>(std::move(fns), u);
}
inline CallVarArgsPattern<OpKind::call_module> CallModuleVarArgs(OpSet fns, Users u = {}) {
  return make_var_args_pattern<OpKind::call_module>(std::move(fns), u);
}

}  // namespace kiln::pattern
