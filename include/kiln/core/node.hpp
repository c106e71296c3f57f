#pragma once
// `Node`: one operation of a Graph, with torch.fx's fields (name, op kind, target,
// args, kwargs, meta) and its bookkeeping (users in insertion order, unique input
// nodes). Nodes are created, moved and erased only through their Graph.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/core/arg.hpp"
#include "kiln/core/detail/node_iterator.hpp"
#include "kiln/core/detail/prefetch.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/fan_in_index.hpp"
#include "kiln/core/node_args.hpp"
#include "kiln/core/node_map.hpp"
#include "kiln/core/op_kind.hpp"
#include "kiln/core/op_ref.hpp"
#include "kiln/core/small_vector.hpp"
#include "kiln/core/tensor_meta.hpp"

namespace kiln {

class Graph;

namespace detail {
// Where a Graph keeps its nodes (core/node_storage.hpp).
struct StorageSlot;
class NodeStorage;
}  // namespace detail

// Aligned to cache lines so that what every walk and match reads costs two
// adjacent lines: the first 64 bytes (links, order, target hash, kind, user
// count, the argument count) and the next 64 (the first two arguments, inline).
// The rest is read when a match succeeds or the node is edited.
class alignas(64) Node {
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  std::uint64_t order_ = 0;
  std::uint64_t target_hash_;
  Graph* graph_;
  OpKind op_;
  bool erased_ = false;
  // A hint: when set, this node is the last live user of each of its inputs
  // (so replace_all_uses_of need not read the inputs of a user of thousands
  // to keep user order). Set there; cleared when a node joins after it.
  bool last_user_of_all_inputs_ = false;
  // Whether the graph holds a detail::FanInIndex of this node's inputs (a
  // FanInState); every edit of args, kwargs or inputs reads it (one byte, in
  // the line an edit reads anyway) and keeps the index up to date or drops it.
  std::uint8_t fan_in_state_ = 0;
  std::uint32_t live_users_ = 0;
  mutable std::uint32_t scratch_ = 0;
  // The argument count at the end of the first line, the inline arguments from
  // the start of the second (args[0] and args[1] fill it exactly).
  NodeArgs args_;
  // ---- then what adding or removing an edge reads and writes of both ends
  // (creating and erasing nodes) ----
  // users_ may hold nullptr holes left by removals; they are skipped when
  // iterating and squeezed out once they outnumber live users. This keeps
  // removal O(1) for nodes with many users (a shared weight used by 30,000 mm's).
  SmallVector<Node*, 4> users_;
  SmallVector<Node*, 3> inputs_;  // InputNodes
  SmallVector<std::uint32_t, 4> input_slots_;  // input_slots_[i]: our index in inputs_[i]->users_
  // Links in the graph's (op, target) index, for find_nodes without a scan.
  // Out of the index (erased or vacant), index_next_ links the graph's list of
  // erased nodes or of free slots instead.
  Node* index_prev_ = nullptr;
  Node* index_next_ = nullptr;
  // This node's entry in its storage chunk's table (see detail::StorageSlot).
  detail::StorageSlot* storage_ = nullptr;
  std::string_view target_name_;
  // ---- then what printing, naming and handlers read ----
  std::string name_;
  std::unique_ptr<ArgDict> kwargs_;  // nullptr when empty, as most nodes' are

 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  OpKind op() const { return op_; }
  OpRef target() const { return OpRef(target_name_, target_hash_); }
  std::string_view target_name() const { return target_name_; }
  // True when this node is a call_function of `op` (one integer compare).
  bool is_call(OpRef op) const { return op_ == OpKind::call_function && target_hash_ == op.hash; }

  const NodeArgs& args() const { return args_; }
  const ArgDict& kwargs() const { return kwargs_ ? *kwargs_ : empty_kwargs(); }
  // Positional argument i; throws naming the node if it has fewer arguments.
  const Arg& arg(std::size_t i) const {
    if (i >= args_.size())
      throw GraphError("node " + name_ + ": args[" + std::to_string(i) + "] requested but it has " +
                       std::to_string(args_.size()) + " positional arguments");
    return args_[i];
  }

  // Editing arguments keeps every input's user list consistent.
  void set_args(ArgList args) { set_args_and_kwargs(std::move(args), kwargs()); }
  void set_kwargs(ArgDict kwargs) { set_args_and_kwargs(args_.to_list(), std::move(kwargs)); }
  void set_arg(std::size_t i, Arg value) {
    ArgList a = args_.to_list();
    if (i >= a.size())
      throw GraphError("node " + name_ + ": set_arg(" + std::to_string(i) + ") out of range (it has " +
                       std::to_string(a.size()) + " positional arguments)");
    a[i] = std::move(value);
    set_args(std::move(a));
  }
  void set_kwarg(std::string key, Arg value) {
    ArgDict k = kwargs();
    k.set(std::move(key), std::move(value));
    set_kwargs(std::move(k));
  }
  void set_args_and_kwargs(ArgList args, ArgDict kwargs);

  // Users, in the order they started using this node (torch.fx keeps a dict).
  class UserRange {
    // Steps over the entries of erased users (null until the list is compacted).
    struct Cursor {
      Node* const* p = nullptr;
      Node* const* e = nullptr;
      Node* get() const { return *p; }
      void advance() {
        ++p;
        skip();
      }
      void skip() {
        while (p != e && *p == nullptr) ++p;
      }
      bool operator==(const Cursor& o) const { return p == o.p; }
    };

   public:
    using iterator = detail::NodeIterator<Cursor>;
    UserRange(Node* const* b, Node* const* e) : b_(b), e_(e) {}
    iterator begin() const {
      Cursor c{b_, e_};
      c.skip();
      return iterator(c);
    }
    iterator end() const { return iterator(Cursor{e_, e_}); }

   private:
    Node* const* b_;
    Node* const* e_;
  };
  UserRange users() const { return UserRange(users_.begin(), users_.end()); }
  std::size_t num_users() const { return live_users_; }
  // A copy of the users, safe to iterate while editing the graph.
  std::vector<Node*> user_list() const {
    std::vector<Node*> out;
    out.reserve(live_users_);
    for (Node* u : users()) out.push_back(u);
    return out;
  }
  // The distinct nodes referenced by args and kwargs, in first-use order.
  using InputNodes = SmallVector<Node*, 3>;
  const InputNodes& all_input_nodes() const { return inputs_; }

  // Neighbours in graph order; nullptr at either end.
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  // O(1): both nodes must be live nodes of the same graph.
  bool is_before(const Node& other) const { return order_ < other.order_; }
  // The key behind is_before: it grows along the graph. Keys change when the
  // graph relabels nodes (an insert between adjacent keys relabels those around
  // it), so compare keys read between the same two edits only.
  std::uint64_t order_key() const { return order_; }

  Graph& graph() const { return *graph_; }
  bool erased() const { return erased_; }

  // Whether removing this node could change what the program does.
  bool is_impure() const;
  // Whether this node writes one of its inputs (in-place or out= ops).
  bool is_mutating() const;

  // Points every user of this node (those accepted by `filter`, if given) at
  // `replacement` instead; returns the users that were changed.
  // The list holds a few nodes inline (most nodes have one to four users), so the
  // common call allocates nothing; it converts to std::vector<Node*>.
  using NodeList = SmallVector<Node*, 4>;
  NodeList replace_all_uses_with(Node* replacement, const std::function<bool(Node*)>& filter = {});
  // Replaces every reference to `old_input` in this node's args and kwargs.
  void replace_input_with(Node* old_input, Node* new_input);
  // from[i]->replace_all_uses_with(to[i]) for each i in order, with the same
  // result (arguments, inputs, the order of every user list), but each user
  // is edited once: replacing the n inputs of a cat one by one costs n times
  // its fan-in, this costs it once. (`to` must not hold nodes of `from`, nor
  // nodes that use them; otherwise it makes the calls one by one.)
  static void replace_all_uses_of(std::span<Node* const> from, std::span<Node* const> to);

  // Moves `n` to directly before / after this node.
  void prepend(Node* n);
  void append(Node* n);

  // Asks the cache for the whole node: matching reads the first two lines, an
  // edit or erasure also the rest (user and input lists, index links, name,
  // meta). A pass calls it on the nodes a handler is about to edit, so that the
  // misses overlap the handler's other work instead of stalling it.
  // `from_line` 2 skips the lines matching has just read.
  void prefetch_for_edit(std::size_t from_line = 0) const {
    const char* p = reinterpret_cast<const char*>(this);
    for (std::size_t line = from_line; line < sizeof(Node) / 64; ++line) detail::prefetch<1>(p + 64 * line);
  }
  // The same for the lines a new user of this node writes: its first (the user
  // count) and the one where its user list starts.
  void prefetch_for_new_user() const {
    detail::prefetch<1>(this);
    detail::prefetch<1>(&users_);
  }

  // A per-node integer that a graph algorithm may use for its own bookkeeping
  // (a position in a table) instead of a hash map; meaningless between algorithms.
  std::uint32_t& scratch() const { return scratch_; }

  // The index of this node's inputs that replace_all_uses_of keeps for a node
  // of many inputs (core/fan_in_index.hpp), or nullptr; for lint and tests.
  const detail::FanInIndex* fan_in_index() const;

 private:
  friend class Graph;
  friend class Arg;
  friend class detail::NodeStorage;
  Node(Graph* g, OpKind op, OpRef target, std::string name)
      : target_hash_(target.hash), graph_(g), op_(op), target_name_(target.name), name_(std::move(name)) {}

  static const ArgDict& empty_kwargs() {
    static const ArgDict empty;
    return empty;
  }
  template <class Args>
  static void collect_inputs(const Args& args, const ArgDict& kwargs, InputNodes& out);
  // set_args_and_kwargs for an ArgList (moved in) or a braced list (copied).
  template <class List>
  void set_inputs(List&& args, ArgDict&& kwargs);
  // Throws (naming this node) unless `n` is a live node of this node's graph.
  void check_input(const Node* n) const;
  void reject_input(const Node* n) const;  // check_input's throwing part, kept out of line
  // replace_input_with once new_input is checked.
  void replace_checked_input(Node* old_input, Node* new_input);
  // Rebuilds inputs_ from args_ and kwargs_ and rejoins their user lists.
  void relink_inputs();
  // Drops every argument (erase_node).
  void clear_inputs();
  enum FanInState : std::uint8_t {
    kNoFanInIndex,     // none yet: replace_all_uses_of builds one for a node of many inputs
    kFanInIndexed,     // the graph holds one
    kFanInUnindexable  // none, as some input has no single place; until the arguments are set again
  };
  detail::FanInIndex* mutable_fan_in_index();
  // After replace_all_uses_of edited this node: an index if it has many inputs.
  void index_fan_in_if_large() {
    if (fan_in_state_ == kNoFanInIndex && inputs_.size() >= detail::FanInIndex::kMinInputs) index_fan_in();
  }
  void index_fan_in();
  // Before an edit the index would not follow: drops it (and forgets that there could be none).
  void forget_fan_in_index() {
    if (fan_in_state_ != kNoFanInIndex) [[unlikely]]
      drop_fan_in_index();
  }
  void drop_fan_in_index();
  // Tells the graph's index that this node gained or lost its keywords (in
  // core/graph.hpp: the index counts the nodes with keywords per target).
  void keywords_changed(bool had_keywords);
  void add_user_to(Node* input);
  void remove_from_users_of(std::size_t input_index);
  // Joins inputs_[i]'s user list at its end, recording the slot.
  void join_users_of(std::size_t input_index);
  // Clears the hint of the node that was `input`'s last live user until now.
  static void displace_last_user_of(Node* input);
  // Whether this node is the last user in inputs_[i]'s list.
  bool is_last_user_of(std::size_t input_index) const;
  void compact_users();


 public:
  // Last, as the least used by graph algorithms.
  NodeMeta meta;
};

inline Arg::Arg(Node* n)
    : v_(NodeRef{n, n ? n->target_hash_ : 0, n ? static_cast<std::uint8_t>(n->op_) : std::uint8_t{0xff}}) {}

// args[index] if the node has that many positional arguments, else kwargs[name],
// else nullptr (Inductor's get_arg_value).
inline const Arg* get_arg_value(const Node& node, std::size_t index, std::string_view name = {}) {
  if (index < node.args().size()) return &node.args()[index];
  if (name.empty()) return nullptr;
  return node.kwargs().find(name);
}

}  // namespace kiln

// The definitions of the members above (the mechanism behind this API).
#include "kiln/core/detail/node_impl.hpp"
