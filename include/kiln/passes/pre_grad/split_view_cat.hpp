#pragma once
// The chunk/split -> view -> cat passes of Inductor's pre-dispatch pipeline:
// fuse_chunk_squeeze_cat_pass, fuse_chunk_reshape_concat_pass,
// fuse_chunk_reshape_unsqueeze_concat_pass, fuse_split_getitem_squeeze_cat.
//
// Each matches cat([v(getitem(s, 0)), ..., v(getitem(s, n-1))], c) where s
// cuts x along d into n pieces and v is a fixed chain of view ops (a squeeze;
// a reshape; a reshape then an unsqueeze). Why one reshape of x is equal:
// squeeze, unsqueeze and reshape all reinterpret a tensor's elements in
// row-major order, so v(piece) is reshape(piece, F) with F its result shape.
// Piece i is the block of x at positions [o_i, o_i + size_i) along d; with
// P = x.shape[:d], within each prefix index p in P that block is one
// contiguous run of x's elements in row-major order. If F keeps the prefix
// (F[:d] == P), reshape(piece, F) keeps each run under its prefix index, and
// a cat along c == d puts run 0, run 1, ... one after another under each
// prefix index, which is x's own row-major order: the cat is
// reshape(x, cat.shape). The pieces must be all of s's, each once, in order;
// every getitem and view must have only the next step as user; otherwise the
// cat is left and `<pass>_skipped` counted. Counts `<pass>` per rewrite.
#include <string>
#include <vector>

#include "kiln/passes/pre_grad/predispatch_common.hpp"

namespace kiln::predispatch {

namespace detail {
enum class ViewStep { squeeze, reshape, unsqueeze };
inline bool is_step(const Node& n, ViewStep s) {
  switch (s) {
    case ViewStep::squeeze: return is_squeeze(n);
    case ViewStep::reshape: return is_reshape(n);
    case ViewStep::unsqueeze: return is_unsqueeze(n);
  }
  return false;
}
enum class Source { chunk, split };
inline bool is_source(const Node& n, Source s) {
  // chunk reaches a pre-dispatch graph as aten.split.Tensor (equal pieces).
  return s == Source::chunk ? is_chunk(n) || n.is_call(aten::split_Tensor) : is_split(n);
}

inline PatternMatcherPass make_split_view_cat_pass(std::string name, Source source_kind, std::vector<ViewStep> steps,
                                                   std::shared_ptr<Counters*> counters) {
  PatternMatcherPass pass(name);
  auto handler = [name, source_kind, steps, count = Count{counters}](auto& m, Graph& g, Node*) {
    Node* cat = m.nodes()[0];
    const auto call = cat_of(*cat);
    if (!call || call->tensors.empty()) return;
    // Walk each cat input back through the chain to its getitem.
    std::vector<std::vector<Node*>> chains;  // per input: the views (top first), then the getitem
    Node* source = nullptr;
    for (const Arg& t : call->tensors) {
      std::vector<Node*> chain;
      Node* n = t.node();
      for (std::size_t k = steps.size(); k-- > 0;) {
        if (!n || !is_step(*n, steps[k]) || n->args().empty()) return;
        chain.push_back(n);
        n = n->args()[0].node();
      }
      Node* s = getitem_source(n);
      if (!s || !is_source(*s, source_kind) || (source && s != source)) return;
      source = s;
      chain.push_back(n);
      chains.push_back(std::move(chain));
    }
    const auto pieces = pieces_of(*source);
    const auto cat_shape = static_shape(cat);
    if (!pieces || !cat_shape) return;
    const Shape prefix(pieces->input_shape.begin(), pieces->input_shape.begin() + pieces->dim);
    bool ok = chains.size() == pieces->sizes.size() && call->dim == pieces->dim &&
              numel(*cat_shape) == numel(pieces->input_shape) &&
              tensor_of(cat)->dtype == tensor_of(pieces->input)->dtype;
    for (std::size_t i = 0; ok && i < chains.size(); ++i) {
      ok = piece_index(*chains[i].back(), source, pieces->sizes.size()) == std::optional<std::size_t>(i);
      for (Node* n : chains[i]) ok = ok && n->num_users() == 1;
      const auto top = static_shape(chains[i].front());
      ok = ok && top && top->size() > prefix.size() && std::equal(prefix.begin(), prefix.end(), top->begin());
    }
    if (!ok) {
      count(name + "_skipped");
      return;
    }
    ArgList shape;
    for (std::int64_t s : *cat_shape) shape.push_back(Arg(s));
    const OpRef reshape = is_aten(*cat) ? aten::reshape : torch::reshape;
    split_cat::detail::replace_by_call(g, cat, reshape, {Arg(pieces->input), Arg(shape)}, {});
    for (const auto& chain : chains)
      for (Node* n : chain) erase_if_unused(g, {n});
    erase_if_unused(g, {source});
    count(name);
  };
  pass.register_pattern(pattern::CallFunctionVarArgs({aten::cat, torch::cat, ops::torch_concat}, pattern::MULTIPLE),
                        handler);
  return pass;
}
}  // namespace detail

// chunk -> getitem -> squeeze -> cat.
inline PatternMatcherPass make_fuse_chunk_squeeze_cat_pass(std::shared_ptr<Counters*> counters) {
  return detail::make_split_view_cat_pass("fuse_chunk_squeeze_cat_pass", detail::Source::chunk,
                                          {detail::ViewStep::squeeze}, std::move(counters));
}
// chunk -> getitem -> reshape -> cat.
inline PatternMatcherPass make_fuse_chunk_reshape_concat_pass(std::shared_ptr<Counters*> counters) {
  return detail::make_split_view_cat_pass("fuse_chunk_reshape_concat_pass", detail::Source::chunk,
                                          {detail::ViewStep::reshape}, std::move(counters));
}
// chunk -> getitem -> reshape -> unsqueeze -> cat (a stack of the reshaped
// pieces, as stack_to_unsqueeze_pass leaves it).
inline PatternMatcherPass make_fuse_chunk_reshape_unsqueeze_concat_pass(std::shared_ptr<Counters*> counters) {
  return detail::make_split_view_cat_pass("fuse_chunk_reshape_unsqueeze_concat_pass", detail::Source::chunk,
                                          {detail::ViewStep::reshape, detail::ViewStep::unsqueeze},
                                          std::move(counters));
}
// split -> getitem -> squeeze -> cat.
inline PatternMatcherPass make_fuse_split_getitem_squeeze_cat_pass(std::shared_ptr<Counters*> counters) {
  return detail::make_split_view_cat_pass("fuse_split_getitem_squeeze_cat", detail::Source::split,
                                          {detail::ViewStep::squeeze}, std::move(counters));
}

}  // namespace kiln::predispatch
