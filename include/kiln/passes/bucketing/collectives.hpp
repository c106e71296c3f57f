#pragma once
// The collectives bucketing groups, as Inductor's bucketing.py recognizes them:
// a call of all_gather_into_tensor (or its `_out` form), reduce_scatter_tensor
// or all_reduce waited on by a wait_tensor. Their group keys and the byte size
// a bucket counts for each.
#include <cstdint>
#include <string>

#include "kiln/core/error.hpp"
#include "kiln/core/node.hpp"
#include "kiln/ops/c10d_functional.hpp"
#include "kiln/ops/c10d_meta.hpp"

namespace kiln::bucketing {

enum class Collective { all_gather, reduce_scatter, all_reduce };

inline const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_gather: return "all_gather_into_tensor";
    case Collective::reduce_scatter: return "reduce_scatter_tensor";
    case Collective::all_reduce: return "all_reduce";
  }
  return "?";
}

// An all_gather_into_tensor_out whose `out` buffer nothing else reads: the
// merge replaces its wait but leaves `out` unwritten, so Inductor, which merges
// every `_out`, would hand a later reader of `out` stale bytes. kiln leaves
// such a one alone.
inline bool out_buffer_private(const Node* n) {
  const Arg* out = n->kwargs().find("out");
  const Node* buf = out ? out->node() : nullptr;
  return buf && buf->num_users() == 1;
}

inline bool is_collective(const Node* n, Collective c) {
  if (!n) return false;
  switch (c) {
    case Collective::all_gather:
      return n->is_call(c10d_functional::all_gather_into_tensor) ||
             (n->is_call(c10d_functional::all_gather_into_tensor_out) && out_buffer_private(n));
    case Collective::reduce_scatter: return n->is_call(c10d_functional::reduce_scatter_tensor);
    case Collective::all_reduce: return n->is_call(c10d_functional::all_reduce);
  }
  return false;
}

inline bool is_wait(const Node* n) { return n && n->is_call(c10d_functional::wait_tensor); }

// The node a wait waits on, or nullptr.
inline Node* waited(const Node* wait) { return is_wait(wait) && !wait->args().empty() ? wait->arg(0).node() : nullptr; }

// Argument positions: all_gather(input, group_size, group_name),
// reduce_scatter(input, reduce_op, group_size, group_name), all_reduce(input, reduce_op, group_name).
inline std::string string_arg(const Node* n, std::size_t i, const char* what) {
  const Arg* a = get_arg_value(*n, i, what);
  const std::string* s = a ? a->get_if<std::string>() : nullptr;
  if (!s) throw Error("node " + n->name() + ": " + what + " must be a string");
  return *s;
}
inline std::int64_t group_size_of(const Node* n, Collective c) {
  if (c == Collective::all_reduce) return 1;  // not an argument of all_reduce
  const std::size_t i = c == Collective::all_gather ? 1 : 2;
  const Arg* a = get_arg_value(*n, i, "group_size");
  const std::int64_t* v = a ? a->get_if<std::int64_t>() : nullptr;
  if (!v) throw Error("node " + n->name() + ": group_size must be an integer");
  return *v;
}
inline std::string group_name_of(const Node* n, Collective c) {
  return string_arg(n, c == Collective::all_gather ? 2 : c == Collective::reduce_scatter ? 3 : 2, "group_name");
}
inline std::string reduce_op_of(const Node* n, Collective c) {
  return c == Collective::all_gather ? std::string() : string_arg(n, 1, "reduce_op");
}

// What the collective produces: its meta.val, else its shape rule's answer.
inline TensorMeta output_meta(const Node* n) {
  if (const TensorMeta* t = n->meta.val.tensor()) return *t;
  if (auto t = c10d_meta::infer(*n)) return *t;
  throw Error("node " + n->name() + ": no tensor meta");
}
inline const TensorMeta& input_meta(const Node* n) {
  const Node* in = n->all_input_nodes().empty() ? nullptr : n->all_input_nodes()[0];
  if (!in || !in->meta.val.tensor()) throw Error("node " + n->name() + ": its input has no tensor meta");
  return *in->meta.val.tensor();
}

inline std::int64_t static_bytes(const TensorMeta& t, const Node* n) {
  auto numel = t.numel();
  if (!numel) throw Error("node " + n->name() + ": bucketing needs static shapes");
  return *numel * static_cast<std::int64_t>(dtype_itemsize(t.dtype));
}

// The bytes a collective adds to its bucket: the larger of its output and its
// first input (Inductor counts all_gather by its output, reduce_scatter by its input).
inline std::int64_t bucket_bytes(const Node* n) {
  return std::max(static_bytes(output_meta(n), n), static_bytes(input_meta(n), n));
}

// Collectives with equal keys may share a bucket: the group name and the
// output dtype, and the reduce op for reduce_scatter and all_reduce.
struct GroupKey {
  std::string group_name;
  std::string reduce_op;
  DType dtype = DType::float32;
  friend bool operator==(const GroupKey&, const GroupKey&) = default;
};

inline GroupKey group_key(const Node* n, Collective c) {
  return GroupKey{group_name_of(n, c), reduce_op_of(n, c), output_meta(n).dtype};
}

}  // namespace kiln::bucketing
