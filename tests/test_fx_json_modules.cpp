// fx-graph-json's optional "modules" table: module path -> {"class": ..., ...}.
// It carries what Inductor reads from the GraphModule for call_module nodes:
// extract_target takes the class of node.graph.owning_module's submodule at
// node.target, so a pattern can name nn.Linear instead of a path.
#include <doctest/doctest.h>

#include <string>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "test_support.hpp"

using namespace kiln;
using kiln::testing::message_of;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string doc_with(const std::string& extra) {
  return R"({"format":"fx-graph-json","version":1,"name":"m","nodes":[)"
         R"({"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{}},)"
         R"({"name":"encoder_fc","op":"call_module","target":"encoder.fc","args":[{"node":"x"}],"kwargs":{}},)"
         R"({"name":"output","op":"output","target":"output","args":[[{"node":"encoder_fc"}]],"kwargs":{}}])" +
         extra + "}";
}

const std::string kModules =
    R"(,"modules":{"encoder.fc":{"class":"torch.nn.modules.linear.Linear","attrs":{"in_features":8,"out_features":4,"bias":true}},)"
    R"("head":{"class":"torch.nn.modules.conv.Conv2d","stride":[1,1],"note":"caf\u00e9"}})";

}  // namespace

TEST_CASE("the modules table is read onto the graph: class by path, other fields kept in order") {
  io::GraphFile f = io::parse_fx_json(doc_with(kModules));
  const ModuleTable& t = f.graph.modules();
  REQUIRE(t.size() == 2);
  const ModuleInfo* fc = t.find("encoder.fc");
  REQUIRE(fc);
  CHECK(fc->class_name == "torch.nn.modules.linear.Linear");
  REQUIRE(fc->fields.size() == 1);
  CHECK(fc->fields[0].first == "attrs");
  CHECK(fc->fields[0].second == R"({"in_features":8,"out_features":4,"bias":true})");
  const ModuleInfo* head = t.find("head");
  REQUIRE(head);
  CHECK(head->fields.size() == 2);
  CHECK(head->fields[1].second == R"("caf\u00e9")");
  // From a call_module node to its class: the node's target hash is the key.
  Node* n = f.graph.find_node("encoder_fc");
  REQUIRE(n);
  CHECK(t.class_hash_of(n->target().hash) == hash_op_name("torch.nn.modules.linear.Linear"));
  CHECK(t.class_hash_of(hash_op_name("no.such.module")) == 0);
  CHECK(t.find("encoder") == nullptr);
}

TEST_CASE("a file without a modules table reads as before, and writes none") {
  io::GraphFile f = io::parse_fx_json(doc_with(""));
  CHECK(f.graph.modules().empty());
  CHECK_FALSE(contains(io::to_fx_json(f.graph), "modules"));
}

TEST_CASE("the modules table round-trips through the writer unchanged") {
  const std::string text = doc_with(kModules);
  io::GraphFile f = io::parse_fx_json(text);
  const std::string written = io::to_fx_json(f.graph, f.weights);
  CHECK(contains(written, kModules));
  io::GraphFile again = io::parse_fx_json(written);
  CHECK(io::to_fx_json(again.graph, again.weights) == written);
  // It travels with the graph when the graph is copied or moved.
  Graph copy = f.graph.clone();
  CHECK(copy.modules().find("head") != nullptr);
  Graph moved = std::move(copy);
  CHECK(moved.modules().size() == 2);
  CHECK(copy.modules().empty());
  // Whitespace and member order are a spelling: the class is written first.
  io::GraphFile spaced = io::parse_fx_json(
      doc_with(R"(, "modules" : { "encoder.fc" : { "attrs" : { "in_features" : 8 } , "class" : "torch.nn.modules.linear.Linear" } })"));
  CHECK(contains(io::to_fx_json(spaced.graph),
                 R"("modules":{"encoder.fc":{"class":"torch.nn.modules.linear.Linear","attrs":{"in_features":8}}})"));
  // A table built in C++ is written too.
  Graph g;
  Node* x = g.placeholder("x");
  g.output(ArgList{g.call_module("fc", {x})});
  g.modules().set("fc", "torch.nn.modules.linear.Linear");
  CHECK(contains(io::to_fx_json(g), R"("modules":{"fc":{"class":"torch.nn.modules.linear.Linear"}})"));
}

TEST_CASE("a malformed modules table is an error that names the entry and the field") {
  auto err = [](const std::string& modules) {
    return message_of<io::FormatError>([&] { io::parse_fx_json(doc_with(modules)); });
  };
  CHECK(contains(err(R"(,"modules":{"encoder.fc":{"class":3}})"), "modules['encoder.fc'].class: expected a string"));
  CHECK(contains(err(R"(,"modules":{"encoder.fc":{"attrs":{}}})"), "modules['encoder.fc']: missing field 'class'"));
  CHECK(contains(err(R"(,"modules":{"encoder.fc":"Linear"})"), "modules['encoder.fc']: expected an object"));
  CHECK(contains(err(R"(,"modules":[])"), "modules: expected an object"));
  CHECK(contains(err(R"(,"modules":{"fc":{"class":"A"},"fc":{"class":"B"}})"), "modules['fc']: duplicate entry 'fc'"));
  CHECK(contains(err(R"(,"modules":{"fc":{"class":"A","class":"A"}})"), "duplicate field 'class'"));
  CHECK(contains(err(R"(,"modules":{"fc":{"class":""}})"), "modules['fc'].class: expected a fully qualified"));
  CHECK(contains(err(R"(,"modules":{"":{"class":"A"}})"), "a module path must not be empty"));
  CHECK(contains(err(R"(,"modules":{"fc":{"class":"A","attrs":{"a":}}})"), "modules['fc'].attrs"));
  CHECK(contains(err(R"(,"modules":{},"modules":{})"), "duplicate field 'modules'"));
}
