// Writing fx-graph-json: byte-identical round trips of the fixtures, files
// (plain and gzip), and graphs built in C++.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::Arg;
using kiln::ArgDict;
using kiln::ArgList;
using kiln::Graph;
using kiln::Node;

const std::vector<std::string> kFixtures{"towers_n8_pregrad.json.gz", "towers_n8_after_gbf.json.gz",
                                         "postgrad_net_pre.json.gz", "qmlp_exported.json.gz"};

std::string fixture(const std::string& name) { return std::string(KILN_FIXTURES_DIR) + "/inductor/" + name; }

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("kiln_test_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Args of two different graphs are the same when they have the same shape and
// values, node references naming the same node, and NaN matching NaN.
bool same_arg(const Arg& a, const Arg& b) {
  if (!a.visit([&](const auto& x) { return b.is<std::remove_cvref_t<decltype(x)>>(); })) return false;
  if (a.is_node()) return a.node()->name() == b.node()->name();
  if (const double* x = a.get_if<double>()) {
    const double y = *b.get_if<double>();
    return (std::isnan(*x) && std::isnan(y)) || (*x == y && std::signbit(*x) == std::signbit(y));
  }
  if (const ArgList* l = a.get_if<ArgList>()) {
    const ArgList& m = *b.get_if<ArgList>();
    if (l->size() != m.size()) return false;
    for (std::size_t i = 0; i < l->size(); ++i)
      if (!same_arg((*l)[i], m[i])) return false;
    return true;
  }
  if (const auto* s = a.get_if<kiln::Slice>()) return same_arg(Arg(s->parts), Arg(b.get_if<kiln::Slice>()->parts));
  if (const ArgDict* d = a.get_if<ArgDict>()) {
    const ArgDict& e = *b.get_if<ArgDict>();
    if (d->size() != e.size()) return false;
    auto it = e.begin();
    for (const auto& [k, v] : *d) {
      if (k != it->first || !same_arg(v, it->second)) return false;
      ++it;
    }
    return true;
  }
  return a == b;
}

// Same names, order, ops, targets, args, kwargs, meta and users.
void check_same_graph(const Graph& a, const Graph& b) {
  CHECK(a.name() == b.name());
  REQUIRE(a.size() == b.size());
  auto na = a.node_list(), nb = b.node_list();
  for (std::size_t i = 0; i < na.size(); ++i) {
    const Node& x = *na[i];
    const Node& y = *nb[i];
    CAPTURE(x.name());
    CHECK(x.name() == y.name());
    CHECK(x.op() == y.op());
    CHECK(x.target_name() == y.target_name());
    CHECK(same_arg(Arg(x.args()), Arg(y.args())));
    CHECK(same_arg(Arg(x.kwargs()), Arg(y.kwargs())));
    CHECK(x.meta == y.meta);
    CHECK(x.num_users() == y.num_users());
  }
}

kiln::TensorMeta tensor(std::vector<kiln::Dim> shape, kiln::DType dt = kiln::DType::float32) {
  kiln::TensorMeta t;
  t.dtype = dt;
  std::vector<kiln::Dim> stride(shape.size(), std::int64_t{1});
  t.shape = std::move(shape);
  t.stride = std::move(stride);
  return t;
}

// A graph that uses every ARG and META form.
Graph build_everything() {
  Graph g("built_in_cpp");
  Node* x = g.placeholder("x", tensor({std::int64_t{4}, kiln::SymInt{"s0"}}));
  Node* w = g.get_attr("weight", tensor({std::int64_t{8}, std::int64_t{8}}));
  Node* mm = g.call_function(kiln::aten::mm, {x, w});
  mm->meta.val = tensor({std::int64_t{4}, std::int64_t{8}});
  mm->meta.extra_json = {{"stack_trace", "\"File \\\"m.py\\\", line 3\""}, {"seq_nr", "17"}};
  const double inf = std::numeric_limits<double>::infinity();
  Node* f = g.call_function(
      kiln::OpRef("test.everything"),
      ArgList{kiln::None{}, true, false, 3, -7, 2.5, -0.0, 1e-05, inf, -inf, std::nan(""), "caf\xc3\xa9 \"q\"\n",
              ArgList{1, ArgList{x, ArgList{}}}, kiln::DType::int8, kiln::Device{"cuda:1"},
              kiln::EnumConst{"torch.strided"}, kiln::Slice{{kiln::None{}, 3, kiln::SymInt{"s0"}}},
              kiln::SymInt{"s0"}, ArgDict{{"k", mm}, {"nested", ArgDict{}}}, kiln::Repr{"object()"}},
      ArgDict{{"alpha", 0.5}, {"out_dtype", kiln::DType::float16}, {"inputs", ArgList{x, mm}}});
  f->meta.val = kiln::MetaVal::List{tensor({std::int64_t{2}}), kiln::MetaVal{}, kiln::MetaVal(std::int64_t{3}),
                                    kiln::MetaVal(kiln::SymInt{"s1"})};
  Node* v = g.call_method("view", {f, -1});
  v->meta.present = false;  // written without a "meta" key
  g.output(ArgList{f, mm, v});
  return g;
}

}  // namespace

TEST_CASE("every fixture is written back byte for byte") {
  for (const auto& name : kFixtures) {
    CAPTURE(name);
    const std::string original = kiln::io::read_file(fixture(name));
    kiln::io::GraphFile f = kiln::io::read_fx_json(fixture(name));
    const std::string written = kiln::io::to_fx_json(f.graph, f.weights);
    CHECK(written.size() == original.size());
    CHECK(written == original);
  }
}

TEST_CASE("every fixture reads back from its written form as the same graph") {
  for (const auto& name : kFixtures) {
    CAPTURE(name);
    kiln::io::GraphFile first = kiln::io::read_fx_json(fixture(name));
    kiln::io::GraphFile second = kiln::io::parse_fx_json(kiln::io::to_fx_json(first.graph, first.weights));
    check_same_graph(first.graph, second.graph);
    CHECK(first.weights == second.weights);
    CHECK_NOTHROW(kiln::lint(second.graph));
  }
}

TEST_CASE("write_fx_json writes plain and gzip files that read back") {
  TempDir dir("write");
  kiln::io::GraphFile f = kiln::io::read_fx_json(fixture("postgrad_net_pre.json.gz"));
  const std::string text = kiln::io::to_fx_json(f.graph);
  kiln::io::write_fx_json(f.graph, dir.path / "g.json");
  kiln::io::write_fx_json(f.graph, dir.path / "g.json.gz");
  kiln::io::write_fx_json(f.graph, dir.path / "g1.json.gz", {}, 1);

  const std::string plain = kiln::io::read_file_bytes(dir.path / "g.json");
  CHECK_FALSE(kiln::io::is_gzip(plain));
  CHECK(plain == text);
  for (const char* gz : {"g.json.gz", "g1.json.gz"}) {
    CAPTURE(gz);
    const std::string packed = kiln::io::read_file_bytes(dir.path / gz);
    CHECK(kiln::io::is_gzip(packed));
    CHECK(packed.size() < text.size() / 4);
    CHECK(kiln::io::gzip_decompress(packed) == text);
    kiln::io::GraphFile back = kiln::io::read_fx_json(dir.path / gz);
    check_same_graph(f.graph, back.graph);
  }
  kiln::io::GraphFile back = kiln::io::read_fx_json(dir.path / "g.json");
  check_same_graph(f.graph, back.graph);
  CHECK(back.base_dir == fs::absolute(dir.path));
}

TEST_CASE("a graph built in C++ with every ARG and META form is written and read back identically") {
  Graph g = build_everything();
  CHECK_NOTHROW(kiln::lint(g));
  const kiln::io::WeightsTable weights{{"weight", "weights/weight.npy"}, {"other.attr", "w/other.npy"}};
  const std::string text = kiln::io::to_fx_json(g, weights);
  kiln::io::GraphFile back = kiln::io::parse_fx_json(text, "built.json");
  check_same_graph(g, back.graph);
  CHECK(back.weights == weights);
  CHECK(kiln::io::to_fx_json(back.graph, back.weights) == text);
  CHECK(text.find(R"("meta":{"val":{"shape":[4,8],"dtype":"float32","stride":[1,1]},"stack_trace":"File \"m.py\", line 3","seq_nr":17}})") !=
        std::string::npos);
  CHECK(text.find(R"({"name":"view","op":"call_method","target":"view","args":[{"node":"everything"},-1],"kwargs":{}})") !=
        std::string::npos);
  CHECK(text.find(R"("weights":{"weight":{"file":"weights/weight.npy"},"other.attr":{"file":"w/other.npy"}}})") !=
        std::string::npos);
}

TEST_CASE("the document layout is json.dumps(separators=(',', ':'))") {
  Graph g("tiny");
  Node* x = g.placeholder("x", tensor({std::int64_t{2}}));
  Node* r = g.call_function(kiln::aten::relu, {x});
  g.output(ArgList{r});
  CHECK(kiln::io::to_fx_json(g) ==
        R"({"format":"fx-graph-json","version":1,"name":"tiny","nodes":[)"
        R"({"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{},"meta":{"val":{"shape":[2],"dtype":"float32","stride":[1]}}},)"
        R"({"name":"relu","op":"call_function","target":"aten.relu.default","args":[{"node":"x"}],"kwargs":{},"meta":{}},)"
        R"({"name":"output","op":"output","target":"output","args":[[{"node":"relu"}]],"kwargs":{},"meta":{}}]})");
}

TEST_CASE("floats are written as Python's repr writes them") {
  Graph g("floats");
  const double inf = std::numeric_limits<double>::infinity();
  Node* f = g.call_function(kiln::OpRef("test.floats"),
                            ArgList{1.0, 1e-05, 0.1, 1e16, 1e15, 123456789.0, -0.0, 1.7976931348623157e+308, 5e-324,
                                    0.0001, 2.5e-7, 100.5, inf, -inf, std::nan(""), 3});
  g.output(ArgList{f});
  const std::string text = kiln::io::to_fx_json(g);
  // The expected text is what Python prints for the same list.
  CHECK(text.find(R"("args":[1.0,1e-05,0.1,1e+16,1000000000000000.0,123456789.0,-0.0,1.7976931348623157e+308,5e-324,)"
                  R"(0.0001,2.5e-07,100.5,{"float":"inf"},{"float":"-inf"},{"float":"nan"},3])") != std::string::npos);
}

TEST_CASE("strings are escaped as json.dumps(ensure_ascii=True) escapes them") {
  Graph g("strings");
  // e-acute, U+1F600, newline, tab, quote, backslash, slash, U+0001, DEL, U+001F, CR, BS, FF
  const std::string s = "\xc3\xa9\xf0\x9f\x98\x80\n\t\"\\/\x01\x7f\x1f\r\b\f";
  Node* f = g.call_function(kiln::OpRef("test.strings"), ArgList{s});
  g.output(ArgList{f});
  const std::string text = kiln::io::to_fx_json(g);
  CHECK(text.find(R"("args":["\u00e9\ud83d\ude00\n\t\"\\/\u0001\u007f\u001f\r\b\f"])") != std::string::npos);
  auto back = kiln::io::parse_fx_json(text);
  CHECK(back.graph.find_node("strings")->args()[0] == Arg(s));
}

TEST_CASE("a lone surrogate escape survives a round trip") {
  const std::string text =
      R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)"
      R"({"name":"x","op":"placeholder","target":"x\ud800y","args":[],"kwargs":{},"meta":{}},)"
      R"({"name":"output","op":"output","target":"output","args":[[{"node":"x"}]],"kwargs":{},"meta":{}}]})";
  auto f = kiln::io::parse_fx_json(text);
  CHECK(kiln::io::to_fx_json(f.graph) == text);
}

TEST_CASE("meta is left out only for nodes read without one") {
  const std::string text =
      R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)"
      R"({"name":"a","op":"placeholder","target":"a","args":[],"kwargs":{}},)"
      R"({"name":"b","op":"placeholder","target":"b","args":[],"kwargs":{},"meta":{}},)"
      R"({"name":"output","op":"output","target":"output","args":[[{"node":"a"},{"node":"b"}]],"kwargs":{}}]})";
  auto f = kiln::io::parse_fx_json(text);
  CHECK(kiln::io::to_fx_json(f.graph) == text);
  // Giving such a node a value brings its meta back.
  f.graph.find_node("a")->meta.val = kiln::MetaVal(std::int64_t{5});
  CHECK(kiln::io::to_fx_json(f.graph).find(R"("name":"a","op":"placeholder","target":"a","args":[],"kwargs":{},"meta":{"val":5}})") !=
        std::string::npos);
}

TEST_CASE("the writer refuses graphs that could not be read back") {
  SUBCASE("no output node") {
    Graph g;
    g.placeholder("x");
    CHECK_THROWS_WITH_AS(kiln::io::to_fx_json(g), doctest::Contains("does not end with an output node"), kiln::GraphError);
  }
  SUBCASE("a node before one of its inputs") {
    Graph g;
    Node* x = g.placeholder("x");
    Node* r = g.call_function(kiln::aten::relu, {x});
    g.output(ArgList{r});
    g.move_before(x, r);
    CHECK_THROWS_WITH_AS(kiln::io::to_fx_json(g), doctest::Contains("node 'relu': args[0]: refers to node 'x', which does not come before it"),
                         kiln::GraphError);
    kiln::stable_topological_sort(g);
    CHECK_NOTHROW(kiln::io::to_fx_json(g));
  }
  SUBCASE("invalid UTF-8 in a string") {
    Graph g;
    Node* x = g.placeholder("x");
    Node* r = g.call_function(kiln::OpRef("test.f"), {x}, ArgDict{{"s", std::string("bad \xff byte")}});
    g.output(ArgList{r});
    CHECK_THROWS_WITH_AS(kiln::io::to_fx_json(g), doctest::Contains("node 'f': kwargs['s']: invalid UTF-8"), kiln::GraphError);
  }
  SUBCASE("a negative size or stride in meta.val") {
    Graph g;
    Node* x = g.placeholder("x", kiln::TensorMeta{{4, -3}, kiln::DType::float32, std::nullopt});
    Node* y = g.placeholder("y", kiln::TensorMeta{{4, 3}, kiln::DType::float32, std::vector<kiln::Dim>{3, -1}});
    g.output(ArgList{x, y});
    CHECK_THROWS_WITH_AS(kiln::io::to_fx_json(g),
                         doctest::Contains("node 'x': meta.val.shape[1]: a tensor's size is never negative, got -3"),
                         kiln::GraphError);
    x->meta.val = kiln::TensorMeta{{4, 3}, kiln::DType::float32, std::nullopt};
    CHECK_THROWS_WITH_AS(kiln::io::to_fx_json(g),
                         doctest::Contains("node 'y': meta.val.stride[1]: a tensor's stride is never negative, got -1"),
                         kiln::GraphError);
  }
  SUBCASE("duplicate weights entries") {
    Graph g;
    g.output(ArgList{});
    CHECK_THROWS_WITH_AS(kiln::io::to_fx_json(g, {{"w", "a.npy"}, {"w", "b.npy"}}), doctest::Contains("duplicate entry 'w'"),
                         kiln::GraphError);
  }
}

TEST_CASE("writing to a directory that does not exist is an IoError naming the path") {
  Graph g;
  g.output(ArgList{});
  CHECK_THROWS_WITH_AS(kiln::io::write_fx_json(g, "/nonexistent-dir-kiln/x.json"),
                       doctest::Contains("/nonexistent-dir-kiln/x.json: cannot open for writing"), kiln::io::IoError);
}
