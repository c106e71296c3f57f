#pragma once
// decompose_mm_pass (Inductor's decompose_mem_bound_mm.py, in its post-grad
// split/cat list): a memory-bound mm, addmm or bmm becomes a broadcast
// multiply and a sum, which a fusing backend turns into one pointwise-and-
// reduce kernel instead of a GEMM call.
//   mm(a, b)        -> sum(unsqueeze(a, 2) * unsqueeze(b, 0), dim=1)
//   addmm(c, a, b)  -> that + c
//   bmm(a, b)       -> sum(unsqueeze(a, 3) * unsqueeze(b, 1), dim=2)
// Equal because (a b)[i, j] = sum_k a[i, k] b[k, j], which is what the
// broadcast product summed over k computes (up to the order of the float
// additions). Counts `decompose_mm`, `decompose_addmm`, `decompose_bmm`.
//
// When: Inductor's thresholds, by the device's policy (option "device":
// "cpu", where kiln executes, by default; "cuda" for the accelerator policy):
//   accelerator: mm/addmm when a.shape[0] >= min_first_dimension_decomposition
//     (10240) and both dims of b < max_other_dimension_decomposition (32);
//     bmm when a.shape[0] >= 10240 and two of m, k, n are < 32.
//   cpu: mm/addmm when a.shape[0] <= cpu_max_first_dimension_decomposition (1)
//     and both dims of b <= cpu_max_other_dimension_decomposition (2048); bmm
//     when both batch sizes are <= 1.
// Shapes must be static and both operands of one dtype (the rewrite keeps
// it). Inductor's addmm pattern ignores beta and alpha and so decomposes
// addmm(c, a, b, beta=2) into a + c; kiln declines any addmm whose beta or
// alpha is not 1 (`decompose_mm_pass_skipped`).
#include <nlohmann/json.hpp>

#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::split_cat {

struct DecomposeMmOptions {
  bool accelerator = false;
  std::int64_t min_first_dimension_decomposition = 10240;
  std::int64_t max_other_dimension_decomposition = 32;
  std::int64_t cpu_max_first_dimension_decomposition = 1;
  std::int64_t cpu_max_other_dimension_decomposition = 2048;

  static DecomposeMmOptions from_json(const nlohmann::json& j) {
    DecomposeMmOptions o;
    if (j.contains("device")) o.accelerator = j.at("device").get<std::string>() != "cpu";
    auto read = [&](const char* key, std::int64_t& v) {
      if (j.contains(key)) v = j.at(key).get<std::int64_t>();
    };
    read("min_first_dimension_decomposition", o.min_first_dimension_decomposition);
    read("max_other_dimension_decomposition", o.max_other_dimension_decomposition);
    read("cpu_max_first_dimension_decomposition", o.cpu_max_first_dimension_decomposition);
    read("cpu_max_other_dimension_decomposition", o.cpu_max_other_dimension_decomposition);
    return o;
  }
  static std::vector<std::string> keys() {
    return {"device", "min_first_dimension_decomposition", "max_other_dimension_decomposition",
            "cpu_max_first_dimension_decomposition", "cpu_max_other_dimension_decomposition"};
  }
  bool should_decompose_mm(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) const {
    if (a.size() != 2 || b.size() != 2) return false;
    if (accelerator)
      return a[0] >= min_first_dimension_decomposition && b[0] < max_other_dimension_decomposition &&
             b[1] < max_other_dimension_decomposition;
    return a[0] <= cpu_max_first_dimension_decomposition && b[0] <= cpu_max_other_dimension_decomposition &&
           b[1] <= cpu_max_other_dimension_decomposition;
  }
  bool should_decompose_bmm(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) const {
    if (a.size() != 3 || b.size() != 3) return false;
    if (accelerator) {
      const int small = int(a[1] < max_other_dimension_decomposition) + int(a[2] < max_other_dimension_decomposition) +
                        int(b[2] < max_other_dimension_decomposition);
      return a[0] >= min_first_dimension_decomposition && small >= 2;
    }
    return a[0] <= cpu_max_first_dimension_decomposition && b[0] <= cpu_max_first_dimension_decomposition;
  }
};

inline PatternMatcherPass make_decompose_mm_pass(std::shared_ptr<Counters*> counters,
                                                 std::shared_ptr<DecomposeMmOptions> options) {
  namespace d = predispatch::detail;
  PatternMatcherPass pass("decompose_mm_pass");
  // sum_k unsqueeze(a, k_dim + 1) * unsqueeze(b, k_dim - 1) over k_dim, placed before `at`.
  auto product_sum = [](Graph& g, Node* at, Node* a, Node* b, const d::Shape& as, const d::Shape& bs) {
    const std::size_t k_dim = as.size() - 1;  // k's position in the broadcast product
    d::Shape ua = as, ub = bs, prod = as;
    ua.push_back(1);
    ub.insert(ub.begin() + static_cast<std::ptrdiff_t>(k_dim - 1), 1);
    prod.push_back(bs.back());
    d::Shape out = prod;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(k_dim));
    const TensorMeta& like = *d::tensor_of(a);
    auto guard = g.inserting_before(at);
    Node* a3 = d::call_with_meta(g, aten::unsqueeze, {Arg(a), Arg(static_cast<std::int64_t>(k_dim + 1))},
                                 d::meta_like(like, ua));
    Node* b3 = d::call_with_meta(g, aten::unsqueeze, {Arg(b), Arg(static_cast<std::int64_t>(k_dim - 1))},
                                 d::meta_like(like, ub));
    Node* p = d::call_with_meta(g, aten::mul_Tensor, {Arg(a3), Arg(b3)}, d::meta_like(like, prod));
    return d::call_with_meta(g, aten::sum_dim_IntList, {Arg(p), Arg(ArgList{Arg(static_cast<std::int64_t>(k_dim))})},
                             d::meta_like(like, out));
  };
  // The two operands' static shapes when they have one dtype.
  auto operands = [](const Node* a, const Node* b) -> std::optional<std::pair<d::Shape, d::Shape>> {
    const auto as = d::static_shape(a), bs = d::static_shape(b);
    if (!as || !bs || d::tensor_of(a)->dtype != d::tensor_of(b)->dtype) return std::nullopt;
    return std::pair{*as, *bs};
  };
  const d::Count count{counters};
  pass.register_pattern(pattern::CallFunctionVarArgs(aten::mm), [=](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    if (node->args().size() != 2 || !node->kwargs().empty()) return;
    Node* a = node->args()[0].node();
    Node* b = node->args()[1].node();
    const auto shapes = operands(a, b);
    if (!shapes || !options->should_decompose_mm(shapes->first, shapes->second)) return;
    Node* sum = product_sum(g, node, a, b, shapes->first, shapes->second);
    node->replace_all_uses_with(sum);
    g.erase_node(node);
    count("decompose_mm");
  });
  pass.register_pattern(pattern::CallFunctionVarArgs(aten::addmm), [=](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    if (node->args().size() != 3) return;
    Node* c = node->args()[0].node();
    Node* a = node->args()[1].node();
    Node* b = node->args()[2].node();
    const auto shapes = operands(a, b);
    const auto out = d::static_shape(node);
    if (!c || !shapes || !out || !options->should_decompose_mm(shapes->first, shapes->second)) return;
    for (std::string_view k : {"beta", "alpha"})
      if (const Arg* s = node->kwargs().find(k); s && !(d::int_of(s) == std::optional<std::int64_t>(1) ||
                                                        (s->get_if<double>() && *s->get_if<double>() == 1.0))) {
        count("decompose_mm_pass_skipped");
        return;
      }
    Node* sum = product_sum(g, node, a, b, shapes->first, shapes->second);
    Node* result;
    {
      auto guard = g.inserting_before(node);
      result = d::call_with_meta(g, aten::add_Tensor, {Arg(sum), Arg(c)}, node->meta.val);
    }
    node->replace_all_uses_with(result);
    g.erase_node(node);
    count("decompose_addmm");
  });
  pass.register_pattern(pattern::CallFunctionVarArgs({aten::bmm, aten::packets::bmm}), [=](auto& m, Graph& g, Node*) {
    Node* node = m.nodes()[0];
    if (node->args().size() != 2 || !node->kwargs().empty()) return;
    Node* a = node->args()[0].node();
    Node* b = node->args()[1].node();
    const auto shapes = operands(a, b);
    if (!shapes || !options->should_decompose_bmm(shapes->first, shapes->second)) return;
    Node* sum = product_sum(g, node, a, b, shapes->first, shapes->second);
    node->replace_all_uses_with(sum);
    g.erase_node(node);
    count("decompose_bmm");
  });
  return pass;
}

}  // namespace kiln::split_cat
