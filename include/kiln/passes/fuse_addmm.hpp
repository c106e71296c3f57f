#pragma once
// fuse_addmm: add(mm(mat1, mat2), inp) -> addmm(inp, mat1, mat2), the fusion
// Inductor's post-grad passes make for CPU (its `addmm` lowering pattern). It
// applies only when the bias `inp` broadcasts to the product's [n, p] shape
// from a rank of at most 2, and the add has no alpha other than 1, and it
// needs both shapes in meta.val to decide that. Counter: fuse_addmm.
#include "kiln/core/graph.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pass_registry.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"

namespace kiln {

namespace detail {
inline bool bias_broadcasts_to(const TensorMeta& bias, const TensorMeta& out) {
  if (bias.rank() > 2 || out.rank() != 2) return false;
  for (std::size_t i = 0; i < bias.rank(); ++i) {
    const Dim& b = bias.shape[bias.rank() - 1 - i];
    const Dim& o = out.shape[1 - i];
    if (is_static(b) && std::get<std::int64_t>(b) == 1) continue;
    if (!(b == o)) return false;
  }
  return bias.dtype == out.dtype;
}
}  // namespace detail

inline PatternMatcherPass make_fuse_addmm_pass() {
  using namespace pattern;
  PatternMatcherPass pass("fuse_addmm");
  pass.register_pattern(
      CallFunction(aten::add_Tensor, CallFunction(aten::mm, kw<"mat1">, kw<"mat2">), kw<"inp">),
      [](auto& m, Graph& g, Node* root) {
        Node* fused = g.call_function(aten::addmm, {get<"inp">(m), get<"mat1">(m), get<"mat2">(m)});
        fused->meta = root->meta;
        root->replace_all_uses_with(fused);
        m.erase_nodes();
      },
      [](const auto& m) {
        Node* root = m.output_node();
        if (const kiln::Arg* alpha = root->kwargs().find("alpha"); alpha && !python_equal(*alpha, kiln::Arg(1)))
          return false;
        const Node* inp = get<"inp">(m).node();
        if (!inp || !inp->meta.val.tensor() || !root->meta.val.tensor()) return false;
        return kiln::detail::bias_broadcasts_to(*inp->meta.val.tensor(), *root->meta.val.tensor());
      },
      PatternOptions{.name = "fuse_addmm: add(mm(mat1, mat2), inp) -> addmm(inp, mat1, mat2)"});
  return pass;
}

inline void register_fuse_addmm_pass(PassRegistry& registry) {
  registry.add(make_pattern_pass("fuse_addmm", "add(mm(a, b), bias) -> addmm(bias, a, b) where the bias broadcasts",
                                 make_fuse_addmm_pass, "fuse_addmm"));
}

}  // namespace kiln
