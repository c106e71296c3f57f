#pragma once
// relu_nan_to_num (a pre-dispatch pass Inductor's pipeline names).
//
// What is correct here: nan_to_num(relu(x)) with default arguments is NOT
// relu(x). relu keeps NaN (relu(NaN) is NaN) and +inf, and nan_to_num turns
// them into 0 and the dtype's largest finite value; only -inf and finite
// values come out of relu already as nan_to_num leaves them. So the
// nan_to_num may be dropped only where its input is known to hold no NaN and
// no infinity: relu of a value that a nan_to_num (with finite, default
// posinf/neginf) produced, directly or through further relus, or a tensor of
// an integer or bool dtype (which has neither). Everywhere else the pattern
// is declined and counted `relu_nan_to_num_skipped`.
#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

namespace detail {
inline bool is_relu(const Node& n) { return is_any(n, {aten::relu, torch::relu, F::relu}) || is_method(n, "relu"); }
inline bool is_nan_to_num(const Node& n) {
  return is_any(n, {ops::nan_to_num, torch::nan_to_num}) || is_method(n, "nan_to_num");
}
// nan_to_num whose posinf and neginf are left to their defaults (the dtype's
// finite extremes) and whose nan, if given, is a number: its result is finite.
inline bool is_finite_nan_to_num(const Node& n) {
  if (!is_nan_to_num(n) || n.args().size() > 2) return false;
  for (std::string_view k : {"posinf", "neginf"})
    if (const Arg* a = n.kwargs().find(k); a && !a->is_none()) return false;
  const Arg* nan = arg_value(n, 1, "nan");
  return !nan || nan->is_none() || nan->get_if<double>() || nan->get_if<std::int64_t>();
}
// Whether `n`'s values are known to be finite (no NaN, no infinity).
inline bool known_finite(const Node* n) {
  for (int depth = 0; n && depth < 64; ++depth) {
    const TensorMeta* t = tensor_of(n);
    if (t && !is_floating_point(t->dtype)) return true;
    if (is_finite_nan_to_num(*n)) return true;
    if (!is_relu(*n) || n->args().empty()) return false;
    n = n->args()[0].node();
  }
  return false;
}
}  // namespace detail

// nan_to_num(relu(x)) (default arguments) becomes relu(x) where x is known
// finite (see above); a nan_to_num of an integer tensor becomes its input.
// Counts `relu_nan_to_num`, or `relu_nan_to_num_skipped` where x may hold NaN
// or infinity.
inline PatternMatcherPass make_relu_nan_to_num_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  PatternMatcherPass pass("relu_nan_to_num");
  auto handler = [count = d::Count{counters}](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    if (!d::is_finite_nan_to_num(*node) || node->args().size() != 1) return;
    if (!node->kwargs().empty()) {
      const Arg* nan = node->kwargs().find("nan");
      if (node->kwargs().size() > 3 || (nan && !nan->is_none() && !(nan->get_if<double>() && *nan->get_if<double>() == 0.0)))
        return;  // only the default arguments
    }
    Node* input = node->args()[0].node();
    const TensorMeta* t = d::tensor_of(input);
    if (!input || !t || !d::tensor_of(node) || t->dtype != d::tensor_of(node)->dtype) return;
    const bool integral = !is_floating_point(t->dtype);
    if (!integral && !d::is_relu(*input)) return;
    if (!integral && !d::known_finite(input)) {
      count("relu_nan_to_num_skipped");
      return;
    }
    node->replace_all_uses_with(input);
    g.erase_node(node);
    count("relu_nan_to_num");
  };
  pass.register_pattern(pattern::CallFunctionVarArgs({ops::nan_to_num, torch::nan_to_num}, pattern::MULTIPLE), handler);
  pass.register_pattern(pattern::CallMethodVarArgs("nan_to_num", pattern::MULTIPLE), handler);  // x.nan_to_num()
  return pass;
}

}  // namespace kiln::predispatch
