// The collectives outside mpirun: a graph with a collective is refused when
// compiled, naming the node, whether kiln was built without MPI or the program
// holds no kernels::mpi::World. (Their results under mpirun: tests/mpi/.)
#include <doctest/doctest.h>

#include <string>

#include "kiln/core.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops/c10d_meta.hpp"

using namespace kiln;
namespace c10d = kiln::c10d_functional;

TEST_CASE("a collective compiled without MPI running is refused naming the node") {
  Graph g;
  Node* x = g.placeholder("x", c10d_meta::contiguous({4, 3}, DType::float32));
  Node* ag = g.call_function(c10d::all_gather_into_tensor, {x, Arg(std::int64_t{2}), Arg("0")});
  ag->meta.val = *c10d_meta::infer(*ag);
  Node* w = g.call_function(c10d::wait_tensor, {ag});
  w->meta.val = *c10d_meta::infer(*w);
  g.output(Arg(ArgList{Arg(w)}));
  std::string what;
  try {
    runtime::CompiledGraph::compile(g, {});
  } catch (const runtime::CompileError& e) {
    what = e.what();
  }
  CAPTURE(what);
  CHECK(what.find("node " + ag->name() + " (_c10d_functional.all_gather_into_tensor.default)") != std::string::npos);
  const bool without_mpi = what.find("built without MPI") != std::string::npos;
  const bool not_started = what.find("MPI is not initialized") != std::string::npos;
  CHECK((without_mpi || not_started));
}
