#pragma once
// The mechanism behind PatternMatcherPass (passes/pattern_matcher_pass.hpp):
// the type-erased entry that holds one registered pattern with its handler and
// extra_check and tries it at a node, the per-apply context, the counters and
// guards of one apply(), and register_pattern's argument sorting.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/passes/counters.hpp"
#include "kiln/passes/mutation_regions.hpp"
#include "kiln/passes/pass.hpp"
#include "kiln/passes/pattern_options.hpp"
#include "kiln/pattern/check_result.hpp"
#include "kiln/pattern.hpp"  // the whole DSL a pass author writes: ListOf, MultiOutputPattern, RepeatedExpr
#include "kiln/pattern/plan_for.hpp"

namespace kiln {

namespace detail {

// The root (kind, targets) a pattern is indexed under.
template <class P>
std::pair<OpKind, pattern::OpSet> pattern_root(const P& p) {
  if constexpr (requires { p.root_fns(); })
    return {p.root_kind(), p.root_fns()};
  else
    return {P::kind, p.fns};
}


struct ApplyContext {
  Counters* counters = nullptr;
  // Counted during apply() and added to `counters` once at its end.
  std::int64_t matches = 0;
  std::int64_t matched_nodes = 0;
  const std::string* debug_node = nullptr;  // KILN_PATTERN_DEBUG
  // Mutation regions (unless the pass lets matches cross mutations).
  MutationRegions* regions = nullptr;
};

// KILN_PATTERN_DEBUG output; out of line so each pattern's code stays small.
[[gnu::noinline]] inline void report_pattern_debug(const Node* node, const std::string& pattern, std::string_view what) {
  std::cerr << "KILN_PATTERN_DEBUG: node " << node->name() << ": " << pattern << ": " << what << "\n";
}

// Adds what one apply() counted to its Counters, when it ends (also by an
// exception from a handler: the matches applied before it still count).
struct CountOnExit {
  ApplyContext& ctx;
  ~CountOnExit() {
    if (!ctx.counters || ctx.matches == 0) return;
    ctx.counters->increment("pattern_matcher_count", ctx.matches);
    ctx.counters->increment("pattern_matcher_nodes", ctx.matched_nodes);
  }
};

// Sets a flag for a scope and then restores what it was: the re-entrancy
// guards of a pass's reusable buffers.
class ScopedFlag {
 public:
  explicit ScopedFlag(bool& flag) : flag_(flag), was_(flag) { flag = true; }
  ~ScopedFlag() { flag_ = was_; }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  bool& flag_;
  bool was_;
};

// The handler of a match will erase the matched nodes and edit the root's
// users, whose later lines matching did not read, and link its new nodes to
// the matched nodes' inputs: start fetching all of those now. (Out of the
// pattern templates, so that each pattern does not compile its own copy.)
inline void prefetch_for_handler(std::span<Node* const> matched, const Node* root) {
  for (const Node* n : matched) {
    n->prefetch_for_edit(/*from_line=*/2);
    for (const kiln::Arg& a : n->args())
      if (const Node* in = a.node()) in->prefetch_for_new_user();
  }
  for (const Node* u : root->users()) u->prefetch_for_edit();  // uses replaced by the handler
}

// Runs an extra_check that returns bool or CheckResult; on a rejection
// `why` (if given) receives what KILN_PATTERN_DEBUG prints, with the reason.
template <class Check, class M>
bool passes_check(Check& check, M& m, std::string* why) {
  using R = std::invoke_result_t<Check&, M&>;
  if constexpr (std::is_same_v<std::remove_cvref_t<R>, CheckResult>) {
    const CheckResult r = check(m);
    if (!r.accepted() && why) {
      *why = "extra_check rejected the match";
      if (!r.reason().empty()) (*why += ": ") += r.reason();
    }
    return r.accepted();
  } else {
    if (static_cast<bool>(check(m))) return true;
    if (why) *why = "extra_check rejected the match";
    return false;
  }
}

class EntryBase {
 public:
  virtual ~EntryBase() = default;
  // Matches at `node`, and on success checks and applies; true if applied.
  // `why` is given at KILN_PATTERN_DEBUG's node only: what is reported there.
  virtual bool try_apply(Node* node, Graph& g, ApplyContext& ctx, std::string* why) = 0;
  virtual std::string describe() const = 0;
  std::string name;
  // Asked before try_apply, without a call: most patterns tried at a node fail
  // on its first argument's kind or target.
  pattern::FirstArgFilter first_arg;
  // Where it goes in a root list: lists are kept in this order (prepended
  // patterns count down from 0, appended ones up), so lists merged for a node
  // that several roots reach keep the order of registration.
  std::int64_t order = 0;
};

template <class P, class Handler, class Check>
class Entry final : public EntryBase {
 public:
  Entry(P p, Handler h, Check c) : plan_(std::move(p)), handler_(std::move(h)), check_(std::move(c)) {
    if constexpr (requires { plan_.pattern().first_arg_filter(); }) first_arg = plan_.pattern().first_arg_filter();
    else if constexpr (requires { plan_.first_arg_filter(); }) first_arg = plan_.first_arg_filter();
  }

  bool try_apply(Node* node, Graph& g, ApplyContext& ctx, std::string* why) override {
    const bool debug = why != nullptr;
    // The pass found `node` under this pattern's root kind and target.
    if (!plan_.try_match(node, why, /*root_fits=*/true)) {
      if (debug) report_pattern_debug(node, name, *why);
      return false;
    }
    if (ctx.regions && !ctx.regions->same_region(plan_.matched_nodes(), g)) {
      if (debug) report_pattern_debug(node, name, "the match crosses a mutation");
      return false;
    }
    prefetch_for_handler(plan_.matched_nodes(), node);
    // One Match per pattern, refilled for each match, so its vectors keep their
    // capacity; a handler that re-enters this pass gets a fresh one (on the
    // heap: an empty std::optional<Match> costs more to set up and tear down).
    std::unique_ptr<Match> fresh;
    Match* slot = &match_;
    if (match_in_use_) slot = (fresh = std::make_unique<Match>()).get();
    plan_.take_result(*slot, g);
    Match& m = *slot;
    ScopedFlag in_use(match_in_use_);
    if (!passes_check(check_, m, debug ? why : nullptr)) {
      if (debug) report_pattern_debug(node, name, *why);
      return false;
    }
    if (debug) report_pattern_debug(node, name, "matched");
    const auto matched = static_cast<std::int64_t>(m.nodes().size());
    {
      auto guard = g.inserting_before(node);
      if constexpr (std::is_invocable_v<Handler&, decltype(m)&, Graph&, Node*>)
        handler_(m, g, node);
      else
        handler_(m);
    }
    ++ctx.matches;
    ctx.matched_nodes += matched;
    return true;
  }
  std::string describe() const override { return plan_.describe(); }

 private:
  // PatternPlan and Match, or RuntimeMatcher and RuntimeMatch (pattern/plan_for.hpp).
  using Match = typename pattern::PlanFor<P>::Match;
  typename pattern::PlanFor<P>::Plan plan_;
  Handler handler_;
  Check check_;
  Match match_;
  bool match_in_use_ = false;
};

// Counts the apply() calls running on this thread; only the outermost one
// recycles erased nodes, since an outer apply's snapshot may still hold them.
class ApplyDepth {
 public:
  ApplyDepth() { ++depth(); }
  ~ApplyDepth() { --depth(); }
  ApplyDepth(const ApplyDepth&) = delete;
  ApplyDepth& operator=(const ApplyDepth&) = delete;
  bool outermost() const { return depth() == 1; }

 private:
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
};

struct AcceptAll {
  template <class M>
  bool operator()(const M&) const { return true; }
};

// register_pattern's optional tail, (), (check), (options) or (check, options),
// as one (check, options) pair: one overload serves all four spellings.
inline std::pair<AcceptAll, PatternOptions> check_and_options() { return {}; }
inline std::pair<AcceptAll, PatternOptions> check_and_options(PatternOptions opts) { return {{}, std::move(opts)}; }
template <class Check>
  requires(!std::is_same_v<std::remove_cvref_t<Check>, PatternOptions>)
std::pair<std::decay_t<Check>, PatternOptions> check_and_options(Check&& check, PatternOptions opts = {}) {
  return {std::forward<Check>(check), std::move(opts)};
}

}  // namespace detail

}  // namespace kiln
