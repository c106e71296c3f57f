#pragma once
// Lowering (the counterpart of Inductor's GraphLowering): once per graph,
// every node the outputs need becomes values and steps of a Program. Inputs
// take their layouts from the placeholders' meta; weights become constants,
// one per attribute, whether a get_attr or a placeholder bound to a weight
// names it; getitem of a tuple or of a static list is resolved here, and
// every other call goes to its kernel. Before anything is lowered,
// every node with no kernel is reported, all at once.
#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/core/print.hpp"
#include "kiln/kernels/kernel_table.hpp"
#include "kiln/executor/bfloat16_rounding.hpp"
#include "kiln/executor/buffer_plan.hpp"
#include "kiln/executor/layout_decision.hpp"
#include "kiln/runtime/lower_context.hpp"

namespace kiln::runtime {


namespace detail {

inline std::optional<Layout> layout_from_meta(const MetaVal& v) {
  const TensorMeta* t = v.tensor();
  if (!t) return std::nullopt;
  Shape shape;
  for (const Dim& d : t->shape) {
    if (!is_static(d)) return std::nullopt;
    shape.push_back(std::get<std::int64_t>(d));
  }
  return Layout::contiguous(std::move(shape), t->dtype);
}

// FNV-1a over a contiguous tensor's bytes, dtype and shape.
inline std::uint64_t content_hash(const Tensor& t) {
  std::uint64_t h = 0xcbf29ce484222325ull ^ static_cast<std::uint64_t>(t.dtype());
  auto mix = [&h](std::uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ull;
  };
  for (auto d : t.shape()) mix(static_cast<std::uint64_t>(d));
  const auto* b = static_cast<const unsigned char*>(t.raw());
  const std::size_t n = t.nbytes();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, b + i, 8);
    mix(w);
  }
  for (; i < n; ++i) mix(b[i]);
  return h;
}

// The nodes the outputs depend on, and in-place ops that write to one of those.
inline std::unordered_set<const Node*> needed_nodes(const Graph& g) {
  std::unordered_set<const Node*> live;
  std::vector<const Node*> stack;
  auto mark = [&](const Node* n) {
    if (live.insert(n).second) stack.push_back(n);
  };
  if (const Node* out = g.output_node()) mark(out);
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::call_function && OpRegistry::instance().traits(n->target()).impure()) mark(n);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Node* in : n->all_input_nodes()) mark(in);
  }
  return live;
}

inline void flatten_outputs(const Arg& a, const std::unordered_map<const Node*, Lowered>& lowered,
                            std::vector<ValueId>& out) {
  if (const Node* n = a.node()) {
    const Lowered& l = lowered.at(n);
    std::function<void(const Lowered&)> add = [&](const Lowered& x) {
      if (x.is_tensor()) out.push_back(x.id);
      else if (x.kind == Lowered::Kind::tuple)
        for (const Lowered& y : x.items) add(y);
      else
        throw CompileError("output: " + n->name() + " is not a tensor; kiln returns tensors only");
    };
    add(l);
  } else if (const ArgList* list = a.list()) {
    for (const Arg& x : *list) flatten_outputs(x, lowered, out);
  } else if (!a.is_none()) {
    throw CompileError("output: an output that is not a tensor; kiln returns tensors only");
  }
}

// Every node with no kernel, reported at once, grouped by what is missing.
inline void refuse_nodes_without_kernel(const Graph& g, const std::unordered_set<const Node*>& live,
                                        const kernels::KernelTable& kernels) {
  std::vector<std::pair<std::string, std::vector<std::string>>> missing;  // key, node names (first-seen order)
  std::size_t n_missing = 0;
  for (const Node* n : g.nodes()) {
    if (!live.count(n)) continue;
    if (n->op() != OpKind::call_function && n->op() != OpKind::call_method && n->op() != OpKind::call_module) continue;
    if (n->op() == OpKind::call_function && n->target_name() == "operator.getitem") continue;  // resolved here or by its kernel
    if (kernels.find(kernels::kernel_key(*n))) continue;
    // Named as the graph names it: a bare call_function target is looked up as a
    // Tensor method, but the graph calls the function.
    const std::string key = kernels::missing_kernel_name(*n);
    auto it = std::find_if(missing.begin(), missing.end(), [&](const auto& m) { return m.first == key; });
    if (it == missing.end()) it = missing.insert(missing.end(), {key, {}});
    it->second.push_back(n->name());
    ++n_missing;
  }
  if (n_missing) {
    std::string msg = std::to_string(n_missing) + " node" + (n_missing > 1 ? "s have" : " has") + " no kernel:";
    for (const auto& [key, names] : missing) {
      msg += "\n  " + key + ": ";
      for (std::size_t i = 0; i < names.size(); ++i) msg += (i ? ", " : "") + names[i];
    }
    throw CompileError(msg);
  }
}

// The meta the exporter recorded checks the tensor a node became: `what` is
// the tensor's part in the message ("the kernel makes", "the weight bound to
// it is"). A symbolic dim of the meta matches any size.
inline void check_against_meta(const LowerContext& ctx, const Node& n, const Layout& l, std::string_view what) {
  const TensorMeta* t = n.meta.val.tensor();
  if (!t) return;
  bool same = t->shape.size() == l.shape.size() && t->dtype == l.dtype;
  for (std::size_t k = 0; same && k < l.shape.size(); ++k)
    same = !is_static(t->shape[k]) || std::get<std::int64_t>(t->shape[k]) == l.shape[k];
  if (same) return;
  std::string meta_shape = "[";
  for (std::size_t k = 0; k < t->shape.size(); ++k) meta_shape += (k ? ", " : "") + format_dim(t->shape[k]);
  ctx.fail(std::string(what) + " " + std::string(dtype_name(l.dtype)) + " " + shape_str(l.shape) + ", but meta.val says " +
           std::string(dtype_name(t->dtype)) + " " + meta_shape + "]");
}

// list[start:stop:step] with Python's rules for missing, negative and out-of-range bounds.
inline ArgList sliced_items(const LowerContext& ctx, const ArgList& list, const Slice& s) {
  auto bound = [&](const Arg& a) -> std::optional<std::int64_t> {
    if (a.is_none()) return std::nullopt;
    if (const auto* i = a.get_if<std::int64_t>()) return *i;
    ctx.fail("a slice bound is not an int");
  };
  const auto n = static_cast<std::int64_t>(list.size());
  const std::int64_t step = bound(s.parts[2]).value_or(1);
  if (step == 0) ctx.fail("slice step cannot be zero");
  const std::int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto clamp = [&](std::optional<std::int64_t> b, std::int64_t dflt) {
    if (!b) return dflt;
    return *b < 0 ? std::max(*b + n, lower) : std::min(*b, upper);
  };
  const std::int64_t start = clamp(bound(s.parts[0]), step > 0 ? lower : upper);
  const std::int64_t stop = clamp(bound(s.parts[1]), step > 0 ? upper : lower);
  ArgList out;
  for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(list[static_cast<std::size_t>(k)]);
  return out;
}

// getitem of a tuple (split, max_pool2d_with_indices) or of a static list (a
// shape, an int or a slice of it), resolved while lowering; nullopt for a getitem of a tensor, which
// its kernel indexes.
inline std::optional<Lowered> item_of_lowered(const LowerContext& ctx, const Node& n) {
  const Node* src = n.args().empty() ? nullptr : n.arg(0).node();
  const Lowered* from = src ? &ctx.lowered(src) : nullptr;
  if (from && from->kind == Lowered::Kind::tuple) {
    const std::int64_t i = ctx.int_arg(1, "");
    const auto size = static_cast<std::int64_t>(from->items.size());
    if (i < -size || i >= size) ctx.fail("index " + std::to_string(i) + " is out of range for " + std::to_string(size) + " results");
    return from->items[i < 0 ? i + size : i];
  }
  if (from && from->kind == Lowered::Kind::value) {
    const ArgList* l = from->value.list();
    const Arg idx = ctx.value(1, "");
    const auto* i = idx.get_if<std::int64_t>();
    if (const auto* s = idx.get_if<Slice>(); l && s) return Lowered::constant(Arg(sliced_items(ctx, *l, *s)));
    if (!l || !i) ctx.fail("getitem of a static value needs a list and an int index or a slice");
    const auto size = static_cast<std::int64_t>(l->size());
    if (*i < -size || *i >= size) ctx.fail("index " + std::to_string(*i) + " is out of range for " + std::to_string(size) + " items");
    return Lowered::constant((*l)[*i < 0 ? *i + size : *i]);
  }
  return std::nullopt;
}

}  // namespace detail

// Runs, when lowering, the steps a node added if they read only constants
// (stacking a layer's weights, transposing a weight, ...) and keeps what they
// wrote as constants: a graph rewritten by batch fusion then stacks its weights
// once, not on every run.
class ConstantFolder {
 public:
  explicit ConstantFolder(Program& p) : p_(p) {}

  // Folds steps [first, end) if they can be; returns whether they were. The
  // node's own values start at `first_value`: a step writing into an older
  // buffer (fill_ of a slice) updates what earlier steps wrote, so it stays a step.
  bool fold(std::size_t first, ValueId first_value) {
    if (first >= p_.steps.size()) return false;
    for (std::size_t s = first; s < p_.steps.size(); ++s)
      if (p_.steps[s]->has_effects) return false;
    auto root = [&](ValueId v) { return p_.values[v].storage == Storage::view ? p_.values[v].base : v; };
    std::vector<ValueId> produced;
    for (std::size_t s = first; s < p_.steps.size(); ++s)
      for (ValueId w : p_.steps[s]->writes) {
        const ValueId r = root(w);
        if (p_.values[r].storage != Storage::arena || !p_.values[r].layout.is_contiguous() || r < first_value) return false;
        if (std::find(produced.begin(), produced.end(), r) == produced.end()) produced.push_back(r);
      }
    for (std::size_t s = first; s < p_.steps.size(); ++s)
      for (ValueId v : p_.steps[s]->reads) {
        const ValueId r = root(v);
        if (p_.values[r].storage != Storage::constant && std::find(produced.begin(), produced.end(), r) == produced.end())
          return false;
      }
    // Run them once on a frame of their own.
    std::vector<Tensor> results;
    Frame f;
    f.start(p_, 1);
    for (ValueId r : produced) {
      results.push_back(Tensor::empty(p_.values[r].layout.shape, p_.values[r].layout.dtype));
      f.bind(r, static_cast<std::byte*>(results.back().raw()));
    }
    f.bind_views();
    std::size_t scratch = 0;
    for (std::size_t s = first; s < p_.steps.size(); ++s) scratch = std::max(scratch, p_.steps[s]->scratch_bytes);
    auto scratch_mem = detail::aligned_bytes(scratch);
    for (std::size_t s = first; s < p_.steps.size(); ++s) {
      auto local = p_.steps[s]->make_local();
      f.set_step(scratch_mem.get(), local.get());
      p_.steps[s]->run(f);
    }
    p_.steps.erase(p_.steps.begin() + static_cast<std::ptrdiff_t>(first), p_.steps.end());
    for (std::size_t k = 0; k < produced.size(); ++k) {
      ValueInfo& i = p_.values[produced[k]];
      i.storage = Storage::constant;
      i.index = static_cast<std::uint32_t>(p_.constants.size());
      p_.constants.push_back(std::move(results[k]));
    }
    return true;
  }

 private:
  Program& p_;
};

namespace detail {

// Inputs and weights first, wherever the graph has them: a kernel that folds
// the op after it (a batch-norm into a convolution) reads that op's weights.
inline std::vector<const Node*> lowering_order(const Graph& g, const std::unordered_set<const Node*>& live) {
  std::vector<const Node*> order;
  for (const Node* n : g.nodes())
    if (live.count(n) && (n->op() == OpKind::placeholder || n->op() == OpKind::get_attr)) order.push_back(n);
  for (const Node* n : g.nodes())
    if (live.count(n) && n->op() != OpKind::placeholder && n->op() != OpKind::get_attr) order.push_back(n);
  return order;
}

inline bool conv_channels_last(const Graph& g, const Weights& weights, const CompileOptions& options) {
  using ConvLayout = CompileOptions::ConvLayout;
  return options.conv_layout == ConvLayout::channels_last ||
         (options.conv_layout == ConvLayout::decide && decide_channels_last(g, weights));
}

// The constant of each weight the graph names, made once per name, and once
// per content: equal weights under different names (tied embeddings,
// repeated constants) are stored once.
class WeightConstants {
 public:
  WeightConstants(const Weights& weights, Program& p, LowerContext& ctx) : weights_(weights), p_(p), ctx_(ctx) {}

  // `meta_dtype`: the dtype the node naming it says; a float32 weight of a
  // bfloat16 node (as the exporter saves them) is rounded to it.
  std::optional<ValueId> operator()(std::string_view target, std::optional<DType> meta_dtype = std::nullopt) {
    if (auto known = by_name_.find(target); known != by_name_.end()) return known->second;
    auto w = weights_.find(std::string(target));
    if (w == weights_.end()) return std::nullopt;
    Tensor value = w->second.dtype() == DType::float32 && meta_dtype == DType::bfloat16 ? as_bfloat16(w->second)
                                                                                         : w->second.contiguous();
    const std::uint64_t h = content_hash(value);
    ValueId id;
    if (const auto same = stored_equal(value, h)) {
      id = *same;
    } else {
      id = ctx_.constant_value(std::move(value), std::string(target));
      by_content_.emplace(h, id);
    }
    by_name_.emplace(std::string(target), id);
    return id;
  }

 private:
  std::optional<ValueId> stored_equal(const Tensor& value, std::uint64_t h) const {
    for (auto [it, end] = by_content_.equal_range(h); it != end; ++it) {
      const Tensor& other = p_.constants[p_.values[it->second].index];
      if (other.dtype() == value.dtype() && other.shape() == value.shape() &&
          std::memcmp(other.raw(), value.raw(), value.nbytes()) == 0)
        return it->second;
    }
    return std::nullopt;
  }

  const Weights& weights_;
  Program& p_;
  LowerContext& ctx_;
  std::map<std::string, ValueId, std::less<>> by_name_;
  std::unordered_multimap<std::uint64_t, ValueId> by_content_;
};

// One graph's lowering: each node in turn becomes values and steps of the program.
class GraphLowering {
 public:
  GraphLowering(Program& p, const Graph& g, const Weights& weights, const kernels::KernelTable& kernels,
                const CompileOptions& options)
      : p_(p), kernels_(kernels), ctx_(p, lowered_, options), folder_(p), constants_(weights, p, ctx_),
        getitem_(kernels.find("operator.getitem")) {
    ctx_.set_channels_last(conv_channels_last(g, weights, options));
    ctx_.set_weight_finder([this](std::string_view target) { return constants_(target); });
    ctx_.set_kernel_finder([&kernels](std::string_view target) -> LowerFn { return kernels.find(target); });
  }

  void lower_node(const Node& n) {
    if (ctx_.was_absorbed(&n)) return;
    ctx_.begin(n);
    switch (n.op()) {
      case OpKind::placeholder: return lower_placeholder(n);
      case OpKind::get_attr: return lower_get_attr(n);
      case OpKind::output: return flatten_outputs(n.args().empty() ? Arg() : n.arg(0), lowered_, p_.outputs);
      default: break;
    }
    if (n.op() == OpKind::call_function && n.target_name() == "operator.getitem") {
      if (std::optional<Lowered> item = item_of_lowered(ctx_, n)) {
        lowered_[&n] = std::move(*item);
        return;
      }
      if (!getitem_) ctx_.fail("no kernel indexes a tensor (operator.getitem)");
      run_folded([&] { getitem_(ctx_); });
    } else {
      run_folded([&] {
        run_kernel(n);
        round_to_meta_bfloat16(n);
      });
    }
    keep_result(n);
  }

 private:
  // A placeholder bound to a weight (a lifted parameter of a torch.export
  // or Dynamo graph) is that weight, a constant like a get_attr's.
  void lower_placeholder(const Node& n) {
    if (const auto weight = constants_(n.target_name(), meta_dtype(n))) {
      check_against_meta(ctx_, n, p_.values[*weight].layout, "the weight bound to it is");
      lowered_[&n] = Lowered::tensor(*weight);
      return;
    }
    lowered_[&n] = Lowered::tensor(add_input(n));
  }

  ValueId add_input(const Node& n) {
    auto layout = layout_from_meta(n.meta.val);
    if (!layout) ctx_.fail("the input needs meta.val with a static tensor shape and dtype (the executor plans from it)");
    ValueInfo i;
    i.layout = std::move(*layout);
    i.storage = Storage::input;
    i.index = static_cast<std::uint32_t>(p_.inputs.size());
    i.name = n.name();
    p_.values.push_back(std::move(i));
    const auto id = static_cast<ValueId>(p_.values.size() - 1);
    p_.inputs.push_back(id);
    p_.input_names.push_back(n.name());
    return id;
  }

  void lower_get_attr(const Node& n) {
    const std::string target(n.target_name());
    const auto id = constants_(target, meta_dtype(n));
    if (!id) ctx_.fail("no weight named '" + target + "' was given");
    lowered_[&n] = Lowered::tensor(*id);
  }

  // Runs `lower`, then folds the steps it added if they read only constants.
  template <class Lower>
  void run_folded(Lower&& lower) {
    const std::size_t first = p_.steps.size();
    const auto first_value = static_cast<ValueId>(p_.values.size());
    lower();
    folder_.fold(first, first_value);
    ctx_.erase_dropped_steps();  // steps of earlier nodes that this one made redundant
  }

  void run_kernel(const Node& n) {
    try {
      kernels_.find(kernels::kernel_key(n))(ctx_);
    } catch (const std::bad_alloc&) {
      ctx_.fail("ran out of memory while lowering it (a constant or packed weight it makes is larger than this machine can hold)");
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      // A library under a kernel (oneDNN, xtensor) refused what the kernel asked of it: still an error naming the node.
      ctx_.fail(std::string("a library refused it while lowering: ") + e.what());
    }
  }

  static std::optional<DType> meta_dtype(const Node& n) {
    const TensorMeta* t = n.meta.val.tensor();
    return t ? std::optional<DType>(t->dtype) : std::nullopt;
  }

  // A float32 result of a node PyTorch ran in bfloat16, rounded as PyTorch rounds it.
  void round_to_meta_bfloat16(const Node& n) {
    if (meta_dtype(n) != DType::bfloat16) return;
    Lowered r = ctx_.take_result();
    if (r.is_tensor() && p_.values[r.id].layout.dtype == DType::float32) r = Lowered::tensor(round_to_bfloat16(ctx_, r.id));
    ctx_.set_result(std::move(r));
  }

  // The kernel's result, checked against the node's meta.
  void keep_result(const Node& n) {
    Lowered result = ctx_.take_result();
    if (result.kind == Lowered::Kind::none && !n.meta.val.is_none() && n.num_users() > 0)
      ctx_.fail("its kernel gave no result");
    if (result.is_tensor()) check_against_meta(ctx_, n, p_.values[result.id].layout, "the kernel makes");
    lowered_[&n] = std::move(result);
  }

  Program& p_;
  const kernels::KernelTable& kernels_;
  std::unordered_map<const Node*, Lowered> lowered_;
  LowerContext ctx_;
  ConstantFolder folder_;
  WeightConstants constants_;
  const LowerFn getitem_;
};

// Weights that only served to make packed copies (a linear's [N, K] weight
// once reordered for its primitive) are read by no step: let them go.
inline void release_unread_constants(Program& p) {
  std::vector<bool> used(p.constants.size(), false);
  auto mark = [&](ValueId v) {
    const ValueInfo& i = p.values[v];
    const ValueInfo& root = i.storage == Storage::view ? p.values[i.base] : i;
    if (root.storage == Storage::constant) used[root.index] = true;
  };
  for (const auto& st : p.steps) {
    for (ValueId v : st->reads) mark(v);
    for (ValueId v : st->writes) mark(v);
  }
  for (ValueId v : p.outputs) mark(v);
  for (std::size_t c = 0; c < used.size(); ++c)
    if (!used[c]) p.constants[c] = Tensor();
}

}  // namespace detail

inline Program lower(const Graph& g, const Weights& weights, const kernels::KernelTable& kernels,
                     const CompileOptions& options = {}) {
  const auto live = detail::needed_nodes(g);
  detail::refuse_nodes_without_kernel(g, live, kernels);
  Program p;
  {
    detail::GraphLowering lowering(p, g, weights, kernels, options);
    for (const Node* n : detail::lowering_order(g, live)) lowering.lower_node(*n);
  }
  plan_buffers(p);
  detail::release_unread_constants(p);
  return p;
}

}  // namespace kiln::runtime
