#pragma once
// woq_int8: Inductor 2.11's weight-only int8 lowerings (_register_woq_lowerings
// and _register_int8_woq_concat_linear_pattern in fx_passes/quantization.py).
// `F.linear(x, w.to(x.dtype)) * scales` with a bfloat16 x, an int8 [N, K]
// weight and bfloat16 scales becomes aten._weight_int8pack_mm(x as [-1, K], w,
// scales), reshaped back. Inductor's four forms, rooted at the mul:
//   1. mul(reshape(mm(reshape(x), permute(convert(w)))), scales)  rank > 2 through mm
//   2. mul(reshape(mm(x, permute(convert(w)))), scales)
//   3. mul(bmm(expand(x), expand(permute(convert(w)))), scales)  rank 3 through bmm
//   4. mul(mm(x, convert(permute(w))), scales)                   w.t().to(x.dtype)
// each as Inductor's decomposition spells it or as torch's own trace does
// (t for permute, _to_copy(dtype=) for convert_element_type, view, _unsafe_view
// and _reshape_alias for reshape), and, with {"concat_linear": true} (Inductor's
// config.cpp.enable_concat_linear, off by default as there), three weights
// concatenated: mul(mm(x, cat([convert(permute(w1)), .. w3], 1)), scales) into
// one _weight_int8pack_mm on cat([w1, w2, w3], 0).
// Inductor checks only the dtypes; kiln also leaves a match alone where the
// rewrite would change the result (a permute that is not a transpose, a convert
// to another dtype than x's, scales that are not [N], an expand that broadcasts
// x, a reshape that moves the columns) and counts it as woq_skipped.
// Counters: woq_matcher_count, woq_matcher_nodes (the matched nodes, one for one
// with Inductor's patterns).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/passes/split_cat/common.hpp"
#include "kiln/pattern/runtime_matcher.hpp"
#include "kiln/pattern/runtime_pattern.hpp"

namespace kiln {

namespace woq_detail {

using pattern::RuntimePattern;
using Ref = RuntimePattern::Ref;
using namespace split_cat::node_helpers;

// The spellings of one pattern element; each builds the element over `input`.
using Spelling = Ref (*)(RuntimePattern&, Ref input);

inline Ref reshape_2arg(RuntimePattern& p, Ref in) {
  return p.call_function({aten::reshape, aten::view, aten::unsafe_view}, {in, p.arg()});
}
inline Ref reshape_alias(RuntimePattern& p, Ref in) { return p.call_function(aten::reshape_alias, {in, p.arg(), p.arg()}); }
inline Ref permute(RuntimePattern& p, Ref in) { return p.call_function(aten::permute, {in, p.arg()}); }
inline Ref transpose_t(RuntimePattern& p, Ref in) { return p.call_function(aten::t, {in}); }
inline Ref convert(RuntimePattern& p, Ref in) { return p.call_function(prims::convert_element_type, {in, p.arg()}); }
inline Ref to_copy(RuntimePattern& p, Ref in) { return p.call_function(aten::to_copy, {in}, {{"dtype", p.arg()}}); }

inline constexpr Spelling kReshapes[] = {reshape_2arg, reshape_alias};
inline constexpr Spelling kTransposes[] = {permute, transpose_t};
inline constexpr Spelling kConverts[] = {convert, to_copy};

// Inductor's four patterns in every spelling, each with its form's name.
struct WoqPattern {
  RuntimePattern pattern;
  std::string name;
};
inline std::vector<WoqPattern> woq_patterns() {
  std::vector<WoqPattern> out;
  const auto add = [&](RuntimePattern& p, Ref product, std::string name) {
    p.set_output(p.call_function(aten::mul_Tensor, {product, p.keyword_arg("scales")}));
    out.push_back({std::move(p), std::move(name)});
  };
  for (Spelling t : kTransposes)
    for (Spelling c : kConverts) {
      for (Spelling r_in : kReshapes)
        for (Spelling r_out : kReshapes) {
          RuntimePattern p;
          const Ref x = r_in(p, p.keyword_arg("x"));
          const Ref w = t(p, c(p, p.keyword_arg("weight")));
          add(p, r_out(p, p.call_function(aten::mm, {x, w})), "woq_int8: mul(reshape(mm(reshape(x), permute(convert(w)))), scales)");
        }
      for (Spelling r_out : kReshapes) {
        RuntimePattern p;
        const Ref w = t(p, c(p, p.keyword_arg("weight")));
        add(p, r_out(p, p.call_function(aten::mm, {p.keyword_arg("x"), w})), "woq_int8: mul(reshape(mm(x, permute(convert(w)))), scales)");
      }
      {
        RuntimePattern p;
        const Ref x = p.call_function(aten::expand, {p.keyword_arg("x"), p.arg()});
        const Ref w = p.call_function(aten::expand, {t(p, c(p, p.keyword_arg("weight"))), p.arg()});
        add(p, p.call_function(aten::bmm, {x, w}), "woq_int8: mul(bmm(expand(x), expand(permute(convert(w)))), scales)");
      }
      {
        RuntimePattern p;
        const Ref w = c(p, t(p, p.keyword_arg("weight")));
        add(p, p.call_function(aten::mm, {p.keyword_arg("x"), w}), "woq_int8: mul(mm(x, convert(permute(w))), scales)");
      }
    }
  return out;
}

// The concat-linear form: three weights, each convert(permute(w)), cat on dim 1.
inline std::vector<WoqPattern> concat_linear_patterns() {
  std::vector<WoqPattern> out;
  for (Spelling t : kTransposes)
    for (Spelling c : kConverts) {
      RuntimePattern p;
      std::vector<Ref> weights;
      for (const char* name : {"w1", "w2", "w3"}) weights.push_back(c(p, t(p, p.keyword_arg(name))));
      const Ref cat = p.call_function(aten::cat, {p.list(std::move(weights)), p.constant(std::int64_t{1})});
      p.set_output(p.call_function(aten::mul_Tensor, {p.call_function(aten::mm, {p.keyword_arg("x"), cat}), p.keyword_arg("scales")}));
      out.push_back({std::move(p), "woq_int8: mul(mm(x, cat([convert(permute(w1)), .. w3], 1)), scales)"});
    }
  return out;
}

inline bool is_dtype(const Node* n, DType d) {
  const TensorMeta* t = tensor_of(n);
  return t && t->dtype == d;
}

// Inductor's _is_valid_woq_optimization_pattern (and its concat-linear twin):
// bfloat16 activation and scales, int8 weights.
inline bool inductor_valid(const pattern::RuntimeMatch& m) {
  if (!is_dtype(m.node("x"), DType::bfloat16) || !is_dtype(m.node("scales"), DType::bfloat16)) return false;
  for (const char* w : {"weight", "w1", "w2", "w3"})
    if (m.binds(w) && !is_dtype(m.node(w), DType::int8)) return false;
  return true;
}

// The dtype a convert or _to_copy asks for.
inline std::optional<DType> converted_to(const Node* n) {
  const Arg* a = n->target() == aten::to_copy ? n->kwargs().find("dtype") : (n->args().size() > 1 ? &n->arg(1) : nullptr);
  const auto* d = a ? a->get_if<DType>() : nullptr;
  return d ? std::optional<DType>(*d) : std::nullopt;
}

// Whether a permute or t swaps the two dims of a 2-d tensor.
inline bool is_transpose(const Node* n) {
  if (n->target() == aten::t) return true;
  const auto* axes = n->args().size() > 1 ? n->arg(1).get_if<ArgList>() : nullptr;
  if (!axes || axes->size() != 2) return false;
  const auto dim = [&](std::size_t i) { return int_of(&(*axes)[i]); };
  const auto a = dim(0), b = dim(1);
  return a && b && (*a == 1 || *a == -1) && (*b == 0 || *b == -2);
}

// Why the rewrite would change the result, or "" where it would not. `weights`
// are the int8 [N_i, K] weights in the order the product's columns take them.
inline std::string unsafe_reason(const pattern::RuntimeMatch& m, const std::vector<Node*>& weights) {
  const Node* x = m.node("x");
  const DType x_dtype = tensor_of(x)->dtype;
  std::int64_t n_total = 0, k = -1;
  for (Node* w : weights) {
    const auto ws = static_shape(w);
    if (!ws || ws->size() != 2) return "weight " + w->name() + " is not a 2-d tensor of known shape";
    if (k >= 0 && (*ws)[1] != k) return "the weights have different in-features";
    k = (*ws)[1];
    n_total += (*ws)[0];
  }
  for (Node* n : m.nodes()) {
    if ((n->target() == aten::permute || n->target() == aten::t) && !is_transpose(n))
      return "node " + n->name() + " is not a transpose [1, 0]";
    if ((n->target() == prims::convert_element_type || n->target() == aten::to_copy) && converted_to(n) != x_dtype)
      return "node " + n->name() + " converts the weight to another dtype than x's";
  }
  const auto xs = static_shape(x);
  const auto ss = static_shape(m.node("scales"));
  const auto out = static_shape(m.nodes().back());
  if (!xs || xs->size() < 2 || xs->back() != k) return "x is not [.., " + std::to_string(k) + "] of known shape";
  if (!ss || ss->size() != 1 || (*ss)[0] != n_total) return "scales is not [" + std::to_string(n_total) + "]";
  // The product, as the graph reshapes it, must hold x's rows by the weights'
  // columns in its last dim (which also rules out an expand that broadcasts x).
  std::int64_t rows = 1, out_numel = 1;
  for (std::size_t i = 0; i + 1 < xs->size(); ++i) rows *= (*xs)[i];
  if (out)
    for (std::int64_t s : *out) out_numel *= s;
  if (!out || out->back() != n_total || out_numel != rows * n_total)
    return "the product is not x's rows by " + std::to_string(n_total) + " columns";
  return "";
}

// The matched weights, in column order.
inline std::vector<Node*> matched_weights(const pattern::RuntimeMatch& m) {
  if (m.binds("weight")) return {m.node("weight")};
  return {m.node("w1"), m.node("w2"), m.node("w3")};
}

inline MetaVal tensor_meta(const Shape& shape, DType d) {
  TensorMeta t;
  for (std::int64_t s : shape) t.shape.emplace_back(s);
  t.dtype = d;
  return t;
}

// Replaces the matched mul by _weight_int8pack_mm on x as [-1, K], reshaped to the mul's shape.
inline void lower(const pattern::RuntimeMatch& m, Graph& g, Node* root) {
  Node* x = m.node("x");
  const std::vector<Node*> weights = matched_weights(m);
  const Shape xs = *static_shape(x), out = *static_shape(root);
  const DType d = tensor_of(x)->dtype;
  const std::int64_t k = xs.back(), n = out.back();
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < xs.size(); ++i) rows *= xs[i];
  Node* x2 = xs.size() == 2 ? x : call_with_meta(g, aten::reshape, {Arg(x), ArgList{std::int64_t{-1}, k}}, tensor_meta({rows, k}, d));
  Arg w = Arg(weights[0]);
  if (weights.size() > 1) {
    ArgList list;
    for (Node* wi : weights) list.push_back(Arg(wi));
    w = Arg(call_with_meta(g, aten::cat, {Arg(std::move(list)), std::int64_t{0}}, tensor_meta({n, k}, DType::int8)));
  }
  Node* y = call_with_meta(g, aten::weight_int8pack_mm, {Arg(x2), w, Arg(m.node("scales"))}, tensor_meta({rows, n}, d));
  if (out != Shape{rows, n}) {
    ArgList shape;
    for (std::int64_t s : out) shape.push_back(s);
    y = call_with_meta(g, aten::reshape, {Arg(y), Arg(std::move(shape))}, root->meta.val);
  }
  root->replace_all_uses_with(y);
}

}  // namespace woq_detail

// Registers the woq patterns into `pass` (with the concat-linear form when
// `concat_linear`); `*counters`, read when a match is applied, gets the counts.
inline void register_woq_int8_patterns(PatternMatcherPass& pass, std::shared_ptr<Counters*> counters, bool concat_linear = false) {
  namespace wd = woq_detail;
  // Several forms can match one mul (form 2 reads form 1's reshaped input as
  // its x), and they are tried one after another: a mul is skipped once.
  auto last_skipped = std::make_shared<std::pair<const Node*, std::string>>();
  const auto check = [counters, last_skipped](const pattern::RuntimeMatch& m) -> CheckResult {
    if (!wd::inductor_valid(m)) return reject("not a bfloat16 activation with int8 weights and bfloat16 scales");
    if (std::string why = wd::unsafe_reason(m, wd::matched_weights(m)); !why.empty()) {
      const Node* root = m.nodes().back();
      if (*counters && (last_skipped->first != root || last_skipped->second != root->name()))
        (*counters)->increment("woq_skipped", 1);
      *last_skipped = {root, root->name()};
      return reject(why);
    }
    return true;
  };
  const auto handler = [counters](pattern::RuntimeMatch& m, Graph& g, Node* root) {
    wd::lower(m, g, root);
    const auto nodes = static_cast<std::int64_t>(m.nodes().size());
    m.erase_nodes();
    if (*counters) {
      (*counters)->increment("woq_matcher_count", 1);
      (*counters)->increment("woq_matcher_nodes", nodes);
    }
  };
  std::vector<wd::WoqPattern> patterns = wd::woq_patterns();
  if (concat_linear)
    for (auto& p : wd::concat_linear_patterns()) patterns.push_back(std::move(p));
  for (auto& p : patterns) pass.register_runtime_pattern(std::move(p.pattern), handler, check, PatternOptions{.name = std::move(p.name)});
}

// Applies the woq lowerings once over `g`; returns the number of products replaced.
inline std::size_t woq_int8(Graph& g, Counters* counters = nullptr, bool concat_linear = false) {
  PatternMatcherPass pass("woq_int8");
  auto slot = std::make_shared<Counters*>(counters);
  register_woq_int8_patterns(pass, slot, concat_linear);
  return pass.apply(g, counters);
}

inline void register_woq_int8_pass(PassRegistry& registry) {
  registry.add(Pass{"woq_int8",
                    "weight-only int8: F.linear(x, w.to(x.dtype)) * scales with a bfloat16 x and an int8 weight -> "
                    "aten._weight_int8pack_mm ({\"concat_linear\": true} also three weights concatenated)",
                    [](Graph& g, PassContext& ctx) {
                      bool concat = false;
                      if (const auto it = ctx.options.find("concat_linear"); it != ctx.options.end()) {
                        if (!it->is_boolean())
                          throw Error("pass woq_int8: option concat_linear must be true or false, got " + it->dump());
                        concat = it->get<bool>();
                      }
                      return woq_int8(g, &ctx.counters, concat) > 0;
                    },
                    {"concat_linear"}});
}

}  // namespace kiln
