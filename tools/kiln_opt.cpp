// kiln-opt: read an fx-graph-json graph, run named passes, write and/or print it.
//
//   kiln-opt IN.json[.gz] [--passes a,b,c] [--pass-options JSON|@FILE] [--replacements FILE]
//            [-o OUT.json[.gz]] [--dot OUT.dot] [--print] [--counters] [--timings] [--no-lint] [--list-passes]
//            [--max-gzip-bytes N]
//
// --replacements FILE loads search/replace graph pairs (a manifest, see
// kiln/passes/replacement_manifest.hpp) into one pattern pass named
// "replacements", which runs before the --passes unless they name it.
//
// stdout carries what was asked for (--print text, then the --counters JSON
// object); --timings goes to stderr so stdout stays machine-readable. Any error
// is one line on stderr and exit status 2.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/passes.hpp"
#include "kiln/passes/replacement_manifest.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kiln-opt IN.json[.gz] [--passes a,b,c] [--pass-options JSON|@FILE] [--replacements FILE]\n"
    "                [-o OUT.json[.gz]] [--dot OUT.dot] [--print] [--counters] [--timings] [--no-lint]\n"
    "                [--list-passes] [--max-gzip-bytes N]\n"
    "  --max-gzip-bytes N   a gzip input may decompress to at most N bytes (default 1 GiB)\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string input;
  std::vector<std::string> passes;
  std::string pass_options;
  std::string replacements;
  std::string output;
  std::string dot;
  bool print = false, counters = false, timings = false, lint = true, list = false;
  std::size_t max_gzip_bytes = kiln::io::kDefaultMaxDecompressedBytes;
};

std::size_t parse_byte_count(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-') throw UsageError(flag + " needs a whole number of bytes, got '" + text + "'");
  return static_cast<std::size_t>(v);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Options parse_args(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw UsageError(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--passes") o.passes = split_commas(value(i));
    else if (a == "--pass-options") o.pass_options = value(i);
    else if (a == "--replacements") o.replacements = value(i);
    else if (a == "-o" || a == "--output") o.output = value(i);
    else if (a == "--dot") o.dot = value(i);
    else if (a == "--print") o.print = true;
    else if (a == "--counters") o.counters = true;
    else if (a == "--timings") o.timings = true;
    else if (a == "--no-lint") o.lint = false;
    else if (a == "--list-passes") o.list = true;
    else if (a == "--max-gzip-bytes") o.max_gzip_bytes = parse_byte_count(a, value(i));
    else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (!a.empty() && a[0] == '-') throw UsageError("unknown option " + a);
    else if (o.input.empty()) o.input = a;
    else throw UsageError("more than one input file: " + o.input + " and " + a);
  }
  if (o.input.empty() && !o.list) throw UsageError("no input graph given");
  return o;
}

nlohmann::json load_pass_options(const std::string& text) {
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

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw kiln::Error("cannot write " + path + ": " + std::strerror(errno));
  if (!(f << text) || !f.flush()) throw kiln::Error("cannot write " + path + ": " + std::strerror(errno));
}

int run(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  kiln::PassRegistry registry = kiln::default_pass_registry();
  if (!o.replacements.empty()) {
    // Loaded (and every pair checked) before the graph is read.
    const std::string manifest = o.replacements;
    registry.add(kiln::make_pattern_pass("replacements", "the search/replace pairs of " + manifest,
                                         [&] { return kiln::load_replacements(manifest); }));
    if (std::find(o.passes.begin(), o.passes.end(), "replacements") == o.passes.end())
      o.passes.insert(o.passes.begin(), "replacements");
  }
  if (o.list) {
    for (const auto& p : registry.passes()) std::cout << p.name << "\t" << p.description << "\n";
    if (o.input.empty()) return 0;
  }
  kiln::PassManager pm(registry);
  pm.set_options(load_pass_options(o.pass_options));
  pm.set_lint_after_each(o.lint);
  for (const auto& name : o.passes) registry.get(name);  // reject typos before reading a large file

  kiln::io::GraphFile file = kiln::io::read_fx_json(o.input, o.max_gzip_bytes);
  if (o.lint) {
    // Named like the reader's errors: the file, then what is wrong in it.
    try {
      kiln::lint(file.graph);
    } catch (const kiln::LintError& e) {
      throw kiln::LintError(o.input + ": " + e.what());
    }
  }
  auto records = pm.run(file.graph, o.passes);

  if (!o.output.empty()) {
    // Weight paths are relative to the JSON file: re-anchor them at the new location.
    const auto out_dir = std::filesystem::absolute(o.output).parent_path();
    kiln::io::WeightsTable weights = file.weights;
    for (auto& [attr, rel] : weights) {
      auto abs = std::filesystem::absolute(file.base_dir / rel).lexically_normal();
      rel = abs.lexically_relative(out_dir).generic_string();
    }
    kiln::io::write_fx_json(file.graph, o.output, weights);
  }
  if (!o.dot.empty()) write_text(o.dot, kiln::to_dot(file.graph));
  if (o.print) std::cout << kiln::to_string(file.graph, {.show_meta = true});
  if (o.counters) std::cout << pm.counters().to_json().dump() << "\n";
  if (o.timings)
    for (const auto& r : records)
      std::fprintf(stderr, "pass %-28s %10.3f ms%s\n", r.name.c_str(), r.seconds * 1e3,
                   r.skipped ? " (disabled)" : r.changed ? " (changed the graph)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "kiln-opt: " << e.what() << " (see kiln-opt --help)\n";
    return 2;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    std::cerr << "kiln-opt: error: " << msg << "\n";
    return 2;
  }
}
