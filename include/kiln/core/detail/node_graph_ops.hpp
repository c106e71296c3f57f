#pragma once
// The definitions of Node's members that need its Graph (the fan-in index the
// Graph owns, its count of nodes with kwargs, moving a node), once Graph is
// complete. Included by core/graph.hpp: not a header to include on its own.
#include "kiln/core/graph.hpp"

namespace kiln {

inline void Node::keywords_changed(bool had_keywords) {
  // Only a node in the index counts (its storage slot has a key from index_add
  // to index_remove); one being created is counted by index_add.
  if (storage_ == nullptr || storage_->key == 0) return;
  std::size_t& with = graph_->bucket_for(storage_->key).with_kwargs;
  if (had_keywords) --with;
  else ++with;
}
inline const detail::FanInIndex* Node::fan_in_index() const {
  return fan_in_state_ == kFanInIndexed ? graph_->fan_in_indexes_.find(this)->second.get() : nullptr;
}
inline detail::FanInIndex* Node::mutable_fan_in_index() { return graph_->fan_in_indexes_.find(this)->second.get(); }
inline void Node::index_fan_in() {
  std::unique_ptr<detail::FanInIndex> index = detail::FanInIndex::of(args_, kwargs(), {inputs_.data(), inputs_.size()});
  if (!index) {
    fan_in_state_ = kFanInUnindexable;
    return;
  }
  graph_->fan_in_indexes_[this] = std::move(index);
  fan_in_state_ = kFanInIndexed;
}
inline void Node::drop_fan_in_index() {
  if (fan_in_state_ == kFanInIndexed) graph_->fan_in_indexes_.erase(this);
  fan_in_state_ = kNoFanInIndex;
}
inline void Node::prepend(Node* n) { graph_->move_before(this, n); }
inline void Node::append(Node* n) {
  if (n == this) return;
  graph_->move_before(next_ == n ? n->next_ : next_, n);
}

}  // namespace kiln
