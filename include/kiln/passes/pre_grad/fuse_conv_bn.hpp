#pragma once
// fuse_conv_bn (Inductor's pre_grad.py fuse_conv_bn, run under freezing): an
// inference batch-norm right after a convolution is folded into the
// convolution's weight and bias, which become new weights in the pass's
// WeightStore:
//
//   W' = W * g / sqrt(var + eps)          (per output channel)
//   b' = (b - mean) * g / sqrt(var + eps) + beta
//
// Forms: call_module Conv{1,2,3}d then BatchNorm{1,2,3}d (by class, from the
// graph's modules table; the parameters are the weights `<path>.weight`,
// `<path>.bias`, `<path>.running_mean`, `<path>.running_var`), and the
// functional and aten calls of conv_bn_common.hpp. Every value folded must be a
// constant: a get_attr, or a placeholder bound to a weight (torch.export and
// Dynamo lift parameters to placeholders). The convolution's output must have
// the batch-norm as its only user.
//
// The fold computes in the parameters' dtype (float32 for a float model), as
// PyTorch's fuse_conv_bn_weights does. A conv weight that nothing but its conv
// reads is taken from the store (WeightStore::take: its file still gives the
// original) and scaled in place, so folding a model copies none of its weights.
// That pass over the weights is bound by memory bandwidth, so it is split over
// threads (options `threads`, default the CPUs this process may run on, 1: no
// thread; `min_bytes_per_thread`, default 1 MiB, below which a share is not
// worth a thread); the result is the same bits whatever the split.
//
// Where Inductor replaces a module by its folded copy (so every call of a
// shared conv module changes), kiln rewrites the one call: a module pair
// becomes torch.nn.functional.conv{N}d on the folded weights, a functional or
// aten conv takes them in place of its own. Constants left without users are
// erased (a lifted parameter's placeholder too). Counters: `fuse_conv_bn` per
// batch-norm folded; `fuse_conv_bn_no_weights` per pair left because the
// caller gave no WeightStore.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/error.hpp"
#include "kiln/core/parallel_shares.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/passes/pass.hpp"
#include "kiln/passes/pre_grad/conv_bn_common.hpp"

namespace kiln::pre_grad {

namespace conv_bn_detail {

// The weight name a node stands for: a get_attr's target, or a placeholder's
// target when the store binds a weight to it; nullopt for anything else.
inline std::optional<std::string> constant_name(const io::WeightStore& store, const Node* n) {
  if (!n) return std::nullopt;
  if (n->op() != OpKind::get_attr && n->op() != OpKind::placeholder) return std::nullopt;
  std::string name(n->target_name());
  if (!store.contains(name)) return std::nullopt;
  return name;
}

inline TensorMeta meta_of(const io::WeightTensor& t) {
  TensorMeta m;
  m.dtype = t.dtype;
  std::vector<Dim> stride(t.shape.size());
  std::int64_t s = 1;
  for (std::size_t i = t.shape.size(); i-- > 0;) stride[i] = s, s *= t.shape[i];
  for (auto d : t.shape) m.shape.push_back(d);
  m.stride = std::move(stride);
  return m;
}

// The values a fold reads, each from the store (null where the form has None).
struct FoldInputs {
  const io::WeightTensor* conv_weight = nullptr;
  const io::WeightTensor* conv_bias = nullptr;
  const io::WeightTensor* bn_weight = nullptr;
  const io::WeightTensor* bn_bias = nullptr;
  const io::WeightTensor* mean = nullptr;
  const io::WeightTensor* var = nullptr;
  double eps = 1e-5;
};
// A fold decided: its bias made, and its weight's storage (taken from the
// store or copied) waiting to be multiplied by `scale`, row by row.
struct Folded {
  io::WeightTensor weight, bias;
  std::vector<std::byte> scale;  // one value per output channel, in the weight's dtype
};

// Per output channel, what multiplies the weight and the folded bias.
template <class T>
struct ChannelFold {
  std::vector<T> scale, bias;
};

// Whether a per-channel parameter (null: None) is float32 or float64 with one
// value per output channel; `why` says why not.
inline bool channel_param_fits(const io::WeightTensor* t, std::size_t channels, const char* what, std::string& why) {
  if (!t) return true;
  if (t->dtype != DType::float32 && t->dtype != DType::float64)
    why = std::string(what) + " is " + std::string(dtype_name(t->dtype)) + ", not float32 or float64";
  else if (static_cast<std::size_t>(t->numel()) != channels)
    why = std::string(what) + " has " + std::to_string(t->numel()) + " values for " + std::to_string(channels) +
          " output channels";
  return why.empty();
}

// A parameter that fits, as T; `fill` everywhere for None.
template <class T>
std::vector<T> channel_values(const io::WeightTensor* t, std::size_t channels, T fill) {
  std::vector<T> out(channels, fill);
  if (!t) return out;
  if (t->dtype == DType::float32) {
    const auto* v = reinterpret_cast<const float*>(t->bytes.data());
    for (std::size_t i = 0; i < channels; ++i) out[i] = static_cast<T>(v[i]);
  } else {
    const auto* v = reinterpret_cast<const double*>(t->bytes.data());
    for (std::size_t i = 0; i < channels; ++i) out[i] = static_cast<T>(v[i]);
  }
  return out;
}

// PyTorch's fuse_conv_bn_weights in T, the parameters' dtype (float32 for a
// float model, not double), with its order of operations:
//   rsqrt = 1 / sqrt(var + eps), scale = gamma * rsqrt, bias' = (b - mean) * rsqrt * gamma + beta.
template <class T>
ChannelFold<T> channel_fold(const FoldInputs& in, std::size_t channels) {
  const std::vector<T> bias = channel_values<T>(in.conv_bias, channels, T(0));
  const std::vector<T> gamma = channel_values<T>(in.bn_weight, channels, T(1));
  const std::vector<T> beta = channel_values<T>(in.bn_bias, channels, T(0));
  const std::vector<T> mean = channel_values<T>(in.mean, channels, T(0));
  const std::vector<T> var = channel_values<T>(in.var, channels, T(1));
  ChannelFold<T> f{std::vector<T>(channels), std::vector<T>(channels)};
  const T eps = static_cast<T>(in.eps);
  for (std::size_t o = 0; o < channels; ++o) {
    const T rsqrt = T(1) / std::sqrt(var[o] + eps);
    f.scale[o] = gamma[o] * rsqrt;
    f.bias[o] = (bias[o] - mean[o]) * rsqrt * gamma[o] + beta[o];
  }
  return f;
}

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
Folded prepare_as(const FoldInputs& in, std::size_t channels) {
  const ChannelFold<T> f = channel_fold<T>(in, channels);
  Folded out;
  out.bias.dtype = in.conv_weight->dtype;
  out.bias.shape = {static_cast<std::int64_t>(channels)};
  out.bias.bytes = bytes_of(f.bias);
  out.scale = bytes_of(f.scale);
  return out;
}

// The folded bias and the weight's per-channel scale, in the conv weight's
// dtype; nullopt, with the reason in `why`, when a dtype or size does not fit.
// The weight itself is left to the caller (take or copy, then scale_weights).
inline std::optional<Folded> prepare_fold(const FoldInputs& in, std::string& why) {
  const io::WeightTensor& w = *in.conv_weight;
  if (w.shape.empty() || w.shape[0] <= 0) {
    why = "the convolution weight has no output channels";
    return std::nullopt;
  }
  if (w.dtype != DType::float32 && w.dtype != DType::float64) {
    why = "the convolution weight is " + std::string(dtype_name(w.dtype)) + ", not float32 or float64";
    return std::nullopt;
  }
  const auto channels = static_cast<std::size_t>(w.shape[0]);
  if (!channel_param_fits(in.conv_bias, channels, "the convolution bias", why) ||
      !channel_param_fits(in.bn_weight, channels, "the batch-norm weight", why) ||
      !channel_param_fits(in.bn_bias, channels, "the batch-norm bias", why) ||
      !channel_param_fits(in.mean, channels, "running_mean", why) ||
      !channel_param_fits(in.var, channels, "running_var", why))
    return std::nullopt;
  return w.dtype == DType::float32 ? prepare_as<float>(in, channels) : prepare_as<double>(in, channels);
}

// Multiplies the C-order weight's elements [begin, end) by their output
// channel's scale, in place. The fixed blocks let the compiler vectorize it at
// -O2 as well; each element is one multiply, so any split of the range gives
// the same bits.
template <class T>
void scale_elements(T* w, std::size_t per_channel, const T* scale, std::size_t begin, std::size_t end) {
  constexpr std::size_t kBlock = 64 / sizeof(T);
  while (begin < end) {
    const std::size_t o = begin / per_channel;
    const std::size_t row_end = std::min(end, (o + 1) * per_channel);
    const T s = scale[o];
    T* x = w + begin;
    const std::size_t n = row_end - begin;
    std::size_t k = 0;
    for (; k + kBlock <= n; k += kBlock)
      for (std::size_t j = 0; j < kBlock; ++j) x[k + j] *= s;
    for (; k < n; ++k) x[k] *= s;
    begin = row_end;
  }
}

// fuse_conv_bn's options: how many threads the fold may use (default: the
// CPUs this process may run on; 1: none started), and the fewest bytes of
// weights worth a thread, so a small model starts none.
struct FoldThreads {
  std::size_t threads = 1;
  std::size_t min_bytes_per_thread = std::size_t{1} << 20;
};

inline FoldThreads fold_threads(const nlohmann::json& options) {
  FoldThreads t;
  t.threads = static_cast<std::size_t>(
      positive_int_option(options, "fuse_conv_bn", "threads", static_cast<std::int64_t>(available_cpus())));
  t.min_bytes_per_thread = static_cast<std::size_t>(positive_int_option(
      options, "fuse_conv_bn", "min_bytes_per_thread", static_cast<std::int64_t>(t.min_bytes_per_thread)));
  return t;
}

// How many shares `bytes` of weights are cut into: at most `threads`, and no
// share smaller than min_bytes_per_thread (so a small model starts no thread).
inline std::size_t share_count(std::size_t bytes, const FoldThreads& t) {
  return std::max<std::size_t>(1, std::min(t.threads, bytes / t.min_bytes_per_thread));
}

// Scales every fold's weight by its scale, in shares of equal bytes over at
// most `threads` threads (the weights' bytes laid end to end and cut evenly,
// so one large weight is split by rows and small ones go together). The
// weights are the pass's own (taken from the store or copied), so whatever
// happens here leaves the store and the graph as they were.
inline void scale_weights(std::vector<Folded>& folds, const FoldThreads& t) {
  std::size_t total = 0;
  for (const Folded& f : folds) total += f.weight.bytes.size();
  const std::size_t shares = share_count(total, t);
  run_shares(shares, [&](std::size_t share) {
    // This share's bytes [from, to) of the weights laid end to end.
    const std::size_t from = total / shares * share + std::min(share, total % shares);
    const std::size_t to = from + total / shares + (share < total % shares ? 1 : 0);
    std::size_t offset = 0;
    for (Folded& f : folds) {
      const std::size_t size = f.weight.bytes.size();
      const std::size_t lo = std::max(from, offset), hi = std::min(to, offset + size);
      if (lo < hi) {
        const std::size_t channels = static_cast<std::size_t>(f.weight.shape[0]);
        const std::size_t elem = f.weight.dtype == DType::float32 ? sizeof(float) : sizeof(double);
        const std::size_t per_channel = size / elem / channels;
        // Element bounds round down on both ends, so consecutive shares tile the weight.
        const std::size_t begin = (lo - offset) / elem, end = hi == offset + size ? size / elem : (hi - offset) / elem;
        if (f.weight.dtype == DType::float32)
          scale_elements(reinterpret_cast<float*>(f.weight.bytes.data()), per_channel,
                         reinterpret_cast<const float*>(f.scale.data()), begin, end);
        else
          scale_elements(reinterpret_cast<double*>(f.weight.bytes.data()), per_channel,
                         reinterpret_cast<const double*>(f.scale.data()), begin, end);
      }
      offset += size;
    }
  });
}

// Erases constants that lost their last user (get_attr, or a placeholder bound to a weight).
inline void erase_unused_constants(Graph& g, const io::WeightStore& store, std::vector<Node*> nodes) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Node* n = nodes[i];
    if (!n || n->erased() || n->num_users() != 0 || !constant_name(store, n)) continue;
    for (std::size_t j = i + 1; j < nodes.size(); ++j)
      if (nodes[j] == n) nodes[j] = nullptr;  // listed twice (one weight in two roles)
    g.erase_node(n);
  }
}

// One pair to fold, everything read before the graph is touched.
struct Plan {
  BatchNormCall bn;           // bn.node: the batch-norm (call_function or call_module)
  Node* conv = nullptr;
  std::optional<ConvCall> call;  // the functional/aten conv; empty for the module form
  ArgList module_conv_args;      // module form: stride, padding, dilation, groups
  int dims = 2;
  FoldInputs inputs;
  std::vector<Node*> constants;  // the nodes whose values are folded in
  std::string conv_weight_name;
  Node* conv_weight_node = nullptr;  // function form: the constant node of the conv weight
};

// How many nodes read each weight, counted once before the first rewrite: a
// get_attr or placeholder names its weight, and a call_module (or a get_attr of
// a module) reads every weight under its path. The rewrites only drop readers
// of existing weights, so the counts stay an upper bound.
class WeightReaders {
 public:
  explicit WeightReaders(const Graph& g) {
    for (const Node* n : g.nodes())
      if (n->op() == OpKind::get_attr || n->op() == OpKind::placeholder || n->op() == OpKind::call_module)
        ++by_target_[std::string(n->target_name())];
  }
  int count(std::string_view weight) const {
    int c = 0;
    for (std::size_t end = weight.find('.');; end = weight.find('.', end + 1)) {
      const auto it = by_target_.find(weight.substr(0, end));
      if (it != by_target_.end()) c += it->second;
      if (end == std::string_view::npos) return c;
    }
  }

 private:
  std::map<std::string, int, std::less<>> by_target_;
};

// Whether the plan's conv weight is read by its conv alone, so the fold may
// scale its storage in place: the rewrite leaves nothing that refers to it.
inline bool conv_weight_private(const Plan& p, const WeightReaders& readers) {
  if (p.conv_weight_node && p.conv_weight_node->num_users() != 1) return false;
  return readers.count(p.conv_weight_name) == 1;
}

inline constexpr const char* kNoWeights = "the caller gave no weights to fold";

// The structural conditions shared by both forms.
inline bool pair_is_private(const Node* conv, const BatchNormCall& bn, std::string& why) {
  if (conv->num_users() != 1) why = "the output of " + conv->name() + " has other users";
  else if (!only_output_used(bn)) why = "the batch statistics of " + bn.node->name() + " are read";
  return why.empty();
}

inline std::optional<Plan> plan_function_form(io::WeightStore* weights, Node* n, std::string& why) {
  const auto bn = inference_batch_norm_call(n);
  if (!bn) return std::nullopt;
  const auto conv = conv_call(bn->input);
  if (!conv || !pair_is_private(conv->node, *bn, why)) return std::nullopt;
  if (!weights) {
    why = kNoWeights;
    return std::nullopt;
  }
  io::WeightStore& store = *weights;
  Plan p;
  p.bn = *bn;
  p.conv = conv->node;
  p.call = conv;
  p.inputs.eps = bn->eps;
  const std::pair<Node*, const io::WeightTensor**> wanted[] = {
      {conv->weight, &p.inputs.conv_weight}, {conv->bias, &p.inputs.conv_bias}, {bn->weight, &p.inputs.bn_weight},
      {bn->bias, &p.inputs.bn_bias},        {bn->running_mean, &p.inputs.mean}, {bn->running_var, &p.inputs.var}};
  for (auto [node, slot] : wanted) {
    if (!node) continue;
    const auto name = constant_name(store, node);
    if (!name) {
      why = "node " + node->name() + " is not a constant (a get_attr or a placeholder bound to a weight)";
      return std::nullopt;
    }
    *slot = store.find(*name);
    p.constants.push_back(node);
    if (node == conv->weight) p.conv_weight_name = *name, p.conv_weight_node = node;
  }
  return p;
}

inline std::optional<Plan> plan_module_form(io::WeightStore* weights, Graph& g, Node* n, std::string& why) {
  const auto pair = module_conv_bn(g, n, why);
  if (!pair) return std::nullopt;
  Plan p;
  p.bn.node = n;
  p.bn.input = pair->conv;
  p.conv = pair->conv;
  p.dims = pair->dims;
  p.module_conv_args = pair->conv_args;
  if (!pair_is_private(p.conv, p.bn, why)) return std::nullopt;
  if (!weights) {
    why = kNoWeights;
    return std::nullopt;
  }
  io::WeightStore& store = *weights;
  p.inputs.eps = pair->eps;
  const std::string cpath(p.conv->target_name()), bpath(n->target_name());
  p.conv_weight_name = cpath + ".weight";
  p.inputs.conv_weight = store.find(p.conv_weight_name);
  p.inputs.conv_bias = store.find(cpath + ".bias");
  p.inputs.mean = store.find(bpath + ".running_mean");
  p.inputs.var = store.find(bpath + ".running_var");
  p.inputs.bn_weight = store.find(bpath + ".weight");
  p.inputs.bn_bias = store.find(bpath + ".bias");
  if (!p.inputs.conv_weight || !p.inputs.mean || !p.inputs.var) {
    why = "no weights " + cpath + ".weight, " + bpath + ".running_mean and " + bpath + ".running_var";
    return std::nullopt;
  }
  return p;
}

inline Node* add_constant(Graph& g, io::WeightStore& store, const std::string& base, io::WeightTensor t) {
  const TensorMeta meta = meta_of(t);
  const std::string name = store.create(base, std::move(t));
  return g.get_attr(name, meta);
}

inline void apply_plan(Graph& g, io::WeightStore& store, Plan& p, Folded folded) {
  Node* conv = p.conv;
  Node* weight;
  Node* bias;
  {
    auto guard = g.inserting_before(conv);
    weight = add_constant(g, store, conv->name() + "_folded_weight", std::move(folded.weight));
    bias = add_constant(g, store, conv->name() + "_folded_bias", std::move(folded.bias));
  }
  if (p.call) {
    if (conv->args().size() > p.call->weight_pos) conv->set_arg(p.call->weight_pos, Arg(weight));
    else conv->set_kwarg("weight", Arg(weight));
    if (conv->args().size() > p.call->bias_pos) conv->set_arg(p.call->bias_pos, Arg(bias));
    else if (conv->args().size() == p.call->bias_pos && !conv->kwargs().contains("bias")) {
      ArgList args = conv->args().to_list();
      args.push_back(Arg(bias));
      conv->set_args(std::move(args));
    } else {
      conv->set_kwarg("bias", Arg(bias));
    }
    replace_batch_norm(g, p.bn, conv);
  } else {
    Node* call;
    {
      auto guard = g.inserting_before(conv);
      ArgList args{conv->args()[0], Arg(weight), Arg(bias)};  // an earlier pair may have replaced the input
      for (const Arg& a : p.module_conv_args) args.push_back(a);
      call = g.call_function(OpRef("torch.nn.functional.conv" + std::to_string(p.dims) + "d"), std::move(args));
    }
    call->meta = conv->meta;
    replace_batch_norm(g, p.bn, call);
    if (conv->num_users() == 0) g.erase_node(conv);
  }
  erase_unused_constants(g, store, p.constants);
}

}  // namespace conv_bn_detail

// The pass: every foldable pair, all decided from the graph before the first
// rewrite (each pair's nodes are its own, so no rewrite changes another's
// decision), then the weights scaled (over threads, see FoldThreads), then the
// rewrites. Returns whether the graph changed.
inline bool fuse_conv_bn(Graph& g, PassContext& ctx) {
  namespace d = conv_bn_detail;
  const d::FoldThreads threads = d::fold_threads(ctx.options);
  // Module calls and inference batch-norm calls in graph order, found through
  // the graph's index of targets (a graph without them is not walked).
  std::vector<Node*> candidates = g.find_nodes(OpKind::call_module, std::nullopt, /*sorted=*/false);
  for (std::size_t i = 0; i < kBatchNormTargets; ++i)
    g.for_each_node(OpKind::call_function, OpRef(batch_norm_target(i)), [&](Node* n) {
      if (inference_batch_norm_call(n)) candidates.push_back(n);
    });
  std::sort(candidates.begin(), candidates.end(), [](const Node* a, const Node* b) { return a->is_before(*b); });
  std::vector<d::Plan> plans;
  std::vector<d::Folded> folds;
  for (Node* n : candidates) {
    std::string why;
    std::optional<d::Plan> plan = n->op() == OpKind::call_module ? d::plan_module_form(ctx.weights, g, n, why)
                                                                  : d::plan_function_form(ctx.weights, n, why);
    std::optional<d::Folded> folded;
    if (plan) folded = d::prepare_fold(plan->inputs, why);
    if (!folded) {
      if (why == d::kNoWeights) ctx.counters.increment("fuse_conv_bn_no_weights");
      if (ctx.log && !why.empty()) *ctx.log << "fuse_conv_bn: " << n->name() << " left: " << why << "\n";
      continue;
    }
    plans.push_back(std::move(*plan));
    folds.push_back(std::move(*folded));
  }
  if (plans.empty()) return false;
  // Each conv weight's storage: its own, taken from the store, when nothing
  // else reads it (no copy of the model's largest weights), else a copy. A
  // taken weight still comes from its file, so until the rewrites below the
  // store holds the same values.
  const d::WeightReaders readers(g);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    std::optional<io::WeightTensor> taken;
    if (d::conv_weight_private(plans[i], readers)) taken = ctx.weights->take(plans[i].conv_weight_name);
    if (taken) folds[i].weight = std::move(*taken);  // inputs.conv_weight dangles now
    else folds[i].weight = *plans[i].inputs.conv_weight;
  }
  d::scale_weights(folds, threads);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    d::apply_plan(g, *ctx.weights, plans[i], std::move(folds[i]));
    ctx.counters.increment("fuse_conv_bn");
  }
  return true;
}

}  // namespace kiln::pre_grad
