#pragma once
// The split/unbind -> cat/stack simplifier that split_cat_pass and
// unbind_stack_pass share (Inductor's SplitCatSimplifier and
// UnbindCatRemover, split_cat.py).
//
// A split's pieces are read by the users of its getitems: cat/stack nodes,
// whose runs of consecutive pieces become ranges of the split's input, and
// other nodes, which keep their pieces. When those ranges cover the input with
// fewer pieces than the split has, the split is remade with one piece per
// range (or dropped when one range is the whole input) and each cat/stack is
// rebuilt from the ranges: a range of k equal pieces is unflattened into
// (k, piece) and its new dim moved to where the cat/stack puts it (then
// flattened into the cat dim for a cat). An unbind is removed only when every
// range is its whole input.
//
// Where kiln differs from Inductor, so that the result always equals the
// original: dims may be negative on the split, unbind, cat or stack (read
// against meta); the cat of a split along another dim flattens each range
// before the cat instead of unsqueezing the cat's other inputs, so they may
// have any size there; getitem indices may be negative (Inductor would read
// them as offsets into its cumulative sizes); a cat/stack that reads a piece
// outside its tensor list is left; every new node's shape is worked out
// before the graph is edited and must give each cat or stack its recorded
// shape, else nothing is rewritten and `<pass>_skipped` counts it.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/split_cat/common.hpp"

namespace kiln::split_cat {

namespace simplify_detail {

inline constexpr OpRef kUnflatten{"torch.unflatten"};

using detail::Shape;
using detail::static_shape;
inline TensorMeta tensor_meta(const Shape& s, DType dtype) {
  return TensorMeta{std::vector<Dim>(s.begin(), s.end()), dtype, std::nullopt};
}
inline Arg ints(const Shape& s) {
  ArgList l;
  for (std::int64_t v : s) l.emplace_back(v);
  return Arg(std::move(l));
}
inline std::optional<std::vector<std::int64_t>> int_list(const Arg* a) {
  if (!a || !a->list()) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const Arg& x : *a->list()) {
    const auto* i = x.get_if<std::int64_t>();
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}
using detail::normalized_dim;
inline bool is_getitem(const Node* n) { return n->is_call(pyop::getitem) && n->args().size() == 2; }

// Inductor's TorchSplit: a split whose sections are a list and whose users
// are getitems of distinct non-negative int indices.
inline bool is_normalized_split(const Node& split) {
  if (!split.is_call(torch::split) || split.args().size() < 2 || !split.args()[1].list()) return false;
  // Every user a getitem of its own non-negative index (sorted and compared
  // with its neighbour: a split of 30,000 pieces is asked this in several passes).
  std::vector<std::int64_t> seen;
  seen.reserve(split.num_users());
  for (const Node* u : split.users()) {
    if (!is_getitem(u)) return false;
    const auto i = detail::int_of(&u->args()[1]);
    if (!i || *i < 0) return false;
    seen.push_back(*i);
  }
  std::sort(seen.begin(), seen.end());
  return std::adjacent_find(seen.begin(), seen.end()) == seen.end();
}
// The first matched node that calls `op`.
template <class M>
Node* matched(const M& m, OpRef op) {
  for (Node* n : m.nodes())
    if (n->is_call(op)) return n;
  return nullptr;
}

// A tensor being built: its node (none while only planning) and its shape.
struct Value {
  Node* node = nullptr;
  Shape shape;
};

// Makes the view and join nodes of a rewrite, or, without a graph, only works
// out their shapes (the planning run that decides whether to rewrite). Each
// returns nullopt where the op would be invalid for these shapes.
class Builder {
 public:
  Builder(Graph* g, DType dtype) : g_(g), dtype_(dtype) {}

  // unflatten(v, d, [k, size / k]).
  std::optional<Value> unflatten(const Value& v, std::int64_t d, std::int64_t k) const {
    const auto du = static_cast<std::size_t>(d);
    if (du >= v.shape.size() || k <= 0 || v.shape[du] % k != 0) return std::nullopt;
    Shape s = v.shape;
    const std::int64_t inner = s[du] / k;
    s[du] = inner;
    s.insert(s.begin() + d, k);
    return make(kUnflatten, {Arg(v.node), Arg(d), ints({k, inner})}, {}, std::move(s));
  }
  // movedim(v, from, to), as a permute.
  std::optional<Value> move_dim(const Value& v, std::int64_t from, std::int64_t to) const {
    const auto r = static_cast<std::int64_t>(v.shape.size());
    if (from < 0 || from >= r || to < 0 || to >= r) return std::nullopt;
    if (from == to) return v;
    Shape perm;
    for (std::int64_t i = 0; i < r; ++i)
      if (i != from) perm.push_back(i);
    perm.insert(perm.begin() + to, from);
    Shape s;
    for (std::int64_t p : perm) s.push_back(v.shape[static_cast<std::size_t>(p)]);
    return make(torch::permute, {Arg(v.node), ints(perm)}, {}, std::move(s));
  }
  // flatten(v, d, d + 1).
  std::optional<Value> flatten_pair(const Value& v, std::int64_t d) const {
    const auto du = static_cast<std::size_t>(d);
    if (d < 0 || du + 1 >= v.shape.size()) return std::nullopt;
    Shape s = v.shape;
    s[du] *= s[du + 1];
    s.erase(s.begin() + d + 1);
    return make(torch::flatten, {Arg(v.node), Arg(d), Arg(d + 1)}, {}, std::move(s));
  }
  std::optional<Value> stack(const std::vector<Value>& vs, std::int64_t d) const {
    if (vs.empty() || d < 0 || static_cast<std::size_t>(d) > vs[0].shape.size()) return std::nullopt;
    for (const Value& v : vs)
      if (v.shape != vs[0].shape) return std::nullopt;
    Shape s = vs[0].shape;
    s.insert(s.begin() + d, static_cast<std::int64_t>(vs.size()));
    return make(torch::stack, {list_of(vs)}, {{"dim", Arg(d)}}, std::move(s));
  }
  std::optional<Value> cat(const std::vector<Value>& vs, std::int64_t d) const {
    const auto du = static_cast<std::size_t>(d);
    if (vs.empty() || d < 0 || du >= vs[0].shape.size()) return std::nullopt;
    Shape s = vs[0].shape;
    s[du] = 0;
    for (const Value& v : vs) {
      if (v.shape.size() != s.size()) return std::nullopt;
      for (std::size_t i = 0; i < s.size(); ++i)
        if (i != du && v.shape[i] != s[i]) return std::nullopt;
      s[du] += v.shape[du];
    }
    return make(torch::cat, {list_of(vs)}, {{"dim", Arg(d)}}, std::move(s));
  }

 private:
  static Arg list_of(const std::vector<Value>& vs) {
    ArgList l;
    for (const Value& v : vs) l.emplace_back(v.node);
    return Arg(std::move(l));
  }
  Value make(OpRef op, ArgList args, ArgDict kwargs, Shape shape) const {
    Value out{nullptr, std::move(shape)};
    if (!g_) return out;
    out.node = g_->call_function(op, std::move(args), std::move(kwargs));
    out.node->meta.val = MetaVal(tensor_meta(out.shape, dtype_));
    return out;
  }
  Graph* g_;
  DType dtype_;
};

}  // namespace simplify_detail

// What the simplifier did with one split or unbind.
enum class SimplifyOutcome {
  rewritten,
  declined,  // nothing to simplify, or a case Inductor also leaves
  unsafe,    // Inductor would rewrite, but its result could differ: left, counted as <pass>_skipped
};

class SplitCatSimplifier {
 public:
  // `source` is a split (torch.split(x, [sizes], dim=d)) or, with `unbind`, an unbind.
  SplitCatSimplifier(Node* source, bool unbind, Counters* counters)
      : source_(source), unbind_(unbind), counters_(counters) {}

  SimplifyOutcome run(Graph& g) {
    namespace sd = simplify_detail;
    if (const auto v = read_source()) return *v;
    if (const auto v = read_users()) return *v;

    // The ranges of the input that the users read, as element offsets.
    std::set<std::pair<std::int64_t, std::int64_t>> wanted;
    for (const UserPlan& u : users_)
      for (const Item& it : u.items)
        if (const Range* r = std::get_if<Range>(&it)) wanted.insert(offsets_of(*r));
    std::vector<std::pair<std::int64_t, std::int64_t>> sorted(wanted.begin(), wanted.end());
    for (std::size_t i = 0; i + 1 < sorted.size(); ++i)
      if (sorted[i].second > sorted[i + 1].first) return SimplifyOutcome::declined;  // overlapping reads
    std::int64_t at = 0;
    for (const auto& r : sorted) {
      if (at < r.first) new_ranges_.emplace_back(at, r.first);
      new_ranges_.push_back(r);
      at = r.second;
    }
    if (at < offsets_.back()) new_ranges_.emplace_back(at, offsets_.back());
    const auto pieces = static_cast<std::int64_t>(sections_.size());
    if (static_cast<std::int64_t>(new_ranges_.size()) == pieces) return SimplifyOutcome::declined;
    // As in Inductor, the last simplification planned sets this count (even one not applied).
    if (counters_) counters_->assign("scmerge_split_sections_removed", pieces - static_cast<std::int64_t>(new_ranges_.size()));
    if (unbind_ && new_ranges_.size() != 1) return SimplifyOutcome::declined;

    // Inductor's transform condition: a range going into a stack, or into a
    // cat along another dim, is made of equal pieces.
    if (!unbind_)
      for (const UserPlan& u : users_) {
        if (!u.catlike || (!u.stack && u.dim == dim_)) continue;
        for (const Item& it : u.items)
          if (const Range* r = std::get_if<Range>(&it))
            for (std::int64_t i = r->first; i <= r->last; ++i)
              if (sections_[static_cast<std::size_t>(i)] != sections_[static_cast<std::size_t>(r->first)])
                return SimplifyOutcome::declined;
      }

    // kiln's own check, before any edit: every rebuilt cat/stack has its recorded shape.
    {
      sd::Builder plan(nullptr, dtype_);
      const std::vector<sd::Value> pieces_planned = new_pieces(nullptr);
      for (const UserPlan& u : users_) {
        if (!u.catlike) continue;
        const auto built = build(plan, u, pieces_planned);
        if (!built || built->shape != u.shape) return SimplifyOutcome::unsafe;
      }
    }

    // The rewrite.
    const std::vector<sd::Value> pieces_made = new_pieces(&g);
    for (UserPlan& u : users_) {
      if (!u.catlike) {
        for (const Item& it : u.items) {
          const Range& r = std::get<Range>(it);
          u.user->replace_input_with(getitems_.at(r.first), pieces_made[range_index(r)].node);
        }
        continue;
      }
      std::optional<sd::Value> built;
      {
        auto guard = g.inserting_before(u.user);
        sd::Builder make(&g, dtype_);
        built = build(make, u, pieces_made);
      }
      u.user->replace_all_uses_with(built->node);
      replaced_[u.user] = built->node;
    }
    increment("scmerge_split_removed");
    std::vector<Node*> to_erase;
    for (const UserPlan& u : users_)
      if (u.catlike) {
        increment("scmerge_cat_removed");
        to_erase.push_back(u.user);
      }
    for (auto it = getitems_.rbegin(); it != getitems_.rend(); ++it) to_erase.push_back(it->second);
    to_erase.push_back(source_);
    for (Node* n : to_erase)
      if (n->num_users() == 0) g.erase_node(n);
    increment("unbind_stack_pass");  // Inductor 2.11 counts every simplification under this name
    return SimplifyOutcome::rewritten;
  }

 private:
  struct Range {
    std::int64_t first, last;  // piece indices, inclusive
  };
  using Item = std::variant<Node*, Range>;  // an input not from the source, or a run of its pieces
  struct UserPlan {
    Node* user = nullptr;
    bool catlike = false;  // a cat or stack rebuilt from the ranges; else its pieces are swapped
    bool stack = false;
    std::int64_t dim = 0;
    simplify_detail::Shape shape;  // a cat/stack's recorded shape
    std::vector<Item> items;
  };

  void increment(const char* name) {
    if (counters_) counters_->increment(name);
  }

  std::optional<SimplifyOutcome> read_source() {
    namespace sd = simplify_detail;
    const Arg* input_arg = unbind_ ? detail::arg_value(*source_, 0, "input") : detail::arg_value(*source_, 0, "tensor");
    input_ = input_arg ? input_arg->node() : nullptr;
    const TensorMeta* in_meta = detail::tensor_of(input_);
    const auto in_shape = sd::static_shape(input_);
    if (!in_shape) return SimplifyOutcome::declined;
    in_shape_ = *in_shape;
    dtype_ = in_meta->dtype;
    std::int64_t dim = 0;
    const Arg* dim_arg = detail::arg_value(*source_, unbind_ ? 1 : 2, "dim");
    if (dim_arg && !dim_arg->is_none()) {
      const auto d = detail::int_of(dim_arg);
      if (!d) return SimplifyOutcome::declined;
      dim = *d;
    }
    const auto d = sd::normalized_dim(dim, in_shape_.size());
    if (!d) return SimplifyOutcome::declined;
    dim_ = *d;
    const std::int64_t extent = in_shape_[static_cast<std::size_t>(dim_)];
    if (unbind_) {
      sections_.assign(static_cast<std::size_t>(extent), 1);
    } else {
      const auto sections = sd::int_list(detail::arg_value(*source_, 1, "split_size_or_sections"));
      if (!sections) return SimplifyOutcome::declined;
      sections_ = *sections;
      std::int64_t total = 0;
      for (std::int64_t s : sections_) {
        if (s <= 0) return SimplifyOutcome::unsafe;  // an empty piece would make ranges ambiguous
        total += s;
      }
      if (total != extent) return SimplifyOutcome::unsafe;
    }
    offsets_.assign(1, 0);
    for (std::int64_t s : sections_) offsets_.push_back(offsets_.back() + s);
    // Every user is a getitem of a distinct piece.
    const auto n = static_cast<std::int64_t>(sections_.size());
    for (Node* u : source_->users()) {
      if (!sd::is_getitem(u)) return SimplifyOutcome::declined;
      auto i = detail::int_of(&u->args()[1]);
      if (!i) return SimplifyOutcome::declined;
      if (*i < 0) *i += n;
      if (*i < 0 || *i >= n || getitems_.count(*i)) return SimplifyOutcome::declined;
      getitems_[*i] = u;
    }
    if (getitems_.empty()) return SimplifyOutcome::declined;
    // Inductor removes an unbind only when each of its outputs is taken.
    if (unbind_ && static_cast<std::int64_t>(getitems_.size()) != n) return SimplifyOutcome::declined;
    return std::nullopt;
  }

  std::optional<std::int64_t> index_of(const Node* n) const {
    for (const auto& [i, gi] : getitems_)
      if (gi == n) return i;
    return std::nullopt;
  }

  // The users of the pieces in Inductor's order (each getitem's users in turn), read into plans.
  std::optional<SimplifyOutcome> read_users() {
    namespace sd = simplify_detail;
    std::vector<Node*> next;
    for (Node* gi : source_->users())
      for (Node* u : gi->users())
        if (std::find(next.begin(), next.end(), u) == next.end()) next.push_back(u);
    for (Node* u : next) {
      UserPlan plan;
      plan.user = u;
      if (u->is_call(torch::cat) || u->is_call(torch::stack)) {
        plan.catlike = true;
        plan.stack = u->is_call(torch::stack);
        // Only (tensors, dim): anything else (out=) could read a piece elsewhere.
        if (u->args().size() > 2) return SimplifyOutcome::unsafe;
        for (const auto& [key, value] : u->kwargs())
          if (key != "tensors" && key != "dim") return SimplifyOutcome::unsafe;
        const Arg* tensors = detail::arg_value(*u, 0, "tensors");
        if (!tensors || !tensors->list()) return SimplifyOutcome::declined;
        const Arg* dim_arg = detail::arg_value(*u, 1, "dim");
        std::int64_t dim = 0;
        if (dim_arg && !dim_arg->is_none()) {
          const auto d = detail::int_of(dim_arg);
          if (!d) return SimplifyOutcome::declined;
          dim = *d;
        }
        const auto shape = sd::static_shape(u);
        if (!shape) return SimplifyOutcome::unsafe;
        plan.shape = *shape;
        const auto d = sd::normalized_dim(dim, plan.shape.size());
        if (!d) return SimplifyOutcome::unsafe;
        plan.dim = *d;
        for (const Arg& t : *tensors->list()) {
          Node* tn = t.node();
          if (!tn) return SimplifyOutcome::declined;
          const auto i = index_of(tn);
          if (!i) {
            plan.items.emplace_back(tn);
            continue;
          }
          Range* last = plan.items.empty() ? nullptr : std::get_if<Range>(&plan.items.back());
          if (last && last->last + 1 == *i) last->last = *i;
          else plan.items.emplace_back(Range{*i, *i});
        }
      } else {
        for (Node* in : u->all_input_nodes())
          if (const auto i = index_of(in)) plan.items.emplace_back(Range{*i, *i});
      }
      users_.push_back(std::move(plan));
    }
    return std::nullopt;
  }

  std::pair<std::int64_t, std::int64_t> offsets_of(const Range& r) const {
    return {offsets_[static_cast<std::size_t>(r.first)], offsets_[static_cast<std::size_t>(r.last + 1)]};
  }
  std::size_t range_index(const Range& r) const {
    const auto want = offsets_of(r);
    return static_cast<std::size_t>(std::find(new_ranges_.begin(), new_ranges_.end(), want) - new_ranges_.begin());
  }

  // One value per new range: the input itself when one range covers it, else
  // the getitems of a new split (made only with a graph).
  std::vector<simplify_detail::Value> new_pieces(Graph* g) {
    namespace sd = simplify_detail;
    std::vector<sd::Value> out;
    if (new_ranges_.size() == 1) {
      out.push_back({g ? input_ : nullptr, in_shape_});
      return out;
    }
    sd::Shape sizes;
    MetaVal::List metas;
    for (const auto& [a, b] : new_ranges_) {
      sd::Shape s = in_shape_;
      s[static_cast<std::size_t>(dim_)] = b - a;
      sizes.push_back(b - a);
      metas.emplace_back(sd::tensor_meta(s, dtype_));
      out.push_back({nullptr, std::move(s)});
    }
    if (!g) return out;
    Node* split;
    {
      auto guard = g->inserting_after(source_);
      split = g->call_function(torch::split, {Arg(input_), sd::ints(sizes)}, {{"dim", Arg(dim_)}});
      split->meta.val = MetaVal(std::move(metas));
    }
    increment("scmerge_split_added");
    auto guard = g->inserting_after(split);
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].node = g->call_function(pyop::getitem, {Arg(split), Arg(static_cast<std::int64_t>(i))});
      out[i].node->meta.val = MetaVal(sd::tensor_meta(out[i].shape, dtype_));
    }
    return out;
  }

  // A cat/stack rebuilt from the new pieces, or nullopt where the shapes do not fit.
  std::optional<simplify_detail::Value> build(const simplify_detail::Builder& b, const UserPlan& u,
                                              const std::vector<simplify_detail::Value>& pieces) {
    namespace sd = simplify_detail;
    const std::int64_t c = u.dim;
    std::vector<sd::Value> parts;
    std::vector<sd::Value> to_stack;  // a stack's other inputs, stacked run by run
    auto flush = [&]() -> bool {
      if (to_stack.empty()) return true;
      auto s = b.stack(to_stack, c);
      to_stack.clear();
      if (!s) return false;
      parts.push_back(*s);
      return true;
    };
    for (const Item& it : u.items) {
      if (Node* const* other = std::get_if<Node*>(&it)) {
        // An earlier cat/stack of this source may have been replaced meanwhile.
        const auto again = replaced_.find(*other);
        Node* in = again == replaced_.end() ? *other : again->second;
        const auto shape = sd::static_shape(in);
        if (!shape) return std::nullopt;
        const sd::Value v{in, *shape};
        if (u.stack) to_stack.push_back(v);
        else parts.push_back(v);
        continue;
      }
      if (!flush()) return std::nullopt;
      const Range& r = std::get<Range>(it);
      const std::int64_t k = r.last - r.first + 1;
      std::optional<sd::Value> v = pieces[range_index(r)];
      if (unbind_) {
        // The whole input: its unbind dim is the stack dim, or is flattened into the cat dim.
        v = b.move_dim(*v, dim_, c);
        if (v && !u.stack) v = b.flatten_pair(*v, c);
      } else if (u.stack) {
        v = b.unflatten(*v, dim_, k);
        if (v) v = b.move_dim(*v, dim_, c);
      } else if (c != dim_ && k > 1) {
        v = b.unflatten(*v, dim_, k);
        if (v) v = b.move_dim(*v, dim_, c);
        if (v) v = b.flatten_pair(*v, c);
      }
      if (!v) return std::nullopt;
      parts.push_back(*v);
    }
    if (!flush()) return std::nullopt;
    if (parts.size() == 1) return parts[0];
    auto joined = b.cat(parts, c);
    if (joined && joined->node) increment("scmerge_cat_added");
    return joined;
  }

  Node* source_;
  bool unbind_;
  Counters* counters_;
  Node* input_ = nullptr;
  simplify_detail::Shape in_shape_;
  DType dtype_ = DType::float32;
  std::int64_t dim_ = 0;
  std::vector<std::int64_t> sections_;
  std::vector<std::int64_t> offsets_;
  std::map<std::int64_t, Node*> getitems_;
  std::vector<UserPlan> users_;
  std::vector<std::pair<std::int64_t, std::int64_t>> new_ranges_;
  std::map<Node*, Node*> replaced_;  // cat/stack users already rebuilt, by their new value
};

}  // namespace kiln::split_cat
