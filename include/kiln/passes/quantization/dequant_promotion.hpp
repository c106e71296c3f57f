#pragma once
// dequant_promotion, the first of Inductor 2.11's quantization passes
// (_register_dequant_promotion_pass in torch/_inductor/fx_passes/quantization.py,
// pass_number 0, before weight prepack): a per-tensor dequantize of an
// activation, optionally followed by a convert_element_type (int8-mixed-bf16)
// and a reshape, whose last node has several users is copied, so that each user
// reads a chain of its own and can later fuse into a dequant-op-quant form.
// The first user keeps the original chain; the others get copies placed right
// before them. Counters: dequant_promotion_matcher_count (chains promoted) and
// dequant_promotion_matcher_nodes (their nodes, as Inductor counts them: see
// inductor_chain_length).
#include <cstdint>

#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/passes/counters.hpp"
#include "kiln/passes/quantization/inductor_match_count.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"

namespace kiln {

namespace quantization_detail {

// Inductor's get_dequantize_per_tensor_activation_pattern, both overloads.
inline auto dequantize_per_tensor_activation() {
  using namespace pattern;
  return CallFunction({quantized_decomposed::dequantize_per_tensor, quantized_decomposed::dequantize_per_tensor_tensor},
                      kw<"x">, kw<"x_scale">, kw<"x_zp">, kw<"x_quant_min">, kw<"x_quant_max">, kw<"x_dq_dtype">);
}

inline bool is_dequantize_per_tensor(const Node* n) {
  return n && n->op() == OpKind::call_function &&
         (n->target() == quantized_decomposed::dequantize_per_tensor ||
          n->target() == quantized_decomposed::dequantize_per_tensor_tensor);
}

// Inductor matches after decomposing aten.linear: over an input of rank > 2
// each linear reads it through a reshape to 2-D, and CSE merges the reshapes
// of one input, so a dequantize whose users are all such linears ends, for
// Inductor, in one more node (that reshape) than kiln's graph holds.
// Likewise autocast converts a dequantize to bfloat16 once per reader, and CSE
// leaves Inductor one convert that every reader shares: its chain is one node longer.
inline bool read_through_one_convert(const Node* dq) {
  if (!is_dequantize_per_tensor(dq) || dq->num_users() < 2) return false;
  const Arg* dtype = nullptr;
  for (const Node* u : dq->users()) {
    if (u->op() != OpKind::call_function || u->target() != prims::convert_element_type || u->args().size() != 2 ||
        u->arg(0).node() != dq || !u->kwargs().empty())
      return false;
    if (dtype && !(u->arg(1) == *dtype)) return false;
    dtype = &u->arg(1);
  }
  return true;
}

inline std::int64_t inductor_chain_length(const Node* end, std::int64_t matched) {
  if (read_through_one_convert(end)) return matched + 1;
  const TensorMeta* in = end->meta.val.tensor();
  if (end->target() == aten::reshape || !in || in->rank() <= 2) return matched;
  if (!inductor_folds_linear_input(in)) return matched;  // expands instead, which the promotion does not take
  for (const Node* u : end->users())
    if (u->op() != OpKind::call_function || u->target() != aten::linear || u->args().empty() || u->arg(0).node() != end)
      return matched;
  return matched + 1;
}

// Gives `user` its own copy of the chain from `end` up to (not including) the
// dequantize's input, placed right before it, as Inductor's clone_to_new_node does.
inline void copy_chain_for(Graph& g, Node* end, Node* user) {
  const Node* stop = nullptr;
  for (const Node* n = end; n; n = n->args().empty() ? nullptr : n->arg(0).node())
    if (is_dequantize_per_tensor(n)) {
      stop = n->args().empty() ? nullptr : n->arg(0).node();
      break;
    }
  for (Node* source = end; source && source != stop; source = source->arg(0).node()) {
    Node* copy = nullptr;
    {
      auto guard = g.inserting_before(user);
      copy = g.call_function(source->target(), source->args(), source->kwargs());
    }
    copy->meta = source->meta;
    user->replace_input_with(source, copy);
    user = copy;
  }
}

}  // namespace quantization_detail

// Registers the four chains Inductor registers (dequantize; with
// convert_element_type; with reshape; with both) into `pass`; matches are
// counted into `counters` when given.
inline void register_dequant_promotion_patterns(PatternMatcherPass& pass, Counters* counters = nullptr) {
  using namespace pattern;
  namespace qd = quantization_detail;
  const auto promote = [counters](auto& m, Graph& g, Node* end) {
    const std::int64_t nodes = qd::inductor_chain_length(end, static_cast<std::int64_t>(m.nodes().size()));
    const auto users = end->user_list();
    for (std::size_t i = 1; i < users.size(); ++i) qd::copy_chain_for(g, end, users[i]);
    qd::count_inductor_match(counters, "dequant_promotion", nodes, static_cast<std::int64_t>(m.nodes().size()));
  };
  const auto several_users = [](const auto& m) { return m.output_node()->num_users() > 1; };
  const auto dq = qd::dequantize_per_tensor_activation();
  const auto to_dtype = [](auto inner) { return CallFunction(prims::convert_element_type, inner, kw<"autocast_act_dtype">); };
  const auto reshaped = [](auto inner) { return CallFunction(aten::reshape, inner, kw<"act_reshape_size">); };
  pass.register_pattern(reshaped(dq), promote, several_users, PatternOptions{.name = "dequant_promotion: reshape(dequant)"});
  pass.register_pattern(dq, promote, several_users, PatternOptions{.name = "dequant_promotion: dequant"});
  pass.register_pattern(reshaped(to_dtype(dq)), promote, several_users,
                        PatternOptions{.name = "dequant_promotion: reshape(to_dtype(dequant))"});
  pass.register_pattern(to_dtype(dq), promote, several_users, PatternOptions{.name = "dequant_promotion: to_dtype(dequant)"});
}

// Applies dequant promotion once over `g`; returns the number of chains promoted.
inline std::size_t dequant_promotion(Graph& g, Counters* counters = nullptr) {
  PatternMatcherPass pass("dequant_promotion");
  register_dequant_promotion_patterns(pass, counters);
  return pass.apply(g, counters);
}

inline void register_quantization_passes(PassRegistry& registry) {
  registry.add(Pass{"dequant_promotion",
                    "copy a per-tensor dequantize (and its to-dtype and reshape) for each of its users",
                    [](Graph& g, PassContext& ctx) { return dequant_promotion(g, &ctx.counters) > 0; }});
}

}  // namespace kiln
