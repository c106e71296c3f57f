// A driver of one's own: kiln-opt's command line with a pass added, in a few
// lines (kiln::opt_main, as MLIR's MlirOptMain). Try `my-opt --list-passes`.
#include <kiln/opt_main.hpp>
#include <kiln/ops/aten.hpp>

// neg(neg(x)) -> x, counted as drop_double_neg.
kiln::Pass drop_double_neg() {
  return kiln::Pass{"drop_double_neg", "neg(neg(x)) -> x", [](kiln::Graph& g, kiln::PassContext& ctx) {
                      bool changed = false;
                      for (kiln::Node* outer : g.find_nodes(kiln::OpKind::call_function, kiln::aten::neg)) {
                        kiln::Node* inner = outer->arg(0).node();
                        if (outer->erased() || !inner || !inner->is_call(kiln::aten::neg)) continue;
                        outer->replace_all_uses_with(inner->arg(0).node());
                        g.erase_node(outer);
                        if (inner->num_users() == 0) g.erase_node(inner);
                        ctx.counters.increment("drop_double_neg");
                        changed = true;
                      }
                      return changed;
                    }};
}

int main(int argc, char** argv) {
  kiln::PassRegistry registry = kiln::default_pass_registry();
  registry.add(drop_double_neg());
  return kiln::opt_main(argc, argv, registry, "my-opt");
}
