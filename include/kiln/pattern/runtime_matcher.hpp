#pragma once
// RuntimeMatcher: a RuntimePattern prepared for matching (the runtime
// counterpart of PatternPlan), and RuntimeMatch, what a handler gets.
//
//   RuntimeMatcher matcher(std::move(pattern));
//   if (matcher.try_match(node)) { RuntimeMatch m = matcher.result(graph); ... }
//
// The rules are the compiled DSL's, which are Inductor's: exact positional
// argument count; an interior call element's node must have exactly `users`
// users (pattern outputs exempt, by element as Inductor decides by object);
// keyword children by keyword_values() (keyword_rule.hpp); an element reached
// twice must match one node ("repeated pattern differs"); a capture name bound
// twice must bind equal values; exclusive args distinct; constants compared
// with python_equal and never equal to a node; literal lists of exact length.
// Several outputs are matched as MultiOutputPattern: the first at the node,
// each other one from the anchors that already-matched elements offer.
//
// The pattern is flattened into index tables once; an attempt allocates
// nothing once the state's vectors have grown, and an attempt that records
// nothing costs no reset. A matcher is one thread's: it keeps its state.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/pattern/keyword_rule.hpp"
#include "kiln/pattern/matched_nodes.hpp"
#include "kiln/pattern/plan_for.hpp"
#include "kiln/pattern/match_state.hpp"  // describe_value
#include "kiln/pattern/python_equal.hpp"
#include "kiln/pattern/runtime_pattern.hpp"

namespace kiln::pattern {

class RuntimeMatch : public MatchedNodes {
 public:
  // The value captured as `name` (a node reference or a constant).
  const kiln::Arg& get(std::string_view name) const {
    for (std::size_t i = 0; i < names_->size(); ++i)
      if ((*names_)[i] == name) return captures_[i];
    std::string known;
    for (const auto& n : *names_) known += (known.empty() ? "" : ", ") + n;
    throw Error("RuntimeMatch::get: the pattern binds no KeywordArg '" + std::string(name) + "' (it binds: " + known + ")");
  }
  // The node captured as `name`; an error if that capture is a constant.
  Node* node(std::string_view name) const {
    const kiln::Arg& a = get(name);
    if (Node* n = a.node()) return n;
    throw Error("RuntimeMatch::node: the capture '" + std::string(name) + "' is " + describe_value(a) + ", not a node");
  }
  bool binds(std::string_view name) const { return std::find(names_->begin(), names_->end(), name) != names_->end(); }
  // Capture names (each once, in the order the pattern first names them) and their values.
  const std::vector<std::string>& capture_names() const { return *names_; }
  const std::vector<kiln::Arg>& captures() const { return captures_; }
  // Arg() captures in depth-first order.
  const std::vector<kiln::Arg>& args() const { return args_; }

 private:
  friend class RuntimeMatcher;
  std::shared_ptr<const std::vector<std::string>> names_ = std::make_shared<const std::vector<std::string>>();
  std::vector<kiln::Arg> captures_;
  std::vector<kiln::Arg> args_;
};

// get<"x">(m) as for compiled matches, so that a generic handler serves both.
template <FixedString Name>
const kiln::Arg& get(const RuntimeMatch& m) {
  return m.get(Name.view());
}
template <FixedString Name>
Node* node(const RuntimeMatch& m) {
  return m.node(Name.view());
}

class RuntimeMatcher {
 public:
  using Result = RuntimeMatch;

  explicit RuntimeMatcher(RuntimePattern p) : pattern_(std::move(p)) {
    root_ = pattern_.root().id;  // throws for a pattern without output
    const auto& els = pattern_.elements();
    info_.resize(els.size());
    auto names = std::make_shared<std::vector<std::string>>();
    for (std::size_t i = 0; i < els.size(); ++i) {
      const auto& e = els[i];
      Info& in = info_[i];
      in.kind = e.kind;
      in.child_begin = static_cast<std::uint32_t>(children_.size());
      in.num_args = static_cast<std::uint32_t>(e.args.size());
      for (auto r : e.args) children_.push_back(r.id);
      if (e.kind == ElementKind::call) {
        in.op = static_cast<std::uint8_t>(e.op);
        in.fns = &e.fns;
        in.users = e.users.count;
        in.num_kwargs = static_cast<std::uint32_t>(e.kwargs.size());
        in.kw_begin = static_cast<std::uint32_t>(kw_names_.size());
        for (const auto& [k, r] : e.kwargs) {
          children_.push_back(r.id);
          kw_names_.push_back(k);  // views into pattern_, which this matcher owns and never changes
        }
      } else if (e.kind == ElementKind::constant) {
        in.value = &e.value;
      } else if (e.kind == ElementKind::keyword_arg || e.kind == ElementKind::exclusive_arg) {
        auto it = std::find(names->begin(), names->end(), e.name);
        in.capture = static_cast<std::uint32_t>(it - names->begin());
        if (it == names->end()) names->push_back(e.name);
      }
    }
    // A call with a literal list or a list/dict constant among its children
    // compares its arguments as flattened pytrees (see is_structure_leaf_v).
    for (Info& in : info_) {
      if (in.kind != ElementKind::call) continue;
      for (std::uint32_t i = 0; i < in.num_args + in.num_kwargs; ++i) {
        const Info& c = info_[children_[in.child_begin + i]];
        in.pytree |= c.kind == ElementKind::list || (c.kind == ElementKind::constant && is_container(*c.value));
      }
    }
    // Inductor exempts the outputs from the users rule by object: every place
    // an output element occurs.
    for (const auto& o : pattern_.outputs())
      if (o) info_[o->id].users = -1;
    names_ = std::move(names);
    slots_.assign(els.size(), Slot{});
    captures_.assign(names_->size(), nullptr);
  }
  // The tables point into the pattern the matcher owns (moving keeps them valid).
  RuntimeMatcher(RuntimeMatcher&&) = default;
  RuntimeMatcher(const RuntimeMatcher&) = delete;
  RuntimeMatcher& operator=(const RuntimeMatcher&) = delete;

  const RuntimePattern& pattern() const { return pattern_; }
  std::string describe() const { return pattern_.describe(); }
  const std::vector<std::string>& capture_names() const { return *names_; }

  // What a pass indexes the pattern under: the first output's kind and targets.
  OpKind root_kind() const { return static_cast<OpKind>(info_[root_].op); }
  const OpSet& root_fns() const { return *info_[root_].fns; }
  bool root_accepts(const Node* n) const { return fits(info_[root_], n); }

  // The cheap necessary condition PatternMatcherPass asks before trying the
  // pattern (see FirstArgFilter): the root's first child is matched first.
  FirstArgFilter first_arg_filter() const {
    const Info& r = info_[root_];
    if (r.num_args == 0) return {};
    const Info& c = info_[children_[r.child_begin]];
    // A wide target set (packets, classes) is not decided by a reference.
    if (c.kind != ElementKind::call || c.fns->wide()) return {};
    return {c.op, c.fns};
  }

  // True when the pattern matches with its root at `n`; the match stays in the
  // state until the next attempt. `root_fits`: the caller found `n` by the
  // root's kind and target. On failure `why` (if given) receives the reason.
  bool try_match(Node* n, std::string* why = nullptr, bool root_fits = false) {
    reset();
    why_ = why;
    if (why) why->clear();
    if (!match_node(root_, n, nullptr, root_fits)) return false;
    const auto& outs = pattern_.outputs();
    for (std::size_t i = 1; i < outs.size(); ++i)
      if (outs[i] && !match_output(i, outs[i]->id)) return false;
    return true;
  }
  std::optional<RuntimeMatch> match(Node* n, std::string* why = nullptr) {
    if (!try_match(n, why)) return std::nullopt;
    return result(n->graph());
  }

  std::span<Node* const> matched_nodes() const { return {nodes_.data(), nodes_.size()}; }

  RuntimeMatch result(Graph& g) {
    RuntimeMatch m;
    take_result(m, g);
    return m;
  }
  // The last successful attempt into `m`, reusing its storage.
  void take_result(RuntimeMatch& m, Graph& g) {
    if (m.names_ != names_) m.names_ = names_;
    m.captures_.resize(captures_.size());
    for (std::size_t i = 0; i < captures_.size(); ++i) m.captures_[i] = captures_[i] ? *captures_[i] : kiln::Arg();
    m.args_.swap(args_);  // the next attempt clears what it got back
    m.nodes_.assign(nodes_.begin(), nodes_.end());
    const auto& outs = pattern_.outputs();
    m.outputs_.resize(outs.size());
    for (std::size_t i = 0; i < outs.size(); ++i) m.outputs_[i] = outs[i] ? slot_node(slots_[outs[i]->id]) : nullptr;
    m.graph_ = &g;
  }

 private:
  struct Info {
    ElementKind kind{};
    std::uint8_t op = 0;
    std::int32_t users = -1;          // the users rule, outputs' exemption folded in; -1: any
    std::uint32_t child_begin = 0;    // children_[child_begin ..]: positional, then keyword children
    std::uint32_t num_args = 0;       // positional children (a list's items)
    std::uint32_t num_kwargs = 0;
    std::uint32_t kw_begin = 0;       // kw_names_[kw_begin ..]
    std::uint32_t capture = 0;        // keyword args: index into the capture names
    const OpSet* fns = nullptr;       // call elements
    const kiln::Arg* value = nullptr; // constants
    bool pytree = false;              // calls: Inductor's pytree mode (a list or list/dict constant child)
  };
  // Inductor's pattern_to_node entry of one element; set while epoch == epoch_.
  struct Slot {
    Node* node = nullptr;              // call elements
    const kiln::Arg* value = nullptr;  // leaves: the value matched (a call: the reference it was reached by)
    std::uint32_t epoch = 0;
  };
  static Node* slot_node(const Slot& s) { return s.node ? s.node : (s.value ? s.value->node() : nullptr); }
  bool is_set(std::uint32_t e) const { return slots_[e].epoch == epoch_; }
  static bool fits(const Info& in, const Node* n) {
    return static_cast<std::uint8_t>(n->op()) == in.op && in.fns->contains(n->target().hash, n);
  }

  void reset() {
    if (!recorded_) return;
    if (++epoch_ == 0) {  // wrapped: clear the epochs once
      for (auto& s : slots_) s.epoch = 0;
      epoch_ = 1;
    }
    std::fill(captures_.begin(), captures_.end(), nullptr);
    exclusive_.clear();
    args_.clear();
    nodes_.clear();
    recorded_ = false;
  }
  void set_slot(std::uint32_t e, Node* n, const kiln::Arg* v) {
    slots_[e] = Slot{n, v, epoch_};
    recorded_ = true;
  }
  template <class Make>
  bool fail(Make&& make) {
    if (why_ && why_->empty()) *why_ = make();
    return false;
  }
  static const char* call_name(const Info& in) {
    return in.op == static_cast<std::uint8_t>(OpKind::call_function) ? "CallFunction"
           : in.op == static_cast<std::uint8_t>(OpKind::call_method) ? "CallMethod"
                                                                     : "CallModule";
  }
  std::string short_describe(std::uint32_t e) const {
    return std::string(call_name(info_[e])) + "(" + info_[e].fns->describe() + ", ...)";
  }

  bool match_value(std::uint32_t e, const kiln::Arg& v) {
    const Info& in = info_[e];
    switch (in.kind) {
      case ElementKind::call: {
        const NodeRef* r = v.node_ref();
        // The reference carries the node's kind and target: a wrong op fails
        // without reading the node, unless the element matched before (then
        // the repeat must be reported) or a failure is being explained.
        // Only the inline ops are known from the reference: a packet or module
        // class target (OpSet::wide) is asked of the node itself.
        const bool ok = r && r->op == in.op && in.fns->contains_exact(r->target_hash);
        if (!ok && !why_ && !is_set(e) && !in.fns->wide()) return false;
        if (!r || !r->node) return fail([&] { return describe_value(v) + ": expected a node for " + short_describe(e); });
        return match_node(e, r->node, &v, ok);
      }
      case ElementKind::constant:
        if (v.is_node() || !python_equal(v, *in.value))
          return fail([&] { return "constant_args: " + describe_value(v) + " != " + format_arg(*in.value); });
        return true;
      case ElementKind::list: {
        const ArgList* l = v.list();
        if (!l || l->size() != in.num_args)
          return fail([&] {
            return "args_structure: " + describe_value(v) + " is not a list of " + std::to_string(in.num_args);
          });
        for (std::uint32_t i = 0; i < in.num_args; ++i)
          if (!structure_fits(children_[in.child_begin + i], (*l)[i]) ||
              !match_value(children_[in.child_begin + i], (*l)[i]))
            return false;
        return true;
      }
      default:
        return match_leaf(e, in, v);
    }
  }

  // In pytree mode a node's list or dict flattens to several leaves, so it
  // never meets a pattern leaf (anything but a literal list or a constant).
  bool structure_fits(std::uint32_t child, const kiln::Arg& v) {
    const ElementKind k = info_[child].kind;
    if (k == ElementKind::list || k == ElementKind::constant || !is_container(v)) return true;
    return fail([&] { return container_meets_leaf(v); });
  }

  bool match_leaf(std::uint32_t e, const Info& in, const kiln::Arg& v) {
    if (is_set(e)) {
      const Slot& s = slots_[e];
      const Node* before = slot_node(s);
      if (before ? v.node() == before : (s.value && python_equal(*s.value, v))) return true;
      return fail([&] { return describe_value(v) + ": repeated pattern differs"; });
    }
    switch (in.kind) {
      case ElementKind::arg:
        args_.push_back(v);
        break;
      case ElementKind::exclusive_arg:
        for (const kiln::Arg* seen : exclusive_)
          if (python_equal(*seen, v)) return fail([&] { return describe_value(v) + ": exclusive arg appears twice"; });
        exclusive_.push_back(&v);
        [[fallthrough]];
      case ElementKind::keyword_arg:
        if (!bind(in.capture, v)) return false;
        break;
      default:  // ignored
        break;
    }
    set_slot(e, nullptr, &v);
    return true;
  }

  bool bind(std::uint32_t i, const kiln::Arg& v) {
    if (const kiln::Arg* prev = captures_[i]) {
      if (python_equal(*prev, v)) return true;
      return fail([&] { return "kwarg mismatch: '" + (*names_)[i] + "' is bound to two different values"; });
    }
    captures_[i] = &v;
    recorded_ = true;
    return true;
  }

  // `ok`: the node's kind and target are known to fit.
  bool match_node(std::uint32_t e, Node* n, const kiln::Arg* via, bool ok) {
    const Info& in = info_[e];
    if (is_set(e)) {
      if (slots_[e].node == n) return true;
      return fail([&] { return "node " + n->name() + ": repeated pattern differs (" + short_describe(e) + ")"; });
    }
    if (!ok && !fits(in, n))
      return fail([&] { return function_mismatch_message(n, call_name(in), *in.fns); });
    const auto& args = n->args();
    if (args.size() != in.num_args)
      return fail([&] {
        return "node " + n->name() + ": function_mismatch: it has " + std::to_string(args.size()) +
               " positional arguments, the pattern " + std::to_string(in.num_args);
      });
    if (in.users >= 0 && n->num_users() != static_cast<std::size_t>(in.users))
      return fail([&] {
        return "node " + n->name() + ": expected " + std::to_string(in.users) + " user" + (in.users == 1 ? "" : "s") +
               ", has " + std::to_string(n->num_users());
      });
    const kiln::Arg* const* kw = nullptr;
    const kiln::Arg* small[8];
    std::vector<const kiln::Arg*> big;
    if (in.num_kwargs) {
      const kiln::Arg** buf = small;
      if (in.num_kwargs > 8) buf = (big.resize(in.num_kwargs), big.data());
      if (!keyword_values(n, {kw_names_.data() + in.kw_begin, in.num_kwargs}, buf, why_)) return false;
      kw = buf;
    }
    const kiln::Arg* a = args.data();
    for (std::uint32_t i = 0; i < in.num_args; ++i) {
      const std::uint32_t c = children_[in.child_begin + i];
      if ((in.pytree && !structure_fits(c, a[i])) || !match_value(c, a[i])) {
        if (why_) prepend_path_step(*why_, n, call_name(in), *in.fns, i);
        return false;
      }
    }
    for (std::uint32_t i = 0; i < in.num_kwargs; ++i) {
      const std::uint32_t c = children_[in.child_begin + in.num_args + i];
      if ((in.pytree && !structure_fits(c, *kw[i])) || !match_value(c, *kw[i])) {
        if (why_) prepend_path_step(*why_, n, call_name(in), *in.fns, i, kw_names_[in.kw_begin + i]);
        return false;
      }
    }
    nodes_.push_back(n);
    set_slot(e, n, via);
    return true;
  }

  // ---- MultiOutputPattern: the outputs after the first ----

  // Inductor's _match_from_anchors for output `i` (element e).
  bool match_output(std::size_t i, std::uint32_t e) {
    if (info_[e].kind != ElementKind::call) {
      // A leaf output anchors only on what it matched already.
      if (is_set(e)) return true;
      return fail([&] { return "output " + std::to_string(i) + ": no anchor found"; });
    }
    // Collected up front: Python's generator reads pattern_to_node only between
    // candidates, after each failed one is reverted, so it sees this state.
    candidates_.clear();
    searched_.clear();
    anchors(e, candidates_);
    if (candidates_.empty())
      return fail([&] { return "output " + std::to_string(i) + ": no anchor found for " + pattern_.describe_element({e}); });
    prior_ = slots_;
    const bool explained = why_ && !why_->empty();
    for (Node* c : candidates_) {  // (matching a candidate never searches for anchors)
      if (why_ && !explained) why_->clear();  // Inductor reports the last candidate's failure
      const SubResult r = sub_match(e, c);
      if (r == SubResult::matched) return true;
      if (r == SubResult::conflict) return false;
      // Revert the candidate's slots. The exclusive set is not reverted, as in Inductor.
      slots_ = prior_;
    }
    return false;
  }

  enum class SubResult { failed, conflict, matched };
  // Matches output element e at node c as Inductor's separate Match: its
  // captures start empty and are merged after, where a name bound on both
  // sides must bind equal values (Match.extend), or the whole match fails.
  SubResult sub_match(std::uint32_t e, Node* c) {
    outer_ = captures_;
    const std::size_t nodes = nodes_.size(), args = args_.size();
    auto undo = [&] {
      captures_ = outer_;
      nodes_.resize(nodes);
      args_.resize(args);
    };
    std::fill(captures_.begin(), captures_.end(), nullptr);
    if (!match_node(e, c, nullptr, false)) {
      undo();
      return SubResult::failed;
    }
    for (std::size_t k = 0; k < captures_.size(); ++k)
      if (captures_[k] && outer_[k] && !python_equal(*captures_[k], *outer_[k])) {
        undo();
        fail([&] { return "kwarg mismatch: '" + (*names_)[k] + "' is bound to two different values"; });
        return SubResult::conflict;
      }
    for (std::size_t k = 0; k < captures_.size(); ++k)
      if (outer_[k]) captures_[k] = outer_[k];  // the first binding is kept
    return SubResult::matched;
  }

  // Inductor's find_anchor_nodes: a matched element offers its node; an
  // unmatched call element offers the users, fitting its kind and target, of
  // the nodes its children offer.
  void anchors(std::uint32_t e, std::vector<Node*>& out) {
    if (is_set(e)) {
      if (Node* n = slot_node(slots_[e])) out.push_back(n);
      return;
    }
    const Info& in = info_[e];
    if (in.kind != ElementKind::call) return;
    for (std::uint32_t i = 0; i < in.num_args + in.num_kwargs; ++i) anchors_via(in, children_[in.child_begin + i], out);
  }
  void anchors_via(const Info& parent, std::uint32_t c, std::vector<Node*>& out) {
    const Info& ci = info_[c];
    if (ci.kind == ElementKind::constant) return;
    if (ci.kind == ElementKind::list) {  // Inductor flattens a list's items into the call's children
      for (std::uint32_t i = 0; i < ci.num_args; ++i) anchors_via(parent, children_[ci.child_begin + i], out);
      return;
    }
    std::vector<Node*> from;
    anchors(c, from);
    for (Node* other : from)
      for (Node* u : other->users()) {
        if (std::find(searched_.begin(), searched_.end(), u) != searched_.end()) continue;
        if (fits(parent, u)) {
          out.push_back(u);
          searched_.push_back(u);
        }
      }
  }

  RuntimePattern pattern_;
  std::uint32_t root_ = 0;
  std::vector<Info> info_;
  std::vector<std::uint32_t> children_;
  std::vector<std::string_view> kw_names_;
  std::shared_ptr<const std::vector<std::string>> names_;

  // ---- the state of one attempt ----
  std::vector<Slot> slots_;
  std::uint32_t epoch_ = 1;
  std::vector<const kiln::Arg*> captures_;
  std::vector<const kiln::Arg*> exclusive_;
  std::vector<kiln::Arg> args_;
  std::vector<Node*> nodes_;
  bool recorded_ = false;
  std::string* why_ = nullptr;
  // MultiOutputPattern's scratch, kept for their capacity.
  std::vector<Node*> candidates_, searched_;
  std::vector<Slot> prior_;
  std::vector<const kiln::Arg*> outer_;
};

// PatternMatcherPass prepares a registered RuntimePattern with a RuntimeMatcher.
template <>
struct PlanFor<RuntimePattern> {
  using Plan = RuntimeMatcher;
  using Match = RuntimeMatch;
};

// One-off matching, without keeping a matcher.
inline std::optional<RuntimeMatch> match(const RuntimePattern& pattern, Node* n, std::string* why = nullptr) {
  RuntimeMatcher m(pattern);
  return m.match(n, why);
}

}  // namespace kiln::pattern
