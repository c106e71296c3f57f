// kiln-run: compile a graph with kiln's executor, run it, time it, write or
// compare its outputs. All of it is kiln::run_main (kiln/run_main.hpp);
// `kiln-run --help` lists the options.
#include <cstdio>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/kernels/registry.hpp"  // the kernels themselves: tools/kernels_*.cpp
#include "kiln/run_main.hpp"
#ifdef KILN_HAVE_MPI
#include "kiln/kernels/mpi/world.hpp"
#endif

int main(int argc, char** argv) {
#ifdef KILN_HAVE_MPI
  // Under mpirun every rank runs the graph (its collectives need them all);
  // rank 0 reports, the others keep their standard output quiet.
  std::optional<kiln::kernels::mpi::World> world;
  if (kiln::kernels::mpi::launched()) world.emplace(&argc, &argv);
  if (world && world->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 2;
  // Every rank's outputs are the same: only rank 0 writes them (--outputs).
  std::vector<char*> args(argv, argv + argc);
  if (world && world->rank() != 0)
    for (std::size_t i = 1; i < args.size();) {
      const std::string_view a = args[i];
      if (a == "--outputs" && i + 1 < args.size()) args.erase(args.begin() + i, args.begin() + i + 2);
      else if (a.starts_with("--outputs=")) args.erase(args.begin() + i);
      else ++i;
    }
  argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  argv = args.data();
#endif
  // shard_parameters shards over the ranks the launcher started (alone: one).
  nlohmann::json ranks = {{"world_size", 1}, {"rank", 0}};
#ifdef KILN_HAVE_MPI
  if (world) ranks = {{"world_size", world->size()}, {"rank", world->rank()}};
#endif
  kiln::PassRegistry registry = kiln::default_pass_registry();
  return kiln::run_main(argc, argv, registry, "kiln-run", {{"shard_parameters", ranks}});
}
