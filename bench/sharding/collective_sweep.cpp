// The three collectives kiln's kernels launch (kernels/collectives.hpp), timed
// alone over message sizes, for fitting an alpha-beta cost model
// (bench/sharding/fit_alpha_beta.py). Each size is launched the way a
// collective step and its wait_tensor do it, MPI_I<collective> then MPI_Wait,
// on float32 buffers, after a barrier, `--reps` times; rank 0 prints one JSON
// line per collective and size with the median over reps of the slowest
// rank's time. `bytes` is the size of the gathered output (all-gather), of the
// input (reduce-scatter) or of the buffer (all-reduce): the N of the model.
//   mpirun -np P kiln-bench-collectives [--min-kb 4] [--max-mb 64] [--reps 20]
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#define OMPI_SKIP_MPICXX 1  // the C API only: no C++ bindings to compile
#include <mpi.h>

namespace {

enum class Kind { all_gather, reduce_scatter, all_reduce };
const char* name_of(Kind k) {
  return k == Kind::all_gather ? "all_gather" : k == Kind::reduce_scatter ? "reduce_scatter" : "all_reduce";
}

// One launch and wait of `kind` moving `total` floats over `ranks`; seconds on this rank.
double time_once(Kind kind, std::vector<float>& src, std::vector<float>& dst, int total, int ranks) {
  const int part = total / ranks;
  MPI_Request req;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (kind == Kind::all_gather)
    MPI_Iallgather(src.data(), part, MPI_FLOAT, dst.data(), part, MPI_FLOAT, MPI_COMM_WORLD, &req);
  else if (kind == Kind::reduce_scatter)
    MPI_Ireduce_scatter_block(src.data(), dst.data(), part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
  else
    MPI_Iallreduce(src.data(), dst.data(), total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  return MPI_Wtime() - t0;
}

double arg_or(int argc, char** argv, const std::string& flag, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == flag) return std::atof(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const auto min_bytes = static_cast<std::int64_t>(arg_or(argc, argv, "--min-kb", 4) * 1024);
  const auto max_bytes = static_cast<std::int64_t>(arg_or(argc, argv, "--max-mb", 64) * 1024 * 1024);
  const int reps = static_cast<int>(arg_or(argc, argv, "--reps", 20));
  for (Kind kind : {Kind::all_gather, Kind::reduce_scatter, Kind::all_reduce}) {
    for (std::int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const int total = static_cast<int>(bytes / 4 / ranks * ranks);  // a whole part per rank
      std::vector<float> src(kind == Kind::all_gather ? total / ranks : total, 1.0f);
      std::vector<float> dst(kind == Kind::reduce_scatter ? total / ranks : total);
      time_once(kind, src, dst, total, ranks);  // warm-up: connections, pages
      std::vector<double> times;
      for (int r = 0; r < reps; ++r) {
        double mine = time_once(kind, src, dst, total, ranks), slowest = 0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        times.push_back(slowest);
      }
      if (rank != 0) continue;
      std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
      std::cout << "{\"collective\":\"" << name_of(kind) << "\",\"ranks\":" << ranks
                << ",\"bytes\":" << std::int64_t{total} * 4 << ",\"median_us\":" << times[reps / 2] * 1e6 << "}\n";
    }
  }
  MPI_Finalize();
  return 0;
}
