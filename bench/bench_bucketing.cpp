// Collective bucketing on synthetic FSDP graphs, the shape of the graphs issue
// 27's Inductor figures came from: each parameter shard a placeholder, every
// third converted to bf16, all-gathered (group of 8), waited on and used (its
// sum added into a running chain, so every all-gather has the rest of the
// forward as descendants); then each gradient (the use, reversed order)
// reduce-scattered, its wait a graph output. Shard sizes are log-uniform over
// 1 KB..16 MB from a fixed seed. Prints, per size, the bucket counts at the
// cap and the best time of bucket_fsdp_all_gather and bucket_fsdp_reduce_scatter
// (planning, merging and the final sort), and of a bare walk of the graph, then
// each one's fitted power-law exponent.
// With --write-graphs DIR, also writes each graph as DIR/fsdp_<n>.json and
// prints the buckets of the --params graph by collective name, which
// bench/inductor/bucketing_inductor.py compares with Inductor's on the same files.
//   kiln-bench-bucketing [--params 200] [--cap-mb 10] [--sizes 500,2000,8000] [--reps 3] [--write-graphs DIR]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_write.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/passes/bucketing/bucket_collectives.hpp"

using namespace kiln;
namespace c10d = kiln::c10d_functional;

namespace {

TensorMeta flat(std::int64_t n, DType dt) { return c10d_meta::contiguous({n}, dt); }

Node* with(Node* n, MetaVal v) {
  n->meta.val = std::move(v);
  return n;
}

Graph fsdp_graph(std::int64_t params, std::uint64_t seed = 27) {
  constexpr std::int64_t G = 8;
  Graph g;
  std::vector<Node*> used;
  std::vector<DType> dts;
  std::uint64_t s = seed;
  Node* h = nullptr;
  for (std::int64_t i = 0; i < params; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = double(s >> 11) / double(1ULL << 53);  // log-uniform bytes in [1 KB, 16 MB]
    const std::int64_t n = std::max<std::int64_t>(1, std::int64_t(std::exp2(10 + 14 * u)) / 4);
    Node* x = g.placeholder("shard" + std::to_string(i), flat(n, DType::float32));
    DType dt = DType::float32;
    if (i % 3 == 0) {
      dt = DType::bfloat16;
      x = with(g.call_function(prims::convert_element_type, {x, Arg(dt)}), flat(n, dt));
    }
    Node* ag = with(g.call_function(c10d::all_gather_into_tensor, {x, Arg(G), Arg("0")}), flat(n * G, dt));
    Node* w = with(g.call_function(c10d::wait_tensor, {ag}), flat(n * G, dt));
    Node* sum = with(g.call_function(aten::sum_dim_IntList, {w, Arg(ArgList{Arg(0)})}), c10d_meta::contiguous({}, dt));
    h = h ? with(g.call_function(aten::add_Tensor, {h, sum}), sum->meta.val) : sum;
    used.push_back(w);
    dts.push_back(dt);
  }
  ArgList outs{Arg(h)};
  for (std::int64_t i = params; i-- > 0;) {
    Node* w = used[static_cast<std::size_t>(i)];
    const TensorMeta& t = *w->meta.val.tensor();
    Node* grad = with(g.call_function(aten::mul_Tensor, {w, h}), t);
    Node* rs = with(g.call_function(c10d::reduce_scatter_tensor, {grad, Arg("sum"), Arg(G), Arg("0")}),
                    flat(std::get<std::int64_t>(t.shape[0]) / G, t.dtype));
    outs.push_back(Arg(with(g.call_function(c10d::wait_tensor, {rs}), rs->meta.val)));
  }
  g.output(Arg(std::move(outs)));
  return g;
}

const bucketing::BucketingPass& pass_named(std::string_view name) {
  static const auto all = bucketing::bucketing_passes();
  for (const auto& p : all)
    if (p.name == name) return p;
  throw Error("no pass");
}

std::vector<std::int64_t> parse_list(const std::string& s) {
  std::vector<std::int64_t> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoll(x));
  return v;
}

// Best seconds of one pass over `reps` fresh graphs; the bucket count of the last.
std::pair<double, std::size_t> time_pass(std::int64_t params, const char* name, const bucketing::BucketCap& cap, int reps) {
  double best = 1e30;
  std::size_t buckets = 0;
  for (int r = 0; r < reps; ++r) {
    Graph g = fsdp_graph(params);
    const auto t0 = std::chrono::steady_clock::now();
    buckets = bucketing::bucket_collectives(g, pass_named(name), cap);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    lint(g);
  }
  return {best, buckets};
}

// Best seconds of a bare walk of a fresh graph (each node and its inputs' order
// keys): a linear pass whose growth is the machine's alone (caches), for scale.
double time_walk(std::int64_t params, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    Graph g = fsdp_graph(params);
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t sum = 0;
    for (const Node* n : g.nodes())
      for (const Node* in : n->all_input_nodes()) sum += in->order_key();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (sum == 42) std::cout << "";
  }
  return best;
}

// The buckets of `name` on the graph, by collective name, as a JSON list of lists.
std::string plan_json(std::int64_t params, const char* name, const bucketing::BucketCap& cap) {
  Graph g = fsdp_graph(params);
  const auto& pass = pass_named(name);
  std::string out = "[";
  for (const auto& b : bucketing::plan_buckets(g, pass.kind, cap, pass.filter)) {
    out += out.size() > 1 ? ", [" : "[";
    for (std::size_t i = 0; i < b.size(); ++i) out += (i ? ", \"" : "\"") + std::string(b[i]->name()) + "\"";
    out += "]";
  }
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t params = 200;
  double cap_mb = 10;
  std::vector<std::int64_t> sizes{500, 2000, 8000};
  int reps = 3;
  std::string graphs_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--params") params = std::stoll(v);
    else if (a == "--cap-mb") cap_mb = std::stod(v);
    else if (a == "--sizes") sizes = parse_list(v);
    else if (a == "--reps") reps = std::stoi(v);
    else if (a == "--write-graphs") graphs_dir = v;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  const bucketing::BucketCap cap({cap_mb});
  if (!graphs_dir.empty()) {
    std::vector<std::int64_t> all = sizes;
    all.push_back(params);
    for (std::int64_t n : all) io::write_fx_json(fsdp_graph(n), graphs_dir + "/fsdp_" + std::to_string(n) + ".json");
    std::cout << "{\"params\": " << params << ", \"all_gather_plan\": " << plan_json(params, "bucket_fsdp_all_gather", cap)
              << ", \"reduce_scatter_plan\": " << plan_json(params, "bucket_fsdp_reduce_scatter", cap) << "}\n";
  }
  const auto ag = time_pass(params, "bucket_fsdp_all_gather", cap, 1);
  const auto rs = time_pass(params, "bucket_fsdp_reduce_scatter", cap, 1);
  std::cout << "{\"params\": " << params << ", \"cap_mb\": " << cap_mb << ", \"all_gather_buckets\": " << ag.second
            << ", \"reduce_scatter_buckets\": " << rs.second << "}\n";
  std::vector<double> xs, ys, zs, ws;
  for (std::int64_t n : sizes) {
    const auto a = time_pass(n, "bucket_fsdp_all_gather", cap, reps);
    const auto r = time_pass(n, "bucket_fsdp_reduce_scatter", cap, reps);
    const double walk = time_walk(n, reps);
    ws.push_back(std::log(walk));
    std::cout << "{\"collectives\": " << n << ", \"all_gather_ms\": " << a.first * 1e3
              << ", \"all_gather_buckets\": " << a.second << ", \"reduce_scatter_ms\": " << r.first * 1e3
              << ", \"reduce_scatter_buckets\": " << r.second << ", \"walk_ms\": " << walk * 1e3 << "}\n";
    xs.push_back(std::log(double(n)));
    ys.push_back(std::log(a.first));
    zs.push_back(std::log(r.first));
  }
  // Least-squares slope of log time against log size (n log n over 500..8,000 is about 1.13).
  auto slope = [&](const std::vector<double>& v) {
    double mx = 0, my = 0, sxy = 0, sxx = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) mx += xs[i] / double(xs.size()), my += v[i] / double(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) sxy += (xs[i] - mx) * (v[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
    return sxy / sxx;
  };
  if (xs.size() >= 2)
    std::cout << "{\"all_gather_time_exponent\": " << slope(ys) << ", \"reduce_scatter_time_exponent\": " << slope(zs)
              << ", \"walk_time_exponent\": " << slope(ws) << "}\n";
}
