// Pass time of the pre-grad group/batch fusions on towers graphs (the shape of
// ../shared/fixtures/inductor/towers_n8_pregrad, any number of towers): the
// five fusions Inductor's fixture ran (batch_linear, batch_layernorm,
// batch_tanh, batch_relu, batch_sigmoid), in that order, each timed whole
// (sort, search, rewrites). Prints one JSON line per size, then the exponent
// of a power law fitted to the times; beside it, the same for one bare walk
// of each graph (every node and the order key of each input, nothing else),
// a linear pass whose growth is the machine's alone: with a warm cache the
// small graphs sit in L2 and the large ones do not, so every per-node cost
// grows with the graph and no pass reading it grows more slowly than that.
// With --evict-mb M, M MiB are written and read before the walk and before
// the fusions, so each starts with the graph out of the caches, as a graph
// read long before would be: then every size pays memory's latency, the bare
// walk grows linearly, and the exponent shows the algorithm's growth more
// than the caches' (M should be a few times the last-level cache).
// Each size runs at least R times and until its runs have taken T ms in all
// (--min-ms, 300 by default), so that a small graph, whose best time is the
// easiest to disturb, is timed as many times as its share of a second allows
// (at most 1,000 runs, or 20 with --evict-mb, whose eviction takes longer).
//   kiln-bench-group-batch-fusion [--towers 512,4096,32768] [--reps 5] [--min-ms 300] [--evict-mb M]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/passes/group_batch_fusion.hpp"
#include "towers_graph.hpp"

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes{512, 4096, 32768};
  int reps = 5;
  double min_ms = 300;
  std::size_t evict_mb = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--towers" && i + 1 < argc) {
      sizes.clear();
      std::stringstream ss(argv[++i]);
      for (std::string part; std::getline(ss, part, ',');) sizes.push_back(std::stoll(part));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (a == "--min-ms" && i + 1 < argc) {
      min_ms = std::stod(argv[++i]);
    } else if (a == "--evict-mb" && i + 1 < argc) {
      evict_mb = std::stoul(argv[++i]);
    } else {
      std::cerr << "usage: kiln-bench-group-batch-fusion [--towers N,N,...] [--reps R] [--min-ms T] [--evict-mb M]\n";
      return 2;
    }
  }
  // Pushes the graph out of the caches (see --evict-mb): writes then reads a
  // buffer larger than them, so that the lines it held are evicted.
  std::vector<std::uint64_t> evict_buffer(evict_mb << 17);
  std::uint64_t evict_sum = 0;
  auto evict = [&] {
    for (std::size_t i = 0; i < evict_buffer.size(); ++i) evict_buffer[i] += i;
    for (std::uint64_t v : evict_buffer) evict_sum += v;
  };
  const std::vector<std::string> order{"batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"};
  std::vector<double> xs, ys, walk_ys;
  for (std::int64_t towers : sizes) {
    double best = 1e300;
    double walk_best = 1e300;
    std::size_t nodes = 0, nodes_after = 0;
    std::int64_t sets = 0;
    double total_ms = 0;
    int runs = 0;
    const int max_runs = std::max(reps, evict_mb ? 20 : 1000);
    for (; runs < reps || (total_ms < min_ms && runs < max_runs); ++runs) {
      kiln::Graph g = kiln::testing::towers_graph(towers);
      nodes = g.size();
      if (evict_mb) evict();
      {
        const auto w0 = std::chrono::steady_clock::now();
        std::uint64_t sum = 0;
        for (const kiln::Node* n : g.nodes())
          for (const kiln::Node* in : n->all_input_nodes()) sum += in->order_key();
        const auto w1 = std::chrono::steady_clock::now();
        walk_best = std::min(walk_best, std::chrono::duration<double, std::milli>(w1 - w0).count());
        if (sum == 42 || evict_sum == 42) std::cerr << "";  // (keeps the walk and the eviction)
      }
      kiln::Counters counters;
      std::vector<std::unique_ptr<kiln::gbf::Fusion>> fusions;
      for (const auto& name : order) fusions.push_back(kiln::make_group_batch_fusion(name));
      if (evict_mb) evict();
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& f : fusions) kiln::gbf::apply_group_batch_fusion(g, *f, &counters);
      const auto t1 = std::chrono::steady_clock::now();
      const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      best = std::min(best, ms);
      total_ms += ms;
      nodes_after = g.size();
      sets = 0;
      for (const auto& [k, v] : counters.values()) sets += v;
    }
    std::cout << "{\"towers\":" << towers << ",\"nodes\":" << nodes << ",\"nodes_after\":" << nodes_after
              << ",\"fused_sets\":" << sets << ",\"runs\":" << runs << ",\"best_ms\":" << best << ",\"walk_ms\":" << walk_best << "}\n";
    xs.push_back(std::log(static_cast<double>(nodes)));
    ys.push_back(std::log(best));
    walk_ys.push_back(std::log(walk_best));
  }
  if (xs.size() >= 2) {
    // Least squares slope of log(time) over log(nodes).
    auto slope = [&](const std::vector<double>& y) {
      double mx = 0, my = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) mx += xs[i], my += y[i];
      mx /= static_cast<double>(xs.size());
      my /= static_cast<double>(xs.size());
      double num = 0, den = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) num += (xs[i] - mx) * (y[i] - my), den += (xs[i] - mx) * (xs[i] - mx);
      return num / den;
    };
    std::cout << "{\"fitted_exponent\":" << slope(ys) << ",\"walk_exponent\":" << slope(walk_ys)
              << ",\"evict_mb\":" << evict_mb << "}\n";
  }
}
