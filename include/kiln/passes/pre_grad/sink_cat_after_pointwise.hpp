#pragma once
// sink_cat_after_pointwise (Inductor's pre_grad.py, first of fuse_fx): a
// torch.cat whose one user, through a chain of one-user Tensor.view calls, is
// a unary relu or tanh (torch.relu, torch.tanh, Tensor.relu, Tensor.tanh)
// becomes that op applied to each piece and a cat of the results, with the
// views after the new cat:
//   relu(cat([a, b]).view(s))  ->  cat([relu(a), relu(b)]).view(s)
// Inductor counts nothing; kiln counts each rewrite as
// `sink_cat_after_pointwise`. Where Inductor's rewrite would compute in
// another precision (pieces of different dtypes, which cat promotes before
// the op and the rewrite after it), kiln leaves the cat and counts
// `sink_cat_after_pointwise_skipped`.
#include <cstddef>
#include <vector>

#include "kiln/passes/counters.hpp"
#include "kiln/passes/pre_grad/common.hpp"

namespace kiln::pre_grad {

namespace detail {
inline Node* only_user(const Node* n) { return n->num_users() == 1 ? n->user_list().front() : nullptr; }
inline bool is_view_method(const Node* n) { return n->op() == OpKind::call_method && n->target_name() == "view"; }
inline bool is_unary_relu_or_tanh(const Node* n) {
  if (n->op() == OpKind::call_method) return n->target_name() == "relu" || n->target_name() == "tanh";
  return n->is_call(torch::relu) || n->is_call(torch::tanh);
}
}  // namespace detail

// Returns how many cats were sunk.
inline std::size_t sink_cat_after_pointwise(Graph& g, Counters* counters = nullptr) {
  namespace d = detail;
  std::size_t rewritten = 0;
  for (Node* cat : g.find_nodes(OpKind::call_function, torch::cat)) {
    Node* last = cat;  // the cat or the last view after it
    std::vector<Node*> views;
    Node* user = d::only_user(cat);
    while (user && d::is_view_method(user)) {
      views.push_back(user);
      last = user;
      user = d::only_user(user);
    }
    if (!user || !d::is_unary_relu_or_tanh(user)) continue;
    // The pointwise call must take the chain's value as its only argument.
    const bool method = user->op() == OpKind::call_method;
    if (user->args().size() != 1 || user->args()[0].node() != last) continue;
    ArgDict unary_kwargs;
    for (const auto& [k, v] : user->kwargs())
      if (k != "input") unary_kwargs.set(k, v);
    if (!unary_kwargs.empty()) continue;  // relu/tanh take no other arguments
    const Arg* tensors = d::arg_value(*cat, 0, "tensors");
    const Arg* dim = d::arg_value(*cat, 1, "dim");
    if (!tensors || !tensors->is_list() || tensors->list()->empty()) continue;
    const TensorMeta* cat_meta = d::tensor_of(cat);
    bool pieces_ok = cat_meta != nullptr;
    for (const Arg& piece : *tensors->list()) {
      const TensorMeta* t = d::tensor_arg(&piece);
      pieces_ok = pieces_ok && t && t->dtype == cat_meta->dtype;
    }
    if (!pieces_ok) {
      if (counters) counters->increment("sink_cat_after_pointwise_skipped");
      continue;
    }
    const TensorMeta* user_meta = d::tensor_of(user);
    const DType out_dtype = user_meta ? user_meta->dtype : cat_meta->dtype;
    Node* new_cat;
    {
      auto at = g.inserting_before(cat);
      ArgList pieces;
      for (const Arg& piece : *tensors->list()) {
        TensorMeta m = *d::tensor_arg(&piece);
        m.dtype = out_dtype;
        Node* p = method ? g.call_method(user->target_name(), {piece}) : g.call_function(user->target(), {piece});
        p->meta.val = MetaVal(gbf::contiguous(m.shape, m.dtype));
        pieces.push_back(Arg(p));
      }
      TensorMeta cm = *cat_meta;
      cm.dtype = out_dtype;
      new_cat = g.call_function(torch::cat, {Arg(pieces), dim ? *dim : Arg(std::int64_t{0})});
      new_cat->meta.val = MetaVal(cm);
    }
    user->replace_all_uses_with(last);
    cat->replace_all_uses_with(new_cat);
    // The views after the cat now carry the op's dtype.
    for (Node* v : views)
      if (const TensorMeta* vm = d::tensor_of(v); vm && vm->dtype != out_dtype) {
        TensorMeta m = *vm;
        m.dtype = out_dtype;
        v->meta.val = MetaVal(m);
      }
    g.erase_node(user);
    g.erase_node(cat);
    ++rewritten;
    if (counters) counters->increment("sink_cat_after_pointwise");
  }
  return rewritten;
}

}  // namespace kiln::pre_grad
