// kiln-opt: read an fx-graph-json graph, run named passes, write and/or print
// it. All of it is kiln::opt_main (kiln/opt_main.hpp), which a user calls with
// a registry of their own passes to build their own driver; `kiln-opt --help`
// lists the options.
#include "kiln/opt_main.hpp"

int main(int argc, char** argv) {
  kiln::PassRegistry registry = kiln::default_pass_registry();
  return kiln::opt_main(argc, argv, registry);
}
