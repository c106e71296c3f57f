#pragma once
// einsum_to_pointwise_pass (Inductor's split_cat.py): a two-operand einsum of
// the form "abc,abcd->abd" whose result some add reads becomes
// (x.unsqueeze(-1) * w).sum(-2), which a pointwise fusion can take in. Counts
// `einsum_to_pointwise_pass`.
//
// Inductor's check reads only the equation's letters at those places. kiln
// also asks that the four letters differ (a repeated one is a diagonal or a
// trace, which the pointwise form does not compute) and that both operands
// have the sizes the equation gives them, without broadcasting; an equation
// of that form that fails these counts `einsum_to_pointwise_pass_skipped`.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::split_cat {

namespace einsum_detail {

KILN_DECLARE_OP(functional_einsum, "torch.functional.einsum");
KILN_DECLARE_OP(torch_einsum, "torch.einsum");

inline std::string strip(std::string s) {
  const auto b = s.find_first_not_of(' ');
  const auto e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
// The three subscripts of "x,w->out", or nothing when the equation has another form.
inline std::optional<std::vector<std::string>> subscripts(const std::string& equation) {
  const auto arrow = equation.find("->");
  if (arrow == std::string::npos) return std::nullopt;
  const std::string inputs = equation.substr(0, arrow);
  const auto comma = inputs.find(',');
  if (comma == std::string::npos || inputs.find(',', comma + 1) != std::string::npos) return std::nullopt;
  const std::string out = equation.substr(arrow + 2);
  if (out.find(',') != std::string::npos || out.find("->") != std::string::npos) return std::nullopt;
  return std::vector<std::string>{strip(inputs.substr(0, comma)), strip(inputs.substr(comma + 1)), strip(out)};
}
// Inductor's match_einsum_strings: "abc,abcd->abd" by position.
inline bool has_pointwise_form(const std::vector<std::string>& s) {
  if (s[0].size() != 3 || s[1].size() != 4 || s[2].size() != 3) return false;
  return s[0].substr(0, 2) == s[1].substr(0, 2) && s[1].substr(0, 2) == s[2].substr(0, 2) && s[0][2] == s[1][2] &&
         s[1][3] == s[2][2];
}
inline bool letters_distinct(const std::vector<std::string>& s) {
  const std::string l{s[1][0], s[1][1], s[1][2], s[1][3]};
  for (std::size_t i = 0; i < l.size(); ++i)
    for (std::size_t k = i + 1; k < l.size(); ++k)
      if (l[i] == l[k]) return false;
  return true;
}
inline bool read_by_add(const Node& n) {
  for (const Node* u : n.user_list())
    if (u->is_call(pyop::add) || (u->op() == OpKind::call_method && u->target_name() == "add")) return true;
  return false;
}

}  // namespace einsum_detail

inline PatternMatcherPass make_einsum_to_pointwise_pass(std::shared_ptr<Counters*> counters) {
  namespace d = detail;
  namespace e = einsum_detail;
  PatternMatcherPass pass("einsum_to_pointwise_pass");
  auto count = [counters](const std::string& name) {
    if (*counters) (*counters)->increment(name);
  };
  pass.register_pattern(
      pattern::CallFunctionVarArgs({e::functional_einsum, e::torch_einsum}, pattern::MULTIPLE),
      [count](auto& m, Graph& g, Node*) {
        Node* node = m.nodes()[0];
        if (node->args().size() != 3 || !node->kwargs().empty()) return;
        const auto* equation = node->args()[0].get_if<std::string>();
        Node* x = node->args()[1].node();
        Node* w = node->args()[2].node();
        const TensorMeta* xt = d::tensor_of(x);
        const TensorMeta* wt = d::tensor_of(w);
        const TensorMeta* out = d::tensor_of(node);
        if (!equation || !xt || !wt || !out || !e::read_by_add(*node)) return;
        const auto s = e::subscripts(*equation);
        if (!s || !e::has_pointwise_form(*s)) return;
        // x [a,b,c] and w [a,b,c,d] exactly, all static, one dtype.
        const bool shapes_agree = d::all_static(*xt) && d::all_static(*wt) && xt->rank() == 3 && wt->rank() == 4 &&
                                  xt->shape[0] == wt->shape[0] && xt->shape[1] == wt->shape[1] &&
                                  xt->shape[2] == wt->shape[2] && xt->dtype == wt->dtype && out->dtype == xt->dtype &&
                                  out->shape == std::vector<Dim>{xt->shape[0], xt->shape[1], wt->shape[3]};
        if (!e::letters_distinct(*s) || !shapes_agree) {
          count("einsum_to_pointwise_pass_skipped");
          return;
        }
        Node* sum;
        {
          auto guard = g.inserting_before(node);
          Node* unsqueezed = g.call_function(torch::unsqueeze, {Arg(x), Arg(-1)});
          TensorMeta u = *xt;
          u.shape.push_back(Dim(std::int64_t{1}));
          u.stride.reset();
          unsqueezed->meta.val = MetaVal(u);
          Node* product = g.call_function(torch::mul, {Arg(unsqueezed), Arg(w)});
          TensorMeta p = *wt;
          p.stride.reset();
          product->meta.val = MetaVal(p);
          sum = g.call_function(torch::sum, {Arg(product), Arg(-2)});
          sum->meta = node->meta;
        }
        node->replace_all_uses_with(sum);
        g.erase_node(node);
        count("einsum_to_pointwise_pass");
      });
  return pass;
}

}  // namespace kiln::split_cat
