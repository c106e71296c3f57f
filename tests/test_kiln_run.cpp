// kiln-run driven as a user drives it: a real process, its exit status
// (0, 1 on a mismatch, 2 on bad input), its stdout and stderr, the files it writes.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tool_test_support.hpp"

#include "kiln/core.hpp"
#include "kiln/core/parallel_shares.hpp"
#include "kiln/io.hpp"
#include "kiln/ops.hpp"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

using Run = kiln::test::ToolRun;
using kiln::test::slurp;

fs::path scratch_dir() { return kiln::test::scratch_dir("kiln_run_test_"); }

// Runs kiln-run with `args` (already shell-quoted where needed).
Run kiln_run(const std::string& args) { return kiln::test::run_tool(KILN_RUN_EXE, args, scratch_dir()); }

TensorMeta f32(std::vector<Dim> s) { return TensorMeta{std::move(s), DType::float32, std::nullopt}; }

// y = relu(x) @ w: x [3, 4] an input, w [4, 2] a weight.
fs::path write_model_folder(const std::string& name, const std::vector<float>& x) {
  const fs::path dir = scratch_dir() / name;
  fs::create_directories(dir / "weights");
  fs::create_directories(dir / "inputs");
  fs::create_directories(dir / "outputs");
  Graph g(name);
  Node* in = g.placeholder("x", f32({3, 4}));
  Node* w = g.get_attr("w", f32({4, 2}));
  g.output(ArgList{g.call_function(aten::mm, {g.call_function(aten::relu, {in}), w})});
  const std::vector<float> wv{1, 2, 3, 4, 5, 6, 7, 8};
  io::write_npy(dir / "weights/w.npy", io::make_weight<float>({4, 2}, wv));
  io::write_fx_json(g, (dir / "graph.json").string(), {{"w", "weights/w.npy"}});
  io::write_npy(dir / "inputs/x.npy", io::make_weight<float>({3, 4}, x));
  std::vector<float> y(6, 0.0f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 4; ++k) y[i * 2 + j] += std::max(x[i * 4 + k], 0.0f) * wv[k * 2 + j];
  io::write_npy(dir / "outputs/output_0.npy", io::make_weight<float>({3, 2}, y));
  std::ofstream(dir / "manifest.json") << R"({"inputs": ["inputs/x.npy"], "outputs": ["outputs/output_0.npy"]})";
  return dir;
}

const std::vector<float> kX{1, -2, 3, -4, 0.5f, 6, -7, 8, 9, -1, 2, -3};

}  // namespace

TEST_CASE("kiln-run runs an exporter folder on its inputs and matches its outputs") {
  const fs::path dir = write_model_folder("folder", kX);
  Run r = kiln_run("'" + dir.string() + "' --compare '" + (dir / "outputs").string() + "' --iterations 3");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("2 steps") != std::string::npos);
  CHECK(r.out.find("run (1 thread, 3 iterations): median") != std::string::npos);
  CHECK(r.out.find("memory: arena") != std::string::npos);
  CHECK(r.out.find(": match: output 0: max abs err 0") != std::string::npos);
}

TEST_CASE("kiln-run --json gives the figures scripts read") {
  const fs::path dir = write_model_folder("json", kX);
  Run r = kiln_run("'" + dir.string() + "' --json --threads 2 --compare '" + (dir / "outputs").string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"median_ms", "min_ms", "arena_bytes", "peak_rss_bytes", "max_abs_err", "max_rel_err"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["threads"] == 2);
  CHECK(j["match"] == true);
  CHECK(j["peak_rss_bytes"].get<double>() > 0);
}

TEST_CASE("kiln-run exits 1 when the outputs differ from --compare") {
  const fs::path dir = write_model_folder("mismatch", kX);
  // Random inputs instead of the folder's: the stored outputs no longer fit.
  Run r = kiln_run("'" + dir.string() + "' --random 7 --compare '" + (dir / "outputs").string() + "'");
  CHECK(r.status == 1);
  CHECK(r.out.find("MISMATCH: output 0") != std::string::npos);
}

TEST_CASE("kiln-run --outputs writes what --compare reads back") {
  const fs::path dir = write_model_folder("outputs", kX);
  const fs::path out = scratch_dir() / "written";
  Run r = kiln_run("'" + (dir / "graph.json").string() + "' --random 3 --outputs '" + out.string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(fs::exists(out / "output_0.npy"));
  r = kiln_run("'" + (dir / "graph.json").string() + "' --random 3 --compare '" + out.string() + "'");
  CHECK(r.status == 0);
  const auto t = io::read_npy(out / "output_0.npy");
  CHECK(t.shape == std::vector<std::int64_t>{3, 2});
}

TEST_CASE("kiln-run --profile lists time per op type and the slowest nodes") {
  const fs::path dir = write_model_folder("profile", kX);
  Run r = kiln_run("'" + dir.string() + "' --profile --iterations 2");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("time per op type") != std::string::npos);
  CHECK(r.out.find("aten.mm.default") != std::string::npos);
  CHECK(r.out.find("slowest nodes") != std::string::npos);
}

TEST_CASE("kiln-run --profile-nodes sets how many nodes the profile lists") {
  const fs::path dir = write_model_folder("profile_nodes", kX);
  // The lines after "slowest nodes", one per node listed.
  auto listed = [](const std::string& out) {
    const auto at = out.find("slowest nodes");
    REQUIRE(at != std::string::npos);
    int lines = 0;
    for (std::size_t p = out.find('\n', at); p != std::string::npos && p + 1 < out.size(); p = out.find('\n', p + 1))
      ++lines;
    return lines;
  };
  Run every = kiln_run("'" + dir.string() + "' --profile --profile-nodes 0 --iterations 2");
  REQUIRE_MESSAGE(every.status == 0, every.err);
  const int steps = listed(every.out);
  REQUIRE(steps >= 2);  // relu and mm
  Run one = kiln_run("'" + dir.string() + "' --profile --profile-nodes 1 --iterations 2");
  REQUIRE_MESSAGE(one.status == 0, one.err);
  CHECK(listed(one.out) == 1);
  Run bad = kiln_run("'" + dir.string() + "' --profile --profile-nodes -1");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--profile-nodes") != std::string::npos);
}

TEST_CASE("kiln-run --against runs a second graph alternately and gives the ratio pair by pair") {
  const fs::path a = write_model_folder("against_a", kX);
  std::vector<float> x2(kX);
  for (float& v : x2) v = -v;
  const fs::path b = write_model_folder("against_b", x2);
  Run r = kiln_run("'" + a.string() + "' --against '" + b.string() + "' --json --iterations 6 --compare '" + (a / "outputs").string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.contains("against"));
  const auto& g = j["against"];
  CHECK(g["graph"] == b.string());
  CHECK(g["steps"] == j["steps"]);
  CHECK(g["median_ms"].get<double>() > 0);
  CHECK(g["min_ms"].get<double>() <= g["median_ms"].get<double>());
  CHECK(g["ratio_min"].get<double>() > 0);
  CHECK(g["ratio_min"].get<double>() <= g["ratio_median"].get<double>());
  CHECK(g["ratio_median"].get<double>() <= g["ratio_max"].get<double>());
  CHECK(j["match"] == true);  // --compare is the first graph's
  // The text form says the same in one line; --inputs stays the first graph's.
  Run t = kiln_run("'" + a.string() + "' --against '" + b.string() + "' --iterations 2 --inputs '" + (a / "inputs/x.npy").string() + "'");
  REQUIRE_MESSAGE(t.status == 0, t.err);
  CHECK(t.out.find("against " + b.string() + " (2 steps, run alternately): median") != std::string::npos);
  CHECK(t.out.find("this graph over it, pair by pair: median") != std::string::npos);
  // Without --against nothing of it is printed.
  Run alone = kiln_run("'" + a.string() + "' --json --iterations 2");
  REQUIRE_MESSAGE(alone.status == 0, alone.err);
  CHECK_FALSE(nlohmann::json::parse(alone.out).contains("against"));
}

TEST_CASE("kiln-run --against-warm runs each graph untimed before its timed run in a pair") {
  const fs::path a = write_model_folder("against_warm_a", kX);
  const fs::path b = write_model_folder("against_warm_b", kX);
  Run r = kiln_run("'" + a.string() + "' --against '" + b.string() + "' --against-warm 2 --json --iterations 4");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.contains("against"));
  CHECK(j["against"]["warm"] == 2);
  CHECK(j["against"]["ratio_min"].get<double>() <= j["against"]["ratio_max"].get<double>());
  Run plain = kiln_run("'" + a.string() + "' --against '" + b.string() + "' --json --iterations 2");
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  CHECK(nlohmann::json::parse(plain.out)["against"]["warm"] == 0);
  Run t = kiln_run("'" + a.string() + "' --against '" + b.string() + "' --against-warm=1 --iterations 2");
  REQUIRE_MESSAGE(t.status == 0, t.err);
  CHECK(t.out.find("(2 steps, run alternately, each timed run after 1 untimed): median") != std::string::npos);
  // Without --against, or below 0, it is refused.
  Run alone = kiln_run("'" + a.string() + "' --against-warm 1");
  CHECK(alone.status == 2);
  CHECK(alone.err.find("--against-warm needs --against") != std::string::npos);
  Run negative = kiln_run("'" + a.string() + "' --against '" + b.string() + "' --against-warm -1");
  CHECK(negative.status == 2);
  CHECK(negative.err.find("--against-warm") != std::string::npos);
}

TEST_CASE("kiln-run --warmup-ms keeps running untimed until that long has passed") {
  const fs::path a = write_model_folder("warmup_ms", kX);
  // Without it, exactly --warmup untimed runs.
  Run counted = kiln_run("'" + a.string() + "' --json --iterations 2 --warmup 3");
  REQUIRE_MESSAGE(counted.status == 0, counted.err);
  CHECK(nlohmann::json::parse(counted.out)["warmup_runs"] == 3);
  // With it, at least --warmup runs and as many more as 50 ms take (a run of this graph is
  // microseconds, so many more), and the text says how many.
  Run timed = kiln_run("'" + a.string() + "' --json --iterations 2 --warmup 1 --warmup-ms 50");
  REQUIRE_MESSAGE(timed.status == 0, timed.err);
  CHECK(nlohmann::json::parse(timed.out)["warmup_runs"].get<int>() > 3);
  Run text = kiln_run("'" + a.string() + "' --iterations 2 --warmup 0 --warmup-ms=5");
  REQUIRE_MESSAGE(text.status == 0, text.err);
  CHECK(text.out.find("2 iterations, after ") != std::string::npos);
  CHECK(text.out.find(" untimed): median") != std::string::npos);
  // Under --against both graphs warm alike; negative or infinite times are refused.
  Run pair = kiln_run("'" + a.string() + "' --against '" + a.string() + "' --json --iterations 2 --warmup 0 --warmup-ms 20");
  REQUIRE_MESSAGE(pair.status == 0, pair.err);
  CHECK(nlohmann::json::parse(pair.out)["warmup_runs"].get<int>() > 0);
  for (const std::string bad : {"-1", "inf", "nan"}) {
    Run r = kiln_run("'" + a.string() + "' --warmup-ms " + bad);
    CHECK(r.status == 2);
    CHECK(r.err.find("--warmup-ms") != std::string::npos);
  }
}

TEST_CASE("kiln-run --against names the second graph when its inputs are wrong") {
  const fs::path a = write_model_folder("against_ok", kX);
  const fs::path b = write_model_folder("against_wrong", kX);
  io::write_npy(b / "inputs/x.npy", io::make_weight<float>({4, 3}, kX));
  Run r = kiln_run("'" + a.string() + "' --against '" + b.string() + "' --iterations 2");
  CHECK(r.status == 2);
  CHECK(r.err.find("--against " + b.string() + ": input x: expected float32 [3, 4], got float32 [4, 3]") != std::string::npos);
  r = kiln_run("'" + a.string() + "' --against '" + (scratch_dir() / "nowhere.json").string() + "'");
  CHECK(r.status == 2);
  CHECK(r.err.find("nowhere.json") != std::string::npos);
}

// libgomp binds the main thread to one CPU at start under OMP_PROC_BIND; the
// threads a run may use are still the process's CPUs.
TEST_CASE("kiln-run under OMP_PROC_BIND keeps the threads asked for") {
  const std::size_t cpus = kiln::available_cpus();
  if (cpus < 2) return;  // one CPU: nothing to keep
  const fs::path dir = write_model_folder("bound", kX);
  const std::string threads = std::to_string(cpus);
  const Run r = kiln::test::run_tool("/usr/bin/env", "OMP_PROC_BIND=close OMP_PLACES=cores '" + std::string(KILN_RUN_EXE) + "' '" +
                                                         dir.string() + "' --threads " + threads + " --iterations 2",
                                     scratch_dir());
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("is more than the") == std::string::npos);
  CHECK(r.out.find("run (" + threads + " threads") != std::string::npos);
}

TEST_CASE("kiln-run caps --threads at the CPUs it may run on, saying so, and still matches") {
  const fs::path dir = write_model_folder("threads", kX);
  Run r = kiln_run("'" + dir.string() + "' --threads 100000 --iterations 2 --compare '" + (dir / "outputs").string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::string cpus = std::to_string(kiln::available_cpus());
  CHECK(r.err.find("kiln-run: --threads 100000 is more than the " + cpus + " CPUs this process may run on; using " + cpus) !=
        std::string::npos);
  CHECK(r.out.find(": match:") != std::string::npos);
}

TEST_CASE("kiln-run exits 2 on bad input, naming what is wrong") {
  const fs::path dir = write_model_folder("bad", kX);
  Run r = kiln_run("'" + (scratch_dir() / "missing.json").string() + "'");
  CHECK(r.status == 2);
  CHECK(r.err.find("kiln-run: error:") == 0);
  r = kiln_run("'" + dir.string() + "' --frobnicate");
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown option --frobnicate") != std::string::npos);
  // A choice option names its choices.
  r = kiln_run("'" + dir.string() + "' --conv-algorithm fast");
  CHECK(r.status == 2);
  CHECK(r.err.find("--conv-algorithm takes auto or direct or winograd, got 'fast'") != std::string::npos);
  r = kiln_run("'" + dir.string() + "' --fpmath f16");
  CHECK(r.status == 2);
  CHECK(r.err.find("--fpmath takes bf16 or strict, got 'f16'") != std::string::npos);
  // An input of the wrong shape is named.
  io::write_npy(scratch_dir() / "x_wrong.npy", io::make_weight<float>({4, 3}, kX));
  r = kiln_run("'" + dir.string() + "' --inputs '" + (scratch_dir() / "x_wrong.npy").string() + "'");
  CHECK(r.status == 2);
  CHECK(r.err.find("input x: expected float32 [3, 4], got float32 [4, 3]") != std::string::npos);
  // A graph with ops that have no kernel: every such node is listed.
  Graph g;
  Node* x = g.placeholder("x", f32({2}));
  g.output(ArgList{g.call_function(OpRef("myns.frob.default"), {x}, {}, "frob")});
  const fs::path nk = scratch_dir() / "no_kernel.json";
  std::ofstream(nk) << io::to_fx_json(g);
  r = kiln_run("'" + nk.string() + "'");
  CHECK(r.status == 2);
  CHECK(r.err.find("1 node has no kernel:   myns.frob.default: frob") != std::string::npos);
}

TEST_CASE("kiln-run --passes shard_parameters alone shards over one rank: the graph runs unchanged") {
  const fs::path dir = write_model_folder("shard_alone", kX);
  const Run r = kiln_run("'" + dir.string() + "' --passes shard_parameters --compare '" + (dir / "outputs").string() +
                         "' --iterations 1 --warmup 0");
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("pass counters: {}") != std::string::npos);
  CHECK(r.out.find(": match") != std::string::npos);
  // Options given win over kiln-run's: two ranks asked for, none running, refused naming the all-gather.
  const Run two = kiln_run("'" + dir.string() + R"(' --passes shard_parameters --pass-options '{"shard_parameters": {"world_size": 2, "rank": 0}}' --iterations 1 --warmup 0)");
  CHECK(two.status == 2);
  CHECK(two.err.find("all_gather_into_tensor") != std::string::npos);
  CHECK(two.err.find("MPI") != std::string::npos);
}
