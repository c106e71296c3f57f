#pragma once
// rebatch: the same graph for a smaller batch, so that a batch can run as
// slices of it, each slice on one thread (CompileOptions::split_batch).
//
//   Graph slice = kiln::runtime::rebatch(g, weights, /*batch=*/1);  // or RebatchError
//
// The batch is dim 0 of the graph's inputs. Every tensor computed from an input
// must keep each sample's values apart from the others': its dim 0 is the batch
// times some rows per sample (a view may fold [B, S, K] into [B*S, K]), and
// each op is one kiln knows to work sample by sample given its arguments (a
// convolution, an element-wise op, a mean over dims other than 0, ...). Any
// other op, or one that mixes samples (a sum over dim 0, a transpose of dim 0, a
// cat along it, a constant with a row per sample), is refused with the node
// named. One exception to dim 0: a permute may move the batch into dim 1
// when its only users select or unbind along dim 0, which brings it back
// (attention's q, k, v taken from one [3, B, ...] tensor, as Swin does). The
// rebatched graph's shapes then say the smaller batch, and so do the sizes
// that views, expands and as_strided write; lowering checks each kernel's
// result against those shapes, so a rule here that was wrong stops at compile time.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/runtime/tensor.hpp"

namespace kiln::runtime {

// A graph that cannot run slice by slice; the message names the node and why.
class RebatchError : public Error {
 public:
  using Error::Error;
};

namespace detail {

// Ops that work element by element (with broadcasting): each batch-dependent
// operand must line up with the output's dim 0, a constant must not.
inline bool rebatch_elementwise(std::string_view t) {
  static const std::unordered_set<std::string_view> ops{
      "aten.relu.default", "aten.relu_.default", "aten.hardtanh.default", "aten.hardtanh_.default",
      "aten.hardswish.default", "aten.hardswish_.default", "aten.hardsigmoid.default", "aten.hardsigmoid_.default",
      "aten.silu.default", "aten.silu_.default", "aten.gelu.default", "aten.sigmoid.default", "aten.tanh.default",
      "aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default", "aten.neg.default",
      "aten.abs.default", "aten.exp.default", "aten.log.default", "aten.sqrt.default", "aten.rsqrt.default",
      "aten.reciprocal.default", "aten.erf.default", "aten.pow.Tensor_Scalar", "aten.leaky_relu.default",
      "aten.elu.default", "aten.add.Tensor", "aten.add_.Tensor", "aten.sub.Tensor", "aten.mul.Tensor",
      "aten.mul_.Tensor", "aten.div.Tensor", "aten.add.Scalar", "aten.mul.Scalar", "aten.sub.Scalar",
      "aten.div.Scalar", "aten.maximum.default", "aten.minimum.default", "aten.where.self",
      "aten._to_copy.default", "aten.clone.default", "aten.alias.default", "aten.detach.default",
      "aten.dropout.default", "prims.convert_element_type.default",
      "quantized_decomposed.quantize_per_tensor.default", "quantized_decomposed.quantize_per_tensor.tensor",
      "quantized_decomposed.dequantize_per_tensor.default", "quantized_decomposed.dequantize_per_tensor.tensor"};
  return ops.count(t) > 0;
}

// Ops that map each row of dim 0 of their data operands to the same row of the
// output (convolutions, pooling, normalization in inference, products with a
// constant weight, kiln's fused int8 ops), with the positions of their data
// operands; every other tensor operand must be a constant.
inline const std::vector<std::size_t>* rebatch_rowwise(std::string_view t) {
  static const std::vector<std::size_t> first{0}, second{1}, both{0, 1};
  static const std::unordered_map<std::string_view, const std::vector<std::size_t>*> ops{
      {"aten.convolution.default", &first},
      {"aten.max_pool2d_with_indices.default", &first},
      {"aten.max_pool2d.default", &first},
      {"aten.avg_pool2d.default", &first},
      {"aten._adaptive_avg_pool2d.default", &first},
      {"aten.adaptive_avg_pool2d.default", &first},
      {"aten.upsample_nearest2d.vec", &first},
      {"aten.upsample_bilinear2d.vec", &first},
      {"aten._native_batch_norm_legit_no_training.default", &first},
      {"aten.mm.default", &first},
      {"aten.addmm.default", &second},
      {"aten.linear.default", &first},
      {"aten.bmm.default", &both},
      {"quantized.max_pool2d.default", &first},
      {"aten._weight_int8pack_mm.default", &first}};
  const auto it = ops.find(t);
  return it == ops.end() ? nullptr : it->second;
}

// kiln's fused int8 ops (quantization passes): their activations and addends are
// the only operands that come from the input; weights are prepacked constants.
inline bool rebatch_fused_int8(std::string_view t) {
  return t.starts_with("onednn.qconv") || t.starts_with("onednn.qlinear_pointwise");
}

// Ops with a dim argument that must not be 0 (position, name; nullopt: the op's
// default is 0, so a missing one is refused too).
struct DimArg {
  std::size_t index;
  std::string_view name;
  bool list = false;  // a list of dims (empty or absent: every dim, refused)
};
inline const DimArg* rebatch_dim_arg(std::string_view t) {
  static const std::unordered_map<std::string_view, DimArg> ops{
      {"aten.mean.dim", {1, "dim", true}},
      {"aten.sum.dim_IntList", {1, "dim", true}},
      {"aten.amax.default", {1, "dim", true}},
      {"aten.amin.default", {1, "dim", true}},
      {"aten.norm.ScalarOpt_dim", {2, "dim", true}},
      {"aten.linalg_vector_norm.default", {2, "dim", true}},
      {"aten._softmax.default", {1, "dim"}},
      {"aten._log_softmax.default", {1, "dim"}},
      {"aten.softmax.int", {1, "dim"}},
      {"aten.log_softmax.int", {1, "dim"}},
      {"aten.cat.default", {1, "dim"}},
      {"aten.slice.Tensor", {1, "dim"}},
      {"aten.select.int", {1, "dim"}},
      {"aten.split.Tensor", {2, "dim"}},
      {"aten.split_with_sizes.default", {2, "dim"}},
      {"aten.chunk.default", {2, "dim"}},
      {"aten.unsqueeze.default", {1, "dim"}},
      {"aten.squeeze.dim", {1, "dim"}},
      {"aten.squeeze.dims", {1, "dim", true}},
      {"aten.roll.default", {2, "dims", true}}};  // without dims, roll shifts the flattened tensor
  const auto it = ops.find(t);
  return it == ops.end() ? nullptr : &it->second;
}

// Reshapes: each sample's values are one block of the row-major order, so any
// reshape whose dim 0 is a multiple of the batch keeps samples apart. The ones
// with a size list (position 1) have its dim 0 rewritten.
inline bool rebatch_reshape(std::string_view t) {
  return t == "aten.view.default" || t == "aten._reshape_alias.default" || t == "aten.reshape.default" ||
         t == "aten._unsafe_view.default" || t == "aten.flatten.using_ints";
}
inline bool rebatch_has_size_list(std::string_view t) { return t != "aten.flatten.using_ints"; }

// as_strided views: samples stay apart where each row of the result lies in
// the same row of a contiguous input (checked in Rebatcher::check_as_strided).
inline bool rebatch_as_strided(std::string_view t) { return t == "aten.as_strided.default" || t == "aten.as_strided_.default"; }

inline std::string node_label(const Node& n) {
  const bool call = n.op() == OpKind::call_function;
  return "node " + n.name() + " (" + std::string(call ? n.target_name() : op_kind_name(n.op())) + ")";
}

// The tensors a node's meta.val holds (one, or each of a multi-output node's).
inline std::vector<const TensorMeta*> meta_tensors(const MetaVal& v) {
  std::vector<const TensorMeta*> out;
  if (const TensorMeta* t = v.tensor()) out.push_back(t);
  else if (const MetaVal::List* l = v.list())
    for (const MetaVal& e : *l)
      if (const TensorMeta* t = e.tensor()) out.push_back(t);
  return out;
}

// A placeholder the graph takes as an input, not one bound to a weight.
inline bool is_graph_input(const Node& n, const Weights& weights) {
  return n.op() == OpKind::placeholder && weights.find(n.target_name()) == weights.end();
}

inline std::optional<std::int64_t> static_dim(const TensorMeta& t, std::size_t i) {
  if (i >= t.shape.size() || !is_static(t.shape[i])) return std::nullopt;
  return std::get<std::int64_t>(t.shape[i]);
}

class Rebatcher {
 public:
  Rebatcher(const Graph& g, const Weights& weights, std::int64_t batch) : g_(g), weights_(weights), to_(batch) {}

  Graph run() {
    if (to_ < 1) throw RebatchError("rebatch: the batch asked for is " + std::to_string(to_) + "; it must be at least 1");
    for (const Node* n : g_.nodes()) visit(*n);
    if (!from_) throw RebatchError("rebatch: the graph has no input (a placeholder not bound to a weight)");
    std::unordered_map<const Node*, Node*> map;
    Graph out = g_.clone(&map);
    for (const Node* n : g_.nodes()) {
      if (batched_.count(n)) rewrite(*map.at(n), 0);
      else if (moved_.count(n)) rewrite(*map.at(n), 1);
    }
    return out;
  }

 private:
  [[noreturn]] void refuse(const Node& n, const std::string& why) const {
    throw RebatchError("rebatch: " + node_label(n) + " " + why);
  }

  bool batched(const Arg& a) const { return a.node() && batched_.count(a.node()); }
  bool any_batched(const Node& n) const {
    bool any = false;
    const auto look = [&](const Arg& a, const auto& self) -> void {
      if (batched(a)) any = true;
      if (const ArgList* l = a.list())
        for (const Arg& e : *l) self(e, self);
    };
    for (const Arg& a : n.args()) look(a, look);
    for (const auto& [k, a] : n.kwargs()) look(a, look);
    return any;
  }

  // Dim 0 of a batch-dependent tensor is the batch times its rows per sample,
  // and no stride depends on the batch (dim 0 outermost where strides are recorded).
  void check_tensor(const Node& n, const TensorMeta& t) const {
    const auto d0 = static_dim(t, 0);
    if (t.rank() == 0 || !d0)
      refuse(n, "has no static dim 0 (" + std::to_string(t.rank()) + "-d); its result no longer holds a row per sample");
    if (*d0 % *from_ != 0)
      refuse(n, "has dim 0 of " + std::to_string(*d0) + ", not a multiple of the batch " + std::to_string(*from_) +
                    ": it mixes samples");
    if (t.stride && t.stride->size() == t.rank() && is_static((*t.stride)[0])) {
      const std::int64_t s0 = std::get<std::int64_t>((*t.stride)[0]);
      for (std::size_t i = 1; i < t.rank(); ++i) {
        const auto d = static_dim(t, i);
        if (!d || *d <= 1 || !is_static((*t.stride)[i])) continue;
        if (std::get<std::int64_t>((*t.stride)[i]) * *d > s0 && *d0 > 1)
          refuse(n, "lays its dim 0 inside another dim (its strides would change with the batch)");
      }
    }
  }
  const TensorMeta& tensor_of(const Node& n) const {
    const TensorMeta* t = n.meta.val.tensor();
    if (!t) refuse(n, "has no tensor in meta.val (the shapes of the slices are read from it)");
    return *t;
  }
  std::int64_t dim0(const Node& n) const { return *static_dim(tensor_of(n), 0); }

  void visit(const Node& n) {
    switch (n.op()) {
      case OpKind::placeholder: {
        if (!is_graph_input(n, weights_)) return;
        const TensorMeta& t = tensor_of(n);
        const auto d0 = static_dim(t, 0);
        if (t.rank() == 0 || !d0) refuse(n, "is an input without a static dim 0 to split");
        if (!from_) from_ = *d0;
        else if (*from_ != *d0)
          refuse(n, "has a batch of " + std::to_string(*d0) + " where the graph's first input has " +
                        std::to_string(*from_));
        if (*d0 % to_ != 0)
          refuse(n, "has a batch of " + std::to_string(*d0) + ", which slices of " + std::to_string(to_) + " do not divide");
        batched_.insert(&n);
        return;
      }
      case OpKind::get_attr: return;
      case OpKind::output: {
        for (const Arg& a : flat_outputs(n))
          if (!batched(a)) refuse(n, "returns a value that does not come from the inputs (a slice has no rows of it)");
        return;
      }
      case OpKind::call_function: break;
      default:
        if (any_batched(n)) refuse(n, "is a " + std::string(op_kind_name(n.op())) + "; only call_function nodes are sliced");
        return;
    }
    // A user of a permute that moved the batch into dim 1 (a select or unbind of it).
    if (const Node* m = n.args().empty() ? nullptr : n.arg(0).node(); m && moved_.count(m)) {
      check_batch_back(n, *m);
    } else {
      if (!any_batched(n)) return;  // a constant: every slice computes it alike
      if (takes_only_dtype_of_input(n)) return;  // x.new_zeros(size): a constant of x's dtype
      if (moves_batch_to_dim1(n)) {
        moved_.insert(&n);
        return;
      }
      check_call(n);
    }
    const std::vector<const TensorMeta*> results = meta_tensors(n.meta.val);
    if (results.empty()) refuse(n, "has no tensor in meta.val (the shapes of the slices are read from it)");
    for (const TensorMeta* t : results) check_tensor(n, *t);
    batched_.insert(&n);
  }

  std::vector<Arg> flat_outputs(const Node& n) const {
    std::vector<Arg> out;
    const auto add = [&](const Arg& a, const auto& self) -> void {
      if (const ArgList* l = a.list()) {
        for (const Arg& e : *l) self(e, self);
      } else if (!a.is_none()) {
        out.push_back(a);
      }
    };
    for (const Arg& a : n.args()) add(a, add);
    return out;
  }

  // Each rule below: the ways an op given batch-dependent operands may mix samples.
  void check_call(const Node& n) {
    const std::string_view t = n.target_name();
    if (t == "operator.getitem") {
      if (!batched(n.arg(0))) refuse(n, "takes an item of a value that does not come from the inputs");
      return;
    }
    if (rebatch_elementwise(t)) return check_elementwise(n);
    if (const auto* data = rebatch_rowwise(t)) return check_rowwise_operands(n, *data);
    if (rebatch_fused_int8(t)) return check_rowwise_operands(n, {});
    if (t == "aten.slice.Tensor" && slices_whole_dim0(n)) return check_same_rows(n);  // x[:] keeps every row
    if (const DimArg* d = rebatch_dim_arg(t)) return check_dim_arg(n, *d);
    if (rebatch_reshape(t)) return check_reshape(n);
    if (t == "aten.permute.default") {
      const ArgList* dims = n.arg(1).list();
      const std::int64_t* d0 = dims && !dims->empty() ? (*dims)[0].get_if<std::int64_t>() : nullptr;
      if (!d0 || (*d0 != 0 && *d0 != -static_cast<std::int64_t>(dims->size())))
        refuse(n, "moves dim 0 (the batch) elsewhere (taken only into dim 1, with every user selecting or unbinding along dim 0)");
      return;
    }
    if (t == "aten.transpose.int") {
      const auto rank = static_cast<std::int64_t>(tensor_of(n).rank());
      for (std::size_t i : {1u, 2u}) {
        const std::int64_t* d = n.arg(i).get_if<std::int64_t>();
        if (!d || (*d == 0 || *d == -rank)) refuse(n, "moves dim 0 (the batch) elsewhere");
      }
      return;
    }
    if (rebatch_as_strided(t)) return check_as_strided(n);
    if (t == "aten.expand.default") {
      const Node* in = n.arg(0).node();
      if (!in || !batched_.count(in) || tensor_of(*in).rank() != tensor_of(n).rank() || dim0(*in) != dim0(n))
        refuse(n, "expands along dim 0 (the batch)");
      return;
    }
    if (t == "aten.constant_pad_nd.default") {  // pads the last len(pad) / 2 dims
      const ArgList* pad = n.arg(1).list();
      const Node* in = n.arg(0).node();
      if (!pad || !in || !batched_.count(in) || pad->size() / 2 >= tensor_of(*in).rank())
        refuse(n, "pads dim 0 (the batch)");
      check_same_rows(n);
      return;
    }
    if (t == "aten.native_batch_norm.default") {  // in inference only: training normalizes over the batch
      const Arg* training = get_arg_value(n, 5, "training");
      const bool* on = training ? training->get_if<bool>() : nullptr;
      if (!on || *on) refuse(n, "normalizes over the batch (training mode)");
      check_same_rows(n);
      return;
    }
    if (t == "aten.native_layer_norm.default" || t == "aten.layer_norm.default") {
      const ArgList* shape = n.arg(1).list();
      const Node* in = n.arg(0).node();
      if (!in || !batched_.count(in) || !shape || shape->size() >= tensor_of(*in).rank())
        refuse(n, "normalizes over dim 0 (the batch)");
      check_same_rows(n);
      return;
    }
    refuse(n, "is not an op kiln knows to keep samples apart (rebatch's rules, executor/rebatch.hpp)");
  }

  // Every tensor operand: batch-dependent ones line up with the output's dim 0,
  // constants broadcast along it (size 1 there, or fewer dims).
  void check_elementwise(const Node& n) {
    const TensorMeta* out = &tensor_of(n);
    const auto look = [&](const Arg& a) {
      const Node* x = a.node();
      if (!x) return;
      const TensorMeta* t = x->meta.val.tensor();
      if (!t) return;
      if (batched_.count(x)) {
        if (t->rank() != out->rank() || static_dim(*t, 0) != static_dim(*out, 0))
          refuse(n, "broadcasts " + x->name() + " along dim 0 (the batch)");
      } else if (t->rank() == out->rank() && static_dim(*t, 0) != std::optional<std::int64_t>(1)) {
        refuse(n, "reads the constant " + x->name() + " row by row along dim 0 (the batch)");
      }
    };
    for (const Arg& a : n.args()) look(a);
    for (const auto& [k, a] : n.kwargs()) look(a);
  }

  // The operands at `data` (any position where empty) may come from the inputs,
  // each with the rows of the (first) result; every other operand is a constant.
  void check_rowwise_operands(const Node& n, const std::vector<std::size_t>& data) {
    const std::vector<const TensorMeta*> results = meta_tensors(n.meta.val);
    const TensorMeta* out = results.empty() ? nullptr : results.front();
    for (std::size_t i = 0; i < n.args().size(); ++i) {
      const Arg& a = n.args()[i];
      if (a.list() && any_batched_list(*a.list())) refuse(n, "takes a list with a batch-dependent tensor at args[" + std::to_string(i) + "]");
      if (!batched(a)) continue;
      const bool allowed = data.empty() || std::find(data.begin(), data.end(), i) != data.end();
      const TensorMeta& t = tensor_of(*a.node());
      if (!allowed) refuse(n, "takes the batch-dependent " + a.node()->name() + " at args[" + std::to_string(i) + "], a weight's place");
      if (!out || t.rank() != out->rank() || static_dim(t, 0) != static_dim(*out, 0))
        refuse(n, "does not keep the rows of " + a.node()->name() + " (dim 0) as the rows of its result");
    }
    for (const auto& [k, a] : n.kwargs())
      if (batched(a)) refuse(n, "takes the batch-dependent " + a.node()->name() + " as keyword " + std::string(k));
  }
  bool any_batched_list(const ArgList& l) const {
    for (const Arg& e : l)
      if (batched(e)) return true;
    return false;
  }

  // The first position after args[0] that holds a batch-dependent value (or a list with one).
  std::optional<std::size_t> batched_arg_after_self(const Node& n) const {
    for (std::size_t i = 1; i < n.args().size(); ++i)
      if (batched(n.args()[i]) || (n.args()[i].list() && any_batched_list(*n.args()[i].list()))) return i;
    return std::nullopt;
  }

  // The input (args[0]) is the only batch-dependent operand, and each result keeps its rows of dim 0.
  void check_same_rows(const Node& n) {
    const Node* in = n.arg(0).node();
    if (!in || !batched_.count(in)) refuse(n, "takes a value that does not come from the inputs as its tensor");
    if (const auto i = batched_arg_after_self(n)) refuse(n, "takes a batch-dependent value at args[" + std::to_string(*i) + "]");
    for (const TensorMeta* t : meta_tensors(n.meta.val))  // an empty result (batch norm's saved mean) has no rows
      if (static_dim(*t, 0) != std::optional<std::int64_t>(dim0(*in)) && t->numel() != std::optional<std::int64_t>(0))
        refuse(n, "does not keep the rows of " + in->name() + " (dim 0) as the rows of its result");
  }

  // A slice along dim 0 from its start to its end in steps of 1 (defaults included).
  bool slices_whole_dim0(const Node& n) const {
    const Node* in = n.arg(0).node();
    if (!in || !batched_.count(in)) return false;
    const auto is = [&](std::size_t i, std::string_view name, std::int64_t want, bool at_least) {
      const Arg* a = get_arg_value(n, i, name);
      if (!a || a->is_none()) return true;
      const std::int64_t* v = a->get_if<std::int64_t>();
      return v && (at_least ? *v >= want : *v == want);
    };
    const Arg* dim = get_arg_value(n, 1, "dim");
    const std::int64_t* d = dim ? dim->get_if<std::int64_t>() : nullptr;
    const auto rank = static_cast<std::int64_t>(tensor_of(*in).rank());
    const bool along_dim0 = !dim || dim->is_none() || (d && (*d == 0 || *d == -rank));
    return along_dim0 && is(2, "start", 0, false) && is(3, "end", dim0(*in), true) && is(4, "step", 1, false);
  }

  void check_dim_arg(const Node& n, const DimArg& d) {
    const Arg* a = get_arg_value(n, d.index, d.name);
    const std::string_view t = n.target_name();
    // The rank the dim is counted against: the output's for unsqueeze, else the input's.
    const Node* in = t == "aten.cat.default" ? nullptr : n.arg(0).node();
    std::int64_t rank = 0;
    if (t == "aten.unsqueeze.default") rank = static_cast<std::int64_t>(tensor_of(n).rank());
    else if (in) rank = static_cast<std::int64_t>(tensor_of(*in).rank());
    std::vector<std::int64_t> dims;
    if (!a || a->is_none()) {
      refuse(n, d.list ? "works over every dim, dim 0 (the batch) too" : "works along dim 0 (the batch), its default");
    } else if (const ArgList* l = a->list()) {
      if (l->empty()) refuse(n, "works over every dim, dim 0 (the batch) too");
      for (const Arg& e : *l) {
        const std::int64_t* v = e.get_if<std::int64_t>();
        if (!v) refuse(n, "has a dim that is not an integer");
        dims.push_back(*v);
      }
    } else if (const std::int64_t* v = a->get_if<std::int64_t>()) {
      dims.push_back(*v);
    } else {
      refuse(n, "has a dim that is not an integer");
    }
    if (t == "aten.cat.default") {
      const ArgList* parts = n.arg(0).list();
      if (!parts || parts->empty()) refuse(n, "has no list of tensors to concatenate");
      for (const Arg& p : *parts)
        if (!batched(p) || tensor_of(*p.node()).rank() != tensor_of(n).rank() || dim0(*p.node()) != dim0(n))
          refuse(n, "concatenates " + (p.node() ? p.node()->name() : std::string("a value")) +
                        ", which does not have the result's rows of dim 0");
      rank = static_cast<std::int64_t>(tensor_of(n).rank());
    } else {
      check_same_rows(n);
    }
    for (std::int64_t v : dims)
      if (v == 0 || (rank > 0 && v == -rank)) refuse(n, "works along dim 0 (the batch)");
  }

  void check_reshape(const Node& n) {
    const Node* in = n.arg(0).node();
    if (!in || !batched_.count(in)) refuse(n, "reshapes a value that does not come from the inputs");
    // Dim 0 a multiple of the batch (checked with every tensor): samples stay blocks of rows.
    if (rebatch_has_size_list(n.target_name())) {
      const ArgList* size = n.arg(1).list();
      const std::int64_t* s0 = size && !size->empty() ? (*size)[0].get_if<std::int64_t>() : nullptr;
      if (!s0 || (*s0 != -1 && *s0 != dim0(n)))
        refuse(n, "has a size whose dim 0 is not the integer its result has (or -1)");
    }
  }

  // x.new_zeros([sizes]) and its kin read x's dtype and device, not its values
  // or shape: the result is the same for every slice (Swin's attention mask).
  bool takes_only_dtype_of_input(const Node& n) const {
    const std::string_view t = n.target_name();
    if (t != "aten.new_zeros.default" && t != "aten.new_ones.default" && t != "aten.new_empty.default" &&
        t != "aten.new_full.default")
      return false;
    if (batched_arg_after_self(n)) return false;
    for (const auto& [k, a] : n.kwargs())
      if (batched(a)) return false;
    return true;
  }

  // Whether `n` is a permute of a batch-dependent input that moves its dim 0 to
  // dim 1 ([X, B, ...]: a select along dim 0 gives [B, ...]) and every user of
  // the result selects or unbinds along dim 0; any other node the other rules judge.
  bool moves_batch_to_dim1(const Node& n) const {
    if (n.target_name() != "aten.permute.default" || !batched(n.arg(0))) return false;
    const ArgList* dims = n.arg(1).list();
    const std::int64_t* d1 = dims && dims->size() > 1 ? (*dims)[1].get_if<std::int64_t>() : nullptr;
    if (!d1 || (*d1 != 0 && *d1 != -static_cast<std::int64_t>(dims->size())) || n.num_users() == 0) return false;
    for (const Node* u : n.users())
      if (!takes_along_dim0(*u, n)) return false;
    if (static_dim(tensor_of(n), 1) != std::optional<std::int64_t>(dim0(*n.arg(0).node())))
      refuse(n, "moves dim 0 (the batch) to dim 1 without keeping its size");
    return true;
  }
  // Whether `u` is a select or unbind along dim 0 of `x` (its only tensor operand).
  static bool takes_along_dim0(const Node& u, const Node& x) {
    if (u.op() != OpKind::call_function || u.arg(0).node() != &x) return false;
    const std::string_view t = u.target_name();
    const Arg* dim = nullptr;
    if (t == "aten.select.int") {
      dim = get_arg_value(u, 1, "dim");
      const Arg* index = get_arg_value(u, 2, "index");
      if (!dim || !index || !index->get_if<std::int64_t>()) return false;
    } else if (t == "aten.unbind.int") {
      dim = get_arg_value(u, 1, "dim");
      if (!dim) return true;  // unbind's default dim is 0
    } else {
      return false;
    }
    const std::int64_t* d = dim->get_if<std::int64_t>();
    const TensorMeta* xt = x.meta.val.tensor();
    return d && (*d == 0 || (xt && *d == -static_cast<std::int64_t>(xt->rank())));
  }
  // A select or unbind along dim 0 of `m`, whose batch a permute moved to dim 1
  // (moves_batch_to_dim1 let only such users through): each result has the
  // batch in dim 0 again.
  void check_batch_back(const Node& n, const Node& m) const {
    const std::optional<std::int64_t> rows = static_dim(tensor_of(m), 1);
    for (const TensorMeta* t : meta_tensors(n.meta.val))
      if (static_dim(*t, 0) != rows) refuse(n, "does not keep the batch of " + m.name() + " (dim 1)");
  }

  // x.as_strided(size, stride) on a contiguous x: each row of the result (dim 0,
  // the same count as x's) must read only the same row of x, which holds where
  // stride[0] is x's row length, the other dims span less than it, and there
  // is no storage offset.
  void check_as_strided(const Node& n) {
    const Node* in = n.arg(0).node();
    if (!in || !batched_.count(in)) refuse(n, "restrides a value that does not come from the inputs");
    const TensorMeta& x = tensor_of(*in);
    if (x.stride && x.stride->size() == x.rank()) {
      std::int64_t expect = 1;
      for (std::size_t i = x.rank(); i-- > 0;) {
        const auto d = static_dim(x, i);
        if (!d || !is_static((*x.stride)[i])) refuse(n, "restrides " + in->name() + ", whose strides are not all known");
        if (*d > 1 && std::get<std::int64_t>((*x.stride)[i]) != expect)
          refuse(n, "restrides " + in->name() + ", which is not contiguous (its rows' storage would depend on the batch)");
        expect *= *d;
      }
    }
    const auto numel = x.numel();
    const ArgList* size = n.arg(1).list();
    const ArgList* stride = n.arg(2).list();
    const Arg* offset = get_arg_value(n, 3, "storage_offset");
    const std::int64_t* off = offset ? offset->get_if<std::int64_t>() : nullptr;
    if (!numel || !size || !stride || size->size() != stride->size() || size->empty() ||
        (offset && !offset->is_none() && (!off || *off != 0)))
      refuse(n, "has a size, stride or storage offset that rebatch cannot read as rows of its input");
    std::vector<std::int64_t> sz, st;
    for (std::size_t i = 0; i < size->size(); ++i) {
      const std::int64_t* a = (*size)[i].get_if<std::int64_t>();
      const std::int64_t* b = (*stride)[i].get_if<std::int64_t>();
      if (!a || !b) refuse(n, "has a size or stride that is not a list of integers");
      sz.push_back(*a), st.push_back(*b);
    }
    const std::int64_t rows = dim0(*in), row = *numel / std::max<std::int64_t>(rows, 1);
    std::int64_t span = 0;
    for (std::size_t i = 1; i < sz.size(); ++i) span += std::max<std::int64_t>(sz[i] - 1, 0) * st[i];
    if (sz[0] != rows || (rows > 1 && st[0] != row) || span >= row)
      refuse(n, "reads across the rows of " + in->name() + " (size " + std::to_string(sz[0]) + " and stride " + std::to_string(st[0]) +
                    " in dim 0, against " + std::to_string(rows) + " rows of " + std::to_string(row) + ")");
  }

  // The rebatched node: its shapes say the new batch (in dim `axis`), its size list too.
  void rewrite(Node& n, std::size_t axis) const {
    const std::int64_t from = *from_;
    const auto scale = [&](std::int64_t d) { return d / from * to_; };
    const auto set_dim = [&](TensorMeta& t) { t.shape[axis] = scale(std::get<std::int64_t>(t.shape[axis])); };
    MetaVal::Value& v = n.meta.val.value();
    if (auto* t = std::get_if<TensorMeta>(&v)) set_dim(*t);
    else if (auto* l = std::get_if<MetaVal::List>(&v))
      for (MetaVal& e : *l)
        if (e.is_tensor()) set_dim(std::get<TensorMeta>(e.value()));
    const std::string_view t = n.target_name();
    if (n.op() == OpKind::call_function &&
        ((rebatch_reshape(t) && rebatch_has_size_list(t)) || rebatch_as_strided(t) || t == "aten.expand.default")) {
      ArgList size = *n.arg(1).list();
      if (const std::int64_t* s0 = size[0].get_if<std::int64_t>(); s0 && *s0 != -1) {
        size[0] = Arg(scale(*s0));
        n.set_arg(1, Arg(std::move(size)));
      }
    }
  }

  const Graph& g_;
  const Weights& weights_;
  std::int64_t to_;
  std::optional<std::int64_t> from_;
  std::unordered_set<const Node*> batched_;
  // Permute results whose batch is in dim 1 (moves_batch_to_dim1).
  std::unordered_set<const Node*> moved_;
};

}  // namespace detail

// `g` for a batch of `batch`: dim 0 of every input and of every tensor computed
// from one scaled from the graph's batch to `batch`, or RebatchError naming the
// first node that mixes samples. `weights` tells inputs from placeholders bound to weights.
inline Graph rebatch(const Graph& g, const Weights& weights, std::int64_t batch) {
  return detail::Rebatcher(g, weights, batch).run();
}

// The batch of `g`'s inputs (dim 0 of the first input), as rebatch reads it, or nullopt.
inline std::optional<std::int64_t> graph_batch(const Graph& g, const Weights& weights) {
  for (const Node* n : g.nodes())
    if (detail::is_graph_input(*n, weights))
      if (const TensorMeta* t = n->meta.val.tensor()) return detail::static_dim(*t, 0);
  return std::nullopt;
}

}  // namespace kiln::runtime
