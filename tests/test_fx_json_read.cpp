// Reading fx-graph-json: the spec's example, every ARG and META form, and the
// real Inductor fixtures.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::Arg;
using kiln::ArgList;
using kiln::Node;
using kiln::OpKind;

// The Example document of FX_GRAPH_JSON.md, verbatim.
constexpr const char* kSpecExample = R"({"format":"fx-graph-json","version":1,"name":"tiny","nodes":[
 {"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{},
  "meta":{"val":{"shape":[4,8],"dtype":"float32","stride":[8,1]}}},
 {"name":"w","op":"get_attr","target":"w","args":[],"kwargs":{},
  "meta":{"val":{"shape":[8,8],"dtype":"float32","stride":[8,1]}}},
 {"name":"mm","op":"call_function","target":"aten.mm.default",
  "args":[{"node":"x"},{"node":"w"}],"kwargs":{},
  "meta":{"val":{"shape":[4,8],"dtype":"float32","stride":[8,1]}}},
 {"name":"relu","op":"call_function","target":"aten.relu.default",
  "args":[{"node":"mm"}],"kwargs":{},
  "meta":{"val":{"shape":[4,8],"dtype":"float32","stride":[8,1]}}},
 {"name":"output","op":"output","target":"output","args":[[{"node":"relu"}]],"kwargs":{}}
],"weights":{"w":{"file":"weights/w.npy"}}})";

// A document with placeholder x, one call_function node "f" with the given
// args, kwargs and meta, and an output returning f.
std::string doc_with(const std::string& args, const std::string& kwargs = "{}",
                     const std::string& meta = R"({"val":{"shape":[2],"dtype":"float32"}})") {
  return R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)"
         R"({"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{},"meta":{}},)"
         R"({"name":"f","op":"call_function","target":"test.f","args":)" +
         args + R"(,"kwargs":)" + kwargs + R"(,"meta":)" + meta +
         R"(},{"name":"output","op":"output","target":"output","args":[[{"node":"f"}]],"kwargs":{},"meta":{}}]})";
}

std::vector<kiln::Dim> dims(std::initializer_list<std::int64_t> v) { return {v.begin(), v.end()}; }

std::string fixture(const std::string& name) { return std::string(KILN_FIXTURES_DIR) + "/inductor/" + name; }

// For each node name, how many distinct nodes reference it (computed from the
// JSON itself, independently of kiln).
std::map<std::string, int> users_from_json(const nlohmann::json& doc) {
  std::map<std::string, int> users;
  for (const auto& n : doc["nodes"]) {
    std::set<std::string> refs;
    std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& a) {
      if (a.is_array()) {
        for (const auto& e : a) walk(e);
      } else if (a.is_object()) {
        if (a.size() == 1 && a.contains("node")) refs.insert(a["node"].get<std::string>());
        else
          for (const auto& [k, v] : a.items()) walk(v);
      }
    };
    walk(n["args"]);
    walk(n["kwargs"]);
    users[n["name"].get<std::string>()];  // every node, users or not
    for (const auto& r : refs) ++users[r];
  }
  return users;
}

}  // namespace

TEST_CASE("the spec's Example document parses to the expected graph") {
  kiln::io::GraphFile f = kiln::io::parse_fx_json(kSpecExample, "example.json");
  const kiln::Graph& g = f.graph;
  CHECK(g.name() == "tiny");
  REQUIRE(g.size() == 5);
  auto nodes = g.node_list();
  const std::vector<std::string> names{"x", "w", "mm", "relu", "output"};
  const std::vector<OpKind> ops{OpKind::placeholder, OpKind::get_attr, OpKind::call_function, OpKind::call_function,
                                OpKind::output};
  const std::vector<std::string> targets{"x", "w", "aten.mm.default", "aten.relu.default", "output"};
  for (std::size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(nodes[i]->name() == names[i]);
    CHECK(nodes[i]->op() == ops[i]);
    CHECK(nodes[i]->target_name() == targets[i]);
    CHECK(nodes[i]->kwargs().empty());
  }
  Node *x = nodes[0], *w = nodes[1], *mm = nodes[2], *relu = nodes[3], *out = nodes[4];
  CHECK(mm->is_call(kiln::aten::mm));
  CHECK(relu->is_call(kiln::aten::relu));
  REQUIRE(mm->args().size() == 2);
  CHECK(mm->args()[0].node() == x);
  CHECK(mm->args()[1].node() == w);
  CHECK(relu->args() == ArgList{mm});
  REQUIRE(out->args().size() == 1);
  CHECK(out->args()[0] == Arg(ArgList{relu}));
  CHECK(g.output_node() == out);
  CHECK(x->num_users() == 1);
  CHECK(mm->num_users() == 1);
  CHECK(relu->num_users() == 1);
  CHECK(out->num_users() == 0);

  const kiln::TensorMeta* tm = mm->meta.val.tensor();
  REQUIRE(tm);
  CHECK(tm->shape == dims({4, 8}));
  CHECK(tm->dtype == kiln::DType::float32);
  REQUIRE(tm->stride.has_value());
  CHECK(*tm->stride == dims({8, 1}));
  CHECK(w->meta.val.tensor()->shape == dims({8, 8}));
  CHECK(out->meta.val.is_none());
  CHECK_FALSE(out->meta.present);  // the output node has no "meta" key
  CHECK(x->meta.present);

  REQUIRE(f.weights.size() == 1);
  CHECK(f.weights[0].first == "w");
  CHECK(f.weights[0].second == "weights/w.npy");
  CHECK(f.base_dir.empty());
  CHECK_NOTHROW(kiln::lint(g));
}

TEST_CASE("scalars: None, bools, strings, and ints kept apart from floats") {
  auto f = kiln::io::parse_fx_json(doc_with(
      R"([null,true,false,"s",1,1.0,1e-05,-3,0,-0.0,2.5E+3,9007199254740993,-9223372036854775808,"caf\u00e9\n\"q\""])"));
  const Node* n = f.graph.find_node("f");
  REQUIRE(n);
  const ArgList& a = n->args();
  REQUIRE(a.size() == 14);
  CHECK(a[0].is_none());
  REQUIRE(a[1].get_if<bool>());
  CHECK(*a[1].get_if<bool>() == true);
  REQUIRE(a[2].get_if<bool>());
  CHECK(*a[2].get_if<bool>() == false);
  CHECK(a[3] == Arg(std::string("s")));
  REQUIRE(a[4].get_if<std::int64_t>());
  CHECK(*a[4].get_if<std::int64_t>() == 1);
  REQUIRE(a[5].get_if<double>());  // 1.0 is a float, not the int 1
  CHECK(*a[5].get_if<double>() == 1.0);
  REQUIRE(a[6].get_if<double>());
  CHECK(*a[6].get_if<double>() == 1e-05);
  CHECK(*a[7].get_if<std::int64_t>() == -3);
  CHECK(*a[8].get_if<std::int64_t>() == 0);
  REQUIRE(a[9].get_if<double>());
  CHECK(std::signbit(*a[9].get_if<double>()));
  CHECK(*a[10].get_if<double>() == 2500.0);
  CHECK(*a[11].get_if<std::int64_t>() == 9007199254740993);  // exact: not read through a double
  CHECK(*a[12].get_if<std::int64_t>() == INT64_MIN);
  CHECK(a[13] == Arg(std::string("caf\xc3\xa9\n\"q\"")));
}

TEST_CASE("non-finite floats are read from {\"float\": ...}") {
  auto f = kiln::io::parse_fx_json(doc_with(R"([{"float":"inf"},{"float":"-inf"},{"float":"nan"}])"));
  const ArgList& a = f.graph.find_node("f")->args();
  REQUIRE(a.size() == 3);
  REQUIRE(a[0].get_if<double>());
  CHECK(std::isinf(*a[0].get_if<double>()));
  CHECK(*a[0].get_if<double>() > 0);
  CHECK(std::isinf(*a[1].get_if<double>()));
  CHECK(*a[1].get_if<double>() < 0);
  CHECK(std::isnan(*a[2].get_if<double>()));
}

TEST_CASE("lists nest and node references resolve anywhere in them") {
  auto f = kiln::io::parse_fx_json(doc_with(R"([[1,[2,[{"node":"x"}]]],[]])"));
  const Node* x = f.graph.find_node("x");
  const Node* n = f.graph.find_node("f");
  REQUIRE(n->args().size() == 2);
  const ArgList* outer = n->args()[0].list();
  REQUIRE(outer);
  REQUIRE(outer->size() == 2);
  CHECK((*outer)[0] == Arg(1));
  const ArgList* inner = (*outer)[1].list();
  REQUIRE(inner);
  CHECK((*inner)[0] == Arg(2));
  REQUIRE((*inner)[1].list());
  CHECK((*inner)[1].list()->at(0).node() == x);
  CHECK(n->args()[1] == Arg(ArgList{}));
  CHECK(x->num_users() == 1);
  CHECK(n->all_input_nodes() == std::vector<Node*>{const_cast<Node*>(x)});
}

TEST_CASE("tagged objects: node, dtype, device, enum, slice, sym, dict, repr") {
  auto f = kiln::io::parse_fx_json(doc_with(
      R"([{"node":"x"},{"dtype":"bfloat16"},{"device":"cuda:0"},{"enum":"torch.contiguous_format"},)"
      R"({"slice":[null,5,{"sym":"s0"}]},{"sym":"s1"},{"dict":{"a":1,"b":{"node":"x"},"c":{"dict":{}}}},)"
      R"J({"repr":"Foo(bar=1)"},{"dtype":"bool"}])J",
      R"({"dtype":{"dtype":"int64"},"out":{"node":"x"}})"));
  const Node* x = f.graph.find_node("x");
  const Node* n = f.graph.find_node("f");
  const ArgList& a = n->args();
  REQUIRE(a.size() == 9);
  CHECK(a[0].node() == x);
  CHECK(a[1] == Arg(kiln::DType::bfloat16));
  REQUIRE(a[2].get_if<kiln::Device>());
  CHECK(a[2].get_if<kiln::Device>()->name == "cuda:0");
  REQUIRE(a[3].get_if<kiln::EnumConst>());
  CHECK(a[3].get_if<kiln::EnumConst>()->name == "torch.contiguous_format");
  const auto* s = a[4].get_if<kiln::Slice>();
  REQUIRE(s);
  REQUIRE(s->parts.size() == 3);
  CHECK(s->parts[0].is_none());
  CHECK(s->parts[1] == Arg(5));
  CHECK(s->parts[2] == Arg(kiln::SymInt{"s0"}));
  CHECK(a[5] == Arg(kiln::SymInt{"s1"}));
  const auto* d = a[6].get_if<kiln::ArgDict>();
  REQUIRE(d);
  REQUIRE(d->size() == 3);
  CHECK(*d->find("a") == Arg(1));
  CHECK(d->find("b")->node() == x);
  REQUIRE(d->find("c")->get_if<kiln::ArgDict>());
  CHECK(d->find("c")->get_if<kiln::ArgDict>()->empty());
  std::vector<std::string> keys;
  for (const auto& [k, v] : *d) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"a", "b", "c"});  // document order
  REQUIRE(a[7].get_if<kiln::Repr>());
  CHECK(a[7].get_if<kiln::Repr>()->text == "Foo(bar=1)");
  CHECK(a[8] == Arg(kiln::DType::bool_));

  REQUIRE(n->kwargs().size() == 2);
  CHECK(*n->kwargs().find("dtype") == Arg(kiln::DType::int64));
  CHECK(n->kwargs().find("out")->node() == x);
  CHECK(x->num_users() == 1);  // one user, however many references
}

TEST_CASE("meta.val: sym dims in shapes and strides") {
  auto f = kiln::io::parse_fx_json(
      doc_with("[]", "{}", R"({"val":{"shape":[{"sym":"s0"},64],"dtype":"float16","stride":[64,1]}})"));
  const kiln::TensorMeta* t = f.graph.find_node("f")->meta.val.tensor();
  REQUIRE(t);
  REQUIRE(t->shape.size() == 2);
  CHECK(t->shape[0] == kiln::Dim(kiln::SymInt{"s0"}));
  CHECK(t->shape[1] == kiln::Dim(std::int64_t{64}));
  CHECK(t->dtype == kiln::DType::float16);
  CHECK(*t->stride == dims({64, 1}));
  CHECK_FALSE(t->numel().has_value());
}

TEST_CASE("meta.val: a TENSOR_META without stride, and a 0-d one") {
  auto f = kiln::io::parse_fx_json(doc_with("[]", "{}", R"({"val":{"shape":[],"dtype":"int64"}})"));
  const kiln::TensorMeta* t = f.graph.find_node("f")->meta.val.tensor();
  REQUIRE(t);
  CHECK(t->shape.empty());
  CHECK(t->dtype == kiln::DType::int64);
  CHECK_FALSE(t->stride.has_value());
  CHECK(t->numel() == 1);
}

TEST_CASE("meta.val: a list for multi-output nodes, with null entries") {
  auto f = kiln::io::parse_fx_json(doc_with(
      "[]", "{}",
      R"({"val":[{"shape":[2,3],"dtype":"float32","stride":[3,1]},null,{"shape":[3],"dtype":"int8","stride":[1]}]})"));
  const auto* l = f.graph.find_node("f")->meta.val.list();
  REQUIRE(l);
  REQUIRE(l->size() == 3);
  REQUIRE((*l)[0].tensor());
  CHECK((*l)[0].tensor()->shape == dims({2, 3}));
  CHECK((*l)[1].is_none());
  CHECK((*l)[2].tensor()->dtype == kiln::DType::int8);
}

TEST_CASE("meta.val: an integer and a symbolic integer") {
  auto f = kiln::io::parse_fx_json(doc_with("[]", "{}", R"({"val":7})"));
  CHECK(f.graph.find_node("f")->meta.val == kiln::MetaVal(std::int64_t{7}));
  auto g = kiln::io::parse_fx_json(doc_with("[]", "{}", R"({"val":{"sym":"s3"}})"));
  CHECK(g.graph.find_node("f")->meta.val == kiln::MetaVal(kiln::SymInt{"s3"}));
}

TEST_CASE("meta: keys other than val are kept as raw JSON, in order") {
  auto f = kiln::io::parse_fx_json(doc_with(
      "[]", "{}",
      R"({"stack_trace":"File \"a.py\"", "val":{"shape":[2],"dtype":"float32"}, "nn_module_stack": {"l1": ["L['self'].l1", 1.50, null]}})"));
  const kiln::NodeMeta& m = f.graph.find_node("f")->meta;
  CHECK(m.present);
  REQUIRE(m.val.tensor());
  REQUIRE(m.extra_json.size() == 2);
  CHECK(m.extra_json[0].first == "stack_trace");
  CHECK(m.extra_json[0].second == R"("File \"a.py\"")");
  CHECK(m.extra_json[1].first == "nn_module_stack");
  // Whitespace between tokens goes; the tokens themselves stay exactly as written.
  CHECK(m.extra_json[1].second == R"({"l1":["L['self'].l1",1.50,null]})");
}

TEST_CASE("meta: absent, {} and a val are told apart") {
  std::string text = R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)"
                     R"({"name":"a","op":"placeholder","target":"a","args":[],"kwargs":{}},)"
                     R"({"name":"b","op":"placeholder","target":"b","args":[],"kwargs":{},"meta":{}},)"
                     R"({"name":"output","op":"output","target":"output","args":[[]],"kwargs":{}}]})";
  auto f = kiln::io::parse_fx_json(text);
  CHECK_FALSE(f.graph.find_node("a")->meta.present);
  CHECK(f.graph.find_node("b")->meta.present);
  CHECK(f.graph.find_node("b")->meta.val.is_none());
  CHECK(f.weights.empty());
}

TEST_CASE("unknown targets are kept and interned, node names are kept verbatim") {
  std::string text = R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)"
                     R"({"name":"L__self___x","op":"placeholder","target":"L['x']","args":[],"kwargs":{},"meta":{}},)"
                     R"({"name":"add_01","op":"call_function","target":"my_ns.frobnicate.default","args":[{"node":"L__self___x"}],"kwargs":{},"meta":{}},)"
                     R"({"name":"_x9","op":"call_method","target":"view","args":[{"node":"add_01"},-1],"kwargs":{},"meta":{}},)"
                     R"({"name":"sub","op":"call_module","target":"layers.0","args":[{"node":"_x9"}],"kwargs":{},"meta":{}},)"
                     R"({"name":"output","op":"output","target":"output","args":[[{"node":"sub"}]],"kwargs":{},"meta":{}}]})";
  auto f = kiln::io::parse_fx_json(text);
  auto nodes = f.graph.node_list();
  REQUIRE(nodes.size() == 5);
  CHECK(nodes[0]->name() == "L__self___x");
  CHECK(nodes[0]->target_name() == "L['x']");
  CHECK(nodes[1]->name() == "add_01");
  CHECK(nodes[1]->is_call(kiln::OpRef("my_ns.frobnicate.default")));
  CHECK(kiln::OpRegistry::instance().name_of(kiln::hash_op_name("my_ns.frobnicate.default")) ==
        std::optional<std::string_view>("my_ns.frobnicate.default"));
  CHECK(nodes[2]->op() == OpKind::call_method);
  CHECK(nodes[2]->target_name() == "view");
  CHECK(nodes[3]->op() == OpKind::call_module);
  CHECK(nodes[3]->name() == "sub");
  CHECK_NOTHROW(kiln::lint(f.graph));
  // New nodes still get fresh names next to the verbatim ones.
  Node* extra = f.graph.call_function(kiln::OpRef("my_ns.add.default"), {nodes[1]});
  CHECK(extra->name() != "add_01");
}

TEST_CASE("whitespace and key order do not matter") {
  std::string compact = kSpecExample;
  std::string spaced = R"(
  {
    "weights": { "w": { "file": "weights/w.npy" } },
    "nodes": [
      { "kwargs": {}, "args": [], "target": "x", "op": "placeholder", "name": "x",
        "meta": { "val": { "stride": [8, 1], "dtype": "float32", "shape": [4, 8] } } },
      { "op": "get_attr", "name": "w", "target": "w", "args": [], "kwargs": {},
        "meta": { "val": { "dtype": "float32", "shape": [8, 8], "stride": [8, 1] } } },
      { "name": "mm", "op": "call_function", "target": "aten.mm.default",
        "args": [ { "node": "x" }, { "node" : "w" } ], "kwargs": {},
        "meta": { "val": { "shape": [4, 8], "dtype": "float32", "stride": [8, 1] } } },
      { "name": "relu", "op": "call_function", "target": "aten.relu.default",
        "args": [ { "node": "mm" } ], "kwargs": { },
        "meta": { "val": { "shape": [4, 8], "dtype": "float32", "stride": [8, 1] } } },
      { "name": "output", "op": "output", "target": "output", "args": [ [ { "node": "relu" } ] ], "kwargs": {} }
    ],
    "name": "tiny", "version": 1, "format": "fx-graph-json"
  }
  )";
  auto a = kiln::io::parse_fx_json(compact);
  auto b = kiln::io::parse_fx_json(spaced);
  CHECK(kiln::to_string(a.graph, {.show_meta = true}) == kiln::to_string(b.graph, {.show_meta = true}));
  CHECK(kiln::io::to_fx_json(a.graph, a.weights) == kiln::io::to_fx_json(b.graph, b.weights));
}

TEST_CASE("every fixture reads, lints clean, and has the expected nodes and users") {
  const std::vector<std::pair<std::string, std::size_t>> fixtures{{"towers_n8_pregrad.json.gz", 84},
                                                                  {"towers_n8_after_gbf.json.gz", 107},
                                                                  {"postgrad_net_pre.json.gz", 134},
                                                                  {"qmlp_exported.json.gz", 38}};
  for (const auto& [name, count] : fixtures) {
    CAPTURE(name);
    const std::string path = fixture(name);
    kiln::io::GraphFile f = kiln::io::read_fx_json(path);
    CHECK(f.graph.size() == count);
    CHECK_NOTHROW(kiln::lint(f.graph));
    CHECK(f.base_dir == fs::absolute(path).parent_path());

    // Names, order, ops, targets and user counts against an independent parse.
    const nlohmann::json doc = nlohmann::json::parse(kiln::io::read_file(path));
    CHECK(f.graph.name() == doc["name"].get<std::string>());
    const auto users = users_from_json(doc);
    std::size_t i = 0;
    for (const Node* n : f.graph.nodes()) {
      const auto& jn = doc["nodes"][i++];
      CHECK(n->name() == jn["name"].get<std::string>());
      CHECK(kiln::op_kind_name(n->op()) == jn["op"].get<std::string>());
      CHECK(n->target_name() == jn["target"].get<std::string>());
      CHECK(n->num_users() == static_cast<std::size_t>(users.at(n->name())));
      CHECK(n->meta.present == jn.contains("meta"));
      if (jn.contains("meta") && jn["meta"].contains("val") && jn["meta"]["val"].is_object()) {
        REQUIRE(n->meta.val.tensor());
        CHECK(n->meta.val.tensor()->shape.size() == jn["meta"]["val"]["shape"].size());
        CHECK(kiln::dtype_name(n->meta.val.tensor()->dtype) == jn["meta"]["val"]["dtype"].get<std::string>());
      }
    }
    CHECK(i == doc["nodes"].size());
    REQUIRE(f.graph.output_node());
    CHECK(f.graph.output_node() == f.graph.back());
  }
}

TEST_CASE("fixtures: spot checks of known nodes") {
  auto f = kiln::io::read_fx_json(fixture("towers_n8_pregrad.json.gz"));
  // layer_norm's eps is the float 1e-05, its normalized_shape the list [64].
  auto lns = f.graph.find_nodes(OpKind::call_function, kiln::OpRef("torch.nn.functional.layer_norm"));
  REQUIRE(lns.size() == 8);
  const ArgList& a = lns[0]->args();
  REQUIRE(a.size() >= 2);
  CHECK(a[1] == Arg(ArgList{64}));
  bool saw_eps = false;
  for (const auto& v : a)
    if (const double* d = v.get_if<double>()) saw_eps |= *d == 1e-05;
  for (const auto& [k, v] : lns[0]->kwargs())
    if (const double* d = v.get_if<double>()) saw_eps |= *d == 1e-05;
  CHECK(saw_eps);

  auto q = kiln::io::read_fx_json(fixture("qmlp_exported.json.gz"));
  auto quants = q.graph.find_nodes(OpKind::call_function, kiln::OpRef("quantized_decomposed.quantize_per_tensor.default"));
  REQUIRE(quants.size() == 4);
  bool saw_dtype = false;
  for (const auto& v : quants[0]->args()) saw_dtype |= v.is<kiln::DType>();
  CHECK(saw_dtype);
}

TEST_CASE("read_fx_json tells gzip from plain by content, not by name") {
  const fs::path dir = fs::temp_directory_path() / ("kiln_test_read_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string text = kSpecExample;
  kiln::io::write_file(dir / "gzipped.json", text, /*gzip=*/true);
  kiln::io::write_file(dir / "plain.json.gz", text, /*gzip=*/false);
  CHECK(kiln::io::is_gzip(kiln::io::read_file_bytes(dir / "gzipped.json")));
  auto a = kiln::io::read_fx_json(dir / "gzipped.json");
  auto b = kiln::io::read_fx_json(dir / "plain.json.gz");
  CHECK(a.graph.size() == 5);
  CHECK(b.graph.size() == 5);
  CHECK(a.base_dir == fs::absolute(dir));
  CHECK(a.weight_path("w") == fs::absolute(dir) / "weights/w.npy");
  CHECK(a.weight_path("nope").empty());
  fs::remove_all(dir);
}

TEST_CASE("meta.val: equal tensor metas share one value, and changing one node's leaves the others") {
  const std::string t1 = R"({"val":{"shape":[2,3],"dtype":"float32","stride":[3,1]}})";
  const std::string t2 = R"({"val":{"shape":[2,3],"dtype":"float16","stride":[3,1]}})";
  auto node = [](const std::string& name, const std::string& meta) {
    return R"({"name":")" + name + R"(","op":"call_function","target":"test.f","args":[{"node":"x"}],"kwargs":{},"meta":)" +
           meta + "},";
  };
  const std::string doc = R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)"
                          R"({"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{},"meta":{}},)" +
                          node("a", t1) + node("b", t2) + node("c", t1) +
                          R"({"name":"output","op":"output","target":"output","args":[[{"node":"a"},{"node":"b"},{"node":"c"}]],"kwargs":{},"meta":{}}]})";
  auto f = kiln::io::parse_fx_json(doc);
  kiln::Node* a = f.graph.find_node("a");
  kiln::Node* b = f.graph.find_node("b");
  kiln::Node* c = f.graph.find_node("c");
  CHECK(a->meta.val.shares_value_with(c->meta.val));
  CHECK_FALSE(a->meta.val.shares_value_with(b->meta.val));
  CHECK(b->meta.val.tensor()->dtype == kiln::DType::float16);
  // Copy on write: editing a's value leaves c's as read.
  std::get<kiln::TensorMeta>(a->meta.val.value()).dtype = kiln::DType::bfloat16;
  CHECK(a->meta.val.tensor()->dtype == kiln::DType::bfloat16);
  CHECK(c->meta.val.tensor()->dtype == kiln::DType::float32);
  CHECK_FALSE(a->meta.val.shares_value_with(c->meta.val));
}
