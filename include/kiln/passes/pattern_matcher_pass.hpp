#pragma once
// PatternMatcherPass: Inductor's driver for compile-time patterns.
//
//   kiln::PatternMatcherPass pass("my_fusions");
//   pass.register_pattern(
//       CallFunction(aten::add_Tensor, CallFunction(aten::mm, kw<"a">, kw<"b">), kw<"c">),
//       [](auto& m, kiln::Graph& g, kiln::Node* root) {      // inserting before root
//         auto* fused = g.call_function(aten::addmm, {get<"c">(m), get<"a">(m), get<"b">(m)});
//         root->replace_all_uses_with(fused);
//         m.erase_nodes();
//       });
//   std::size_t n = pass.apply(graph, &counters);
//
// Patterns are indexed by their root's (op kind, target) in a table built at
// registration. apply() takes a snapshot of the candidate nodes in reverse
// topological order (nodes a handler creates are not visited), skips nodes
// erased meanwhile, tries each node's patterns in registration order, drops a
// match that spans a mutation region (as Inductor 2.11 does; a pass built with
// prevent_match_across_mutations = false keeps them), runs extra_check, then
// the handler, and counts `pattern_matcher_count` and `pattern_matcher_nodes`.
// extra_check returns bool, or a kiln::CheckResult that can say why it rejected.
// The nodes a handler erases are freed once it returns (those the pass has yet
// to visit excepted), and the next nodes created reuse their memory: a handler
// must not keep a pointer to a node it erased past its own call.
// KILN_PATTERN_DEBUG=<node name> prints every pattern tried at that node and why
// it did not match (Inductor's TORCHINDUCTOR_PATTERN_MATCH_DEBUG): the path from
// the root to the failing position, each step with its node, then the reason.
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
#include "kiln/passes/detail/candidates.hpp"
#include "kiln/passes/detail/pattern_entry.hpp"
#include "kiln/passes/detail/root_index.hpp"
#include "kiln/passes/mutation_regions.hpp"
#include "kiln/passes/pass.hpp"
#include "kiln/passes/pattern_options.hpp"
#include "kiln/pattern/check_result.hpp"
#include "kiln/pattern.hpp"  // the whole DSL a pass author writes: ListOf, MultiOutputPattern, RepeatedExpr
#include "kiln/pattern/plan_for.hpp"

namespace kiln {

class PatternMatcherPass {
 public:
  explicit PatternMatcherPass(std::string name = "pattern_matcher", bool prevent_match_across_mutations = true)
      : name_(std::move(name)), prevent_across_mutations_(prevent_match_across_mutations) {}
  PatternMatcherPass(PatternMatcherPass&&) = default;
  PatternMatcherPass& operator=(PatternMatcherPass&&) = default;

  const std::string& name() const { return name_; }
  std::size_t num_patterns() const { return entries_.size(); }

  // Registers `pattern` with its handler: handler(match, graph, root_node) or
  // handler(match), called with the graph inserting before the root node.
  // Then, optionally, extra_check(match), which may still reject a structural
  // match (returning bool, or a kiln::CheckResult with the reason), and
  // PatternOptions: register_pattern(p, h), (p, h, check), (p, h, options) or
  // (p, h, check, options).
  template <class P, class Handler, class... CheckAndOptions>
  PatternMatcherPass& register_pattern(P pattern, Handler handler, CheckAndOptions&&... rest) {
    auto [extra_check, opts] = detail::check_and_options(std::forward<CheckAndOptions>(rest)...);
    using Check = decltype(extra_check);
    // Said here, at the user's call, instead of deep in Entry::try_apply.
    using M = typename pattern::PlanFor<P>::Match;
    static_assert(std::is_invocable_v<Handler&, M&, Graph&, Node*> || std::is_invocable_v<Handler&, M&>,
                  "register_pattern: the handler must be callable as handler(match, graph, root_node), e.g. "
                  "[](auto& m, kiln::Graph& g, kiln::Node* root) {...}, or as handler(match)");
    static_assert(std::is_invocable_r_v<CheckResult, Check&, M&>,
                  "register_pattern: extra_check must be callable as extra_check(match) and return bool or "
                  "kiln::CheckResult, e.g. [](const auto& m) { return ...; } or "
                  "[](const auto& m) -> kiln::CheckResult { return kiln::reject(\"why\"); }");
    auto [kind, fns] = detail::pattern_root(pattern);
    auto entry = std::make_unique<detail::Entry<P, Handler, Check>>(std::move(pattern), std::move(handler),
                                                                   std::move(extra_check));
    entry->name = opts.name.empty() ? entry->describe() : opts.name;
    add_entry(std::move(entry), kind, fns, opts.prepend);
    return *this;
  }

  // A pattern built at run time (kiln/pattern/runtime_matcher.hpp), indexed by
  // its first output's kind and targets and applied exactly as a compiled one;
  // handler(RuntimeMatch&, Graph&, Node*) or handler(RuntimeMatch&), and
  // extra_check(const RuntimeMatch&). (register_pattern accepts it too.) A
  // template only so that this header need not include the runtime matcher.
  template <class RP, class Handler, class... CheckAndOptions>
    requires std::is_same_v<RP, pattern::RuntimePattern>
  PatternMatcherPass& register_runtime_pattern(RP pattern, Handler handler, CheckAndOptions&&... rest) {
    return register_pattern(std::move(pattern), std::move(handler), std::forward<CheckAndOptions>(rest)...);
  }

  // Applies the patterns once over a snapshot of `g`; returns the number of matches applied.
  std::size_t apply(Graph& g, Counters* counters = nullptr) {
    if (entries_.empty()) return 0;
    detail::ApplyContext ctx;
    ctx.counters = counters;
    detail::CountOnExit count_on_exit{ctx};
    std::string debug_node;
    std::string why;  // the reason a pattern failed at debug_node
    if (const char* d = std::getenv("KILN_PATTERN_DEBUG"); d && *d) {
      debug_node = d;
      ctx.debug_node = &debug_node;
    }
    // Computed at the first match (mutation_regions.hpp), before any handler
    // runs: a pass that matches nothing does not read the graph for them.
    MutationRegions regions;
    if (prevent_across_mutations_) ctx.regions = &regions;

    std::size_t count = 0;
    // The snapshot goes into a buffer the pass keeps, so applying it again
    // (fixpoint loops, the next graph) allocates nothing; a handler that
    // re-enters apply() on this same pass gets a buffer of its own.
    std::vector<Candidate> own;
    std::vector<Candidate>& candidates = applying_ ? own : buffer_;
    detail::ScopedFlag applying(applying_);
    // Packet and module-class roots reach the targets this graph has: their
    // keys join a copy of the index for this apply. Without them the index is
    // used as it is, and a node costs what it did before they existed.
    RootIndex resolved;
    const RootIndex& index = family_kinds_ == 0 ? roots_ : resolve_families(g, resolved);
    detail::take_snapshot(g, index, candidates, merge_buffer_, run_bounds_);
    // Nodes a handler erases are freed as soon as it returns, when nothing can
    // read them any more, so the nodes the next handler creates take their
    // places (in the cache) instead of fresh memory. Not inside another apply()
    // (the outer one's snapshot may hold them) nor while mutation regions are
    // kept per node (keyed by node address).
    detail::ApplyDepth depth;
    const bool outermost = depth.outermost();
    const std::uint64_t epoch = detail::GraphInternals::reorder_epoch(g);
    // The snapshot is in graph order; visit it backwards.
    for (std::size_t i = candidates.size(); i-- > 0;) {
      detail::prefetch_ahead(candidates, i);
      Node* node = candidates[i].node();
      if (node->erased()) continue;
      const std::size_t root = candidates[i].root();
      const RootList* list = root != detail::kRootUnknown
                                 ? index.lists[root]
                                 : index.find(Graph::bucket_key(node->op(), node->target().hash));
      const std::size_t erased_mark = detail::GraphInternals::erased_pending(g);
      std::string* node_why = ctx.debug_node && node->name() == *ctx.debug_node ? &why : nullptr;
      for (detail::EntryBase* e : list->entries) {
        // (At the debug node every pattern is tried, to say why it fails.)
        if (!node_why && !e->first_arg.may_match(node)) continue;
        if (!e->try_apply(node, g, ctx, node_why)) continue;
        ++count;
        // Only a handler erases nodes; read before recycling may free this one.
        const bool node_erased = node->erased();
        // Frees what the rest of the snapshot cannot reach. A lambda here, not a
        // helper, keeps this loop's registers (bench/README.md, "Why the code is as it is").
        if (outermost && !regions.active())
          detail::GraphInternals::recycle_erased_since(
              g, erased_mark, [&](const Node* n) { return detail::visited(index, n, candidates[i].key, g, epoch); });
        if (node_erased) break;
      }
    }
    return count;
  }

  // Every registered pattern, one per line, for logs.
  std::string describe() const {
    std::string s;
    for (const auto& e : entries_) s += e->name + "\n";
    return s;
  }

 private:
  // The root table and the snapshot (passes/detail/root_index.hpp, candidates.hpp).
  using RootList = detail::RootList;
  using RootIndex = detail::RootIndex;
  using Candidate = detail::Candidate;

  // The non-template part of register_pattern, kept out of each pattern's instantiation.
  // (Cold, as is resolve_families: what the compiler inlines into them counts
  // against the inlining it would otherwise do in the patterns' matching code.)
  [[gnu::cold]] void add_entry(std::unique_ptr<detail::EntryBase> entry, OpKind kind, const pattern::OpSet& fns,
                               bool prepend) {
    detail::EntryBase* e = entry.get();
    e->order = prepend ? --first_order_ : ++last_order_;
    fns.for_each([&](const pattern::OpTarget& t) {
      switch (t.kind) {
        case pattern::OpTarget::Kind::packet:
          // Inductor's fns hold the packet and its overloads; the overloads are
          // found per graph (resolve_families), the packet itself here.
          family_lists_[{kind, t.ref.hash, false}].entries.push_back(e);
          family_kinds_ |= 1u << static_cast<unsigned>(kind);
          [[fallthrough]];
        case pattern::OpTarget::Kind::op: {
          const std::uint64_t key = Graph::bucket_key(kind, t.ref.hash);
          auto& list = index_[key];
          if (list.entries.empty()) {
            list.kind = kind;
            list.target = OpRegistry::instance().intern(t.ref.name);
            roots_.add(key, &list);  // unordered_map nodes never move
            roots_.build();
          }
          insert_in_order(list.entries, e);
          break;
        }
        case pattern::OpTarget::Kind::module_class:
          // Only call_module nodes have a module class.
          if (kind != OpKind::call_module) break;
          family_lists_[{kind, t.ref.hash, true}].entries.push_back(e);
          family_kinds_ |= 1u << static_cast<unsigned>(kind);
          break;
      }
    });
    for (auto& [k, list] : family_lists_) std::stable_sort(list.entries.begin(), list.entries.end(), by_order);
    merged_.clear();  // merged lists are remade with the new entry when next needed
    entries_.push_back(std::move(entry));
  }

  static bool by_order(const detail::EntryBase* a, const detail::EntryBase* b) { return a->order < b->order; }
  static void insert_in_order(std::vector<detail::EntryBase*>& list, detail::EntryBase* e) {
    list.insert(std::upper_bound(list.begin(), list.end(), e, by_order), e);
  }

  // The index for one apply() to a graph where packet or module-class roots
  // exist: `roots_` plus, for each target of `g` that belongs to a registered
  // packet or (call_module) whose module has a registered class, that target's
  // key with the list of every pattern reaching it (its own, the packet's, the
  // class's) in registration order. Visits each distinct target of the graph
  // once, not its nodes. A module's class is the graph's, so this is redone
  // for every apply; the merged lists are kept until the next registration.
  [[gnu::cold]] const RootIndex& resolve_families(const Graph& g, RootIndex& out) {
    out = roots_;
    bool added = false;
    for (unsigned k = 0; k < 8; ++k) {
      if (!(family_kinds_ >> k & 1u)) continue;
      const auto kind = static_cast<OpKind>(k);
      g.for_each_target(kind, [&](OpRef target) {
        const RootList* by_packet = nullptr;
        const RootList* by_class = nullptr;
        const std::uint64_t p = packet_of(target.hash);
        if (p) {
          auto it = family_lists_.find({kind, p, false});
          if (it != family_lists_.end()) by_packet = &it->second;
        }
        const std::uint64_t c = kind == OpKind::call_module ? g.modules().class_hash_of(target.hash) : 0;
        if (c) {
          auto it = family_lists_.find({kind, c, true});
          if (it != family_lists_.end()) by_class = &it->second;
        }
        if (!by_packet && !by_class) return;
        const std::uint64_t key = Graph::bucket_key(kind, target.hash);
        auto [it, fresh] = merged_.try_emplace({key, c});
        RootList& list = it->second;
        if (fresh) {
          list.kind = kind;
          list.target = target;
          if (auto own = index_.find(key); own != index_.end()) list.entries = own->second.entries;
          for (const RootList* more : {by_packet, by_class})
            if (more) list.entries.insert(list.entries.end(), more->entries.begin(), more->entries.end());
          std::stable_sort(list.entries.begin(), list.entries.end(), by_order);
          // A pattern that reaches the target twice (by name and by packet) is tried once.
          list.entries.erase(std::unique(list.entries.begin(), list.entries.end()), list.entries.end());
        }
        out.add(key, &list);
        added = true;
      });
    }
    if (added) out.build();
    return out;
  }

  std::string name_;
  bool prevent_across_mutations_;
  std::vector<std::unique_ptr<detail::EntryBase>> entries_;
  std::unordered_map<std::uint64_t, RootList> index_;  // by exact (kind, target) key
  RootIndex roots_;                                    // over index_
  // Packet and module-class roots, by (kind, packet or class hash, is a class).
  std::map<std::tuple<OpKind, std::uint64_t, bool>, RootList> family_lists_;
  unsigned family_kinds_ = 0;  // bit k: some family root has OpKind k
  // Lists merged by resolve_families, by (key, module class hash or 0); map
  // nodes never move, so an apply's index can point at them.
  std::map<std::pair<std::uint64_t, std::uint64_t>, RootList> merged_;
  std::int64_t first_order_ = 0, last_order_ = 0;  // see EntryBase::order
  std::vector<Candidate> buffer_;          // apply()'s snapshot, kept for the next apply
  std::vector<Candidate> merge_buffer_;    // natural_sort's, likewise
  std::vector<std::size_t> run_bounds_;    // likewise
  bool applying_ = false;
};

// Several PatternMatcherPasses applied in order, with patterns registered by
// pass_number (Inductor's pass_patterns list in post_grad).
class PatternMatcherPasses {
 public:
  explicit PatternMatcherPasses(std::size_t count, const std::string& name = "pattern_matcher",
                                bool prevent_match_across_mutations = true) {
    for (std::size_t i = 0; i < count; ++i)
      passes_.emplace_back(name + "_" + std::to_string(i), prevent_match_across_mutations);
  }
  // As PatternMatcherPass::register_pattern, into the pass options.pass_number names.
  template <class P, class Handler, class... CheckAndOptions>
  PatternMatcherPasses& register_pattern(P pattern, Handler handler, CheckAndOptions&&... rest) {
    auto [extra_check, opts] = detail::check_and_options(std::forward<CheckAndOptions>(rest)...);
    if (opts.pass_number >= passes_.size())
      throw Error("register_pattern: pass_number " + std::to_string(opts.pass_number) + " but there are only " +
                  std::to_string(passes_.size()) + " passes");
    passes_[opts.pass_number].register_pattern(std::move(pattern), std::move(handler), std::move(extra_check), opts);
    return *this;
  }
  std::size_t apply(Graph& g, Counters* counters = nullptr) {
    std::size_t n = 0;
    for (auto& p : passes_) n += p.apply(g, counters);
    return n;
  }
  PatternMatcherPass& operator[](std::size_t i) { return passes_.at(i); }
  std::size_t size() const { return passes_.size(); }

 private:
  std::vector<PatternMatcherPass> passes_;
};

// A Pass (for PassRegistry / kiln-opt) that builds a PatternMatcherPass (or
// PatternMatcherPasses) once and applies it to each graph it runs on. Besides
// the pattern_matcher_* counters, `count_as` (if given) counts the matches under
// the pass family's own name, as Inductor's passes do.
template <class Build>
Pass make_pattern_pass(std::string name, std::string description, Build build, std::string count_as = {}) {
  auto matcher = std::make_shared<decltype(build())>(build());
  return Pass{std::move(name), std::move(description), [matcher, count_as](Graph& g, PassContext& ctx) {
                const std::size_t n = matcher->apply(g, &ctx.counters);
                if (n && !count_as.empty()) ctx.counters.increment(count_as, static_cast<std::int64_t>(n));
                return n > 0;
              }};
}

}  // namespace kiln
