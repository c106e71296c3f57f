#pragma once
// Splitting one job into shares run on a few std::threads, for the passes whose
// work is bound by memory bandwidth (fuse_conv_bn's fold of a model's weights):
//
//   kiln::run_shares(kiln::available_cpus(), [&](std::size_t share) { ... });
//
// No pool: a pass that splits its work does so once, so the threads live for
// that one job, and a caller decides from the size of the work whether a
// thread is worth starting at all.
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace kiln {

// The CPUs this process may run on: its affinity mask, as OpenMP counts them
// (under `taskset -c 1` that is 1, whatever the machine has); at least 1.
inline std::size_t available_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

// Runs share(i) for every i in [0, shares): share 0 on the calling thread, each
// other one on a thread of its own (one that cannot be started runs on the
// caller after share 0). Every share runs to its end, even when another
// throws; then the exception of the lowest share that threw is rethrown, so a
// caller sees the same error whatever the timing. One share starts no thread.
template <class Share>
void run_shares(std::size_t shares, Share&& share) {
  if (shares == 0) return;
  std::vector<std::exception_ptr> errors(shares);
  auto run = [&](std::size_t i) noexcept {
    try {
      share(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::size_t> unstarted;
  {
    std::vector<std::jthread> threads;
    threads.reserve(shares - 1);
    for (std::size_t i = 1; i < shares; ++i) {
      try {
        threads.emplace_back(run, i);
      } catch (const std::system_error&) {
        unstarted.push_back(i);
      }
    }
    run(0);
    for (std::size_t i : unstarted) run(i);
  }  // joins
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace kiln
