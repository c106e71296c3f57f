#pragma once
// LowerContext: what a kernel sees while one node is lowered. It reads the
// node's arguments (tensors as values, everything else as static values: shapes
// are known when lowering, so `x.shape[0] * 4` is a number by then), declares
// the node's results (a new arena buffer, a view of another value, a static
// value, a tuple) and adds the steps that compute them. Errors name the node,
// its target and the argument.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/core/node.hpp"
#include "kiln/runtime/program.hpp"

namespace kiln::runtime {

// A graph the executor cannot compile (an op with no kernel, a shape an op
// cannot take, a missing weight); the message names the node(s).
class CompileError : public Error {
 public:
  using Error::Error;
};

// What a node is after lowering: a tensor value, a static value (an int, a
// list of ints, a float, ...), or a tuple of these (multi-output ops).
struct Lowered {
  enum class Kind : std::uint8_t { none, tensor, value, tuple };
  Kind kind = Kind::none;
  ValueId id = 0;
  Arg value;
  std::vector<Lowered> items;

  static Lowered tensor(ValueId v) { return {Kind::tensor, v, {}, {}}; }
  static Lowered constant(Arg a) { return {Kind::value, 0, std::move(a), {}}; }
  static Lowered tuple(std::vector<Lowered> items) { return {Kind::tuple, 0, {}, std::move(items)}; }
  bool is_tensor() const { return kind == Kind::tensor; }
};

struct CompileOptions {
  int threads = 1;  // the threads a run uses unless the RunContext says otherwise
  // Activation layout of convolution graphs: decided from the graph as
  // Inductor's decide_layout_opt does (executor/layout_decision.hpp), or forced.
  enum class ConvLayout : std::uint8_t { decide, channels_last, contiguous };
  ConvLayout conv_layout = ConvLayout::decide;
  // Arithmetic of the heavy (oneDNN) kernels on an fp32 model: strict fp32, or
  // bf16: convolutions and constant-weight products read bf16 copies where the
  // CPU has bf16 instructions (kernels/onednn/common.hpp, bf16_products).
  enum class FpMath : std::uint8_t { strict, bf16 };
  FpMath fpmath = FpMath::strict;
  // Algorithm of 3x3, stride-1, ungrouped convolutions: direct (what PyTorch
  // runs), Winograd where oneDNN has it (AVX-512) and takes the epilogue, or
  // automatic: Winograd for the convolutions with enough work per thread to pay
  // for its reorders (kernels/onednn/conv_algorithm.hpp). Winograd does fewer
  // multiplications and rounds differently (within 1e-6 of the output's scale on ResNet-50).
  enum class ConvAlgorithm : std::uint8_t { direct, winograd, automatic };
  ConvAlgorithm conv_algorithm = ConvAlgorithm::automatic;
  // Samples per slice when a batch runs as slices, each slice on one thread,
  // the threads taking slices as they finish (executor/rebatch.hpp): no step
  // waits for the other threads, and each slice's tensors stay in its core's
  // cache. 0: the whole batch per step, every step split over the threads. A
  // graph that mixes samples (or a batch the slices do not divide) runs whole;
  // CompiledGraph::batch_split_refusal says why.
  std::int64_t split_batch = 0;
};

class LowerContext;
// A kernel's lower function: what the kernel table (kernels/kernel_table.hpp) holds per op.
using LowerFn = void (*)(LowerContext&);

// An argument given to a kernel in place of the node's own (LowerContext::lower_as):
// a value as a node would hold it (a node reference, an int, a list, ...) or a tensor value.
struct CallArg {
  Arg arg;
  std::optional<ValueId> tensor;
  static CallArg of(Arg a) { return {std::move(a), std::nullopt}; }
  static CallArg of_tensor(ValueId v) { return {Arg(), v}; }
};

class LowerContext {
 public:
  LowerContext(Program& program, std::unordered_map<const Node*, Lowered>& lowered, const CompileOptions& options)
      : program_(program), lowered_(lowered), options_(options) {}

  const Node& node() const { return *node_; }
  const CompileOptions& options() const { return options_; }
  // Whether convolutions, pooling and batch-norm keep activations channels-last
  // (decided once per graph before lowering).
  bool channels_last() const { return channels_last_; }
  void set_channels_last(bool on) { channels_last_ = on; }

  [[noreturn]] void fail(const std::string& what) const {
    throw CompileError("node " + node_->name() + " (" + std::string(node_->target_name()) + "): " +
                       (call_target_.empty() ? std::string() : "lowered as " + call_target_ + ": ") + what);
  }

  // ---- arguments: positional `pos` or keyword `kw` -------------------------
  // The raw argument, or nullptr when the node has neither.
  const Arg* find_arg(std::size_t pos, std::string_view kw) const {
    if (call_args_) {
      if (pos >= call_args_->size()) return nullptr;
      const CallArg& c = (*call_args_)[pos];
      return c.tensor ? &tensor_marker() : &c.arg;
    }
    if (pos < node_->args().size()) return &node_->arg(pos);
    if (!kw.empty())
      if (const Arg* a = node_->kwargs().find(kw)) return a;
    return nullptr;
  }
  // Present and not None.
  bool has(std::size_t pos, std::string_view kw) const {
    if (given_tensor(pos)) return true;
    const Arg* a = find_arg(pos, kw);
    if (!a || a->is_none()) return false;
    if (const Node* n = a->node()) {
      const Lowered& l = lowered(n);
      return !(l.kind == Lowered::Kind::value && l.value.is_none()) && l.kind != Lowered::Kind::none;
    }
    return true;
  }
  // The lowering of a node argument (a tensor, a static value or a tuple).
  const Lowered& lowered(const Node* n) const {
    auto it = lowered_.find(n);
    if (it == lowered_.end()) fail("argument " + n->name() + " has not been lowered");
    return it->second;
  }
  // The argument with every node that has a static value replaced by that value.
  Arg value(std::size_t pos, std::string_view kw) const {
    if (given_tensor(pos)) fail(field(pos, kw) + " is a tensor where a value is expected");
    const Arg* a = find_arg(pos, kw);
    if (!a) return Arg();
    return resolve(*a, pos, kw);
  }
  ValueId tensor(std::size_t pos, std::string_view kw) const {
    if (const auto v = given_tensor(pos)) return *v;
    const Arg* a = find_arg(pos, kw);
    if (!a) fail(field(pos, kw) + " is missing");
    return tensor_of(*a, pos, kw);
  }
  std::optional<ValueId> optional_tensor(std::size_t pos, std::string_view kw) const {
    if (!has(pos, kw)) return std::nullopt;
    return tensor(pos, kw);
  }
  // A list of tensors (cat, stack): a list argument, or a tuple-valued node.
  std::vector<ValueId> tensors(std::size_t pos, std::string_view kw) const {
    const Arg* a = find_arg(pos, kw);
    if (!a) fail(field(pos, kw) + " is missing");
    std::vector<ValueId> out;
    if (const ArgList* l = a->list()) {
      for (const Arg& x : *l) out.push_back(tensor_of(x, pos, kw));
    } else if (const Node* n = a->node(); n && lowered(n).kind == Lowered::Kind::tuple) {
      for (const Lowered& x : lowered(n).items) {
        if (!x.is_tensor()) fail(field(pos, kw) + " holds something that is not a tensor");
        out.push_back(x.id);
      }
    } else {
      fail(field(pos, kw) + " is not a list of tensors");
    }
    return out;
  }
  std::int64_t int_arg(std::size_t pos, std::string_view kw, std::optional<std::int64_t> dflt = std::nullopt) const {
    Arg a = value(pos, kw);
    if (a.is_none()) {
      if (dflt) return *dflt;
      fail(field(pos, kw) + " is missing");
    }
    if (const auto* i = a.get_if<std::int64_t>()) return *i;
    if (const auto* b = a.get_if<bool>()) return *b ? 1 : 0;
    fail(field(pos, kw) + " is not an int");
  }
  std::optional<std::int64_t> optional_int(std::size_t pos, std::string_view kw) const {
    if (value(pos, kw).is_none()) return std::nullopt;
    return int_arg(pos, kw);
  }
  double scalar_arg(std::size_t pos, std::string_view kw, std::optional<double> dflt = std::nullopt) const {
    Arg a = value(pos, kw);
    if (a.is_none()) {
      if (dflt) return *dflt;
      fail(field(pos, kw) + " is missing");
    }
    if (const auto* d = a.get_if<double>()) return *d;
    if (const auto* i = a.get_if<std::int64_t>()) return static_cast<double>(*i);
    if (const auto* b = a.get_if<bool>()) return *b ? 1.0 : 0.0;
    fail(field(pos, kw) + " is not a number");
  }
  bool bool_arg(std::size_t pos, std::string_view kw, std::optional<bool> dflt = std::nullopt) const {
    Arg a = value(pos, kw);
    if (a.is_none()) {
      if (dflt) return *dflt;
      fail(field(pos, kw) + " is missing");
    }
    if (const auto* b = a.get_if<bool>()) return *b;
    if (const auto* i = a.get_if<std::int64_t>()) return *i != 0;
    fail(field(pos, kw) + " is not a bool");
  }
  // A list of ints; a single int counts as a list of one (as `dim=1` for `dim=[1]`).
  std::vector<std::int64_t> ints_arg(std::size_t pos, std::string_view kw,
                                     std::optional<std::vector<std::int64_t>> dflt = std::nullopt) const {
    Arg a = value(pos, kw);
    if (a.is_none()) {
      if (dflt) return *dflt;
      fail(field(pos, kw) + " is missing");
    }
    std::vector<std::int64_t> out;
    if (const auto* i = a.get_if<std::int64_t>()) return {*i};
    const ArgList* l = a.list();
    if (!l) fail(field(pos, kw) + " is not a list of ints");
    for (const Arg& x : *l) {
      const auto* i = x.get_if<std::int64_t>();
      if (!i) fail(field(pos, kw) + " holds something that is not an int");
      out.push_back(*i);
    }
    return out;
  }
  std::string string_arg(std::size_t pos, std::string_view kw, std::optional<std::string> dflt = std::nullopt) const {
    Arg a = value(pos, kw);
    if (a.is_none()) {
      if (dflt) return *dflt;
      fail(field(pos, kw) + " is missing");
    }
    if (const auto* s = a.get_if<std::string>()) return *s;
    fail(field(pos, kw) + " is not a string");
  }

  // ---- lowering as another op -----------------------------------------------
  // Lowers the node being lowered as a call of `target` with `args` (positional,
  // in that op's signature) in place of its own: a call_module runs as its
  // functional form. The kernel comes from the table lowering uses.
  void lower_as(std::string_view target, const std::vector<CallArg>& args) {
    const LowerFn fn = find_kernel_ ? find_kernel_(target) : nullptr;
    if (!fn) fail("it lowers as " + std::string(target) + ", which has no kernel");
    struct Restore {
      LowerContext& c;
      const std::vector<CallArg>* args;
      std::string target;
      ~Restore() {
        c.call_args_ = args;
        c.call_target_ = std::move(target);
      }
    } restore{*this, call_args_, call_target_};
    call_args_ = &args;
    call_target_ = std::string(target);
    fn(*this);
  }
  // Lowers one piece of a node that a kernel computes as several ops (the
  // steps of torchvision's shifted_window_attention) as a call of `target`,
  // and gives the piece's result. A piece is not the node's result, so no
  // kernel folds the node's users into it (may_fuse_users).
  Lowered lower_piece(std::string_view target, const std::vector<CallArg>& args) {
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } depth{piece_depth_};
    lower_as(target, args);
    return take_result();
  }
  bool may_fuse_users() const { return piece_depth_ == 0; }
  // The constant of the weight named `name` (a module's "conv.weight"), shared
  // with get_attr nodes of that name; nullopt when no such weight was given.
  // (Const: the constant is made on first use, and dropped after lowering when no step reads it.)
  std::optional<ValueId> weight(std::string_view name) const {
    return find_weight_ ? find_weight_(name) : std::nullopt;
  }
  // Set by lowering: where lower_as finds kernels and weight() finds weights.
  void set_kernel_finder(std::function<LowerFn(std::string_view)> f) { find_kernel_ = std::move(f); }
  void set_weight_finder(std::function<std::optional<ValueId>(std::string_view)> f) { find_weight_ = std::move(f); }

  // ---- values ---------------------------------------------------------------
  const ValueInfo& info(ValueId v) const { return program_.values[v]; }
  const Layout& layout(ValueId v) const { return program_.values[v].layout; }
  // The constant behind `v` (a weight or a view of one), or nullptr.
  std::optional<Tensor> constant(ValueId v) const {
    const ValueInfo& i = program_.values[v];
    if (i.storage == Storage::constant) return program_.constants[i.index];
    if (i.storage == Storage::view) {
      const ValueInfo& b = program_.values[i.base];
      if (b.storage == Storage::constant) {
        const Tensor& c = program_.constants[b.index];
        return Tensor::wrap(static_cast<std::byte*>(c.raw()) + i.offset * static_cast<std::int64_t>(i.layout.itemsize()),
                            i.layout);
      }
    }
    return std::nullopt;
  }
  // Whether the node being lowered may write over `v`, the value of `owner`,
  // whose reader `last_reader` it folds in (a residual add): `v`'s buffer is in
  // the arena, and every node whose value shares that buffer (`owner`, views of
  // it, and the value an earlier residual add was summed into) has all its
  // readers but `last_reader` lowered already: lowering goes in graph order, and
  // so do the steps. The nodes sharing a buffer are connected through their
  // arguments and users, so the walk visits only them.
  bool may_overwrite(const Node& owner, ValueId v, const Node& last_reader) const {
    const ValueInfo& vi = info(v);
    const ValueId base = vi.storage == Storage::view ? vi.base : v;
    if (info(base).storage != Storage::arena) return false;
    std::vector<const Node*> todo{&owner};
    std::unordered_set<const Node*> seen{&owner};
    auto visit = [&](const Node* m) {
      if (seen.contains(m)) return;
      const auto it = lowered_.find(m);
      if (it == lowered_.end() || !shares(it->second, base)) return;
      seen.insert(m);
      todo.push_back(m);
    };
    while (!todo.empty()) {
      const Node* n = todo.back();
      todo.pop_back();
      for (const Node* u : n->users()) {
        if (u == &last_reader) continue;
        if (!lowered_.contains(u) || collective_in_flight(*u)) return false;
        visit(u);
      }
      for (const Node* a : n->all_input_nodes()) visit(a);
    }
    return true;
  }
  // Whether `n` is a collective whose wait is not lowered yet: MPI may still
  // read its input then (kernels/collectives.hpp), so nothing overwrites it.
  bool collective_in_flight(const Node& n) const {
    const std::string_view t = n.target_name();
    if (n.op() != OpKind::call_function || !t.starts_with("_c10d_functional.") || t.starts_with("_c10d_functional.wait_tensor"))
      return false;
    for (const Node* w : n.users())
      if (!lowered_.contains(w)) return true;
    return false;
  }
  // Makes `v`, a row-major arena buffer that no step has touched yet (an
  // empty()), a constant of zeros, so that a write known now (fill_ of a
  // value) happens once, when lowering; false if it cannot.
  bool make_constant_if_untouched(ValueId v) {
    ValueInfo& i = program_.values[v];
    if (i.storage != Storage::arena || !i.layout.is_contiguous()) return false;
    auto root = [&](ValueId x) { return program_.values[x].storage == Storage::view ? program_.values[x].base : x; };
    for (const auto& s : program_.steps) {
      for (ValueId r : s->reads)
        if (root(r) == v) return false;
      for (ValueId w : s->writes)
        if (root(w) == v) return false;
    }
    i.storage = Storage::constant;
    i.index = static_cast<std::uint32_t>(program_.constants.size());
    program_.constants.push_back(Tensor::zeros(i.layout.shape, i.layout.dtype));
    return true;
  }
  // A new buffer in the arena for this node.
  ValueId buffer(Layout layout) {
    ValueInfo i;
    i.layout = std::move(layout);
    i.storage = Storage::arena;
    i.name = node_->name();
    return add_value(std::move(i));
  }
  ValueId buffer(Shape shape, DType dtype) { return buffer(Layout::contiguous(std::move(shape), dtype)); }
  // A new buffer of `like`'s shape, dense in the same dim order (what an
  // element-wise op's result should be, so that channels-last propagates).
  ValueId buffer_like(ValueId like, DType dtype) { return buffer(dense_like(layout(like), dtype)); }
  // A view `offset` elements into `base` (a view of a view looks into the first base).
  ValueId view(ValueId base, Layout layout, std::int64_t offset = 0) {
    const ValueInfo& b = program_.values[base];
    ValueInfo i;
    i.layout = std::move(layout);
    i.storage = Storage::view;
    i.base = b.storage == Storage::view ? b.base : base;
    i.offset = b.storage == Storage::view ? b.offset + offset : offset;
    i.name = node_->name();
    return add_value(std::move(i));
  }
  // A constant made while lowering (a pre-packed weight, a folded value).
  ValueId constant_value(Tensor t, std::string name) {
    ValueInfo i;
    i.layout = t.layout();
    i.storage = Storage::constant;
    i.index = static_cast<std::uint32_t>(program_.constants.size());
    i.name = std::move(name);
    program_.constants.push_back(std::move(t));
    return add_value(std::move(i));
  }

  // ---- steps and results ----------------------------------------------------
  // Adds a step computing this node; `reads` and `writes` give the values'
  // lifetimes to the planner; `scratch` bytes are the step's alone while it runs.
  void add_step(std::unique_ptr<Step> step, std::vector<ValueId> reads, std::vector<ValueId> writes,
                std::size_t scratch = 0) {
    step->node = node_->name();
    step->op_type = std::string(node_->target_name());
    if (node_->op() == OpKind::call_module)  // the class, not the path: --profile groups by op type
      if (const ModuleInfo* m = node_->graph().modules().find(node_->target_name())) step->op_type = m->class_name;
    step->reads = std::move(reads);
    step->writes = std::move(writes);
    step->scratch_bytes = scratch;
    program_.steps.push_back(std::move(step));
  }
  // A kernel that computes what its input's producer did itself (a convolution
  // that quantizes the graph's float input as it copies it) drops the
  // producer's step, which nothing reads any more: the one step that writes the
  // arena value `v` and nothing else, when no step reads `v` or a view of it.
  // The index of that step, or nullopt when there is none to drop.
  // Steps already dropped do not count as readers (a chain is dropped from its end).
  std::optional<std::size_t> unread_step_writing(ValueId v) const {
    if (info(v).storage != Storage::arena) return std::nullopt;
    const auto touches = [&](ValueId w) { return w == v || (info(w).storage == Storage::view && info(w).base == v); };
    std::optional<std::size_t> found;
    for (std::size_t s = 0; s < program_.steps.size(); ++s) {
      const Step& step = *program_.steps[s];
      if (std::find(dropped_.begin(), dropped_.end(), &step) != dropped_.end()) continue;
      for (ValueId r : step.reads)
        if (touches(r)) return std::nullopt;
      for (ValueId w : step.writes)
        if (touches(w)) {
          if (found || step.has_effects || step.writes.size() != 1 || w != v) return std::nullopt;
          found = s;
        }
    }
    return found;
  }
  // Drops step `index` (from unread_step_writing) once the node being lowered
  // is done: until then the steps keep their places.
  void drop_step(std::size_t index) { dropped_.push_back(program_.steps[index].get()); }
  // Used by lowering after each node.
  void erase_dropped_steps() {
    if (dropped_.empty()) return;
    std::erase_if(program_.steps, [&](const std::unique_ptr<Step>& s) {
      return std::find(dropped_.begin(), dropped_.end(), s.get()) != dropped_.end();
    });
    dropped_.clear();
  }
  // ---- fusing the op that follows ---------------------------------------------
  // A kernel may fold its node's only user into its own steps (a batch-norm, a
  // relu or a residual add into a convolution's primitive): it lowers the user
  // here and lowering then skips it.
  // The node's only user, or nullptr when it has none or several.
  const Node* sole_user() const { return node_->num_users() == 1 ? *node_->users().begin() : nullptr; }
  bool is_lowered(const Node* n) const { return lowered_.count(n) != 0; }
  // Records `result` as what `user` lowers to; no step is added for it.
  void absorb(const Node& user, Lowered result) {
    lowered_[&user] = std::move(result);
    absorbed_.insert(&user);
  }
  bool was_absorbed(const Node* n) const { return absorbed_.count(n) != 0; }

  void set_result(ValueId v) { result_ = Lowered::tensor(v); }
  void set_result(Lowered l) { result_ = std::move(l); }
  void set_static_result(Arg a) { result_ = Lowered::constant(std::move(a)); }

  // Used by lowering: binds the context to a node and takes its result.
  void begin(const Node& n) {
    node_ = &n;
    result_ = Lowered{};
  }
  Lowered take_result() { return std::move(result_); }

 private:
  // The tensor given as argument `pos` by lower_as, if any.
  std::optional<ValueId> given_tensor(std::size_t pos) const {
    if (!call_args_ || pos >= call_args_->size()) return std::nullopt;
    return (*call_args_)[pos].tensor;
  }
  // What find_arg shows for a given tensor: present, not None, not a node.
  static const Arg& tensor_marker() {
    static const Arg marker(std::string("<tensor>"));
    return marker;
  }
  // Whether `l` (or an item of it) is the buffer `base` or a view into it.
  bool shares(const Lowered& l, ValueId base) const {
    if (l.kind == Lowered::Kind::tensor)
      return l.id == base || (info(l.id).storage == Storage::view && info(l.id).base == base);
    for (const Lowered& item : l.items)
      if (shares(item, base)) return true;
    return false;
  }
  std::string field(std::size_t pos, std::string_view kw) const {
    if (call_args_) return kw.empty() ? "args[" + std::to_string(pos) + "]" : "argument '" + std::string(kw) + "'";
    if (pos < node_->args().size() || kw.empty()) return "args[" + std::to_string(pos) + "]";
    return "argument '" + std::string(kw) + "'";
  }
  ValueId tensor_of(const Arg& a, std::size_t pos, std::string_view kw) const {
    const Node* n = a.node();
    if (!n) fail(field(pos, kw) + " is not a tensor");
    const Lowered& l = lowered(n);
    if (!l.is_tensor()) fail(field(pos, kw) + " (" + n->name() + ") is not a tensor");
    return l.id;
  }
  Arg resolve(const Arg& a, std::size_t pos, std::string_view kw) const {
    if (const Node* n = a.node()) {
      const Lowered& l = lowered(n);
      if (l.kind == Lowered::Kind::value) return l.value;
      if (l.kind == Lowered::Kind::none) return Arg();
      return a;  // a tensor or tuple stays a node reference
    }
    if (const ArgList* list = a.list()) {
      ArgList out;
      out.reserve(list->size());
      for (const Arg& x : *list) out.push_back(resolve(x, pos, kw));
      return Arg(std::move(out));
    }
    return a;
  }
  ValueId add_value(ValueInfo i) {
    program_.values.push_back(std::move(i));
    return static_cast<ValueId>(program_.values.size() - 1);
  }

  Program& program_;
  std::unordered_map<const Node*, Lowered>& lowered_;
  const CompileOptions& options_;
  const Node* node_ = nullptr;
  Lowered result_;
  bool channels_last_ = false;
  std::unordered_set<const Node*> absorbed_;
  std::vector<const Step*> dropped_;  // drop_step's, erased after the node
  const std::vector<CallArg>* call_args_ = nullptr;  // lower_as's arguments and target while it runs
  std::string call_target_;
  int piece_depth_ = 0;  // lower_piece calls under way
  std::function<LowerFn(std::string_view)> find_kernel_;
  std::function<std::optional<ValueId>(std::string_view)> find_weight_;
};

// A step whose run is a callable (a lambda capturing the value ids it uses).
template <class F>
class FnStep final : public Step {
 public:
  explicit FnStep(F f) : f_(std::move(f)) {}
  void run(Frame& frame) const override { f_(frame); }

 private:
  F f_;
};
template <class F>
std::unique_ptr<Step> make_step(F f) {
  return std::make_unique<FnStep<F>>(std::move(f));
}

}  // namespace kiln::runtime
