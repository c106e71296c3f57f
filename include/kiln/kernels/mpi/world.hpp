#pragma once
// Open MPI for the collective kernels (kernels/collectives.hpp), present only in
// a build with the kiln::mpi component (KILN_HAVE_MPI). `World` owns
// MPI_Init_thread and MPI_Finalize: a program that runs graphs with collectives
// (kiln-run, the MPI tests) makes one in main(). Each group name a graph uses
// gets its own communicator, a duplicate of MPI_COMM_WORLD made the first time
// a collective of that group is lowered (every rank lowers the same graph, so
// the duplicates are made in the same order everywhere) and freed by World.
#include <cstdlib>
#include <map>
#include <string>

#include <mpi.h>

#include "kiln/core/error.hpp"

namespace kiln::kernels::mpi {

namespace detail {
inline std::map<std::string, MPI_Comm>& communicators() {
  static std::map<std::string, MPI_Comm> comms;
  return comms;
}
}  // namespace detail

inline bool initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Whether an MPI launcher (mpirun, mpiexec, srun with PMIx) started this
// process: a tool makes a World only then, so a run without one never touches MPI.
inline bool launched() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// The communicator of `group` (a collective's group_name).
inline MPI_Comm communicator(const std::string& group) {
  auto& comms = detail::communicators();
  if (auto it = comms.find(group); it != comms.end()) return it->second;
  MPI_Comm c = MPI_COMM_NULL;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &c) != MPI_SUCCESS) throw Error("MPI_Comm_dup failed for group " + group);
  comms.emplace(group, c);
  return c;
}

// MPI for the lifetime of the object. Steps run on the thread that made it
// (oneDNN's OpenMP threads never call MPI), so MPI_THREAD_FUNNELED suffices.
class World {
 public:
  World(int* argc, char*** argv) {
    if (initialized()) return;  // someone else owns MPI
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) throw Error("MPI_Init_thread failed");
    owner_ = true;
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  ~World() {
    if (!owner_) return;
    for (auto& [name, comm] : detail::communicators()) MPI_Comm_free(&comm);
    detail::communicators().clear();
    MPI_Finalize();
  }
  int rank() const { return world_rank(); }
  int size() const { return world_size(); }

 private:
  bool owner_ = false;
};

}  // namespace kiln::kernels::mpi
