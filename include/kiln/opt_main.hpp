#pragma once
// kiln::opt_main: the whole of kiln-opt as a function, so that a user builds
// their own optimizer driver with their passes added (as MLIR's MlirOptMain):
//
//   int main(int argc, char** argv) {
//     kiln::PassRegistry registry = kiln::default_pass_registry();
//     registry.add(my_pass());
//     return kiln::opt_main(argc, argv, registry, "my-opt");
//   }
//
// It reads an fx-graph-json graph (a file, or `-` for stdin), runs the named
// passes and writes the result (fx-graph-json to stdout unless -o, --dot,
// --print or --quiet say otherwise). Errors are one line on stderr and exit
// status 2; `--help` lists every option.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/passes.hpp"
#include "kiln/passes/replacement_manifest.hpp"
#include "kiln/tool_args.hpp"
#include "kiln/version.hpp"

namespace kiln {

namespace opt_detail {

using tool_args::UsageError;
using tool_args::parse_number;
using tool_args::split_commas;

inline std::string help_text(const std::string& tool) {
  return "usage: " + tool +
         " IN.json[.gz]|- [options]\n"
         "\n"
         "Reads an fx-graph-json graph (- reads stdin), runs passes over it and writes the result.\n"
         "Without -o, --dot, --print or --quiet the resulting graph is written to stdout as fx-graph-json.\n"
         "\n"
         "  --passes a,b,c          passes to run, in order (see --list-passes)\n"
         "  --pass-options JSON     options per pass, {\"pass\": {...}}; @FILE reads them from FILE;\n"
         "                          an unknown pass or option key is an error\n"
         "  --replacements FILE     search/replace graph pairs (a manifest) run as the pass\n"
         "                          'replacements', before the --passes unless they name it\n"
         "  -o, --output FILE       write the result as fx-graph-json (.gz: compressed; - : stdout); weights\n"
         "                          a pass made (fuse_conv_bn) go to STEM_weights/NAME.npy beside it\n"
         "  --dot FILE              write the result as Graphviz DOT (- : stdout)\n"
         "  --print                 print the result as torch.fx-style text on stdout\n"
         "  --quiet                 write nothing unless asked to by -o, --dot or --print\n"
         "  --counters              print the counters on stdout as JSON: the total and each pass's\n"
         "  --timings               print each pass's wall time, and the total, on stderr (microseconds)\n"
         "  --no-lint               do not lint the input and the graph after every pass\n"
         "  --numeric-check         run the graph as read and after every pass on the same random inputs\n"
         "                          (kiln's executor); a changed output names the pass, exit status 1\n"
         "  --rtol R, --atol A      the numeric check's tolerance (default 1e-4 and 1e-5)\n"
         "  --max-gzip-bytes N      a gzip input may decompress to at most N bytes (default 1 GiB)\n"
         "  --list-passes           list the passes and what they do\n"
         "  --version               print the version\n"
         "  -h, --help              print this help\n"
         "Every option that takes a value accepts --option=value as well as --option value.\n";
}

struct Options {
  std::string input;
  std::vector<std::string> passes;
  std::string pass_options;
  std::string replacements;
  std::string output;
  std::string dot;
  bool print = false, quiet = false, counters = false, timings = false, lint = true, list = false;
  bool numeric_check = false;
  double rtol = 1e-4, atol = 1e-5;
  std::size_t max_gzip_bytes = io::kDefaultMaxDecompressedBytes;
};

inline std::size_t parse_byte_count(const std::string& flag, const std::string& text) {
  return static_cast<std::size_t>(tool_args::parse_whole(flag, text, 0, "a whole number of bytes"));
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
    else if (a == "--replacements") o.replacements = value();
    else if (a == "-o" || a == "--output") o.output = value();
    else if (a == "--dot") o.dot = value();
    else if (a == "--max-gzip-bytes") o.max_gzip_bytes = parse_byte_count(a, value());
    else if (a == "--print") flag(), o.print = true;
    else if (a == "--quiet") flag(), o.quiet = true;
    else if (a == "--counters") flag(), o.counters = true;
    else if (a == "--timings") flag(), o.timings = true;
    else if (a == "--no-lint") flag(), o.lint = false;
    else if (a == "--numeric-check") flag(), o.numeric_check = true;
    else if (a == "--rtol") o.rtol = parse_number(a, value());
    else if (a == "--atol") o.atol = parse_number(a, value());
    else if (a == "--list-passes") flag(), o.list = true;
    else if (a == "--version") {
      std::cout << tool << " (kiln) " << kVersion << "\n";
      return false;
    } else if (a == "-h" || a == "--help") {
      std::cout << help_text(tool);
      return false;
    } else if (a == "-") {
      if (!o.input.empty()) throw UsageError("more than one input: " + o.input + " and -");
      o.input = a;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option " + a);
    } else if (o.input.empty()) {
      o.input = a;
    } else {
      throw UsageError("more than one input file: " + o.input + " and " + a);
    }
  }
  if (o.input.empty() && !o.list) throw UsageError("no input graph given");
  return true;
}

inline nlohmann::json load_pass_options(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  std::string body = text;
  if (text[0] == '@') {
    const std::string path = text.substr(1);
    if (std::filesystem::is_directory(path))
      throw UsageError("cannot read pass options file " + path + ": it is a directory");
    std::ifstream f(path);
    if (!f) throw UsageError("cannot read pass options file " + path + ": " + std::strerror(errno));
    body.assign(std::istreambuf_iterator<char>(f), {});
  }
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(std::string("--pass-options is not valid JSON: ") + e.what());
  }
}

// `path`, or stdout for "-".
inline void write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("cannot write " + path + ": " + std::strerror(errno));
  if (!(f << text) || !f.flush()) throw Error("cannot write " + path + ": " + std::strerror(errno));
}

inline void weights_table_set(io::WeightsTable& table, const std::string& attr, const std::string& rel) {
  for (auto& [a, file] : table)
    if (a == attr) {
      file = rel;
      return;
    }
  table.emplace_back(attr, rel);
}

inline io::GraphFile read_input(const Options& o) {
  if (o.input != "-") return io::read_fx_json(o.input, o.max_gzip_bytes);
  std::string bytes{std::istreambuf_iterator<char>(std::cin), {}};
  if (io::is_gzip(bytes)) bytes = io::gzip_decompress(bytes, "<stdin>", o.max_gzip_bytes);
  io::GraphFile f = io::parse_fx_json(bytes, "<stdin>");
  f.base_dir = std::filesystem::current_path();  // weight paths are taken as relative to here
  return f;
}

// --numeric-check: a factory makes a check from the graph as read, which runs
// after each pass and throws NumericCheckFailed naming the pass whose result
// changed an output. Empty in a build without the executor.
class NumericCheckFailed : public Error {
 public:
  using Error::Error;
};
// `weights` holds the weights passes create as they run: the check compares
// each pass's graph on the original's weights plus those.
using NumericCheckFactory = std::function<std::function<void(const Graph&, const std::string&)>(
    const io::GraphFile& original, const io::WeightStore& weights, double rtol, double atol)>;

// Where the weights passes created go beside `output` (graph.json -> graph_weights/).
inline std::string created_weights_dir(const std::filesystem::path& output) {
  std::string stem = output.filename().string();
  for (const char* ext : {".gz", ".json"})
    if (stem.size() > std::strlen(ext) && stem.ends_with(ext)) stem.resize(stem.size() - std::strlen(ext));
  return stem + "_weights";
}
// A weight name as a file name: path separators and odd characters become '_'.
inline std::string weight_file_name(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out + ".npy";
}

inline int run(int argc, char** argv, PassRegistry& registry, const std::string& tool,
               const NumericCheckFactory& numeric_check) {
  Options o;
  if (!parse_args(argc, argv, tool, o)) return 0;
  if (!o.replacements.empty()) {
    // Loaded (and every pair checked) before the graph is read.
    const std::string manifest = o.replacements;
    registry.add(make_pattern_pass("replacements", "the search/replace pairs of " + manifest,
                                   [&] { return load_replacements(manifest); }));
    if (std::find(o.passes.begin(), o.passes.end(), "replacements") == o.passes.end())
      o.passes.insert(o.passes.begin(), "replacements");
  }
  if (o.list) {
    for (const auto& p : registry.passes()) std::cout << p.name << "\t" << p.description << "\n";
    for (const auto& p : registry.pipelines()) std::cout << p.name << "\t(pipeline) " << p.description << "\n";
    if (o.input.empty()) return 0;
  }
  PassManager pm(registry);
  pm.set_options(load_pass_options(o.pass_options));
  pm.set_lint_after_each(o.lint);
  for (const auto& name : o.passes)  // reject typos before reading a large file
    if (!registry.find_pipeline(name)) registry.get(name);

  io::GraphFile file = read_input(o);
  if (o.lint) {
    // Named like the reader's errors: the file, then what is wrong in it.
    try {
      lint(file.graph);
    } catch (const LintError& e) {
      throw LintError((o.input == "-" ? std::string("<stdin>") : o.input) + ": " + e.what());
    }
  }
  // Passes read the file's weights through the store (lazily) and add the ones they make.
  io::WeightStore weights(file);
  pm.set_weights(&weights);
  if (o.numeric_check) {
    if (!numeric_check) throw UsageError("--numeric-check needs kiln's executor, which this build of " + tool + " lacks");
    pm.set_after_each_pass(numeric_check(file, weights, o.rtol, o.atol));
  }
  std::vector<PassRecord> records;
  try {
    records = pm.run(file.graph, o.passes);
  } catch (const NumericCheckFailed& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 1;
  }

  const bool json_to_stdout = o.output == "-" || (o.output.empty() && o.dot.empty() && !o.print && !o.quiet);
  if (!weights.created().empty() && json_to_stdout)
    throw UsageError("the passes made " + std::to_string(weights.created().size()) + " new weights (" +
                     weights.created().front() + ", ...): give -o FILE so they can be written beside the graph");
  if (!o.output.empty()) {
    if (o.output == "-") {
      std::cout << io::to_fx_json(file.graph, file.weights);
    } else {
      // Weight paths are relative to the JSON file: re-anchor them at the new location.
      const auto out_dir = std::filesystem::absolute(o.output).parent_path();
      io::WeightsTable weights_table = file.weights;
      // A weight a pass removed (shard_parameters keeps a shard instead) is no longer the graph's.
      std::erase_if(weights_table, [&weights](const auto& entry) { return !weights.contains(entry.first); });
      for (auto& [attr, rel] : weights_table) {
        auto abs = std::filesystem::absolute(file.base_dir / rel).lexically_normal();
        rel = abs.lexically_relative(out_dir).generic_string();
      }
      if (!weights.created().empty()) {
        const std::string dir = created_weights_dir(o.output);
        std::filesystem::create_directories(out_dir / dir);
        for (const std::string& name : weights.created()) {
          const std::string rel = dir + "/" + weight_file_name(name);
          io::write_npy(out_dir / rel, weights.created_value(name));
          weights_table_set(weights_table, name, rel);
        }
      }
      io::write_fx_json(file.graph, o.output, weights_table);
    }
  }
  if (!o.dot.empty()) write_text(o.dot, to_dot(file.graph));
  if (o.print) std::cout << to_string(file.graph, {.show_meta = true});
  // As mlir-opt does: with nowhere else to put it, the result goes to stdout.
  if (o.output.empty() && o.dot.empty() && !o.print && !o.quiet) std::cout << io::to_fx_json(file.graph, file.weights);
  if (o.counters) {
    nlohmann::json per_pass = nlohmann::json::array();
    for (const auto& r : records)
      per_pass.push_back({{"pass", r.name}, {"counters", r.counters.to_json()}});
    std::cout << nlohmann::json{{"total", pm.counters().to_json()}, {"passes", per_pass}}.dump() << "\n";
  }
  if (o.timings) {
    double total = 0;
    for (const auto& r : records) {
      total += r.seconds;
      std::fprintf(stderr, "pass %-28s %12.1f us%s\n", r.name.c_str(), r.seconds * 1e6,
                   r.skipped ? " (disabled)" : r.changed ? " (changed the graph)" : "");
    }
    std::fprintf(stderr, "total %-27s %12.1f us\n", "", total * 1e6);
  }
  return 0;
}

}  // namespace opt_detail

// Runs kiln-opt over argv with the passes of `registry`; returns the exit status
// (0, or 2 after a one-line error on stderr). `tool` names the program in
// messages and --version.
// `numeric_check` backs --numeric-check (tools/kiln_opt.cpp passes the executor's).
inline int opt_main(int argc, char** argv, PassRegistry& registry, const std::string& tool = "kiln-opt",
                    const opt_detail::NumericCheckFactory& numeric_check = {}) {
  return tool_args::run_tool(tool, [&] { return opt_detail::run(argc, argv, registry, tool, numeric_check); });
}

}  // namespace kiln
