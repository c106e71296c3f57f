#pragma once
// A kernel is a specialization of Kernel<"target"> chosen at compile time for
// its op. Its one member, `static void lower(runtime::LowerContext&)`, infers
// the node's result (shape, dtype, or a static value), prepares what the
// kernel needs once (oneDNN primitives, packed weights) and adds the steps that
// run it. kernels/registry.hpp lists every kernel in one compile-time table.
//
//   template <> struct Kernel<"aten.relu.default"> {
//     static void lower(runtime::LowerContext& ctx);
//   };
//
// Targets are the node's key: a call_function's target ("aten.mm.default",
// "torch.nn.functional.linear", "operator.add"), "Tensor.<name>" for a
// call_method ("Tensor.view"), "module:<class>" for a call_module.
#include <concepts>
#include <string>
#include <string_view>

#include "kiln/core/node.hpp"
#include "kiln/pattern/fixed_string.hpp"
#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels {

using pattern::FixedString;

template <FixedString Target>
struct Kernel;  // no definition: no kernel for Target

template <class K>
struct kernel_traits;
template <FixedString Target>
struct kernel_traits<Kernel<Target>> {
  static constexpr std::string_view target = Target.view();
};

template <class K>
concept LowerableKernel = requires(runtime::LowerContext& ctx) {
  { K::lower(ctx) } -> std::same_as<void>;
  kernel_traits<K>::target;
};

using LowerFn = void (*)(runtime::LowerContext&);

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

}  // namespace kiln::kernels
