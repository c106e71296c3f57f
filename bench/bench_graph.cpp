// kiln-bench-graph: times reading, writing, linting, sorting and cloning a graph.
//
//   kiln-bench-graph GRAPH.json[.gz] [--reps N]
//
// Prints one JSON object on stdout. Every figure is in seconds, as
// {"best": ..., "median": ..., "runs": [...]} over N runs (default 3).
// See bench/README.md for the graph (bench/gen_chain_graph.py) and the targets.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs setup() (untimed), then body() (timed), `reps` times.
Json measure(int reps, const std::function<void()>& setup, const std::function<void()>& body,
             const std::function<void()>& teardown = {}) {
  std::vector<double> runs;
  for (int i = 0; i < reps; ++i) {
    if (setup) setup();
    const auto t = Clock::now();
    body();
    runs.push_back(seconds_since(t));
    if (teardown) teardown();
  }
  std::vector<double> sorted = runs;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return Json{{"best", sorted.front()}, {"median", median}, {"runs", runs}};
}

// Moves the last call_function node of every 100th six-node block (of the
// chain graph: every 600th call_function node, counting from the 600th) to
// just before the output. Their users now come first, so the graph is out of
// order until a topological sort puts them back. Returns how many were moved.
std::size_t disorder(kiln::Graph& g) {
  std::vector<kiln::Node*> picked;
  std::size_t k = 0;
  for (kiln::Node* n : g.nodes())
    if (n->op() == kiln::OpKind::call_function && ++k % 600 == 0) picked.push_back(n);
  kiln::Node* out = g.output_node();
  for (kiln::Node* n : picked) g.move_before(out, n);
  return picked.size();
}

bool in_order(const kiln::Graph& g) {
  for (const kiln::Node* n : g.nodes())
    for (const kiln::Node* in : n->all_input_nodes())
      if (!in->is_before(*n)) return false;
  return true;
}

int run(int argc, char** argv) {
  std::string path;
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "-h" || a == "--help") {
      std::cout << "usage: kiln-bench-graph GRAPH.json[.gz] [--reps N]\n";
      return 0;
    } else if (path.empty()) path = a;
    else {
      std::cerr << "kiln-bench-graph: unexpected argument " << a << "\n";
      return 2;
    }
  }
  if (path.empty()) {
    std::cerr << "usage: kiln-bench-graph GRAPH.json[.gz] [--reps N]\n";
    return 2;
  }

  const std::string file_bytes = kiln::io::read_file_bytes(path);
  const bool gz = kiln::io::is_gzip(file_bytes);
  const std::string text = gz ? kiln::io::gzip_decompress(file_bytes, path) : file_bytes;

  Json out;
  out["file"] = path;
  out["gzip"] = gz;
  out["file_bytes"] = file_bytes.size();
  out["json_bytes"] = text.size();

  // read: the whole of read_fx_json (file, gunzip if needed, parse, build).
  // `new T(prvalue)` builds the result in place: no Graph move is timed.
  std::unique_ptr<kiln::io::GraphFile> f;
  out["read_s"] = measure(
      reps, [&] { f.reset(); }, [&] { f.reset(new kiln::io::GraphFile(kiln::io::read_fx_json(path))); });
  out["parse_s"] = measure(
      reps, [&] { f.reset(); }, [&] { f.reset(new kiln::io::GraphFile(kiln::io::parse_fx_json(text, path))); });
  kiln::Graph& g = f->graph;
  out["nodes"] = g.size();

  std::string written;
  out["write_s"] = measure(reps, {}, [&] { written = kiln::io::to_fx_json(g, f->weights); });
  out["round_trip_identical"] = written == text;
  const auto tmp = std::filesystem::temp_directory_path() / ("kiln_bench_" + std::to_string(::getpid()) + ".json.gz");
  out["write_gz_file_s"] = measure(reps, {}, [&] { kiln::io::write_fx_json(g, tmp, f->weights); });
  out["gz_file_bytes"] = std::filesystem::file_size(tmp);
  std::filesystem::remove(tmp);

  out["lint_s"] = measure(reps, {}, [&] { kiln::lint(g); });

  // stable_topological_sort on the sorted graph: nothing should move.
  std::size_t moved = 0;
  out["stable_topological_sort_s"] = measure(reps, {}, [&] { moved = kiln::stable_topological_sort(g); });
  out["sort_sorted_moved"] = moved;

  // ... and on a copy with nodes moved out of order.
  std::unique_ptr<kiln::Graph> shuffled;
  std::size_t displaced = 0;
  out["stable_topological_sort_unsorted_s"] = measure(
      reps,
      [&] {
        shuffled.reset();
        shuffled.reset(new kiln::Graph(g.clone()));
        displaced = disorder(*shuffled);
        if (displaced && in_order(*shuffled)) throw kiln::Error("disorder() left the graph in order");
      },
      [&] { moved = kiln::stable_topological_sort(*shuffled); });
  out["unsorted_displaced_nodes"] = displaced;
  out["sort_unsorted_moved"] = moved;
  if (!in_order(*shuffled)) throw kiln::Error("stable_topological_sort left a node before one of its inputs");
  kiln::lint(*shuffled);
  shuffled.reset();

  std::unique_ptr<kiln::Graph> copy;
  out["clone_s"] = measure(reps, [&] { copy.reset(); }, [&] { copy.reset(new kiln::Graph(g.clone())); });
  out["destroy_s"] = measure(reps, [&] { copy.reset(new kiln::Graph(g.clone())); }, [&] { copy.reset(); });

  // 30,000 nodes inserted right before the output of a clone, as a pass that
  // builds its result at one spot does: each insert halves the key gap there,
  // so the graph must relabel keys every ~32 inserts (locally, not all of it).
  constexpr int kInsertsAtOneSpot = 30000;
  out["insert_at_one_spot_s"] = measure(
      reps, [&] { copy.reset(new kiln::Graph(g.clone())); },
      [&] {
        kiln::Node* first = copy->front();
        auto guard = copy->inserting_before(copy->output_node());
        for (int i = 0; i < kInsertsAtOneSpot; ++i) copy->call_function(kiln::aten::neg, {first});
      });
  if (!in_order(*copy)) throw kiln::Error("inserting at one spot left a node before one of its inputs");
  copy.reset();

  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kiln-bench-graph: error: " << e.what() << "\n";
    return 2;
  }
}
