#pragma once
// numpy_compat_normalization (Inductor's misc_patterns.py, run first in
// pre_grad_passes): keyword arguments spelled the NumPy way become the torch
// names, `axis`→`dim`, `keepdims`→`keepdim`, `x`/`a`/`x1`→`input`,
// `x2`→`other`, on call_function nodes of torch callables (never aten ops).
// Inductor renames a NumPy name only where the callable's signature has the
// torch parameter; kiln reads that from a table of torch functions (below),
// and leaves callables it does not list. Each node changed counts
// `numpy_compat_normalization`, as in Inductor. A node that gives both
// spellings of one parameter is left (Python would refuse the call).
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"

namespace kiln::pre_grad {

namespace detail {

// Which of the torch parameters dim, keepdim, input, other a callable has.
enum NumpyParams : unsigned { kDim = 1, kKeepdim = 2, kInput = 4, kOther = 8 };

inline unsigned torch_params_of(std::string_view target) {
  static const std::unordered_map<std::string_view, unsigned> table = [] {
    std::unordered_map<std::string_view, unsigned> t;
    auto add = [&](unsigned params, std::initializer_list<std::string_view> names) {
      for (std::string_view n : names) t[n] |= params;
    };
    // Reductions: input, dim, keepdim.
    add(kInput | kDim | kKeepdim,
        {"sum", "mean", "nansum", "nanmean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "std", "var",
         "std_mean", "var_mean", "logsumexp", "any", "all", "median", "nanmedian", "mode", "norm", "kthvalue",
         "quantile", "nanquantile", "count_nonzero"});
    // Along a dim: input, dim.
    add(kInput | kDim,
        {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "softmax", "log_softmax", "squeeze", "unsqueeze",
         "unbind", "chunk", "narrow", "select", "index_select", "gather", "sort", "argsort", "topk", "diff",
         "take_along_dim", "tensor_split", "flip", "roll", "renorm", "normalize", "glu"});
    add(kInput | kDim, {"nn.functional.softmax", "nn.functional.log_softmax", "nn.functional.normalize",
                        "nn.functional.glu", "nn.functional.softmin"});
    // Lists of tensors along a dim.
    add(kDim, {"cat", "concat", "concatenate", "stack", "split"});
    // Binary: input, other.
    add(kInput | kOther,
        {"add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "remainder",
         "fmod", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "greater_equal", "less_equal", "not_equal",
         "maximum", "minimum", "fmax", "fmin", "atan2", "arctan2", "hypot", "copysign", "logical_and", "logical_or",
         "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "matmul", "where", "isclose", "allclose",
         "equal", "cross", "dist", "ldexp", "heaviside", "nextafter", "xlogy", "logaddexp", "logaddexp2", "inner",
         "kron", "tensordot"});
    // Unary and other single-tensor functions: input.
    add(kInput, {"abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin",
                 "cos", "tan", "tanh", "sigmoid", "relu", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
                 "clamp", "clip", "square", "transpose", "permute", "reshape", "flatten", "t", "numel",
                 "nan_to_num", "pow", "mm", "bmm", "dot", "outer", "erf", "isnan", "isinf", "isfinite",
                 "nonzero", "clone", "tile", "broadcast_to", "diagonal", "tril", "triu", "trace", "cumulative_trapezoid",
                 "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.linear",
                 "nn.functional.layer_norm", "nn.functional.dropout", "nn.functional.pad"});
    return t;
  }();
  if (!target.starts_with("torch.")) return 0;
  target.remove_prefix(6);
  auto it = table.find(target);
  return it == table.end() ? 0 : it->second;
}

// The torch name of a NumPy keyword, when the callable has that parameter.
inline std::string_view torch_name_of(std::string_view numpy_kw, unsigned params) {
  if (numpy_kw == "axis" && (params & kDim)) return "dim";
  if (numpy_kw == "keepdims" && (params & kKeepdim)) return "keepdim";
  if ((numpy_kw == "x" || numpy_kw == "a" || numpy_kw == "x1") && (params & kInput)) return "input";
  if (numpy_kw == "x2" && (params & kOther)) return "other";
  return {};
}

}  // namespace detail

// Returns how many nodes had keywords renamed.
inline std::size_t numpy_compat_normalization(Graph& g) {
  // Only nodes with keywords, of callables the table lists: looked up once per
  // target, then visited in graph order (renaming rejoins user lists, whose
  // order follows the order the nodes are changed in).
  std::vector<std::pair<Node*, unsigned>> todo;
  g.for_each_target(OpKind::call_function, [&](OpRef target) {
    const unsigned params = detail::torch_params_of(target.name);
    if (!params || g.count_nodes_with_kwargs(OpKind::call_function, target) == 0) return;
    g.for_each_node(OpKind::call_function, target, [&](Node* n) {
      if (!n->kwargs().empty()) todo.emplace_back(n, params);
    });
  });
  std::sort(todo.begin(), todo.end(), [](const auto& a, const auto& b) { return a.first->is_before(*b.first); });
  std::size_t changed = 0;
  for (const auto& [n, params] : todo) {
    ArgDict renamed;
    bool any = false, clash = false;
    for (const auto& [key, value] : n->kwargs()) {
      std::string_view to = detail::torch_name_of(key, params);
      if (!to.empty()) any = true;
      const std::string name(to.empty() ? std::string_view(key) : to);
      if (renamed.contains(name)) clash = true;
      renamed.set(name, value);
    }
    if (!any || clash) continue;
    n->set_kwargs(std::move(renamed));
    ++changed;
  }
  return changed;
}

}  // namespace kiln::pre_grad
