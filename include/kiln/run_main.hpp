#pragma once
// kiln::run_main: the whole of kiln-run as a function (as kiln::opt_main is
// kiln-opt), so that a user with kernels or passes of their own builds their
// own runner. It reads a graph (an fx-graph-json file, or an export_fx.py
// folder with graph.json, weights/, inputs/ and outputs/), optionally runs
// passes, compiles it, runs it, prints time and memory, and writes or compares
// outputs. Exit status: 0, 1 when outputs differ from --compare, 2 on bad input.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/io.hpp"
#include "kiln/passes.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/executor/numeric_check.hpp"
#include "kiln/tool_args.hpp"
#include "kiln/version.hpp"

namespace kiln {

namespace run_detail {

using tool_args::UsageError;
using tool_args::parse_number;
using tool_args::split_commas;

inline std::string help_text(const std::string& tool) {
  return "usage: " + tool +
         " GRAPH.json[.gz]|DIR [options]\n"
         "\n"
         "Compiles a graph with kiln's executor, runs it and prints the time per run and the memory.\n"
         "DIR is a folder written by tools/export_fx.py (graph.json, weights/, inputs/, outputs/): its\n"
         "inputs are used unless --inputs or --random say otherwise.\n"
         "\n"
         "  --passes a,b,c        passes to run before compiling (see kiln-opt --list-passes); prints their counters\n"
         "  --pass-options JSON   options per pass, as kiln-opt takes them (kiln-run gives shard_parameters\n"
         "                        world_size and rank: mpirun's, or 1 and 0 alone)\n"
         "  --inputs a.npy,...    the inputs, one .npy per placeholder in order\n"
         "  --random SEED         random inputs drawn with SEED (normal floats, ints in [0, 10))\n"
         "  --threads N           threads per run (default 1)\n"
         "  --fpmath bf16|strict  convolutions and constant-weight products in bf16 (AMX, AVX-512 BF16), or fp32 (default)\n"
         "  --conv-algorithm auto|direct|winograd\n"
         "                        3x3 stride-1 convolutions: Winograd where oneDNN has it (AVX-512: fewer\n"
         "                        multiplications, other rounding) and each thread has enough work (auto,\n"
         "                        the default), always Winograd, or always direct (as PyTorch)\n"
         "  --split-batch N       run the batch as slices of N samples, each slice on one thread, the threads\n"
         "                        taking slices as they finish (a graph that mixes samples runs whole; the\n"
         "                        output says why)\n"
         "  --iterations N        timed runs (default 10)\n"
         "  --warmup N            untimed runs first (default 2)\n"
         "  --warmup-ms T         after those, more untimed runs until T milliseconds of them have passed\n"
         "                        (default 0): a host whose cores run slow for a while after a process\n"
         "                        starts then times them at their steady speed\n"
         "  --outputs DIR         write the outputs as DIR/output_<i>.npy\n"
         "  --compare DIR         compare the outputs with DIR/output_<i>.npy; exit status 1 when they differ\n"
         "  --rtol R, --atol A    the comparison's tolerance (default 1e-4 and 1e-5)\n"
         "  --max-rel-err E       compare by each output's largest error over its largest magnitude instead\n"
         "  --profile             print the time per op type and the 20 slowest nodes\n"
         "  --profile-nodes N     with --profile, list the N slowest nodes instead (0: every node)\n"
         "  --against G|DIR       also compile G (the same passes and options; its folder's inputs, else\n"
         "                        random ones) and run the two alternately, run by run: prints G's times\n"
         "                        and the median of this graph's time over G's in each pair, which the\n"
         "                        host's drift between runs moves less than it moves either time (each\n"
         "                        run follows the other graph's, its caches holding that graph's data)\n"
         "  --against-warm N      with --against, N untimed runs of each graph before its timed run in a\n"
         "                        pair (default 0): each timed run then follows a run of its own graph\n"
         "  --json                print one JSON object on stdout instead of the text\n"
         "  --version             print the version\n"
         "  -h, --help            print this help\n"
         "Every option that takes a value accepts --option=value as well as --option value.\n";
}

struct Options {
  std::string graph;
  std::string against;  // a second graph, timed alternately with the first
  int against_warm = 0;  // untimed runs of each graph before its timed run in a pair
  std::vector<std::string> passes;
  std::string pass_options;
  std::vector<std::string> inputs;
  std::optional<std::uint64_t> random_seed;
  int threads = 1;
  std::int64_t split_batch = 0;  // samples per slice; 0: the whole batch per step
  int iterations = 10;
  int warmup = 2;
  double warmup_ms = 0;  // untimed runs go on until this long has passed
  std::string outputs;
  std::string compare;
  double rtol = 1e-4, atol = 1e-5;
  std::optional<double> max_rel_err;
  bool profile = false, json = false;
  std::size_t profile_nodes = 20;  // 0: every node
  runtime::CompileOptions::FpMath fpmath = runtime::CompileOptions::FpMath::strict;
  runtime::CompileOptions::ConvAlgorithm conv_algorithm = runtime::CompileOptions::ConvAlgorithm::automatic;
};

inline long long parse_int(const std::string& flag, const std::string& text, long long lo) {
  return static_cast<long long>(tool_args::parse_whole(flag, text, static_cast<unsigned long long>(lo)));
}
// The names the choice options (--fpmath, --conv-algorithm) take, each with its
// value: one table serves the parsing and the name printed back (--json).
template <class E>
using Choices = std::initializer_list<std::pair<const char*, E>>;
inline constexpr Choices<runtime::CompileOptions::FpMath> kFpMathChoices{
    {"bf16", runtime::CompileOptions::FpMath::bf16}, {"strict", runtime::CompileOptions::FpMath::strict}};
inline constexpr Choices<runtime::CompileOptions::ConvAlgorithm> kConvAlgorithmChoices{
    {"auto", runtime::CompileOptions::ConvAlgorithm::automatic},
    {"direct", runtime::CompileOptions::ConvAlgorithm::direct},
    {"winograd", runtime::CompileOptions::ConvAlgorithm::winograd}};

// The value of `flag` named by `text`, one of `choices`.
template <class E>
E parse_choice(const std::string& flag, const std::string& text, Choices<E> choices) {
  std::string names;
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
    names += names.empty() ? name : std::string(" or ") + name;
  }
  throw UsageError(flag + " takes " + names + ", got '" + text + "'");
}
// The name `value` has among `choices`.
template <class E>
const char* choice_name(E value, Choices<E> choices) {
  for (const auto& [name, v] : choices)
    if (v == value) return name;
  return "?";
}
// Returns false when the run is over (--help or --version printed).
inline bool parse_args(int argc, char** argv, const std::string& tool, Options& o) {
  tool_args::ArgCursor cur(argc, argv);
  while (cur.next()) {
    const std::string a = cur.arg();
    auto value = [&] { return cur.value(); };
    auto flag = [&] { cur.no_value(); };
    if (a == "--passes") o.passes = split_commas(value());
    else if (a == "--pass-options") o.pass_options = value();
    else if (a == "--inputs") o.inputs = split_commas(value());
    else if (a == "--random") o.random_seed = static_cast<std::uint64_t>(parse_int(a, value(), 0));
    else if (a == "--threads") o.threads = static_cast<int>(parse_int(a, value(), 1));
    else if (a == "--split-batch") o.split_batch = parse_int(a, value(), 1);
    else if (a == "--iterations") o.iterations = static_cast<int>(parse_int(a, value(), 1));
    else if (a == "--warmup") o.warmup = static_cast<int>(parse_int(a, value(), 0));
    else if (a == "--warmup-ms") o.warmup_ms = parse_number(a, value());
    else if (a == "--fpmath") {
      o.fpmath = parse_choice(a, value(), kFpMathChoices);
    } else if (a == "--conv-algorithm") {
      o.conv_algorithm = parse_choice(a, value(), kConvAlgorithmChoices);
    } else if (a == "--outputs") o.outputs = value();
    else if (a == "--compare") o.compare = value();
    else if (a == "--rtol") o.rtol = parse_number(a, value());
    else if (a == "--atol") o.atol = parse_number(a, value());
    else if (a == "--max-rel-err") o.max_rel_err = parse_number(a, value());
    else if (a == "--profile") flag(), o.profile = true;
    else if (a == "--profile-nodes") o.profile_nodes = static_cast<std::size_t>(parse_int(a, value(), 0));
    else if (a == "--json") flag(), o.json = true;
    else if (a == "--against") o.against = value();
    else if (a == "--against-warm") o.against_warm = static_cast<int>(parse_int(a, value(), 0));
    else if (a == "--version") {
      std::cout << tool << " " << kiln::kVersion << "\n";
      return false;
    } else if (a == "-h" || a == "--help") {
      std::cout << help_text(tool);
      return false;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      throw UsageError("unknown option " + a);
    } else if (o.graph.empty()) {
      o.graph = a;
    } else {
      throw UsageError("more than one graph given ('" + o.graph + "' and '" + a + "')");
    }
  }
  if (o.graph.empty()) throw UsageError("no graph given");
  if (!o.inputs.empty() && o.random_seed) throw UsageError("--inputs and --random exclude each other");
  if (o.against_warm > 0 && o.against.empty()) throw UsageError("--against-warm needs --against");
  // parse_number refuses negative numbers and NaN; an endless warm-up is refused here.
  if (std::isinf(o.warmup_ms)) throw UsageError("--warmup-ms must be a finite number, 0 or more");
  return true;
}

// The graph file and, for an exporter folder, its manifest (inputs and outputs).
struct Source {
  std::filesystem::path graph_path;
  std::vector<std::filesystem::path> inputs;  // from the manifest
};

inline Source locate(const std::string& arg) {
  namespace fs = std::filesystem;
  Source s;
  const fs::path p(arg);
  if (!fs::is_directory(p)) {
    s.graph_path = p;
    return s;
  }
  s.graph_path = p / "graph.json";
  if (!fs::exists(s.graph_path)) throw Error(arg + ": the folder has no graph.json");
  const fs::path manifest = p / "manifest.json";
  if (fs::exists(manifest)) {
    std::ifstream in(manifest);
    nlohmann::json m;
    try {
      in >> m;
    } catch (const std::exception& e) {
      throw Error(manifest.string() + ": " + e.what());
    }
    if (m.contains("inputs"))
      for (const auto& f : m["inputs"]) s.inputs.push_back(p / f.get<std::string>());
  }
  return s;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::size_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<std::size_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

inline std::string mib(std::size_t bytes) {
  char buf[32];
  if (bytes < 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// The pass options to run with: `defaults` (per pass, for passes `registry`
// has) under the user's --pass-options, key by key.
inline nlohmann::json merged_pass_options(const nlohmann::json& defaults, nlohmann::json user, const PassRegistry& registry) {
  for (const auto& [pass, keys] : defaults.items()) {
    if (!registry.find(pass)) continue;
    if (!user.contains(pass)) user[pass] = nlohmann::json::object();
    if (!user[pass].is_object()) continue;  // PassManager reports it
    for (const auto& [key, value] : keys.items())
      if (!user[pass].contains(key)) user[pass][key] = value;
  }
  return user;
}

// The options the passes run with: --pass-options, and the tool's `defaults`
// under it where it is an object (PassManager reports anything else).
inline nlohmann::json pass_options_of(const Options& o, const nlohmann::json& defaults, const PassRegistry& registry) {
  nlohmann::json user = nlohmann::json::object();
  if (!o.pass_options.empty()) {
    try {
      user = nlohmann::json::parse(o.pass_options);
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(std::string("--pass-options is not valid JSON: ") + e.what());
    }
  }
  return user.is_object() ? merged_pass_options(defaults, std::move(user), registry) : user;
}

// The median, minimum and maximum of some times or ratios (not empty).
struct Spread {
  double median, min, max;
};
inline Spread spread_of(const std::vector<double>& v) {
  return {median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

// A graph read, put through the passes, compiled and given its inputs as the
// options say: `files_given` if any, else its folder's, else random ones.
struct Prepared {
  runtime::CompiledGraph cg;
  std::vector<runtime::Tensor> inputs;
  double compile_ms = 0;
  nlohmann::json counters;  // the passes' counters
};

// `pass_options`: --pass-options under the tool's defaults (pass_options_of).
inline Prepared prepare(const std::string& graph, const std::vector<std::string>& files_given, const Options& o, PassRegistry& registry,
                        const nlohmann::json& pass_options) {
  const Source src = locate(graph);
  io::GraphFile file = io::read_fx_json(src.graph_path);

  PassManager pm(registry);
  pm.set_options(pass_options);
  io::WeightStore weights(file);  // passes that fold constants read and add weights here
  pm.set_weights(&weights);
  pm.run(file.graph, o.passes);

  const auto t0 = std::chrono::steady_clock::now();
  runtime::CompileOptions copts;
  copts.threads = o.threads;
  copts.fpmath = o.fpmath;
  copts.conv_algorithm = o.conv_algorithm;
  copts.split_batch = o.split_batch;
  Prepared p{runtime::CompiledGraph::compile(file.graph, runtime::take_weights(weights), copts), {}, 0,
             pm.counters().to_json()};  // what the passes read is not read again
  p.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::vector<std::filesystem::path> files(files_given.begin(), files_given.end());
  if (files.empty() && !o.random_seed) files = src.inputs;
  if (!files.empty()) {
    if (files.size() != p.cg.num_inputs())
      throw runtime::InputError("the graph takes " + std::to_string(p.cg.num_inputs()) + " inputs, " +
                                std::to_string(files.size()) + " files given");
    for (std::size_t i = 0; i < files.size(); ++i) {
      try {
        runtime::Tensor t = runtime::Tensor::from_weight(io::read_npy(files[i]));
        // The exporter writes a bfloat16 input as float32 (numpy has no bfloat16).
        if (t.dtype() == DType::float32 && p.cg.input_layout(i).dtype == DType::bfloat16) t = runtime::as_bfloat16(t);
        p.inputs.push_back(std::move(t));
      } catch (const std::exception& e) {
        throw runtime::InputError("input " + p.cg.input_name(i) + ": " + e.what());
      }
    }
  } else {
    p.inputs = runtime::random_inputs(p.cg, o.random_seed.value_or(0));
  }
  return p;
}

inline int run(int argc, char** argv, PassRegistry& registry, const std::string& tool,
               const nlohmann::json& pass_defaults) {
  namespace fs = std::filesystem;
  Options o;
  if (!parse_args(argc, argv, tool, o)) return 0;
  for (const auto& name : o.passes)  // reject typos before reading a large file
    if (!registry.find_pipeline(name)) registry.get(name);
  if (const int usable = runtime::usable_threads(o.threads); usable != o.threads) {
    std::fprintf(stderr, "kiln-run: --threads %d is more than the %d CPUs this process may run on; using %d\n", o.threads,
                 usable, usable);
    o.threads = usable;
  }
  const nlohmann::json pass_options = pass_options_of(o, pass_defaults, registry);
  const Prepared first = prepare(o.graph, o.inputs, o, registry, pass_options);
  const runtime::CompiledGraph& cg = first.cg;
  const std::vector<runtime::Tensor>& inputs = first.inputs;
  // `f` done for the --against graph: an input it refuses is named as that graph's.
  const auto as_against = [&](const auto& f) {
    try {
      f();
    } catch (const runtime::InputError& e) {
      throw runtime::InputError("--against " + o.against + ": " + e.what());
    }
  };
  // The --against graph takes its own folder's inputs (--inputs names the first graph's).
  std::optional<Prepared> other;
  if (!o.against.empty()) as_against([&] { other.emplace(prepare(o.against, {}, o, registry, pass_options)); });

  runtime::RunContext ctx = cg.make_context(o.threads);
  std::optional<runtime::RunContext> other_ctx;
  if (other) other_ctx.emplace(other->cg.make_context(o.threads));
  const auto run_other = [&] { as_against([&] { other_ctx->run(other->inputs); }); };
  // --warmup runs, then more until --warmup-ms has passed (both graphs alike under --against).
  int warmup_runs = 0;
  const auto warmup_start = std::chrono::steady_clock::now();
  const auto warming = [&] {
    if (warmup_runs < o.warmup) return true;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warmup_start).count() < o.warmup_ms;
  };
  for (; warming(); ++warmup_runs) {
    ctx.run(inputs);
    if (other_ctx) run_other();
  }
  const auto timed = [](const auto& run_once) {
    const auto a = std::chrono::steady_clock::now();
    run_once();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
  };
  // A graph's timed run in a pair, after its --against-warm untimed ones.
  const auto warmed = [&](const auto& run_once) {
    for (int w = 0; w < o.against_warm; ++w) run_once();
    return timed(run_once);
  };
  const auto run_first = [&] { ctx.run(inputs); };
  std::vector<double> step_times;
  std::vector<double> times, other_times, ratios;
  for (int i = 0; i < o.iterations; ++i) {
    if (!other_ctx) {
      times.push_back(timed(run_first));
      continue;
    }
    // Each pair runs the two back to back, the order swapped every pair.
    double mine = 0, theirs = 0;
    if (i % 2 == 0) mine = warmed(run_first), theirs = warmed(run_other);
    else theirs = warmed(run_other), mine = warmed(run_first);
    times.push_back(mine), other_times.push_back(theirs), ratios.push_back(mine / theirs);
  }
  if (o.profile) {
    ctx.set_step_times(&step_times);
    for (int i = 0; i < o.iterations; ++i) ctx.run(inputs);
  }
  const std::vector<runtime::Tensor>& outputs = ctx.run(inputs);  // views into ctx's arena, valid from here on

  if (!o.outputs.empty()) {
    fs::create_directories(o.outputs);
    for (std::size_t i = 0; i < outputs.size(); ++i)
      io::write_npy(fs::path(o.outputs) / ("output_" + std::to_string(i) + ".npy"), outputs[i].to_weight());
  }
  std::optional<runtime::NumericReport> report;
  if (!o.compare.empty()) {
    std::vector<runtime::Tensor> expected;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const fs::path f = fs::path(o.compare) / ("output_" + std::to_string(i) + ".npy");
      runtime::Tensor t = runtime::Tensor::from_weight(io::read_npy(f));
      if (t.dtype() == DType::float32 && outputs[i].dtype() == DType::bfloat16) t = runtime::as_bfloat16(t);  // as inputs
      expected.push_back(std::move(t));
    }
    report = runtime::compare_outputs(outputs, expected, {o.rtol, o.atol});
    if (o.max_rel_err) {
      // Whole-model comparisons: an error small against the output's scale passes.
      report->ok = true;
      for (const auto& e : report->outputs) report->ok = report->ok && e.shape_mismatch.empty() && e.max_rel <= *o.max_rel_err;
    }
  }

  const Spread timing = spread_of(times);
  const Spread other_spread = other ? spread_of(other_times) : Spread{}, ratio = other ? spread_of(ratios) : Spread{};
  const std::size_t rss = peak_rss_bytes();
  if (o.json) {
    nlohmann::json j{{"graph", o.graph},
                     {"threads", o.threads},
                     {"fpmath", choice_name(o.fpmath, kFpMathChoices)},
                     {"conv_algorithm", choice_name(o.conv_algorithm, kConvAlgorithmChoices)},
                     {"iterations", o.iterations},
                     {"warmup_runs", warmup_runs},
                     {"steps", cg.num_steps()},
                     {"compile_ms", first.compile_ms},
                     {"median_ms", timing.median},
                     {"min_ms", timing.min},
                     {"arena_bytes", cg.arena_bytes()},
                     {"peak_live_bytes", cg.peak_live_bytes()},
                     {"constant_bytes", cg.constant_bytes()},
                     {"peak_rss_bytes", rss}};
    if (!o.passes.empty()) j["pass_counters"] = first.counters;
    if (const auto* split = cg.batch_split()) j["batch_split"] = {{"batch", split->batch}, {"slice", split->slice}};
    else if (!cg.batch_split_refusal().empty()) j["batch_split_refused"] = cg.batch_split_refusal();
    if (other)
      j["against"] = {{"graph", o.against},
                      {"steps", other->cg.num_steps()},
                      {"warm", o.against_warm},
                      {"median_ms", other_spread.median},
                      {"min_ms", other_spread.min},
                      {"ratio_median", ratio.median},
                      {"ratio_min", ratio.min},
                      {"ratio_max", ratio.max}};
    if (report) {
      double ma = 0, mr = 0;
      for (const auto& e : report->outputs) ma = std::max(ma, e.max_abs), mr = std::max(mr, e.max_rel);
      j["max_abs_err"] = ma;
      j["max_rel_err"] = mr;
      j["match"] = report->ok;
    }
    std::cout << j.dump() << "\n";
  } else {
    std::printf("%s: %zu input%s, %zu steps, %s of constants, compiled in %.1f ms\n", o.graph.c_str(),
                cg.num_inputs(), cg.num_inputs() == 1 ? "" : "s", cg.num_steps(), mib(cg.constant_bytes()).c_str(),
                first.compile_ms);
    const std::string after = o.warmup_ms > 0 ? ", after " + std::to_string(warmup_runs) + " untimed" : "";
    std::printf("run (%d thread%s, %d iterations%s): median %.3f ms, min %.3f ms\n", o.threads, o.threads == 1 ? "" : "s",
                o.iterations, after.c_str(), timing.median, timing.min);
    std::printf("memory: arena %s (peak live %s)%s, peak RSS %s\n", mib(cg.arena_bytes()).c_str(),
                mib(cg.peak_live_bytes()).c_str(), cg.batch_split() ? " per thread" : "", mib(rss).c_str());
    if (const auto* split = cg.batch_split())
      std::printf("batch split: %lld slices of %lld, one thread each\n", static_cast<long long>(split->batch / split->slice),
                  static_cast<long long>(split->slice));
    else if (!cg.batch_split_refusal().empty())
      std::printf("batch split refused, the batch runs whole: %s\n", cg.batch_split_refusal().c_str());
    if (other) {
      const std::string warm = o.against_warm > 0 ? ", each timed run after " + std::to_string(o.against_warm) + " untimed" : "";
      std::printf("against %s (%zu steps, run alternately%s): median %.3f ms, min %.3f ms; this graph over it, pair by pair: median %.3f (%.3f-%.3f)\n",
                  o.against.c_str(), other->cg.num_steps(), warm.c_str(), other_spread.median, other_spread.min, ratio.median, ratio.min,
                  ratio.max);
    }
    if (!o.passes.empty()) std::printf("pass counters: %s\n", first.counters.dump().c_str());
    if (report) std::printf("compare with %s: %s: %s\n", o.compare.c_str(), report->ok ? "match" : "MISMATCH", report->summary().c_str());
  }
  if (o.profile) {
    std::map<std::string, double> per_type;
    double total = 0;
    for (std::size_t s = 0; s < step_times.size(); ++s) {
      per_type[cg.step(s).op_type] += step_times[s];
      total += step_times[s];
    }
    std::vector<std::pair<double, std::string>> types;
    for (const auto& [k, v] : per_type) types.emplace_back(v, k);
    std::sort(types.rbegin(), types.rend());
    std::FILE* out = o.json ? stderr : stdout;
    const double per_run = 1e3 / o.iterations;
    std::fprintf(out, "time per op type (ms per run):\n");
    for (const auto& [v, k] : types) std::fprintf(out, "  %-44s %9.3f  %5.1f%%\n", k.c_str(), v * per_run, 100 * v / total);
    std::vector<std::size_t> order(step_times.size());
    for (std::size_t s = 0; s < order.size(); ++s) order[s] = s;
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return step_times[a] > step_times[b]; });
    std::fprintf(out, "slowest nodes (ms per run):\n");
    const std::size_t listed = o.profile_nodes == 0 ? order.size() : std::min(o.profile_nodes, order.size());
    for (std::size_t k = 0; k < listed; ++k) {
      const auto& st = cg.step(order[k]);
      std::fprintf(out, "  %-32s %-36s %9.3f  %s\n", st.node.c_str(), st.op_type.c_str(), step_times[order[k]] * per_run,
                   st.implementation.c_str());
    }
  }
  return report && !report->ok ? 1 : 0;
}

}  // namespace run_detail

// Runs kiln-run over argv with the passes of `registry`; returns the exit
// status (0; 1 when the outputs differ from --compare; 2 after a one-line error).
// `pass_defaults` ({"pass": {"key": value}}) are options a pass gets unless
// --pass-options gives that key (kiln-run gives shard_parameters its world).
inline int run_main(int argc, char** argv, PassRegistry& registry, const std::string& tool = "kiln-run",
                    const nlohmann::json& pass_defaults = nlohmann::json::object()) {
  return tool_args::run_tool(tool, [&] { return run_detail::run(argc, argv, registry, tool, pass_defaults); });
}

}  // namespace kiln
