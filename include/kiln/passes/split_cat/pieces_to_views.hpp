#pragma once
// Four passes of Inductor's split_cat.py that gather the pieces of a split or
// an unbind back through a cat or a stack, and replace each run of pieces
// taken in order by a slice (and view) of the input they came from:
//
//   split_cat_to_slices_pass     cat(getitems of a split)    -> slice of the split's input
//   unbind_cat_to_view_pass      cat(getitems of an unbind)  -> slice, permute, reshape
//   split_stack_to_cats_pass     stack(getitems of a split)  -> slice, reshape, permute
//   unbind_stack_to_slices_pass  stack(getitems of an unbind)-> slice, permute
//
// A run is a stretch of the cat's or stack's list holding pieces i, i+1, ...,
// i+L-1 of one split or unbind. It is merged when it is the whole split (all
// pieces, in order) or when L reaches the `threshold_to_cat` option (10 unless
// given, as Inductor's); the rest of the list stays as it was. Each cat or
// stack rewritten counts under the pass's name, as in Inductor.
//
// Inductor groups a list's getitems by parent and takes a group holding as
// many pieces as the unbind has for the whole of it, whatever their order; it
// slices a split's input for a cat along another dim than the split's; and it
// swaps two dims where the pieces' dim must move past others. kiln merges only
// runs in order, moves a dim with a permute that keeps the others in order,
// and where Inductor would have rewritten what it cannot rewrite correctly
// (pieces of a whole unbind reordered or repeated, a split's run for a cat
// along another dim) leaves that run as it is and counts `<pass>_skipped`.
// Everything is decided, and the result's shape checked against the cat's or
// stack's meta, before the graph is edited.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::split_cat {

// What a pieces-to-views pass reads when it runs: where to count, and its option.
struct ViewsPassState {
  Counters* counters = nullptr;
  std::int64_t threshold_to_cat = 10;
  void count(const std::string& name) const {
    if (counters) counters->increment(name);
  }
};

namespace views_detail {

using detail::Shape;
using detail::static_shape;
enum class Source { split, unbind };
enum class Joiner { cat, stack };

inline MetaVal meta_of(const Shape& shape, DType dtype) {
  std::vector<Dim> dims(shape.begin(), shape.end());
  return MetaVal(TensorMeta{std::move(dims), dtype, std::nullopt});
}
inline ArgList int_list(const Shape& v) {
  ArgList out;
  for (std::int64_t x : v) out.push_back(Arg(x));
  return out;
}
// The permutation that moves dim `from` to position `to`, the others kept in order.
inline Shape movedim_permutation(std::size_t rank, std::int64_t from, std::int64_t to) {
  Shape perm;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(rank); ++i)
    if (i != from) perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  return perm;
}
inline Shape permuted(const Shape& s, const Shape& perm) {
  Shape out;
  for (std::int64_t p : perm) out.push_back(s[static_cast<std::size_t>(p)]);
  return out;
}

// A split with explicit sections, or an unbind, seen as pieces of its input
// along `dim`: piece i covers [starts[i], starts[i+1]); an unbind's pieces
// (each of extent 1) drop that dim.
struct Pieces {
  Node* node = nullptr;
  Node* input = nullptr;
  std::int64_t dim = 0;
  Shape input_shape;
  DType dtype = DType::float32;
  std::vector<std::int64_t> starts;
  std::int64_t count() const { return static_cast<std::int64_t>(starts.size()) - 1; }
};

inline std::optional<Pieces> read_pieces(Node* n, Source source) {
  Pieces p;
  p.node = n;
  const Arg* dim_arg = nullptr;
  if (source == Source::split) {
    if (!n->is_call(torch::split)) return std::nullopt;
    const auto args = detail::split_args(*n);
    if (!args || !args->size->list()) return std::nullopt;
    p.input = args->input;
    p.dim = args->dim;
  } else {
    if (!n->is_call(torch::unbind)) return std::nullopt;
    const Arg* input = detail::arg_value(*n, 0, "input");
    if (!input || !input->node()) return std::nullopt;
    p.input = input->node();
    dim_arg = detail::arg_value(*n, 1, "dim");
    const auto dim = dim_arg && !dim_arg->is_none() ? detail::int_of(dim_arg) : std::optional<std::int64_t>(0);
    if (!dim) return std::nullopt;
    p.dim = *dim;
  }
  const auto shape = static_shape(p.input);
  if (!shape) return std::nullopt;
  p.input_shape = *shape;
  p.dtype = detail::tensor_of(p.input)->dtype;
  const auto rank = static_cast<std::int64_t>(shape->size());
  if (p.dim < 0) p.dim += rank;
  if (p.dim < 0 || p.dim >= rank) return std::nullopt;
  const std::int64_t extent = (*shape)[static_cast<std::size_t>(p.dim)];
  p.starts.push_back(0);
  if (source == Source::split) {
    for (const Arg& s : *detail::split_args(*n)->size->list()) {
      const auto size = detail::int_of(&s);
      if (!size || *size < 0) return std::nullopt;
      p.starts.push_back(p.starts.back() + *size);
    }
  } else {
    for (std::int64_t i = 1; i <= extent; ++i) p.starts.push_back(i);
  }
  if (p.starts.back() != extent) return std::nullopt;
  return p;
}

// One element of the cat's or stack's list: a piece (which one, of what) or any other tensor.
struct Item {
  Node* node = nullptr;
  const Pieces* from = nullptr;
  std::int64_t index = 0;
};

// A part of the new list: a run of pieces to merge, or list elements kept as they are.
struct Part {
  const Pieces* run_of = nullptr;  // null: `kept` are list elements kept as they are
  std::int64_t first = 0, length = 0;
  std::vector<Node*> kept;
};

struct Plan {
  std::vector<Part> parts;
  bool merges = false;   // some run is merged
  bool refused = false;  // a run Inductor would merge is left, as merging it would change the result
};

inline bool is_getitem_of(const Node* n, Source source) {
  if (!n->is_call(pyop::getitem) || n->args().size() != 2) return false;
  const Node* parent = n->args()[0].node();
  return parent && parent->is_call(source == Source::split ? torch::split : torch::unbind);
}

// The tensors a cat or stack gathers and its dim made non-negative.
struct JoinerArgs {
  const ArgList* tensors;
  std::int64_t dim;
  Shape shape;
  DType dtype;
};
inline std::optional<JoinerArgs> read_joiner(const Node& joiner) {
  const Arg* tensors = detail::arg_value(joiner, 0, "tensors");
  const Arg* dim_arg = detail::arg_value(joiner, 1, "dim");
  auto dim = dim_arg && !dim_arg->is_none() ? detail::int_of(dim_arg) : std::optional<std::int64_t>(0);
  const auto shape = static_shape(&joiner);
  if (!tensors || !tensors->list() || tensors->list()->empty() || !dim || !shape) return std::nullopt;
  if (*dim < 0) *dim += static_cast<std::int64_t>(shape->size());
  if (*dim < 0 || *dim >= static_cast<std::int64_t>(shape->size())) return std::nullopt;
  for (const Arg& t : *tensors->list())
    if (!t.node() || !static_shape(t.node())) return std::nullopt;
  return JoinerArgs{tensors->list(), *dim, *shape, detail::tensor_of(&joiner)->dtype};
}

// Reads the list into items (the pieces' parents into `parents`, which must
// not reallocate while items point into it) and decides which runs merge.
inline Plan plan_runs(const JoinerArgs& j, Source source, Joiner joiner, std::int64_t threshold,
                      std::vector<Pieces>& parents) {
  std::vector<Item> items;
  parents.reserve(j.tensors->size());
  for (const Arg& a : *j.tensors) {
    Item it{a.node()};
    if (is_getitem_of(it.node, source)) {
      Node* parent = it.node->args()[0].node();
      const auto idx = detail::int_of(&it.node->args()[1]);
      const Pieces* known = nullptr;
      for (const Pieces& p : parents)
        if (p.node == parent) known = &p;
      if (!known) {
        if (auto p = read_pieces(parent, source)) {
          parents.push_back(std::move(*p));
          known = &parents.back();
        }
      }
      if (known && idx) {
        const std::int64_t i = *idx < 0 ? *idx + known->count() : *idx;
        if (i >= 0 && i < known->count()) {
          it.from = known;
          it.index = i;
        }
      }
    }
    items.push_back(it);
  }

  Plan plan;
  auto keep = [&](Node* n) {
    if (plan.parts.empty() || plan.parts.back().run_of) plan.parts.push_back(Part{});
    plan.parts.back().kept.push_back(n);
  };
  for (std::size_t i = 0; i < items.size();) {
    const Item& it = items[i];
    if (!it.from) {
      keep(it.node);
      ++i;
      continue;
    }
    // Inductor takes any stretch of an unbind's pieces as many as it has for
    // the whole unbind: where they are not 0..n-1 in order, that is wrong.
    if (source == Source::unbind) {
      std::size_t end = i;
      bool in_order = true;
      while (end < items.size() && items[end].from == it.from) {
        in_order = in_order && items[end].index == static_cast<std::int64_t>(end - i);
        ++end;
      }
      if (static_cast<std::int64_t>(end - i) == it.from->count() && !in_order) plan.refused = true;
    }
    std::size_t end = i + 1;
    while (end < items.size() && items[end].from == it.from && items[end].index == items[end - 1].index + 1) ++end;
    const auto length = static_cast<std::int64_t>(end - i);
    const bool whole = it.index == 0 && length == it.from->count();
    bool merge = whole || (length >= 2 && length >= threshold);
    // Slicing the split's input gives the cat's result only along the split's dim.
    if (merge && source == Source::split && joiner == Joiner::cat && it.from->dim != j.dim) {
      merge = false;
      plan.refused = true;
    }
    if (merge) {
      plan.parts.push_back(Part{it.from, it.index, length, {}});
      plan.merges = true;
    } else {
      for (std::size_t k = i; k < end; ++k) keep(items[k].node);
    }
    i = end;
  }
  return plan;
}

// Builds the nodes of one merged run (before the joiner) and returns the last;
// its shape is the run's share of the joiner's result.
struct RunBuilder {
  Graph& g;
  Source source;
  Joiner joiner;
  std::int64_t joiner_dim;

  Node* make(OpRef op, ArgList args, ArgDict kwargs, const Shape& shape, DType dtype) const {
    Node* n = g.call_function(op, std::move(args), std::move(kwargs));
    n->meta.val = meta_of(shape, dtype);
    return n;
  }
  // input[..., starts[first]:starts[first+length], ...] along the pieces' dim, or the input when whole.
  std::pair<Node*, Shape> slice(const Pieces& p, std::int64_t first, std::int64_t length) const {
    Shape shape = p.input_shape;
    const auto d = static_cast<std::size_t>(p.dim);
    const std::int64_t begin = p.starts[static_cast<std::size_t>(first)];
    const std::int64_t end = p.starts[static_cast<std::size_t>(first + length)];
    if (begin == 0 && end == shape[d]) return {p.input, shape};
    ArgList index;
    for (std::size_t k = 0; k < shape.size(); ++k)
      index.push_back(k == d ? Arg(Slice{{Arg(begin), Arg(end), Arg()}}) : Arg(Slice{{Arg(), Arg(), Arg()}}));
    shape[d] = end - begin;
    return {make(pyop::getitem, {Arg(p.input), Arg(std::move(index))}, {}, shape, p.dtype), shape};
  }
  std::pair<Node*, Shape> movedim(Node* n, Shape shape, std::int64_t from, std::int64_t to, DType dtype) const {
    if (from == to) return {n, shape};
    const Shape perm = movedim_permutation(shape.size(), from, to);
    shape = permuted(shape, perm);
    return {make(torch::permute, {Arg(n), Arg(int_list(perm))}, {}, shape, dtype), shape};
  }
  std::pair<Node*, Shape> reshape(Node* n, const Shape& from, const Shape& to, DType dtype) const {
    if (from == to) return {n, to};
    return {make(torch::reshape, {Arg(n), Arg(int_list(to))}, {}, to, dtype), to};
  }

  Node* build(const Part& part) const {
    const Pieces& p = *part.run_of;
    auto [sliced, shape] = slice(p, part.first, part.length);
    const std::int64_t d = p.dim;
    if (source == Source::split && joiner == Joiner::cat) return sliced;  // the split's dim is the cat's
    if (source == Source::split) {
      // The pieces (each m long along d) one per index along a new dim d, then moved to the stack's dim.
      Shape unflat = shape;
      const std::int64_t m = shape[static_cast<std::size_t>(d)] / part.length;
      unflat[static_cast<std::size_t>(d)] = m;
      unflat.insert(unflat.begin() + d, part.length);
      auto [r, rs] = reshape(sliced, shape, unflat, p.dtype);
      return movedim(r, rs, d, joiner_dim, p.dtype).first;
    }
    // An unbind's run: its dim already counts the pieces; move it to the joiner's dim.
    auto [moved, ms] = movedim(sliced, shape, d, joiner_dim, p.dtype);
    if (joiner == Joiner::stack) return moved;
    // For a cat, merge it with the next dim (the pieces' own dim the cat joins along).
    Shape merged = ms;
    merged[static_cast<std::size_t>(joiner_dim)] *= merged[static_cast<std::size_t>(joiner_dim) + 1];
    merged.erase(merged.begin() + joiner_dim + 1);
    return reshape(moved, ms, merged, p.dtype).first;
  }
};

// The shape a part contributes to the joiner's result (to check the plan before editing).
inline std::optional<Shape> part_shape(const Part& part, Source source, Joiner joiner, std::int64_t dim) {
  if (!part.run_of) {
    Shape s = *static_shape(part.kept.front());
    if (joiner == Joiner::stack) {
      if (dim > static_cast<std::int64_t>(s.size())) return std::nullopt;
      s.insert(s.begin() + dim, static_cast<std::int64_t>(part.kept.size()));
    } else {
      if (dim >= static_cast<std::int64_t>(s.size())) return std::nullopt;
      s[static_cast<std::size_t>(dim)] = 0;
      for (Node* n : part.kept) {
        const Shape t = *static_shape(n);
        if (t.size() != s.size()) return std::nullopt;
        s[static_cast<std::size_t>(dim)] += t[static_cast<std::size_t>(dim)];
      }
    }
    return s;
  }
  const Pieces& p = *part.run_of;
  Shape piece = p.input_shape;
  const auto d = static_cast<std::size_t>(p.dim);
  const std::int64_t extent = p.starts[static_cast<std::size_t>(part.first + part.length)] -
                              p.starts[static_cast<std::size_t>(part.first)];
  if (source == Source::split) {
    if (joiner == Joiner::cat) {
      piece[d] = extent;
      return piece;
    }
    // A stack needs pieces of one size.
    for (std::int64_t i = part.first; i < part.first + part.length; ++i)
      if (p.starts[static_cast<std::size_t>(i + 1)] - p.starts[static_cast<std::size_t>(i)] != extent / part.length)
        return std::nullopt;
    piece[d] = extent / part.length;
  } else {
    piece.erase(piece.begin() + p.dim);
  }
  if (joiner == Joiner::stack) {
    if (dim > static_cast<std::int64_t>(piece.size())) return std::nullopt;
    piece.insert(piece.begin() + dim, part.length);
  } else {
    if (dim >= static_cast<std::int64_t>(piece.size())) return std::nullopt;
    piece[static_cast<std::size_t>(dim)] *= part.length;
  }
  return piece;
}

// Rewrites the cat or stack `root` where its plan merges a run.
inline void rewrite(Graph& g, Node* root, Source source, Joiner joiner, const std::string& pass_name,
                    const ViewsPassState& state) {
  const auto j = read_joiner(*root);
  if (!j) return;
  std::vector<Pieces> parents;
  const Plan plan = plan_runs(*j, source, joiner, state.threshold_to_cat, parents);
  if (!plan.merges) {
    if (plan.refused) state.count(pass_name + "_skipped");
    return;
  }
  // The parts, put together along the joiner's dim, must give its shape exactly.
  Shape total;
  for (const Part& part : plan.parts) {
    const auto s = part_shape(part, source, joiner, j->dim);
    if (!s) return;
    if (total.empty()) total = *s;
    else if (s->size() != total.size()) return;
    else total[static_cast<std::size_t>(j->dim)] += (*s)[static_cast<std::size_t>(j->dim)];
  }
  if (total != j->shape) {
    state.count(pass_name + "_skipped");
    return;
  }

  std::vector<Node*> old_inputs;
  for (const Arg& a : *j->tensors)
    if (std::find(old_inputs.begin(), old_inputs.end(), a.node()) == old_inputs.end()) old_inputs.push_back(a.node());
  Node* result = nullptr;
  {
    auto guard = g.inserting_before(root);
    const RunBuilder b{g, source, joiner, j->dim};
    ArgList parts;
    for (const Part& part : plan.parts) {
      if (part.run_of) {
        parts.push_back(Arg(b.build(part)));
      } else if (joiner == Joiner::cat) {
        for (Node* n : part.kept) parts.push_back(Arg(n));
      } else {  // kept tensors of a stack are stacked among themselves
        ArgList kept;
        for (Node* n : part.kept) kept.push_back(Arg(n));
        parts.push_back(Arg(b.make(torch::stack, {Arg(std::move(kept))}, {{"dim", Arg(j->dim)}},
                                   *part_shape(part, source, joiner, j->dim), j->dtype)));
      }
    }
    if (parts.size() == 1) {
      result = parts.front().node();
    } else {
      result = g.call_function(torch::cat, {Arg(std::move(parts))}, {{"dim", Arg(j->dim)}});
      result->meta = root->meta;
    }
  }
  root->replace_all_uses_with(result);
  g.erase_node(root);
  // The pieces nothing reads any more, then their splits and unbinds.
  for (Node* n : old_inputs)
    if (n->num_users() == 0 && is_getitem_of(n, source)) g.erase_node(n);
  for (const Pieces& p : parents)
    if (p.node->num_users() == 0) g.erase_node(p.node);
  state.count(pass_name);
}

// Inductor's TorchSplit: a split with a list of sections whose users are all
// getitems at distinct non-negative int indices.
inline bool split_users_are_distinct_getitems(const Node& split) {
  const Arg* sections = detail::arg_value(split, 1);
  if (!sections || !sections->list()) return false;
  std::vector<std::int64_t> seen;
  for (const Node* u : split.user_list()) {
    if (!u->is_call(pyop::getitem) || u->args().size() != 2) return false;
    const auto i = detail::int_of(&u->args()[1]);
    if (!i || *i < 0 || std::find(seen.begin(), seen.end(), *i) != seen.end()) return false;
    seen.push_back(*i);
  }
  return true;
}

// Inductor's patterns: the cat or stack of a list some of whose elements are
// getitems of a canonical split (getitem_split) or unbind (getitem_unbind).
inline auto getitems_of_split() {
  using namespace pattern;
  return ListOf(CallFunction(pyop::getitem,
                             CallFunction(torch::split, Ignored(), kw<"split_sections">, kwarg<"dim">(kw<"dim">), MULTIPLE),
                             Ignored(), MULTIPLE),
                true);
}
inline auto getitems_of_unbind() {
  using namespace pattern;
  return ListOf(CallFunction(pyop::getitem, CallFunction(torch::unbind, kw<"unbind_input">, kwarg<"dim">(kw<"dim">), MULTIPLE),
                             Ignored(), MULTIPLE),
                true);
}

template <class Match>
bool every_split_is_torch_split(const Match& m) {
  for (const Node* n : m.nodes())
    if (n->is_call(torch::split) && !split_users_are_distinct_getitems(*n)) return false;
  return true;
}

inline PatternMatcherPass make_pass(std::string name, Source source, Joiner joiner, std::shared_ptr<ViewsPassState> state) {
  using pattern::CallFunction, pattern::Ignored, pattern::kwarg, pattern::MULTIPLE;
  PatternMatcherPass pass(name);
  const OpRef op = joiner == Joiner::cat ? torch::cat : torch::stack;
  // As Inductor's handler: every cat (or stack) that reads the matched split's
  // (unbind's) pieces is rewritten at this match, the root among them.
  auto handler = [=](auto& m, Graph& g, Node*) {
    const OpRef parent_op = source == Source::split ? torch::split : torch::unbind;
    const auto& nodes = m.nodes();
    const auto parent = std::find_if(nodes.begin(), nodes.end(), [&](const Node* n) { return n->is_call(parent_op); });
    if (parent == nodes.end()) return;
    std::vector<Node*> joiners;
    for (const Node* piece : (*parent)->user_list())
      for (Node* u : piece->user_list())
        if (u->is_call(op) && std::find(joiners.begin(), joiners.end(), u) == joiners.end()) joiners.push_back(u);
    for (Node* j : joiners) rewrite(g, j, source, joiner, name, *state);
  };
  if (source == Source::split)
    pass.register_pattern(CallFunction(op, getitems_of_split(), kwarg<"dim">(Ignored()), MULTIPLE), handler,
                          [](const auto& m) { return every_split_is_torch_split(m); });
  else
    pass.register_pattern(CallFunction(op, getitems_of_unbind(), kwarg<"dim">(Ignored()), MULTIPLE), handler);
  return pass;
}

}  // namespace views_detail

inline PatternMatcherPass make_split_cat_to_slices_pass(std::shared_ptr<ViewsPassState> state) {
  using namespace views_detail;
  return make_pass("split_cat_to_slices_pass", Source::split, Joiner::cat, std::move(state));
}
inline PatternMatcherPass make_unbind_cat_to_view_pass(std::shared_ptr<ViewsPassState> state) {
  using namespace views_detail;
  return make_pass("unbind_cat_to_view_pass", Source::unbind, Joiner::cat, std::move(state));
}
inline PatternMatcherPass make_split_stack_to_cats_pass(std::shared_ptr<ViewsPassState> state) {
  using namespace views_detail;
  return make_pass("split_stack_to_cats_pass", Source::split, Joiner::stack, std::move(state));
}
inline PatternMatcherPass make_unbind_stack_to_slices_pass(std::shared_ptr<ViewsPassState> state) {
  using namespace views_detail;
  return make_pass("unbind_stack_to_slices_pass", Source::unbind, Joiner::stack, std::move(state));
}

// Registers a pass made by `make` whose options object may give threshold_to_cat (an int >= 1).
inline void register_views_pass(PassRegistry& registry, std::string name, std::string description,
                                PatternMatcherPass (*make)(std::shared_ptr<ViewsPassState>)) {
  auto state = std::make_shared<ViewsPassState>();
  auto pass = std::make_shared<PatternMatcherPass>(make(state));
  registry.add({name, std::move(description),
                [state, pass, name](Graph& g, PassContext& ctx) {
                  state->counters = &ctx.counters;
                  state->threshold_to_cat = positive_int_option(ctx.options, name, "threshold_to_cat", 10);
                  const std::size_t n = pass->apply(g, &ctx.counters);
                  state->counters = nullptr;
                  return n > 0;
                },
                {"threshold_to_cat"}});
}

}  // namespace kiln::split_cat
