#pragma once
// A kernel is a type with one member, `static void lower(runtime::LowerContext&)`:
// it infers the node's result (shape, dtype, or a static value), prepares what
// it needs once (oneDNN primitives, packed weights) and adds the steps that run
// it. A kernel group binds op keys to kernels, each key written once, in a
// compile-time list (kernels/kernel_group.hpp):
//
//   struct MyRelu { static void lower(runtime::LowerContext& ctx); };
//   using my_kernels = KernelGroup<KernelEntry<"aten.relu.default", MyRelu>,
//                                  KernelEntry<"torch.relu", MyRelu>>;
//
// Keys are the node's key: a call_function's target ("aten.mm.default",
// "torch.nn.functional.linear", "operator.add"), "Tensor.<name>" for a
// call_method ("Tensor.view"), "module:<class>" for a call_module.
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/fixed_string.hpp"
#include "kiln/core/node.hpp"
#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels {

template <class K>
concept LowerableKernel = requires(runtime::LowerContext& ctx) {
  { K::lower(ctx) } -> std::same_as<void>;
};

using runtime::LowerFn;

// Reading another node's arguments (a kernel that folds its neighbours in):
// the number `a` holds (a float or an int), else nullopt.
inline std::optional<double> as_number(const Arg& a) {
  if (const auto* d = a.get_if<double>()) return *d;
  if (const auto* i = a.get_if<std::int64_t>()) return static_cast<double>(*i);
  return std::nullopt;
}
// The argument at `pos` or named `kw`, or nullptr when not given.
inline const Arg* given_arg(const Node& n, std::size_t pos, std::string_view kw) {
  return pos < n.args().size() ? &n.arg(pos) : n.kwargs().find(kw);
}
inline std::optional<double> number_arg(const Node& n, std::size_t pos, std::string_view kw) {
  const Arg* a = given_arg(n, pos, kw);
  return a ? as_number(*a) : std::nullopt;
}

// The key a node's kernel is registered under (see above).
inline std::string kernel_key(const Node& n) {
  switch (n.op()) {
    case OpKind::call_method: return "Tensor." + std::string(n.target_name());
    case OpKind::call_module: {
      const ModuleInfo* m = n.graph().modules().find(n.target_name());
      return "module:" + (m ? m->class_name : std::string(n.target_name()));
    }
    case OpKind::call_function: {
      // A Tensor method called as a function (Inductor's split/cat rewrites write
      // torch.Tensor.view) is the method; so is a bare name, which is how an
      // exporter without a dotted name for the method descriptor writes it.
      const std::string_view t = n.target_name();
      if (t.starts_with("torch.Tensor.")) return "Tensor." + std::string(t.substr(13));
      if (!t.empty() && t.find('.') == std::string_view::npos) return "Tensor." + std::string(t);
      return std::string(t);
    }
    default: return std::string(n.target_name());
  }
}

// How an error names a node with no kernel: a call_function by its own target
// (a bare "my_op" is looked up as Tensor.my_op, but the graph calls my_op),
// other nodes by their key.
inline std::string missing_kernel_name(const Node& n) {
  if (n.op() == OpKind::call_function) return std::string(n.target_name());
  return kernel_key(n);
}

// One piece of a node that its kernel computes as several ops
// (LowerContext::lower_piece), lowered as `target`: the piece's tensor.
inline runtime::ValueId piece(runtime::LowerContext& ctx, std::string_view target, const std::vector<runtime::CallArg>& args) {
  const runtime::Lowered r = ctx.lower_piece(target, args);
  if (!r.is_tensor()) ctx.fail(std::string(target) + " gave no tensor");
  return r.id;
}

// `v` converted to `dtype` by prims.convert_element_type, as a piece.
inline runtime::ValueId convert_piece(runtime::LowerContext& ctx, runtime::ValueId v, DType dtype) {
  return piece(ctx, "prims.convert_element_type.default", {runtime::CallArg::of_tensor(v), runtime::CallArg::of(Arg(dtype))});
}

}  // namespace kiln::kernels
