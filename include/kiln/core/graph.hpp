#pragma once
// `Graph`: an ordered list of Nodes with torch.fx's editing operations.
//
// Nodes live in an intrusive doubly linked list. Each carries an order key that
// grows along the list, so "is a before b" is one compare. An index from
// (op kind, target) to the nodes with it makes find_nodes scan-free. Erased nodes
// are unlinked but kept alive until purge_erased() (or the graph's destruction),
// so a pass may still ask `erased()` of a node it saw in an earlier snapshot.
// The memory the nodes live in is detail::NodeStorage (core/node_storage.hpp);
// the hooks a pass driver uses on it are detail::GraphInternals
// (core/detail/graph_internals.hpp).
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/module_table.hpp"
#include "kiln/core/name_table.hpp"
#include "kiln/core/node.hpp"
#include "kiln/core/node_storage.hpp"
#include "kiln/core/two_way_memo.hpp"

namespace kiln {

namespace detail {
struct GraphInternals;  // core/detail/graph_internals.hpp
}

// Threads: any number of threads may call const members of one graph (and
// const functions of it: lint, printing, writing) at once; a call that edits
// it needs the graph to itself. A pass object is used by one thread at a time.
class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}
  ~Graph() { destroy(); }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& other) noexcept { steal(other); }
  Graph& operator=(Graph&& other) noexcept {
    if (this != &other) {
      destroy();
      steal(other);
    }
    return *this;
  }

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // The classes (and recorded attributes) of the modules call_module nodes call.
  ModuleTable& modules() { return modules_; }
  const ModuleTable& modules() const { return modules_; }

  // ---- creating nodes (at the insertion point; the end of the graph by default) ----

  Node* placeholder(std::string_view name, MetaVal val = {}) {
    Node* n = create_node(OpKind::placeholder, intern(name), {}, {}, name);
    n->meta.val = std::move(val);
    return n;
  }
  Node* get_attr(std::string_view target, MetaVal val = {}) {
    Node* n = create_node(OpKind::get_attr, intern(target), {}, {}, {});
    n->meta.val = std::move(val);
    return n;
  }
  Node* call_function(OpRef target, ArgList args = {}, ArgDict kwargs = {}, std::string_view name = {}) {
    return create_node(OpKind::call_function, canonical(target), std::move(args), std::move(kwargs), name);
  }
  // The same for a braced list of arguments, `g.call_function(aten::relu, {x})`,
  // copied straight into the node: no ArgList is built on the way.
  Node* call_function(OpRef target, std::initializer_list<Arg> args, ArgDict kwargs = {}, std::string_view name = {}) {
    return make_node(OpKind::call_function, canonical(target), args, std::move(kwargs), name);
  }
  Node* call_method(std::string_view method, ArgList args = {}, ArgDict kwargs = {}, std::string_view name = {}) {
    return create_node(OpKind::call_method, intern(method), std::move(args), std::move(kwargs), name);
  }
  Node* call_module(std::string_view module, ArgList args = {}, ArgDict kwargs = {}, std::string_view name = {}) {
    return create_node(OpKind::call_module, intern(module), std::move(args), std::move(kwargs), name);
  }
  // The graph's result: `result` is the (possibly nested) list of returned values.
  Node* output(Arg result) { return create_node(OpKind::output, intern("output"), {std::move(result)}, {}, "output"); }

  // The general form. An empty `name` derives one from the target as torch.fx
  // does ("aten.add.Tensor" -> add, add_1, ...; "aten.abs.default" -> abs_1, since a
  // derived name never shadows a Python builtin or keyword); a taken name gets a suffix.
  Node* create_node(OpKind op, OpRef target, ArgList args, ArgDict kwargs, std::string_view name = {}) {
    return make_node(op, target, std::move(args), std::move(kwargs), name);
  }
  // ---- private: create_node for an ArgList (moved in) or a braced list (copied) ----
 private:
  template <class List>
  Node* make_node(OpKind op, OpRef target, List&& args, ArgDict&& kwargs, std::string_view name) {
    // The common case, a name derived from the target, takes claim_derived's fast path.
    NameTable::Claim claim;
    bool fast = false;  // claimed by claim_derived, bound through `claim`
    Node* n = node_storage_.allocate_node(op, target);
    n->graph_ = this;  // a recycled slot may have come with a moved graph
    try {
      // The name first: argument errors name the node. It is bound only once
      // the arguments are accepted.
      if (!name.empty()) {
        n->name_ = names_.make_unique(name, false);
      } else {
        // The name table remembers the bases of derived names by (kind, target),
        // which is what the derived name depends on.
        const std::uint64_t key = bucket_key(op, target.hash);
        fast = names_.claim_derived_by_key(key, claim, n->name_);
        if (!fast) {
          const DefaultName& derived = default_name(op, target);
          fast = derived.plain;
          if (fast) names_.claim_derived(derived.name, claim, n->name_, key);
          else n->name_ = names_.make_unique(derived.name, true);
        }
      }
      n->set_inputs(std::forward<List>(args), std::move(kwargs));
    } catch (...) {
      node_storage_.free_node(n);
      throw;
    }
    if (fast) names_.bind(claim, n->name_, n);
    else names_.bind(n->name_, n);
    link_before(insert_after_ ? insert_anchor_->next_ : insert_anchor_, n);
    index_add(n);
    ++size_;
    return n;
  }

 public:

  // Where create_node puts new nodes, as in torch.fx: inside inserting_before(a)
  // each new node goes right before `a` (so several keep their creation order);
  // inside inserting_after(a) each goes right after `a` (so several end up in
  // reverse creation order, exactly as torch.fx and Inductor's passes produce them).
  class InsertionGuard {
   public:
    InsertionGuard(Graph& g, Node* anchor, bool after)
        : g_(&g), saved_anchor_(g.insert_anchor_), saved_after_(g.insert_after_) {
      g.insert_anchor_ = anchor;
      g.insert_after_ = after;
    }
    ~InsertionGuard() {
      if (g_) {
        g_->insert_anchor_ = saved_anchor_;
        g_->insert_after_ = saved_after_;
      }
    }
    InsertionGuard(InsertionGuard&& o) noexcept
        : g_(std::exchange(o.g_, nullptr)), saved_anchor_(o.saved_anchor_), saved_after_(o.saved_after_) {}
    InsertionGuard(const InsertionGuard&) = delete;
    InsertionGuard& operator=(const InsertionGuard&) = delete;
    InsertionGuard& operator=(InsertionGuard&&) = delete;

   private:
    Graph* g_;
    Node* saved_anchor_;
    bool saved_after_;
  };
  [[nodiscard]] InsertionGuard inserting_before(Node* anchor) {
    check_owned(anchor, "inserting_before");
    return InsertionGuard(*this, anchor, false);
  }
  [[nodiscard]] InsertionGuard inserting_after(Node* anchor) {
    check_owned(anchor, "inserting_after");
    return InsertionGuard(*this, anchor, true);
  }

  // ---- removing and moving ----

  // Removes `n`; it is an error while `n` still has users.
  void erase_node(Node* n) {
    check_owned(n, "erase_node");
    if (n->live_users_ != 0) {
      std::string users;
      for (Node* u : n->users()) users += (users.empty() ? "" : ", ") + u->name_;
      throw GraphError("erase_node: node " + n->name_ + " still has " + std::to_string(n->live_users_) +
                       " user(s): " + users);
    }
    if (insert_anchor_ == n) {
      // Handlers erase the node they insert next to; keep inserting at the same spot.
      if (insert_after_ && n->prev_) {
        insert_anchor_ = n->prev_;
      } else {
        insert_anchor_ = n->next_;
        insert_after_ = false;
      }
    }
    n->clear_inputs();
    unlink(n);
    index_remove(n);
    // The name stays bound to `n` (names are never reused, and this saves reading
    // the name, a cache miss on a large graph); find_node checks what it finds.
    n->erased_ = true;
    node_storage_.add_erased(n);
    --size_;
  }

  // Frees erased nodes. Pointers to them become dangling: call only when no
  // snapshot of nodes is held (PassManager does it between passes).
  void purge_erased() {
    node_storage_.recycle_erased_since(0, [](const Node*) { return true; });
  }

  // Moves `n` (already in this graph) to directly before `anchor` (nullptr: the end).
  void move_before(Node* anchor, Node* n) {
    check_owned(n, "move_before");
    if (anchor == n) return;
    if (anchor) check_owned(anchor, "move_before");
    unlink(n);
    link_before(anchor, n);
    ++reorder_epoch_;
  }

  // ---- looking things up ----

  class NodeRange {
    struct Cursor {
      Node* n = nullptr;
      bool rev = false;
      Node* get() const { return n; }
      void advance() { n = rev ? n->prev() : n->next(); }
      bool operator==(const Cursor& o) const { return n == o.n; }
    };

   public:
    using iterator = detail::NodeIterator<Cursor>;
    NodeRange(Node* first, bool rev) : first_(first), rev_(rev) {}
    iterator begin() const { return iterator(Cursor{first_, rev_}); }
    iterator end() const { return iterator(Cursor{nullptr, rev_}); }

   private:
    Node* first_;
    bool rev_;
  };
  // Nodes in order. Editing while iterating: hold a snapshot (node_list()) instead.
  NodeRange nodes() const { return NodeRange(head_, false); }
  NodeRange nodes_reversed() const { return NodeRange(tail_, true); }
  std::vector<Node*> node_list() const {
    std::vector<Node*> v;
    v.reserve(size_);
    for (Node* n : nodes()) v.push_back(n);
    return v;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Makes room for `n` more nodes, so that building a large graph (reading one
  // from a file) does not rehash the name table over and over.
  void reserve(std::size_t n) { names_.reserve(names_.size() + n); }
  Node* front() const { return head_; }
  Node* back() const { return tail_; }

  // The live node called `name`, or nullptr.
  Node* find_node(std::string_view name) const {
    // The table may still point at an erased node, or at its slot now reused by a
    // node with another name; slots stay valid memory while the graph lives.
    Node* n = names_.find(name);
    return n && !n->erased_ && n->name_ == name ? n : nullptr;
  }
  // Nodes of kind `op` (and, if given, target), without scanning the graph.
  // sorted: in graph order; otherwise in creation order per target.
  std::vector<Node*> find_nodes(OpKind op, std::optional<OpRef> target = std::nullopt, bool sorted = true) const {
    std::vector<Node*> out;
    auto collect = [&](const Bucket& b) {
      for (Node* n = b.head; n; n = n->index_next_) out.push_back(n);
    };
    if (target) {
      if (auto it = index_.find(bucket_key(op, target->hash)); it != index_.end()) collect(it->second);
    } else {
      for (const Bucket* b : buckets_by_op_[static_cast<std::size_t>(op)]) collect(*b);
      sorted = true;  // buckets interleave; only graph order is meaningful
    }
    if (sorted) std::sort(out.begin(), out.end(), [](Node* a, Node* b) { return a->order_ < b->order_; });
    return out;
  }
  // Calls fn(Node*) for each live node of kind `op` and target `target`, in
  // creation order (find_nodes' unsorted order), without building a list.
  // `fn` must not erase or create nodes of that kind and target.
  template <class Fn>
  void for_each_node(OpKind op, OpRef target, Fn&& fn) const {
    auto it = index_.find(bucket_key(op, target.hash));
    if (it == index_.end()) return;
    for (Node* n = it->second.head; n; n = n->index_next_) fn(n);
  }
  // The key of an (op kind, target) pair in the graph's index; other indexes of
  // nodes by kind and target (PatternMatcherPass's) use the same one.
  // Never 0 (the low three bits hold the kind plus one), so 0 can mean "no node".
  static std::uint64_t bucket_key(OpKind op, std::uint64_t target_hash) {
    return target_hash * 8 + static_cast<std::uint64_t>(op) + 1;
  }

  // Calls fn(OpKind, OpRef target, std::size_t live_count) for each (kind,
  // target) pair the graph has held a node of, live or not (count 0), without
  // visiting the nodes.
  template <class Fn>
  void for_each_target(Fn&& fn) const {
    for (std::size_t k = 0; k < buckets_by_op_.size(); ++k)
      for (const Bucket* b : buckets_by_op_[k]) fn(static_cast<OpKind>(k), b->target, b->count);
  }
  // How many (kind, target) pairs the graph has held nodes of. It only grows
  // (until clear()), so a pass can tell whether a new kind of node appeared.
  std::size_t target_kinds_seen() const { return index_.size(); }

  // How many live nodes find_nodes(op, target) would return, in O(1).
  std::size_t count_nodes(OpKind op, OpRef target) const {
    auto it = index_.find(bucket_key(op, target.hash));
    return it == index_.end() ? 0 : it->second.count;
  }
  // How many of those have keyword arguments, in O(1): a pass that reads only
  // keywords (or an `out` keyword) skips a target where this is 0.
  std::size_t count_nodes_with_kwargs(OpKind op, OpRef target) const {
    auto it = index_.find(bucket_key(op, target.hash));
    return it == index_.end() ? 0 : it->second.with_kwargs;
  }
  // Calls fn(OpRef target) once for each target that live nodes of kind `op`
  // have, in no particular order, without visiting the nodes.
  template <class Fn>
  void for_each_target(OpKind op, Fn&& fn) const {
    for (const Bucket* b : buckets_by_op_[static_cast<std::size_t>(op)])
      if (b->count != 0) fn(b->target);
  }
  std::vector<Node*> placeholders() const { return find_nodes(OpKind::placeholder); }
  // The output node, or nullptr while the graph has none.
  Node* output_node() const {
    auto outs = find_nodes(OpKind::output, std::nullopt);
    return outs.empty() ? nullptr : outs.back();
  }

  // ---- names ----

  // `candidate` made a legal, unused name as torch.fx's _Namespace.create_name makes
  // it: each run of illegal characters becomes one '_', and a name in use gets a
  // numeric suffix counted on from the last one used with that base
  // (add -> add_1 -> add_2; after an explicit add_5, add is still free, then add_6).
  // A free legal name is kept verbatim ("add_01" stays "add_01"). The name is not reserved.
  std::string unique_name(std::string_view candidate) { return names_.make_unique(candidate, false); }

  // A deep copy: same names, order, args, kwargs and meta.
  Graph clone(std::unordered_map<const Node*, Node*>* mapping = nullptr) const {
    Graph g(name_);
    std::unordered_map<const Node*, Node*> local;
    auto& map = mapping ? *mapping : local;
    auto remap = [&](Node* n) { return map.at(n); };
    for (Node* n : nodes()) {
      ArgList args;
      for (const auto& a : n->args_) args.push_back(map_nodes(a, remap));
      ArgDict kwargs;
      for (const auto& [k, a] : n->kwargs()) kwargs.set(k, map_nodes(a, remap));
      Node* c = g.create_node(n->op_, n->target(), std::move(args), std::move(kwargs), n->name_);
      c->meta = n->meta;
      map[n] = c;
    }
    g.names_.assign_counts(names_);
    g.modules_ = modules_;
    return g;
  }

 private:
  friend class Node;
  friend struct detail::GraphInternals;
  struct Bucket {
    Node* head = nullptr;
    Node* tail = nullptr;
    std::size_t count = 0;
    std::size_t with_kwargs = 0;  // live nodes whose kwargs are not empty
    OpRef target;  // the interned target, for for_each_target
  };
  static constexpr std::uint64_t kKeySpacing = std::uint64_t(1) << 32;

  static OpRef intern(std::string_view s) { return OpRegistry::instance().intern(s); }
  // A target declared at compile time points at a string literal; interning makes
  // graph nodes share one registry entry (and checks for a collision once).
  // A per-thread memo of (hash, text address) pairs skips the registry's lock
  // for the few ops a pass creates over and over; the same address and hash
  // mean the same text (a different text with the same hash would have been
  // rejected as a collision when first interned).
  // The result stays valid until the next call on this thread (a reference
  // into the memo: returning the OpRef by value made every call store it to
  // memory and load it back whole, a stalled store-to-load forward).
  static const OpRef& canonical(OpRef op) {
    struct Memo {
      const char* data = nullptr;  // the name as asked for
      OpRef ref;                   // the interned one
    };
    thread_local std::array<Memo, 64> memo{};
    Memo& m = memo[op.hash % memo.size()];
    if (m.ref.hash == op.hash && m.data == op.name.data() && m.ref.name.size() == op.name.size()) return m.ref;
    const OpRef c = intern(op.name);
    m = Memo{op.name.data(), c};
    return m.ref;
  }

  // torch.fx's Graph._target_to_str: the op's short name, "__x__" stripped to "x",
  // then _snake_case: an '_' where a lower-case letter meets an upper-case one, and
  // everything lower-cased ("MyOp" -> my_op, "ALL_CAPS" -> all_caps, "Conv2D" -> conv2d).
  struct DefaultName {
    std::string name;
    bool plain = false;  // NameTable::is_plain_base(name): claim_derived can name it
  };
  // Made once per (kind, target) and thread; the reference stays valid for the thread's life.
  static const DefaultName& default_name(OpKind op, OpRef target) {
    // Passes create nodes of the same few targets over and over.
    thread_local detail::TwoWayMemo<const DefaultName, 16> memo;
    const std::uint64_t key = bucket_key(op, target.hash);
    if (const DefaultName* hit = memo.find(key)) return *hit;
    // Every name made on this thread, at a fixed address (a program uses few targets).
    thread_local std::unordered_map<std::uint64_t, DefaultName> made;
    auto it = made.find(key);
    if (it == made.end()) {
      std::string name = make_default_name(op, target);
      const bool plain = NameTable::is_plain_base(name);
      it = made.emplace(key, DefaultName{std::move(name), plain}).first;
    }
    memo.put(key, &it->second);
    return it->second;
  }
  static std::string make_default_name(OpKind op, OpRef target) {
    if (op == OpKind::output) return "output";
    std::string_view s = op == OpKind::call_function ? op_short_name(target.name) : target.name;
    if (s.size() >= 2 && s.substr(0, 2) == "__" && s.substr(s.size() - 2) == "__")
      s = s.size() >= 4 ? s.substr(2, s.size() - 4) : std::string_view{};
    std::string out;
    out.reserve(s.size() + 4);
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      // ASCII case rules, written out: the <cctype> calls consult the locale per character.
      const bool upper = c >= 'A' && c <= 'Z';
      if (upper && i > 0 && s[i - 1] >= 'a' && s[i - 1] <= 'z') out.push_back('_');
      out.push_back(static_cast<char>(upper ? c - 'A' + 'a' : c));
    }
    return out;
  }

  // The index's bucket for `key`, created if new. A pass creates and erases
  // nodes of a handful of targets over and over; a small memo of buckets
  // (which never move or go away) skips the hash lookup for those.
  Bucket& bucket_for(std::uint64_t key) {
    if (Bucket* hit = bucket_memo_.find(key)) return *hit;
    auto [it, inserted] = index_.try_emplace(key);
    if (inserted) buckets_by_op_[static_cast<std::size_t>((key - 1) % 8)].push_back(&it->second);
    bucket_memo_.put(key, &it->second);
    return it->second;
  }
  void index_add(Node* n) {
    const std::uint64_t key = bucket_key(n->op_, n->target_hash_);
    n->storage_->key = key;
    Bucket& b = bucket_for(key);
    b.target = OpRef(n->target_name_, n->target_hash_);
    n->index_prev_ = b.tail;
    n->index_next_ = nullptr;
    (b.tail ? b.tail->index_next_ : b.head) = n;
    b.tail = n;
    ++b.count;
    b.with_kwargs += n->kwargs_ != nullptr;
  }
  void index_remove(Node* n) {
    n->storage_->key = 0;
    Bucket& b = bucket_for(bucket_key(n->op_, n->target_hash_));
    (n->index_prev_ ? n->index_prev_->index_next_ : b.head) = n->index_next_;
    (n->index_next_ ? n->index_next_->index_prev_ : b.tail) = n->index_prev_;
    n->index_prev_ = n->index_next_ = nullptr;
    --b.count;
    b.with_kwargs -= n->kwargs_ != nullptr;
  }

  void link_before(Node* anchor, Node* n) {
    Node* p = anchor ? anchor->prev_ : tail_;
    n->prev_ = p;
    n->next_ = anchor;
    (p ? p->next_ : head_) = n;
    (anchor ? anchor->prev_ : tail_) = n;
    assign_order(n);
  }
  void unlink(Node* n) {
    (n->prev_ ? n->prev_->next_ : head_) = n->next_;
    (n->next_ ? n->next_->prev_ : tail_) = n->prev_;
    n->prev_ = n->next_ = nullptr;
  }
  // Gives `n` a key strictly between its neighbours'; when they are adjacent,
  // relabels the nodes around it (relabel_around).
  void assign_order(Node* n) {
    const std::uint64_t lo = n->prev_ ? n->prev_->order_ : 0;
    if (!n->next_) {
      if (lo <= std::numeric_limits<std::uint64_t>::max() - kKeySpacing) {
        set_order(n, lo + kKeySpacing);
        return;
      }
    } else if (n->next_->order_ - lo >= 2) {
      set_order(n, lo + (n->next_->order_ - lo) / 2);
      return;
    }
    relabel_around(n);
  }
  // Spreads evenly the keys of a window of nodes around `n` over the range
  // between the window's outer neighbours. The window doubles (8, 16, 32, ...
  // nodes) until that range leaves every node of it at least as many keys of
  // room as the window has nodes. A pass inserting many nodes at one spot
  // (every insert halves the gap there, so 32 inserts use it up) thus relabels a
  // window that grows with the crowding, not the whole graph every 32 inserts,
  // which made such a pass quadratic in the graph's size.
  [[gnu::noinline, gnu::cold]] void relabel_around(Node* n) {
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    Node* first = n;
    Node* last = n;
    std::uint64_t count = 1;
    for (std::uint64_t want = 8;; want *= 2) {
      while (count < want && (first->prev_ || last->next_)) {
        if (last->next_) {
          last = last->next_;
          ++count;
        }
        if (count < want && first->prev_) {
          first = first->prev_;
          ++count;
        }
      }
      const std::uint64_t lo = first->prev_ ? first->prev_->order_ : 0;
      const std::uint64_t hi = last->next_ ? last->next_->order_ : kMax;
      const std::uint64_t step = (hi - lo) / (count + 1);
      const bool whole = !first->prev_ && !last->next_;
      if (step >= count || (whole && step >= 1)) {
        std::uint64_t k = lo;
        for (Node* m = first;; m = m->next_) {
          set_order(m, k += step);
          if (m == last) break;
        }
        ++reorder_epoch_;
        return;
      }
    }
  }
  // A node's order key lives in the node (for is_before) and in its storage
  // slot (for scans that read no node); both change here only.
  static void set_order(Node* n, std::uint64_t key) { n->storage_->order = n->order_ = key; }

  void check_owned(const Node* n, const char* what) const {
    if (n != nullptr && n->graph_ == this && !n->erased_) [[likely]]
      return;
    reject_owned(n, what);
  }
  [[gnu::cold, gnu::noinline]] void reject_owned(const Node* n, const char* what) const {
    if (n == nullptr) throw GraphError(std::string(what) + ": null node");
    if (n->graph_ != this) throw GraphError(std::string(what) + ": node " + n->name_ + " belongs to another graph");
    if (n->erased_) throw GraphError(std::string(what) + ": node " + n->name_ + " was erased");
  }

  void destroy() {
    fan_in_indexes_.clear();
    node_storage_.clear();
    head_ = tail_ = nullptr;
  }
  void steal(Graph& o) {
    name_ = std::move(o.name_);
    modules_ = std::move(o.modules_);
    o.modules_.clear();
    head_ = std::exchange(o.head_, nullptr);
    tail_ = std::exchange(o.tail_, nullptr);
    size_ = std::exchange(o.size_, 0);
    insert_anchor_ = std::exchange(o.insert_anchor_, nullptr);
    insert_after_ = std::exchange(o.insert_after_, false);
    names_ = std::move(o.names_);
    index_ = std::move(o.index_);
    bucket_memo_ = std::exchange(o.bucket_memo_, {});
    for (auto& v : buckets_by_op_) v.clear();
    for (auto& [key, b] : index_) buckets_by_op_[key == 0 ? 0 : (key - 1) % 8].push_back(&b);
    node_storage_.steal(o.node_storage_);
    fan_in_indexes_ = std::move(o.fan_in_indexes_);  // (keyed by the nodes, which stay where they are)
    o.fan_in_indexes_.clear();
    reorder_epoch_ = o.reorder_epoch_ + 1;
    // Leave `o` an empty graph that can be used again (its bucket list pointed
    // into the index this graph now owns).
    for (auto& v : o.buckets_by_op_) v.clear();
    o.names_.clear();
    o.index_.clear();
    for (Node* n = head_; n; n = n->next_) n->graph_ = this;
    node_storage_.for_each_erased([this](Node* n) { n->graph_ = this; });
  }

  std::string name_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  std::size_t size_ = 0;
  Node* insert_anchor_ = nullptr;  // nullptr: append at the end
  bool insert_after_ = false;      // insert right after insert_anchor_ instead of before it
  NameTable names_;  // every name ever used; erased ones map to no node
  std::unordered_map<std::uint64_t, Bucket> index_;
  detail::TwoWayMemo<Bucket, 8> bucket_memo_;  // see bucket_for
  std::array<std::vector<Bucket*>, 6> buckets_by_op_;
  detail::NodeStorage node_storage_;  // the nodes, live, erased (until freed) and vacant
  // Changes whenever a live node's order key may have changed (a relabeling or
  // a move), so a holder of order keys can tell whether they are still current
  // (GraphInternals::reorder_epoch).
  std::uint64_t reorder_epoch_ = 0;
  // The input indexes of nodes of many inputs (Node::replace_all_uses_of),
  // each there exactly while its node's fan_in_state_ says so.
  std::unordered_map<const Node*, std::unique_ptr<detail::FanInIndex>> fan_in_indexes_;
  ModuleTable modules_;  // last: read by no hot path, so it moves no hot member's offset
};

}  // namespace kiln

// The Node members that need the Graph.
#include "kiln/core/detail/node_graph_ops.hpp"
