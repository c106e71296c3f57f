// kiln-opt: read an fx-graph-json graph, run named passes, write and/or print
// it. All of it is kiln::opt_main (kiln/opt_main.hpp), which a user calls with
// a registry of their own passes to build their own driver; `kiln-opt --help`
// lists the options. Built with the executor, --numeric-check runs the graph
// after every pass.
#include "kiln/opt_main.hpp"

#ifdef KILN_HAVE_RUNTIME
#include <memory>

#include "kiln/kernels/registry.hpp"  // the kernels themselves: tools/kernels_*.cpp
#include "kiln/executor/numeric_check.hpp"

namespace {
std::function<void(const kiln::Graph&, const std::string&)> make_numeric_check(const kiln::io::GraphFile& f,
                                                                                const kiln::io::WeightStore& weights,
                                                                                double rtol, double atol) {
  auto check = std::make_shared<kiln::runtime::NumericCheck>(f.graph, kiln::runtime::weights_of(f),
                                                             kiln::runtime::Tolerance{rtol, atol});
  return [check, &weights](const kiln::Graph& g, const std::string& pass) {
    try {
      check->hook(&weights)(g, pass);
    } catch (const kiln::runtime::NumericMismatch& e) {
      throw kiln::opt_detail::NumericCheckFailed(e.what());
    }
  };
}
}  // namespace
#endif

int main(int argc, char** argv) {
  kiln::PassRegistry registry = kiln::default_pass_registry();
#ifdef KILN_HAVE_RUNTIME
  return kiln::opt_main(argc, argv, registry, "kiln-opt", make_numeric_check);
#else
  return kiln::opt_main(argc, argv, registry);
#endif
}
