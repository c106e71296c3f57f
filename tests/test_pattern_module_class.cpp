// CallModule by module class (kiln::module_class), as Inductor matches
// `CallModule(nn.Linear, ...)`: _match_fns compares extract_target(node),
// which for a call_module node is the class of the module it calls, and
// PatternMatcherPass.apply collects every call_module node when a pattern root
// is call_module and looks it up by that class.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "kiln/pattern/runtime_matcher.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;

namespace {

constexpr ModuleClass kLinear = module_class("torch.nn.modules.linear.Linear");
constexpr ModuleClass kConv = module_class("torch.nn.modules.conv.Conv2d");

// x -> encoder.fc (Linear) -> relu -> decoder.proj (Linear) -> conv (Conv2d) -> unknown (no entry)
struct Net {
  Graph g;
  Node* x = g.placeholder("x");
  Node* fc = g.call_module("encoder.fc", {x});
  Node* relu = g.call_function(aten::relu, {fc});
  Node* proj = g.call_module("decoder.proj", {relu});
  Node* conv = g.call_module("conv", {proj});
  Node* unknown = g.call_module("unknown", {conv});
  Net() {
    g.output(ArgList{unknown});
    g.modules().set("encoder.fc", std::string(kLinear.name));
    g.modules().set("decoder.proj", std::string(kLinear.name));
    g.modules().set("conv", std::string(kConv.name));
  }
};

struct Record {
  std::vector<std::string>* seen;
  template <class M>
  void operator()(M&, Graph&, Node* root) const { seen->push_back(root->name()); }
};

}  // namespace

TEST_CASE("CallModule(module_class) matches every module of that class, whatever its path") {
  Net n;
  auto pat = p::CallModule(kLinear, p::kw<"x">);
  CHECK(p::match(pat, n.fc).has_value());
  CHECK(p::match(pat, n.proj).has_value());
  std::string why;
  CHECK_FALSE(p::match(pat, n.conv, &why).has_value());
  CHECK(why.find("torch.nn.modules.linear.Linear") != std::string::npos);
  CHECK_FALSE(p::match(pat, n.unknown).has_value());  // no entry: no class
  // A call_function node is no module, even with the class's name as target.
  Node* f = n.g.call_function(OpRegistry::instance().intern(kLinear.name), {n.x});
  CHECK_FALSE(p::match(pat, f).has_value());
  // Matching by module path, as before.
  CHECK(p::match(p::CallModule("conv", p::kw<"x">), n.conv).has_value());
  CHECK_FALSE(p::match(p::CallModule("conv", p::kw<"x">), n.fc).has_value());
  // Paths and classes can be mixed.
  auto mixed = p::CallModule({"unknown", kConv}, p::kw<"x">);
  CHECK(p::match(mixed, n.conv).has_value());
  CHECK(p::match(mixed, n.unknown).has_value());
  CHECK_FALSE(p::match(mixed, n.fc).has_value());
}

TEST_CASE("CallModule(module_class) as a child is checked through the node reference") {
  // Inductor matches the child with the same _match_fns.
  Net n;
  auto pat = p::CallModule(kConv, p::CallModule(kLinear, p::kw<"x">, p::MULTIPLE));
  auto m = p::match(pat, n.conv);
  REQUIRE(m.has_value());
  CHECK(m->get<"x">() == Arg(n.relu));
  auto wrong = p::CallModule(kConv, p::CallModule(kConv, p::kw<"x">));
  CHECK_FALSE(p::match(wrong, n.conv).has_value());
  auto relu_of_linear = p::CallFunction(aten::relu, p::CallModule(kLinear, p::kw<"x">));
  CHECK(p::match(relu_of_linear, n.relu).has_value());

  PatternMatcherPass pass("by_class_child");
  std::vector<std::string> seen;
  pass.register_pattern(relu_of_linear, Record{&seen});
  CHECK(pass.apply(n.g) == 1);
  CHECK(seen == std::vector<std::string>{"relu"});
}

TEST_CASE("a module-class root in PatternMatcherPass finds each graph's modules of that class") {
  Net n;
  PatternMatcherPass pass("by_class");
  std::vector<std::string> seen;
  pass.register_pattern(p::CallModule(kLinear, p::kw<"x">, p::MULTIPLE), Record{&seen});
  Counters counters;
  CHECK(pass.apply(n.g, &counters) == 2);
  CHECK(seen == std::vector<std::string>{"decoder_proj", "encoder_fc"});  // reverse topological
  CHECK(counters.get("pattern_matcher_count") == 2);

  // The class is the graph's: in another graph the same path may be another class.
  Graph g2;
  Node* x = g2.placeholder("x");
  Node* a = g2.call_module("encoder.fc", {x});
  Node* b = g2.call_module("other", {a});
  g2.output(ArgList{b});
  g2.modules().set("encoder.fc", std::string(kConv.name));
  g2.modules().set("other", std::string(kLinear.name));
  seen.clear();
  CHECK(pass.apply(g2) == 1);
  CHECK(seen == std::vector<std::string>{"other"});
  // And without a modules table nothing has a class.
  Graph g3;
  Node* y = g3.placeholder("y");
  g3.output(ArgList{g3.call_module("encoder.fc", {y})});
  CHECK(pass.apply(g3) == 0);
}

TEST_CASE("path and class roots at one node are tried in registration order, on a graph read from JSON") {
  const std::string doc = R"({"format":"fx-graph-json","version":1,"name":"m","nodes":[
    {"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{}},
    {"name":"fc","op":"call_module","target":"layers.0.fc","args":[{"node":"x"}],"kwargs":{}},
    {"name":"fc_1","op":"call_module","target":"layers.1.fc","args":[{"node":"fc"}],"kwargs":{}},
    {"name":"output","op":"output","target":"output","args":[[{"node":"fc_1"}]],"kwargs":{}}],
    "modules":{"layers.0.fc":{"class":"torch.nn.modules.linear.Linear"},
               "layers.1.fc":{"class":"torch.nn.modules.linear.Linear","attrs":{"in_features":4}}}})";
  io::GraphFile f = io::parse_fx_json(doc);
  PatternMatcherPass pass("order");
  std::vector<std::string> tried;
  auto note = [&](const char* tag) {
    return [&tried, tag](const auto& m) {
      tried.push_back(std::string(tag) + "@" + m.nodes().back()->name());
      return false;
    };
  };
  auto none = [](auto&, Graph&, Node*) {};
  pass.register_pattern(p::CallModule(kLinear, p::Arg(), p::MULTIPLE), none, note("class1"));
  pass.register_pattern(p::CallModule("layers.1.fc", p::Arg(), p::MULTIPLE), none, note("path2"));
  pass.register_pattern(p::CallModule(kLinear, p::Arg(), p::MULTIPLE), none, note("class3"));
  pass.register_pattern(p::CallModule(kConv, p::Arg(), p::MULTIPLE), none, note("conv4"));
  pass.apply(f.graph);
  CHECK(tried == std::vector<std::string>{"class1@fc_1", "path2@fc_1", "class3@fc_1", "class1@fc", "class3@fc"});
}

TEST_CASE("runtime patterns take module classes and packets as the compiled DSL does, at the root and inside") {
  // The same targets in a RuntimePattern: the node reference cannot decide a
  // class or packet, so the node is asked, and the pass indexes such roots too.
  Net n;
  p::RuntimePattern inner;
  inner.set_output(inner.call_function(aten::relu, {inner.call_module(kLinear, {inner.keyword_arg("x")})}));
  auto m = p::match(inner, n.relu);
  REQUIRE(m.has_value());
  CHECK(m->node("x") == n.x);
  p::RuntimePattern wrong;
  wrong.set_output(wrong.call_function(aten::relu, {wrong.call_module(kConv, {wrong.keyword_arg("x")})}));
  CHECK_FALSE(p::match(wrong, n.relu).has_value());

  p::RuntimePattern root;
  root.set_output(root.call_module(kLinear, {root.keyword_arg("x")}, {}, p::MULTIPLE));
  PatternMatcherPass pass("runtime_by_class");
  std::vector<std::string> seen;
  pass.register_runtime_pattern(root, Record{&seen});
  CHECK(pass.apply(n.g) == 2);
  CHECK(seen == std::vector<std::string>{"decoder_proj", "encoder_fc"});

  // A packet root and child: aten.add.* reaches add.Tensor and add.Scalar alike.
  Graph g;
  Node* x = g.placeholder("x");
  Node* t = g.call_function(aten::add_Tensor, {x, x});
  Node* sc = g.call_function(OpRef("aten.add.Scalar"), {t, 2});
  Node* r = g.call_function(aten::relu, {sc});
  g.output(ArgList{r});
  p::RuntimePattern pk;
  pk.set_output(pk.call_function(aten::relu, {pk.call_function(packet(aten::add_Tensor), {pk.ignored(), pk.ignored()})}));
  CHECK(p::match(pk, r).has_value());
  p::RuntimePattern pk_root;
  pk_root.set_output(pk_root.call_function(packet("aten.add"), {pk_root.ignored(), pk_root.ignored()}));
  PatternMatcherPass by_packet("runtime_by_packet");
  seen.clear();
  by_packet.register_runtime_pattern(pk_root, Record{&seen});
  CHECK(by_packet.apply(g) == 2);
  CHECK(seen == std::vector<std::string>{"add_1", "add"});
}
