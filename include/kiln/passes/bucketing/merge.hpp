#pragma once
// Merging one bucket, as Inductor's merge functions trace it: the inputs are
// flattened and concatenated into one buffer, one collective and one wait run
// on it, and views of the result take the place of each original wait.
//
//  all_gather: cat([reshape(in, [-1]) (converted to the bucket dtype)], 0) ->
//    all_gather -> wait -> reshape([group_size, -1]) -> split_with_sizes(numels, 1)
//    -> reshape([d0 * group_size, ...]). The gathered buffer is rank-major
//    ([rank 0: every input][rank 1: every input]...), so row r of the
//    [group_size, -1] view is rank r's concatenation, and input j's columns of
//    every row, stacked, are exactly what its own all_gather produced.
//  reduce_scatter: cat([reshape(in, [group_size, -1])], 1) -> reshape([-1]) ->
//    reduce_scatter -> wait -> split_with_sizes(numels / group_size, 0) -> reshape.
//  all_reduce: cat([reshape(in, [-1])]) -> all_reduce -> wait -> split_with_sizes(numels) -> reshape.
//
// Inductor's default all-gather merge copies into an empty buffer and calls
// all_gather_into_tensor_out; kiln emits the functional form of its
// all_gather_merge_fn_to_trace_functional (cat + all_gather_into_tensor),
// which holds the same bytes. A single-user dtype convert feeding an
// all-gather is folded into the merge (the copy converts), as Inductor does.
// New nodes go right after the bucket's last collective; the caller sorts.
#include <string>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/passes/bucketing/collectives.hpp"
#include "kiln/passes/bucketing/fsdp_filters.hpp"
#include "kiln/passes/bucketing/greedy_buckets.hpp"

namespace kiln::bucketing {

// One member of a bucket, read and checked before the graph changes.
struct Member {
  Node* coll = nullptr;
  Node* wait = nullptr;
  Node* in = nullptr;           // what the merge flattens
  Node* pre_convert = nullptr;  // a folded convert (all_gather), erased with the collective
  TensorMeta in_meta, out_meta;
  std::int64_t numel = 0;
};

struct BucketArgs {
  std::vector<Member> members;
  std::int64_t group_size = 1;
  std::string group_name, reduce_op;
  DType dtype = DType::float32;  // the bucket buffer's
};

// Reads a bucket; throws naming the node when it cannot be merged.
inline BucketArgs read_bucket(const Bucket& bucket, Collective kind) {
  BucketArgs b;
  const Node* first = bucket.front();
  b.group_size = group_size_of(first, kind);
  b.group_name = group_name_of(first, kind);
  b.reduce_op = reduce_op_of(first, kind);
  bool have_dtype = false;
  for (Node* c : bucket) {
    Member m;
    m.coll = c;
    m.wait = *c->users().begin();
    if (group_size_of(c, kind) != b.group_size)
      throw Error("node " + c->name() + ": group_size " + std::to_string(group_size_of(c, kind)) +
                  " differs from the bucket's " + std::to_string(b.group_size));
    m.in = c->arg(0).node();
    if (!m.in) throw Error("node " + c->name() + ": its input is not a node");
    if (kind == Collective::all_gather && is_convert(m.in) && m.in->num_users() == 1 && m.in->arg(0).node()) {
      m.pre_convert = m.in;
      m.in = m.in->arg(0).node();
    }
    if (!m.in->meta.val.tensor()) throw Error("node " + m.in->name() + ": bucketing needs its tensor meta");
    m.in_meta = *m.in->meta.val.tensor();
    m.out_meta = output_meta(c);
    m.numel = static_bytes(m.in_meta, m.in) / static_cast<std::int64_t>(dtype_itemsize(m.in_meta.dtype));
    static_bytes(m.out_meta, c);
    if (m.in_meta.rank() == 0) throw Error("node " + c->name() + ": bucketing needs an input of rank >= 1");
    // The views are shaped from the input; a recorded output that disagrees would be read wrongly.
    const TensorMeta want = kind == Collective::all_gather ? c10d_meta::all_gather_into_tensor(m.in_meta, b.group_size)
                            : kind == Collective::reduce_scatter
                                ? c10d_meta::reduce_scatter_tensor(m.in_meta, b.group_size)
                                : c10d_meta::all_reduce(m.in_meta);
    if (want.shape != m.out_meta.shape)
      throw Error("node " + c->name() + ": its meta shape " + c10d_meta::detail::shape_text(m.out_meta.shape) +
                  " is not what its input gives, " + c10d_meta::detail::shape_text(want.shape));
    // Inductor's pick_bucket_dtype: the smallest item size, the first on a tie.
    if (!have_dtype || dtype_itemsize(m.out_meta.dtype) < dtype_itemsize(b.dtype)) b.dtype = m.out_meta.dtype;
    have_dtype = true;
    b.members.push_back(std::move(m));
  }
  return b;
}

namespace detail {

inline ArgList int_list(const std::vector<std::int64_t>& v) {
  ArgList l;
  for (std::int64_t x : v) l.push_back(Arg(x));
  return l;
}
inline Node* with_meta(Node* n, MetaVal v) {
  n->meta.val = std::move(v);
  return n;
}
inline Node* reshape(Graph& g, Node* x, const std::vector<std::int64_t>& shape, const std::vector<Dim>& out_shape,
                     DType dtype) {
  return with_meta(g.call_function(aten::reshape, {x, Arg(int_list(shape))}), c10d_meta::contiguous(out_shape, dtype));
}
inline Node* cat(Graph& g, const std::vector<Node*>& parts, std::int64_t dim, std::vector<Dim> shape, DType dtype) {
  ArgList tensors;
  for (Node* p : parts) tensors.push_back(Arg(p));
  ArgList args{Arg(std::move(tensors))};
  if (dim != 0) args.push_back(Arg(dim));
  return with_meta(g.call_function(aten::cat, std::move(args)), c10d_meta::contiguous(std::move(shape), dtype));
}
// split_with_sizes of a contiguous [rows, total] (rows 0: 1-d) along its last
// dim, then one getitem per piece: the views each original output is read from.
inline std::vector<Node*> split(Graph& g, Node* x, std::int64_t rows, const std::vector<std::int64_t>& sizes,
                                std::int64_t dim, DType dtype) {
  std::int64_t total = 0;
  for (std::int64_t s : sizes) total += s;
  MetaVal::List pieces;
  for (std::int64_t s : sizes) {
    if (rows) pieces.push_back(TensorMeta{{rows, s}, dtype, std::vector<Dim>{total, std::int64_t{1}}});
    else pieces.push_back(TensorMeta{{s}, dtype, std::vector<Dim>{std::int64_t{1}}});
  }
  ArgList args{Arg(x), Arg(int_list(sizes))};
  if (dim != 0) args.push_back(Arg(dim));
  Node* sp = with_meta(g.call_function(aten::split_with_sizes, std::move(args)), MetaVal(pieces));
  std::vector<Node*> out;
  for (std::size_t j = 0; j < sizes.size(); ++j)
    out.push_back(with_meta(g.call_function(pyop::getitem, {sp, Arg(static_cast<std::int64_t>(j))}), pieces[j]));
  return out;
}

inline std::vector<std::int64_t> static_shape(const TensorMeta& t) {
  std::vector<std::int64_t> s;
  for (const Dim& d : t.shape) s.push_back(std::get<std::int64_t>(d));
  return s;
}

// The flat collective result's replacements for each member's wait.
inline std::vector<Node*> emit_merge(Graph& g, const BucketArgs& b, Collective kind) {
  const std::int64_t G = b.group_size, n = static_cast<std::int64_t>(b.members.size());
  std::vector<Node*> flats;
  std::vector<std::int64_t> numels;
  std::int64_t total = 0;
  for (const Member& m : b.members) {
    numels.push_back(m.numel);
    total += m.numel;
    if (kind == Collective::reduce_scatter) {
      flats.push_back(reshape(g, m.in, {G, -1}, {G, m.numel / G}, m.in_meta.dtype));
      continue;
    }
    Node* f = reshape(g, m.in, {-1}, {m.numel}, m.in_meta.dtype);
    if (m.in_meta.dtype != b.dtype)
      f = with_meta(g.call_function(prims::convert_element_type, {f, Arg(b.dtype)}),
                    c10d_meta::contiguous({m.numel}, b.dtype));
    flats.push_back(f);
  }
  const DType dt = kind == Collective::all_gather ? b.dtype : b.members.front().in_meta.dtype;
  std::vector<Node*> pieces;
  if (kind == Collective::all_gather) {
    Node* buf = cat(g, flats, 0, {total}, dt);
    Node* coll = with_meta(g.call_function(c10d_functional::all_gather_into_tensor, {buf, Arg(G), Arg(b.group_name)}),
                           c10d_meta::contiguous({total * G}, dt));
    Node* w = with_meta(g.call_function(c10d_functional::wait_tensor, {coll}), coll->meta.val);
    Node* rows = reshape(g, w, {G, -1}, {G, total}, dt);
    pieces = split(g, rows, G, numels, 1, dt);
  } else if (kind == Collective::reduce_scatter) {
    Node* buf = reshape(g, cat(g, flats, 1, {G, total / G}, dt), {-1}, {total}, dt);
    Node* coll = with_meta(
        g.call_function(c10d_functional::reduce_scatter_tensor, {buf, Arg(b.reduce_op), Arg(G), Arg(b.group_name)}),
        c10d_meta::contiguous({total / G}, dt));
    Node* w = with_meta(g.call_function(c10d_functional::wait_tensor, {coll}), coll->meta.val);
    for (std::int64_t& s : numels) s /= G;
    pieces = split(g, w, 0, numels, 0, dt);
  } else {
    Node* buf = cat(g, flats, 0, {total}, dt);
    Node* coll = with_meta(g.call_function(c10d_functional::all_reduce, {buf, Arg(b.reduce_op), Arg(b.group_name)}),
                           c10d_meta::contiguous({total}, dt));
    Node* w = with_meta(g.call_function(c10d_functional::wait_tensor, {coll}), coll->meta.val);
    pieces = split(g, w, 0, numels, 0, dt);
  }
  std::vector<Node*> outs;
  for (std::int64_t j = 0; j < n; ++j) {
    const Member& m = b.members[static_cast<std::size_t>(j)];
    std::vector<std::int64_t> shape = static_shape(m.in_meta);
    if (kind == Collective::all_gather) shape[0] *= G;
    if (kind == Collective::reduce_scatter) shape[0] /= G;
    outs.push_back(reshape(g, pieces[static_cast<std::size_t>(j)], shape, m.out_meta.shape, m.out_meta.dtype));
  }
  return outs;
}

}  // namespace detail

// What merging leaves to do: point each old wait's users at its view, then
// erase the old nodes. Done for all buckets at once, since a graph output
// holding every wait would otherwise be rewritten once per bucket.
struct PendingMerge {
  std::vector<Node*> old_waits, views, erase;  // erase: in an order that leaves no user behind
  void finish(Graph& g) {
    Node::replace_all_uses_of(old_waits, views);
    for (Node* n : erase) g.erase_node(n);
  }
};

// Emits a bucket read by read_bucket right after its last collective; the old
// nodes go on `pending`. The graph may be unsorted afterwards (users of the
// old waits that came before the new wait).
inline void merge_bucket(Graph& g, const BucketArgs& b, Collective kind, PendingMerge& pending) {
  std::vector<Node*> outs;
  {
    auto at = g.inserting_before(b.members.back().coll->next());
    outs = detail::emit_merge(g, b, kind);
  }
  for (std::size_t j = 0; j < b.members.size(); ++j) {
    const Member& m = b.members[j];
    pending.old_waits.push_back(m.wait);
    pending.views.push_back(outs[j]);
    pending.erase.push_back(m.wait);
    pending.erase.push_back(m.coll);
    if (m.pre_convert) pending.erase.push_back(m.pre_convert);
  }
}

}  // namespace kiln::bucketing
