#pragma once
// `Graph`: an ordered list of Nodes with torch.fx's editing operations.
//
// Nodes live in an intrusive doubly linked list. Each carries an order key that
// grows along the list, so "is a before b" is one compare. An index from
// (op kind, target) to the nodes with it makes find_nodes scan-free. Erased nodes
// are unlinked but kept alive until purge_erased() (or the graph's destruction),
// so a pass may still ask `erased()` of a node it saw in an earlier snapshot.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/node.hpp"

namespace kiln {

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
  Node* call_method(std::string_view method, ArgList args = {}, ArgDict kwargs = {}, std::string_view name = {}) {
    return create_node(OpKind::call_method, intern(method), std::move(args), std::move(kwargs), name);
  }
  Node* call_module(std::string_view module, ArgList args = {}, ArgDict kwargs = {}, std::string_view name = {}) {
    return create_node(OpKind::call_module, intern(module), std::move(args), std::move(kwargs), name);
  }
  // The graph's result: `result` is the (possibly nested) list of returned values.
  Node* output(Arg result) { return create_node(OpKind::output, intern("output"), {std::move(result)}, {}, "output"); }

  // The general form. An empty `name` derives one from the target as torch.fx
  // does ("aten.add.Tensor" -> add, add_1, ...); a taken name gets a suffix.
  Node* create_node(OpKind op, OpRef target, ArgList args, ArgDict kwargs, std::string_view name = {}) {
    std::string unique = unique_name(name.empty() ? default_name(op, target) : name);
    auto* n = new Node(this, op, target, std::move(unique));
    try {
      n->set_args_and_kwargs(std::move(args), std::move(kwargs));
    } catch (...) {
      delete n;
      throw;
    }
    names_[n->name_] = n;
    link_before(insert_before_, n);
    index_add(n);
    ++size_;
    return n;
  }

  // Where create_node puts new nodes. While the guard lives, nodes are created
  // before `anchor` (or, for inserting_after, after `anchor` in creation order:
  // unlike torch.fx, several nodes created there keep the order they were made in).
  class InsertionGuard {
   public:
    InsertionGuard(Graph& g, Node* before) : g_(&g), saved_(g.insert_before_) { g.insert_before_ = before; }
    ~InsertionGuard() {
      if (g_) g_->insert_before_ = saved_;
    }
    InsertionGuard(InsertionGuard&& o) noexcept : g_(std::exchange(o.g_, nullptr)), saved_(o.saved_) {}
    InsertionGuard(const InsertionGuard&) = delete;
    InsertionGuard& operator=(const InsertionGuard&) = delete;
    InsertionGuard& operator=(InsertionGuard&&) = delete;

   private:
    Graph* g_;
    Node* saved_;
  };
  [[nodiscard]] InsertionGuard inserting_before(Node* anchor) {
    check_owned(anchor, "inserting_before");
    return InsertionGuard(*this, anchor);
  }
  [[nodiscard]] InsertionGuard inserting_after(Node* anchor) {
    check_owned(anchor, "inserting_after");
    return InsertionGuard(*this, anchor->next_);
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
    if (insert_before_ == n) insert_before_ = n->next_;
    n->set_args_and_kwargs({}, {});
    unlink(n);
    index_remove(n);
    if (auto it = names_.find(n->name_); it != names_.end() && it->second == n) it->second = nullptr;
    n->erased_ = true;
    erased_.push_back(n);
    --size_;
  }

  // Frees erased nodes. Pointers to them become dangling: call only when no
  // snapshot of nodes is held (PassManager does it between passes).
  void purge_erased() {
    for (Node* n : erased_) delete n;
    erased_.clear();
  }

  // Moves `n` (already in this graph) to directly before `anchor` (nullptr: the end).
  void move_before(Node* anchor, Node* n) {
    check_owned(n, "move_before");
    if (anchor == n) return;
    if (anchor) check_owned(anchor, "move_before");
    if (insert_before_ == n) insert_before_ = n->next_;
    unlink(n);
    link_before(anchor, n);
  }

  // ---- looking things up ----

  class NodeRange {
   public:
    class iterator {
     public:
      using value_type = Node*;
      using difference_type = std::ptrdiff_t;
      iterator() = default;
      iterator(Node* n, bool rev) : n_(n), rev_(rev) {}
      Node* operator*() const { return n_; }
      iterator& operator++() {
        n_ = rev_ ? n_->prev() : n_->next();
        return *this;
      }
      iterator operator++(int) {
        auto t = *this;
        ++*this;
        return t;
      }
      bool operator==(const iterator& o) const { return n_ == o.n_; }

     private:
      Node* n_ = nullptr;
      bool rev_ = false;
    };
    NodeRange(Node* first, bool rev) : first_(first), rev_(rev) {}
    iterator begin() const { return {first_, rev_}; }
    iterator end() const { return {nullptr, rev_}; }

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
  Node* front() const { return head_; }
  Node* back() const { return tail_; }

  // The live node called `name`, or nullptr.
  Node* find_node(std::string_view name) const {
    auto it = names_.find(std::string(name));
    return it == names_.end() ? nullptr : it->second;
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
  std::vector<Node*> placeholders() const { return find_nodes(OpKind::placeholder); }
  // The output node, or nullptr while the graph has none.
  Node* output_node() const {
    auto outs = find_nodes(OpKind::output, std::nullopt);
    return outs.empty() ? nullptr : outs.back();
  }

  // ---- names ----

  // `candidate` made a legal, unused name: illegal characters become '_', and a
  // name in use gets the next free numeric suffix (add -> add_1 -> add_2).
  std::string unique_name(std::string_view candidate) {
    std::string base = sanitize(candidate);
    if (base == candidate && !names_.count(base)) return base;  // kept verbatim: "add_01" stays "add_01"
    std::int64_t num = -1;
    if (auto us = base.rfind('_'); us != std::string::npos && us + 1 < base.size() &&
                                   std::all_of(base.begin() + us + 1, base.end(), ::isdigit) &&
                                   base.size() - us - 1 < 18) {
      num = std::stoll(base.substr(us + 1));
      base.resize(us);
    }
    std::string name = num < 0 ? base : base + "_" + std::to_string(num);
    if (!names_.count(name)) return name;
    std::int64_t& next = base_count_[base];
    if (num < next) num = next;
    do {
      name = base + "_" + std::to_string(++num);
    } while (names_.count(name));
    next = num;
    return name;
  }

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
      for (const auto& [k, a] : n->kwargs_) kwargs.set(k, map_nodes(a, remap));
      Node* c = g.create_node(n->op_, n->target_, std::move(args), std::move(kwargs), n->name_);
      c->meta = n->meta;
      map[n] = c;
    }
    g.base_count_ = base_count_;
    return g;
  }

 private:
  friend class Node;
  struct Bucket {
    Node* head = nullptr;
    Node* tail = nullptr;
  };
  static constexpr std::uint64_t kKeySpacing = std::uint64_t(1) << 32;

  static OpRef intern(std::string_view s) { return OpRegistry::instance().intern(s); }
  // A target declared at compile time points at a string literal; interning makes
  // graph nodes share one registry entry (and checks for a collision once).
  static OpRef canonical(OpRef op) { return intern(op.name); }

  static std::string sanitize(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) out.push_back((std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_');
    if (out.empty()) out = "_unnamed";
    if (std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), '_');
    return out;
  }
  static std::string default_name(OpKind op, OpRef target) {
    switch (op) {
      case OpKind::call_function: {
        // CamelCase callables become snake_case, as torch.fx names them.
        std::string_view s = op_short_name(target.name);
        std::string out;
        for (std::size_t i = 0; i < s.size(); ++i) {
          char c = s[i];
          if (std::isupper(static_cast<unsigned char>(c))) {
            if (i > 0 && s[i - 1] != '_') out.push_back('_');
            out.push_back(static_cast<char>(std::tolower(c)));
          } else {
            out.push_back(c);
          }
        }
        return out;
      }
      case OpKind::output:
        return "output";
      default:
        return std::string(target.name);
    }
  }

  static std::uint64_t bucket_key(OpKind op, std::uint64_t target_hash) {
    return target_hash * 8 + static_cast<std::uint64_t>(op) + 1;
  }
  void index_add(Node* n) {
    auto [it, inserted] = index_.try_emplace(bucket_key(n->op_, n->target_.hash));
    Bucket& b = it->second;
    if (inserted) buckets_by_op_[static_cast<std::size_t>(n->op_)].push_back(&b);
    n->index_prev_ = b.tail;
    n->index_next_ = nullptr;
    (b.tail ? b.tail->index_next_ : b.head) = n;
    b.tail = n;
  }
  void index_remove(Node* n) {
    Bucket& b = index_.at(bucket_key(n->op_, n->target_.hash));
    (n->index_prev_ ? n->index_prev_->index_next_ : b.head) = n->index_next_;
    (n->index_next_ ? n->index_next_->index_prev_ : b.tail) = n->index_prev_;
    n->index_prev_ = n->index_next_ = nullptr;
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
  // Gives `n` a key strictly between its neighbours'; renumbers the whole
  // list when they are adjacent (rare: it takes ~32 inserts at one spot).
  void assign_order(Node* n) {
    const std::uint64_t lo = n->prev_ ? n->prev_->order_ : 0;
    if (!n->next_) {
      if (lo <= std::numeric_limits<std::uint64_t>::max() - kKeySpacing) {
        n->order_ = lo + kKeySpacing;
        return;
      }
    } else if (n->next_->order_ - lo >= 2) {
      n->order_ = lo + (n->next_->order_ - lo) / 2;
      return;
    }
    renumber();
  }
  void renumber() {
    // Spread keys evenly over the key space so both appends and inserts have room.
    const std::uint64_t count = size_ + 2;
    const std::uint64_t step = std::max<std::uint64_t>(2, std::min(kKeySpacing, std::numeric_limits<std::uint64_t>::max() / (2 * count)));
    std::uint64_t k = 0;
    for (Node* m = head_; m; m = m->next_) m->order_ = (k += step);
  }

  void check_owned(const Node* n, const char* what) const {
    if (n == nullptr) throw GraphError(std::string(what) + ": null node");
    if (n->graph_ != this) throw GraphError(std::string(what) + ": node " + n->name_ + " belongs to another graph");
    if (n->erased_) throw GraphError(std::string(what) + ": node " + n->name_ + " was erased");
  }

  void destroy() {
    for (Node* n = head_; n;) {
      Node* next = n->next_;
      delete n;
      n = next;
    }
    purge_erased();
    head_ = tail_ = nullptr;
  }
  void steal(Graph& o) {
    name_ = std::move(o.name_);
    head_ = std::exchange(o.head_, nullptr);
    tail_ = std::exchange(o.tail_, nullptr);
    size_ = std::exchange(o.size_, 0);
    insert_before_ = std::exchange(o.insert_before_, nullptr);
    names_ = std::move(o.names_);
    base_count_ = std::move(o.base_count_);
    index_ = std::move(o.index_);
    for (auto& v : buckets_by_op_) v.clear();
    for (auto& [key, b] : index_) buckets_by_op_[key == 0 ? 0 : (key - 1) % 8].push_back(&b);
    erased_ = std::move(o.erased_);
    for (Node* n = head_; n; n = n->next_) n->graph_ = this;
    for (Node* n : erased_) n->graph_ = this;
  }

  std::string name_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  std::size_t size_ = 0;
  Node* insert_before_ = nullptr;  // nullptr: append at the end
  std::unordered_map<std::string, Node*> names_;  // every name ever used; erased ones map to nullptr
  std::unordered_map<std::string, std::int64_t> base_count_;
  std::unordered_map<std::uint64_t, Bucket> index_;
  std::array<std::vector<Bucket*>, 6> buckets_by_op_;
  std::vector<Node*> erased_;
};

// ---- Node operations that need the Graph ----

inline void Node::prepend(Node* n) { graph_->move_before(this, n); }
inline void Node::append(Node* n) {
  if (n == this) return;
  graph_->move_before(next_ == n ? n->next_ : next_, n);
}

}  // namespace kiln
