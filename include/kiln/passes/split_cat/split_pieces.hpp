#pragma once
// What the passes that merge split pieces share: a split read as its pieces
// (sections, a non-negative dim, the input's meta), which piece a getitem
// takes, whether a list of tensors is a run of consecutive pieces taken in
// order, and merging such a run into one piece in place. Inductor's versions
// of these passes trust getitem indices as written; these resolve negative
// indices and refuse repeated, reordered or partly shared pieces instead.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::split_cat::detail {

inline void count(const std::shared_ptr<Counters*>& counters, std::string_view name) {
  if (*counters) (*counters)->increment(std::string(name));
}

inline std::vector<Dim> contiguous_strides(const std::vector<Dim>& shape) {
  std::vector<Dim> stride(shape.size(), Dim(std::int64_t{1}));
  std::int64_t step = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    stride[k] = Dim(step);
    step *= std::get<std::int64_t>(shape[k]);
  }
  return stride;
}
inline std::int64_t product(const std::vector<Dim>& shape, std::size_t from, std::size_t to) {
  std::int64_t n = 1;
  for (std::size_t k = from; k < to; ++k) n *= std::get<std::int64_t>(shape[k]);
  return n;
}
// The `dim` argument of a cat or stack (position 1 or keyword, 0 when absent).
inline std::optional<std::int64_t> list_op_dim(const Node& n) {
  const Arg* a = arg_value(n, 1, "dim");
  if (!a || a->is_none()) return std::int64_t{0};
  return int_of(a);
}
// The tensors of a cat or stack as nodes; nullopt when one is not a node.
inline std::optional<std::vector<Node*>> list_op_tensors(const Node& n) {
  const Arg* a = arg_value(n, 0, "tensors");
  if (!a || !a->list() || a->list()->empty()) return std::nullopt;
  std::vector<Node*> out;
  for (const Arg& t : *a->list()) {
    if (!t.node()) return std::nullopt;
    out.push_back(t.node());
  }
  return out;
}

// A torch.split with a list of sections, its dim made non-negative, every
// section and the input's shape static.
struct SplitPieces {
  Node* split = nullptr;
  Node* input = nullptr;
  const TensorMeta* input_meta = nullptr;
  std::vector<std::int64_t> sections;
  std::int64_t dim = 0;

  std::size_t size() const { return sections.size(); }
  std::int64_t offset(std::size_t piece) const {
    std::int64_t at = 0;
    for (std::size_t i = 0; i < piece; ++i) at += sections[i];
    return at;
  }
  // The meta of a slice [.., length at dim, ..] of the input: a view with its strides.
  TensorMeta slice_meta(std::int64_t length) const {
    TensorMeta t = *input_meta;
    t.shape[static_cast<std::size_t>(dim)] = Dim(length);
    return t;
  }
  MetaVal split_meta() const {
    MetaVal::List parts;
    for (std::int64_t s : sections) parts.push_back(MetaVal(slice_meta(s)));
    return MetaVal(std::move(parts));
  }
};

inline std::optional<SplitPieces> split_pieces(Node* split) {
  if (!split || !split->is_call(torch::split)) return std::nullopt;
  const std::optional<SplitArgs> a = split_args(*split);
  if (!a || !a->size->list()) return std::nullopt;
  SplitPieces p;
  p.split = split;
  p.input = a->input;
  p.input_meta = tensor_of(a->input);
  if (!p.input_meta || !all_static(*p.input_meta)) return std::nullopt;
  const std::optional<std::int64_t> dim = normalized_dim(a->dim, p.input_meta->rank());
  if (!dim) return std::nullopt;
  p.dim = *dim;
  std::int64_t total = 0;
  for (const Arg& s : *a->size->list()) {
    const std::optional<std::int64_t> v = int_of(&s);
    if (!v || *v < 0) return std::nullopt;
    p.sections.push_back(*v);
    total += *v;
  }
  if (total != std::get<std::int64_t>(p.input_meta->shape[static_cast<std::size_t>(p.dim)])) return std::nullopt;
  return p;
}

// The piece `n` takes when it is getitem(split, i) with an int i in range
// (a negative i counts from the end, as Python does).
inline std::optional<std::size_t> piece_index(const Node* n, const SplitPieces& p) {
  if (!n || !n->is_call(pyop::getitem) || n->args().size() != 2 || n->args()[0].node() != p.split) return std::nullopt;
  std::optional<std::int64_t> i = int_of(&n->args()[1]);
  if (!i) return std::nullopt;
  const auto count = static_cast<std::int64_t>(p.size());
  if (*i < 0) *i += count;
  if (*i < 0 || *i >= count) return std::nullopt;
  return static_cast<std::size_t>(*i);
}

// Whether every user of the split is a getitem of one of its pieces, so that
// renumbering the pieces renumbers every use of them.
inline bool only_getitem_users(const SplitPieces& p) {
  for (const Node* u : p.split->users())
    if (!piece_index(u, p)) return false;
  return true;
}

// Pieces first..last of a split, taken in this order by `nodes`.
struct PieceRun {
  std::size_t first = 0;
  std::size_t last = 0;
  std::size_t length() const { return last - first + 1; }
};

// Whether `tensors` are getitems of pieces i, i+1, ..., j of the split, in
// that order, each piece once; a repeated, reversed or skipped piece is not a run.
inline std::optional<PieceRun> consecutive_run(const std::vector<Node*>& tensors, const SplitPieces& p) {
  if (tensors.empty()) return std::nullopt;
  PieceRun run;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const std::optional<std::size_t> i = piece_index(tensors[k], p);
    if (!i) return std::nullopt;
    if (k == 0) run.first = *i;
    else if (*i != run.first + k) return std::nullopt;
  }
  run.last = run.first + tensors.size() - 1;
  return run;
}

// Whether the run's getitems can be folded into one piece: each is used only
// by `consumer`, and no other getitem of the split takes a piece of the run
// and is used (that one would silently become the merged piece; an unused
// one is erased with the merge).
inline bool run_is_private(const std::vector<Node*>& tensors, const PieceRun& run, const SplitPieces& p,
                           const Node* consumer) {
  for (const Node* t : tensors)
    if (t->num_users() != 1 || *t->users().begin() != consumer) return false;
  for (const Node* u : p.split->users()) {
    const std::optional<std::size_t> i = piece_index(u, p);
    if (i && *i >= run.first && *i <= run.last && u != tensors[*i - run.first] && u->num_users() != 0) return false;
  }
  return true;
}

// Merges the run's pieces into piece `run.first`, in place: the split's
// sections, every later getitem's index and the kept getitem's meta. The
// run's other getitems, and any unused getitem of a merged piece, must have
// no users left; they are erased. Returns the kept getitem.
inline Node* merge_run(Graph& g, const SplitPieces& p, const std::vector<Node*>& tensors, const PieceRun& run) {
  std::int64_t merged = 0;
  for (std::size_t i = run.first; i <= run.last; ++i) merged += p.sections[i];
  SplitPieces after = p;
  after.sections.erase(after.sections.begin() + static_cast<std::ptrdiff_t>(run.first) + 1,
                       after.sections.begin() + static_cast<std::ptrdiff_t>(run.last) + 1);
  after.sections[run.first] = merged;
  // Renumber from the old indices before the split changes.
  std::vector<std::pair<Node*, std::size_t>> renumber;
  std::vector<Node*> unused;
  for (Node* u : p.split->user_list()) {
    const std::size_t i = *piece_index(u, p);
    if (i >= run.first && i <= run.last && u != tensors.front()) {
      if (std::find(tensors.begin(), tensors.end(), u) == tensors.end()) unused.push_back(u);
      continue;
    }
    renumber.emplace_back(u, i > run.last ? i - (run.last - run.first) : i);
  }
  for (std::size_t k = 1; k < tensors.size(); ++k) g.erase_node(tensors[k]);
  for (Node* u : unused) g.erase_node(u);
  ArgList sections;
  for (std::int64_t s : after.sections) sections.push_back(Arg(s));
  p.split->set_args_and_kwargs({Arg(p.input), Arg(std::move(sections))}, {{"dim", Arg(p.dim)}});
  p.split->meta.val = after.split_meta();
  for (auto& [u, i] : renumber) {
    u->set_arg(1, Arg(static_cast<std::int64_t>(i)));
    u->meta.val = MetaVal(after.slice_meta(after.sections[i]));
  }
  return tensors.front();
}

}  // namespace kiln::split_cat::detail
