// kiln-opt driven as a user drives it: a real process, its exit status, its
// stdout and stderr, and the files it writes.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tool_test_support.hpp"

#include "kiln/core.hpp"
#include "kiln/io.hpp"

namespace fs = std::filesystem;

namespace {

using Run = kiln::test::ToolRun;
using kiln::test::slurp;

fs::path scratch_dir() { return kiln::test::scratch_dir("kiln_opt_test_"); }

// Runs kiln-opt with `args` (already shell-quoted where needed).
Run kiln_opt(const std::string& args) { return kiln::test::run_tool(KILN_OPT_EXE, args, scratch_dir()); }

std::string fixture(const char* name) { return std::string(KILN_FIXTURES_DIR) + "/inductor/" + name; }

// A graph with a dead chain (tanh -> neg) beside the live relu -> sigmoid.
fs::path write_graph_with_dead_code() {
  kiln::Graph g("dead_code");
  auto* x = g.placeholder("x", kiln::TensorMeta{{2, 3}, kiln::DType::float32, std::nullopt});
  auto* r = g.call_function(kiln::OpRef("aten.relu.default"), {x});
  auto* s = g.call_function(kiln::OpRef("aten.sigmoid.default"), {r});
  auto* dead = g.call_function(kiln::OpRef("aten.tanh.default"), {x});
  g.call_function(kiln::OpRef("aten.neg.default"), {dead});
  g.output(kiln::ArgList{s});
  const fs::path p = scratch_dir() / "dead_code.json";
  std::ofstream(p) << kiln::io::to_fx_json(g);
  return p;
}

}  // namespace

TEST_CASE("kiln-opt runs passes in order and reports counters and timings") {
  const fs::path in = write_graph_with_dead_code();
  const fs::path out = scratch_dir() / "clean.json";
  Run r = kiln_opt("'" + in.string() + "' --passes stable_topological_sort,dce,lint -o '" + out.string() +
                   "' --counters --timings");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto report = nlohmann::json::parse(r.out);
  auto counters = report["total"];
  CHECK(counters["dce_erased_nodes"] == 2);
  // A file's nodes are already in topological order: the sort moves nothing.
  CHECK_FALSE(counters.contains("stable_topological_sort_moved_nodes"));
  // And per pass, in pipeline order.
  REQUIRE(report["passes"].size() == 3);
  CHECK(report["passes"][0]["pass"] == "stable_topological_sort");
  CHECK(report["passes"][0]["counters"].empty());
  CHECK(report["passes"][1]["pass"] == "dce");
  CHECK(report["passes"][1]["counters"]["dce_erased_nodes"] == 2);
  for (const char* pass : {"stable_topological_sort", "dce", "lint"}) CHECK(r.err.find(pass) != std::string::npos);
  CHECK(r.err.find(" us") != std::string::npos);  // microseconds
  CHECK(r.err.find("\ntotal ") != std::string::npos);
  CHECK(r.err.find("(changed the graph)") != std::string::npos);  // dce's line
  auto result = kiln::io::read_fx_json(out);
  CHECK_NOTHROW(kiln::lint(result.graph));
  CHECK(result.graph.size() == 4);
  CHECK(result.graph.find_node("tanh") == nullptr);
  CHECK(result.graph.find_node("neg") == nullptr);
}

TEST_CASE("kiln-opt keeps weights reachable when it writes to another directory") {
  const fs::path src = fs::path(KILN_SOURCE_DIR) / "examples/small_cnn/graph.json";
  const fs::path outdir = scratch_dir() / "moved" / "deeper";
  fs::create_directories(outdir);
  Run r = kiln_opt("'" + src.string() + "' --passes dce,dce -o '" + (outdir / "g.json").string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto in = kiln::io::read_fx_json(src);
  auto out = kiln::io::read_fx_json(outdir / "g.json");
  REQUIRE(out.weights.size() == in.weights.size());
  REQUIRE(out.weights.size() == 10);
  for (const auto& [attr, rel] : out.weights) {
    CAPTURE(attr);
    CHECK(fs::exists(out.weight_path(attr)));
    CHECK(kiln::io::load_weight(out, attr) == kiln::io::load_weight(in, attr));
  }
}

TEST_CASE("kiln-opt prints the graph in FX style and writes DOT and gzip") {
  const fs::path dot = scratch_dir() / "g.dot", gz = scratch_dir() / "g.json.gz";
  Run r = kiln_opt("'" + fixture("towers_n8_pregrad.json.gz") + "' --print --dot '" + dot.string() + "' -o '" +
                   gz.string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.rfind("graph():\n", 0) == 0);
  CHECK(r.out.find("call_function[target=torch.nn.functional.linear]") != std::string::npos);
  const std::string d = slurp(dot);
  CHECK(d.rfind("digraph", 0) == 0);
  CHECK(d.find("->") != std::string::npos);
  const std::string bytes = slurp(gz);
  REQUIRE(bytes.size() > 2);
  CHECK(static_cast<unsigned char>(bytes[0]) == 0x1f);
  CHECK(static_cast<unsigned char>(bytes[1]) == 0x8b);
  CHECK(kiln::io::read_fx_json(gz).graph.size() == 84);
}

TEST_CASE("kiln-opt errors are one line with exit status 2") {
  struct Case {
    std::string args;
    std::string expect;
  };
  const fs::path bad = scratch_dir() / "bad.json";
  std::ofstream(bad) << "{\"format\": \"fx-graph-json\", \"version\": 1, \"nodes\": [";
  // Reads, but a placeholder with an argument fails lint.
  const fs::path unlinted = scratch_dir() / "unlinted.json";
  std::ofstream(unlinted) << R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)"
                          << R"({"name":"x","op":"placeholder","target":"x","args":[1],"kwargs":{}},)"
                          << R"({"name":"output","op":"output","target":"output","args":[[{"node":"x"}]],"kwargs":{}}]})";
  const fs::path options_dir = scratch_dir() / "options_dir";
  fs::create_directories(options_dir);
  const Case cases[] = {
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --passes dce,no_such_pass", "unknown pass 'no_such_pass'"},
      {"/no/such/file.json", "/no/such/file.json"},
      {"'" + bad.string() + "'", "bad.json"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --pass-options '{not json'", "--pass-options"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --pass-options '{\"nope\": {}}'", "unknown pass 'nope'"},
      {"", "no input graph"},
      {"--frobnicate x.json", "unknown option --frobnicate"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --pass-options '{\"dce\": {\"aggressive\": true}}'",
       "pass options for 'dce': unknown key 'aggressive' (dce takes no options)"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --print=yes", "--print takes no value"},
      {"- -", "more than one input"},
      {"'" + unlinted.string() + "'", unlinted.string() + ": lint: node x: a placeholder takes no arguments"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --pass-options @'" + options_dir.string() + "'",
       "cannot read pass options file " + options_dir.string() + ": it is a directory"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --pass-options @/no/such/options.json",
       "cannot read pass options file /no/such/options.json: No such file or directory"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --dot /no/such/dir/out.dot",
       "cannot write /no/such/dir/out.dot: No such file or directory"},
      // The fixture decompresses to several hundred KB: over a 1000-byte limit.
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --max-gzip-bytes 1000", "decompresses to more than 1000 bytes"},
      {"'" + fixture("towers_n8_pregrad.json.gz") + "' --max-gzip-bytes lots", "--max-gzip-bytes needs a whole number"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    Run r = kiln_opt(c.args);
    CHECK(r.status == 2);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(r.err.rfind("kiln-opt: ", 0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);  // exactly one line
  }
}

TEST_CASE("kiln-opt --max-gzip-bytes: a limit above the input's size reads it") {
  Run r = kiln_opt("'" + fixture("towers_n8_pregrad.json.gz") + "' --max-gzip-bytes 100000000 --passes dce --counters");
  CHECK(r.status == 0);
  CHECK(r.err.empty());
}

TEST_CASE("kiln-opt reads - from stdin and writes - to stdout, with no output flag it writes the graph, --quiet not") {
  const fs::path in = write_graph_with_dead_code();
  // Input from stdin; the result, as fx-graph-json, to stdout by default.
  Run r = kiln_opt("- --passes=dce < '" + in.string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  kiln::io::GraphFile f = kiln::io::parse_fx_json(r.out);
  CHECK(f.graph.size() == 4);  // the dead tanh -> neg chain is gone
  CHECK(f.graph.find_node("tanh") == nullptr);
  // gzip on stdin too, -o - and --dot - on stdout.
  const fs::path gz = scratch_dir() / "dead.json.gz";
  kiln::io::write_file(gz, kiln::io::gzip_compress(slurp(in)));
  Run o = kiln_opt("- -o - < '" + gz.string() + "'");
  REQUIRE_MESSAGE(o.status == 0, o.err);
  CHECK(kiln::io::parse_fx_json(o.out).graph.size() == 6);
  Run d = kiln_opt("'" + in.string() + "' --dot -");
  REQUIRE(d.status == 0);
  CHECK(d.out.rfind("digraph", 0) == 0);
  CHECK(d.out.find("\"format\"") == std::string::npos);  // --dot is output enough: no JSON besides
  // --quiet: nothing but what is asked for.
  Run q = kiln_opt("'" + in.string() + "' --passes dce --quiet --counters");
  REQUIRE(q.status == 0);
  CHECK(nlohmann::json::parse(q.out)["total"]["dce_erased_nodes"] == 2);
}

TEST_CASE("kiln-opt --help describes every option, --version names the version") {
  Run h = kiln_opt("--help");
  CHECK(h.status == 0);
  for (const char* opt : {"--passes", "--pass-options", "--replacements", "--output", "--dot", "--print", "--quiet",
                          "--counters", "--timings", "--no-lint", "--max-gzip-bytes", "--list-passes", "--version",
                          "--help", "--option=value"})
    CHECK_MESSAGE(h.out.find(opt) != std::string::npos, opt);
  Run v = kiln_opt("--version");
  CHECK(v.status == 0);
  CHECK(v.out == std::string("kiln-opt (kiln) ") + KILN_PROJECT_VERSION + "\n");
}

TEST_CASE("kiln-opt lists its passes") {
  Run r = kiln_opt("--list-passes");
  CHECK(r.status == 0);
  for (const char* name : {"lint", "dce", "stable_topological_sort"}) CHECK(r.out.find(name) != std::string::npos);
}

namespace {
// Two blocks of add(mm(h, w), b), then neg(neg(.)) and relu.
fs::path write_mm_add_chain() {
  kiln::Graph g("mm_add_chain");
  auto* x = g.placeholder("x");
  auto* w = g.placeholder("w");
  auto* b = g.placeholder("b");
  kiln::Node* h = x;
  for (int i = 0; i < 2; ++i)
    h = g.call_function(kiln::OpRef("aten.add.Tensor"), {g.call_function(kiln::OpRef("aten.mm.default"), {h, w}), b});
  auto* n = g.call_function(kiln::OpRef("aten.neg.default"), {g.call_function(kiln::OpRef("aten.neg.default"), {h})});
  g.output(kiln::ArgList{g.call_function(kiln::OpRef("aten.relu.default"), {n})});
  const fs::path p = scratch_dir() / "mm_add_chain.json";
  std::ofstream(p) << kiln::io::to_fx_json(g);
  return p;
}
std::string manifest() { return std::string(KILN_TEST_DATA_DIR) + "/replacements/manifest.json"; }
}  // namespace

TEST_CASE("kiln-opt --replacements runs search/replace pairs from a manifest before the passes") {
  // Each pair is Inductor's register_replacement; all of them one pattern pass.
  const fs::path in = write_mm_add_chain();
  const fs::path out = scratch_dir() / "replaced.json";
  Run r = kiln_opt("'" + in.string() + "' --replacements '" + manifest() + "' --passes dce --counters --timings -o '" +
                   out.string() + "'");
  REQUIRE(r.status == 0);
  auto counters = nlohmann::json::parse(r.out)["total"];
  CHECK(counters["pattern_matcher_count"] == 3);  // two mm+add, one neg(neg)
  CHECK(counters["pattern_matcher_nodes"] == 6);
  CHECK(r.err.find("pass replacements") < r.err.find("pass dce"));
  kiln::io::GraphFile f = kiln::io::read_fx_json(out);
  CHECK(f.graph.find_nodes(kiln::OpKind::call_function, kiln::OpRef("aten.addmm.default")).size() == 2);
  CHECK(f.graph.find_nodes(kiln::OpKind::call_function, kiln::OpRef("aten.mm.default")).empty());
  CHECK(f.graph.find_nodes(kiln::OpKind::call_function, kiln::OpRef("aten.neg.default")).empty());
  // relu now reads the second addmm.
  kiln::Node* relu = f.graph.find_node("relu");
  REQUIRE(relu != nullptr);
  CHECK(relu->arg(0).node()->target_name() == "aten.addmm.default");
  // Named in --passes, it runs where it is named.
  Run later = kiln_opt("'" + in.string() + "' --replacements '" + manifest() + "' --passes dce,replacements --timings");
  REQUIRE(later.status == 0);
  CHECK(later.err.find("pass dce") < later.err.find("pass replacements"));
}

TEST_CASE("kiln-opt --replacements: a bad manifest is one line naming the entry and field") {
  const fs::path in = write_mm_add_chain();
  const fs::path dir = scratch_dir();
  auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return "'" + (dir / name).string() + "'";
  };
  const std::string data = std::string(KILN_TEST_DATA_DIR) + "/replacements/";
  struct Case {
    std::string manifest;
    std::string expect;
  };
  const Case cases[] = {
      {write("m1.json", "{\"format\": \"kiln-replacements\", \"version\": 1, \"replacements\": [{\"name\": \"x\", "
                        "\"search\": \"missing.json\", \"replace\": \"missing.json\"}]}"),
       "replacements[0] (x): \"search\""},
      {write("m2.json", "{\"format\": \"nope\"}"), "\"format\" must be \"kiln-replacements\""},
      {write("m3.json", "{\"format\": \"kiln-replacements\", \"version\": 1, \"replacements\": [{\"search\": \"" + data +
                            "mm_add_search.json\", \"replace\": \"" + data + "mm_add_replace.json\", \"ignore\": 1}]}"),
       "replacements[0]: unknown field \"ignore\""},
      {write("m4.json", "{\"format\": \"kiln-replacements\", \"version\": 1, \"replacements\": [{\"search\": \"" + data +
                            "mm_add_search.json\", \"replace\": \"" + data + "neg_neg_replace.json\"}]}"),
       "the replacement graph has 1 placeholders, the search graph 3"},
      {"'/no/such/manifest.json'", "cannot read it"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.manifest);
    Run r = kiln_opt("'" + in.string() + "' --replacements " + c.manifest);
    CHECK(r.status == 2);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
}

TEST_CASE("kiln-opt runs the group/batch fusions by name, with options, and writes a graph that reads back") {
  const fs::path out = scratch_dir() / "towers_fused.json";
  Run r = kiln_opt("'" + fixture("towers_n8_pregrad.json.gz") +
                   "' --passes batch_linear,batch_layernorm,batch_tanh,batch_relu,batch_sigmoid"
                   " --pass-options '{\"batch_tanh\": {\"min_fuse_set_size\": 9}}' --counters -o '" + out.string() + "'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto total = nlohmann::json::parse(r.out)["total"];
  for (const char* name : {"batch_linear", "batch_layernorm", "batch_relu", "batch_sigmoid"}) CHECK(total[name] == 1);
  CHECK_FALSE(total.contains("batch_tanh"));  // 8 tanh < 9
  auto result = kiln::io::read_fx_json(out);
  CHECK_NOTHROW(kiln::lint(result.graph));
  CHECK(result.graph.count_nodes(kiln::OpKind::call_function, kiln::OpRef("torch.baddbmm")) == 1);
  // A search option the fusions do not have is an error naming pass and key.
  Run bad = kiln_opt("'" + fixture("towers_n8_pregrad.json.gz") + "' --passes batch_linear --pass-options '{\"batch_linear\": {\"depth\": 3}}'");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("batch_linear") != std::string::npos);
  CHECK(bad.err.find("depth") != std::string::npos);
}
