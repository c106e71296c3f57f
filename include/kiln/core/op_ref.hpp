#pragma once
// Op identity. An OpRef is a canonical target name ("aten.mm.default") plus its
// constexpr 64-bit hash; nodes store the hash, so checking a node's target against
// a pattern's op is one integer compare. The OpRegistry maps hashes back to names,
// rejects collisions, and records which ops mutate or have side effects.
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kiln/core/error.hpp"

namespace kiln {

// FNV-1a: simple, constexpr, and well spread for short dotted names.
constexpr std::uint64_t hash_op_name(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

struct OpRef {
  std::string_view name;
  std::uint64_t hash = 0;

  constexpr OpRef() = default;
  constexpr explicit OpRef(std::string_view n) : name(n), hash(hash_op_name(n)) {}
  constexpr OpRef(std::string_view n, std::uint64_t h) : name(n), hash(h) {}

  constexpr bool empty() const { return name.empty(); }
  friend constexpr bool operator==(const OpRef& a, const OpRef& b) { return a.hash == b.hash; }
};

// What the library knows about an op beyond its name.
struct OpTraits {
  bool mutates = false;       // writes one of its inputs (in-place `relu_`, `.out` overloads, `copy_`)
  bool side_effects = false;  // must not be removed even if unused (collectives, asserts, prints)
  bool impure() const { return mutates || side_effects; }
};

namespace detail {
// Whether `name` is an operator overload written "ns.op.overload", as
// str(torch.ops.ns.op.overload) prints it ("aten.add.Tensor", "mkldnn._linear_pointwise.default",
// a custom "mylib.frob.default"), rather than a Python-level dotted name
// ("torch.nn.functional.linear", "torch.linalg.norm", "operator.getitem").
constexpr bool is_overload_name(std::string_view name) {
  const auto first_dot = name.find('.');
  const auto last_dot = name.rfind('.');
  if (first_dot == std::string_view::npos || first_dot == last_dot) return false;
  const std::string_view ns = name.substr(0, first_dot);
  if (ns == "aten" || ns == "prims" || ns == "quantized_decomposed" || ns == "onednn" || ns == "_c10d_functional" ||
      ns == "c10d" || ns == "_c10d_functional_autograd" || ns == "quantized" || ns == "_quantized" ||
      ns == "mkldnn" || ns == "inductor" || ns == "profiler")
    return true;
  // Any other namespace with exactly three parts; torch.* names are Python callables.
  return ns != "torch" && name.find('.', first_dot + 1) == last_dot;
}
}  // namespace detail

// The packet ("aten.addmm") an overload name ("aten.addmm.default") belongs to,
// as torch.ops.aten.addmm.default.overloadpacket names it; empty for a name that
// is no overload (a Python callable, a method, a module path).
constexpr std::string_view op_packet_name(std::string_view name) {
  if (!detail::is_overload_name(name)) return {};
  return name.substr(0, name.rfind('.'));
}

// Heuristic traits from the canonical name, used when an op was not declared:
// ATen's naming makes in-place ops end in '_' and out-variants use the "out"
// overload; collective namespaces and torch.fx's side-effectful functions
// (asserts, profiler ranges, operator.setitem, ...) are side-effecting.
constexpr OpTraits infer_op_traits(std::string_view name) {
  OpTraits t;
  auto first_dot = name.find('.');
  auto last_dot = name.rfind('.');
  std::string_view ns = first_dot == std::string_view::npos ? std::string_view{} : name.substr(0, first_dot);
  if (detail::is_overload_name(name)) {
    std::string_view op = name.substr(first_dot + 1, last_dot - first_dot - 1);
    std::string_view overload = name.substr(last_dot + 1);
    if (!op.empty() && op.back() == '_' && !(op.size() >= 2 && op.substr(0, 2) == "__")) t.mutates = true;
    if (overload == "out" || (overload.size() > 4 && overload.substr(overload.size() - 4) == "_out")) t.mutates = true;
    if (op == "_assert_async" || op == "_assert_scalar" || op == "_assert_tensor_metadata" || op == "print" ||
        op == "sym_constrain_range" || op == "sym_constrain_range_for_size" || op == "_record_function_enter" ||
        op == "_record_function_enter_new" || op == "_record_function_exit")
      t.side_effects = true;
  }
  // Python-level callables in torch.fx.node._side_effectful_functions (and the
  // profiler op packets, which carry no overload).
  if (name == "operator.setitem" || name == "torch._assert" || name == "torch._assert_async" ||
      name == "torch._C._set_grad_enabled" || name == "torch.amp._enter_autocast" ||
      name == "torch.amp._exit_autocast" || name == "profiler._record_function_enter" ||
      name == "profiler._record_function_enter_new" || name == "profiler._record_function_exit")
    t.side_effects = true;
  if (ns == "_c10d_functional" || ns == "c10d" || ns == "_c10d_functional_autograd") t.side_effects = true;
  return t;
}

class OpRegistry {
 public:
  static OpRegistry& instance() {
    static OpRegistry registry;
    return registry;
  }

  // The OpRef for `name`, whose string view stays valid for the program's life.
  // Throws OpHashCollision if another name already has the same hash.
  OpRef intern(std::string_view name) {
    const std::uint64_t h = hash_op_name(name);
    {
      std::shared_lock lock(mutex_);
      if (auto it = entries_.find(h); it != entries_.end()) {
        check_same(it->second.name, name);
        return OpRef(it->second.name, h);
      }
    }
    std::unique_lock lock(mutex_);
    auto [it, inserted] = entries_.try_emplace(h);
    if (inserted) {
      storage_.emplace_back(name);
      it->second.name = storage_.back();
      it->second.traits = infer_op_traits(name);
    } else {
      check_same(it->second.name, name);
    }
    return OpRef(it->second.name, h);
  }

  // Registers a statically declared op (see KILN_DECLARE_OP) with explicit traits.
  bool declare(OpRef op, OpTraits traits) {
    std::unique_lock lock(mutex_);
    auto [it, inserted] = entries_.try_emplace(op.hash);
    if (!inserted) check_same(it->second.name, op.name);
    it->second.name = op.name;  // string literal: lives forever
    it->second.traits = traits;
    return true;
  }

  std::optional<std::string_view> name_of(std::uint64_t hash) const {
    std::shared_lock lock(mutex_);
    auto it = entries_.find(hash);
    if (it == entries_.end()) return std::nullopt;
    return it->second.name;
  }

  OpTraits traits(OpRef op) const {
    std::shared_lock lock(mutex_);
    auto it = entries_.find(op.hash);
    return it == entries_.end() ? infer_op_traits(op.name) : it->second.traits;
  }

  void set_traits(OpRef op, OpTraits traits) {
    intern(op.name);
    std::unique_lock lock(mutex_);
    entries_[op.hash].traits = traits;
  }

 private:
  struct Entry {
    std::string_view name;
    OpTraits traits;
  };
  static void check_same(std::string_view existing, std::string_view name) {
    if (existing != name)
      throw OpHashCollision("op name hash collision: '" + std::string(name) + "' and '" + std::string(existing) +
                            "' have the same 64-bit hash " + std::to_string(hash_op_name(name)) +
                            "; rename one of them");
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint64_t, Entry> entries_;
  std::deque<std::string> storage_;  // deque: element addresses never move
};

// The op name without namespace and overload: "aten.add.Tensor" -> "add",
// "torch.nn.functional.linear" -> "linear", "operator.getitem" -> "getitem".
// Used to derive default node names, as torch.fx does.
constexpr std::string_view op_short_name(std::string_view name) {
  auto first_dot = name.find('.');
  auto last_dot = name.rfind('.');
  if (first_dot == std::string_view::npos) return name;
  if (detail::is_overload_name(name)) return name.substr(first_dot + 1, last_dot - first_dot - 1);
  return name.substr(last_dot + 1);
}

}  // namespace kiln

// Declares a known op as a constexpr OpRef and registers it (and its traits) at
// start-up, so a hash collision with it is reported. One line per op:
//   KILN_DECLARE_OP(mm, "aten.mm.default")
//   KILN_DECLARE_OP_WITH(relu_, "aten.relu_.default", (::kiln::OpTraits{.mutates = true}))
#define KILN_DECLARE_OP_WITH(var, str, traits)                 \
  inline constexpr ::kiln::OpRef var{str};                     \
  inline const bool var##_kiln_registered_ =                   \
      ::kiln::OpRegistry::instance().declare(var, traits)
#define KILN_DECLARE_OP(var, str) KILN_DECLARE_OP_WITH(var, str, ::kiln::infer_op_traits(str))
