#pragma once
// `detail::NodeStorage`: the memory a Graph's nodes live in. Graph owns one and
// is its only user; it is the mechanism under Graph's editing API.
//
// Nodes are carved from chunks in creation order, so walking a graph that was
// built or read in order touches memory sequentially, and creating a node costs
// no allocation of its own. Beside each chunk's nodes a dense table holds each
// slot's (bucket key, order key), so a scan for the nodes of some kinds and
// targets reads that table and not the nodes. An erased node stays readable
// (on the erased list) until it is freed; a freed slot holds a vacant node that
// the next node created takes over in place.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "kiln/core/detail/huge_page_allocator.hpp"
#include "kiln/core/node.hpp"

namespace kiln::detail {

// What a scan over a Graph's node storage reads instead of the nodes: each
// slot's bucket_key (0: no live node there) and order key, kept up to date by
// the Graph in a dense table beside its nodes.
struct StorageSlot {
  std::uint64_t key = 0;
  std::uint64_t order = 0;
};

class NodeStorage {
 public:
  NodeStorage() = default;
  ~NodeStorage() { clear(); }
  NodeStorage(const NodeStorage&) = delete;
  NodeStorage& operator=(const NodeStorage&) = delete;

  // A blank node of `op` and `target`, unlinked and unnamed (a recycled node
  // still holds its old name's buffer, for the caller to overwrite), whose
  // graph the caller sets.
  Node* allocate_node(OpKind op, OpRef target) {
    if (Node* vacant = free_head_) {
      // A vacant node is already a blank one (free_node emptied it): taking it
      // over costs a few stores, not a destruction and a construction.
      free_head_ = vacant->index_next_;
      vacant->index_next_ = nullptr;
      vacant->target_hash_ = target.hash;
      vacant->op_ = op;
      vacant->erased_ = false;
      vacant->scratch_ = 0;
      vacant->target_name_ = target.name;
      return vacant;
    }
    if (chunks_.empty() || chunk_used_ == chunks_.back().capacity()) {
      const std::size_t capacity = chunks_.empty() ? kFirstChunk : std::min(2 * chunks_.back().capacity(), kMaxChunk);
      chunks_.emplace_back(capacity);
      chunk_used_ = 0;
    }
    StorageSlot* entry = &chunks_.back().table()[chunk_used_];
    Node* n = ::new (chunks_.back().slot(chunk_used_++)) Node(nullptr, op, target, std::string{});
    n->storage_ = entry;  // its key is set once the node is linked
    return n;
  }
  // Makes `n` (erased or never linked: no links, arguments or live users) a
  // vacant node, blank but for its name's buffer, and puts it on the free list.
  void free_node(Node* n) {
    n->storage_->key = 0;
    n->erased_ = true;
    n->last_user_of_all_inputs_ = false;
    n->users_.clear();  // holes left by erased users
    n->meta = NodeMeta{};
    n->prev_ = n->next_ = n->index_prev_ = nullptr;
    n->index_next_ = free_head_;
    free_head_ = n;
  }

  // Keeps the erased node `n` (out of the graph's lists and index, so its
  // index_next_ link is free) readable until it is freed.
  void add_erased(Node* n) {
    n->index_next_ = erased_head_;
    erased_head_ = n;
    ++erased_count_;
  }
  // How many erased nodes await freeing: a mark for recycle_erased_since.
  std::size_t erased_pending() const { return erased_count_; }
  // Frees the nodes erased since `mark` (an erased_pending() read before) that
  // `may_free(const Node*)` accepts, so the next nodes created take their places,
  // which are still in the cache, instead of fresh memory.
  template <class Pred>
  void recycle_erased_since(std::size_t mark, Pred&& may_free) {
    if (mark >= erased_count_) return;  // none since (or purged meanwhile)
    // The list runs newest first, so the nodes erased since `mark` lead it.
    Node** link = &erased_head_;
    for (std::size_t k = erased_count_ - mark; k > 0; --k) {
      Node* n = *link;
      if (may_free(static_cast<const Node*>(n))) {
        *link = n->index_next_;
        --erased_count_;
        free_node(n);
      } else {
        link = &n->index_next_;
      }
    }
  }
  // Calls fn(Node*) for each erased node awaiting freeing, newest first.
  template <class Fn>
  void for_each_erased(Fn&& fn) const {
    for (Node* n = erased_head_; n; n = n->index_next_) fn(n);
  }

  // Calls fn(Node*, bucket key, order key) for every live node in storage
  // order, reading the dense tables and not the nodes (see
  // GraphInternals::for_each_node_in_storage).
  template <class Fn>
  void for_each_live(Fn&& fn) const {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      const std::size_t used = slots_in_chunk(c);
      const StorageSlot* table = chunks_[c].table();
      for (std::size_t i = 0; i < used; ++i)
        if (table[i].key != 0) fn(chunks_[c].node(i), table[i].key, table[i].order);
    }
  }

  // Destroys every node, live, erased or vacant, and frees the chunks.
  void clear() {
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      for (std::size_t i = 0; i < slots_in_chunk(c); ++i) chunks_[c].node(i)->~Node();
    erased_head_ = nullptr;
    erased_count_ = 0;
    free_head_ = nullptr;
    chunks_.clear();
    chunk_used_ = 0;
  }
  // Takes over `o`'s nodes (this storage being empty) and leaves `o` empty.
  void steal(NodeStorage& o) {
    erased_head_ = std::exchange(o.erased_head_, nullptr);
    erased_count_ = std::exchange(o.erased_count_, 0);
    chunks_ = std::move(o.chunks_);
    chunk_used_ = std::exchange(o.chunk_used_, 0);
    free_head_ = std::exchange(o.free_head_, nullptr);
    o.chunks_.clear();
  }

 private:
  struct alignas(Node) NodeSlot {
    std::byte bytes[sizeof(Node)];
  };
  // A block of node slots. Blocks double in size from kFirstChunk slots, so a
  // small graph stays small, up to whole 2 MiB pages, which Linux is asked to
  // back with huge pages: a large graph then costs one page fault per 2 MiB
  // instead of one per 4 KiB when built, and a pass scanning it misses the TLB
  // far less.
  static constexpr std::size_t kFirstChunk = 64;
  static constexpr std::size_t kMaxChunk = kHugePage / sizeof(NodeSlot);
  class Chunk {
   public:
    explicit Chunk(std::size_t capacity) : table_(new StorageSlot[capacity]()), capacity_(capacity) {
      if (capacity >= kMaxChunk) {  // kMaxChunk slots fill one huge page (less a remainder)
        slots_ = static_cast<NodeSlot*>(allocate_huge_pages(kHugePage));
        huge_ = true;
      } else {
        slots_ = static_cast<NodeSlot*>(::operator new(capacity * sizeof(NodeSlot), std::align_val_t{alignof(NodeSlot)}));
      }
    }
    Chunk(Chunk&& o) noexcept
        : slots_(std::exchange(o.slots_, nullptr)), table_(std::move(o.table_)), capacity_(o.capacity_), huge_(o.huge_) {}
    Chunk& operator=(Chunk&&) = delete;
    Chunk(const Chunk&) = delete;
    ~Chunk() {
      if (!slots_) return;
      if (huge_) free_huge_pages(slots_);
      else ::operator delete(slots_, std::align_val_t{alignof(NodeSlot)});
    }
    std::size_t capacity() const { return capacity_; }
    void* slot(std::size_t i) const { return &slots_[i]; }
    Node* node(std::size_t i) const { return std::launder(reinterpret_cast<Node*>(&slots_[i])); }
    // table()[i]: slot i's bucket key (0: no live node) and order key.
    StorageSlot* table() const { return table_.get(); }

   private:
    NodeSlot* slots_;
    std::unique_ptr<StorageSlot[]> table_;
    std::size_t capacity_;
    bool huge_ = false;
  };

  std::size_t slots_in_chunk(std::size_t c) const { return c + 1 == chunks_.size() ? chunk_used_ : chunks_[c].capacity(); }

  // Every slot below chunk_used_ (and every slot of earlier chunks) holds a
  // constructed Node: a live one, an erased one awaiting freeing, or a vacant
  // one (erased, no graph links) whose slot is free for reuse. That keeps
  // for_each_live a plain scan.
  //
  // Erased nodes awaiting freeing, newest first, linked through their
  // index_next_ (a list, not a vector: growing a large vector in the middle of
  // a pass makes malloc consolidate every block the pass freed).
  Node* erased_head_ = nullptr;
  std::size_t erased_count_ = 0;
  std::vector<Chunk> chunks_;
  std::size_t chunk_used_ = 0;
  Node* free_head_ = nullptr;  // vacant nodes, most recently freed (warmest) first, linked likewise
};

}  // namespace kiln::detail
