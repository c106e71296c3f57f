// Op packets as call-pattern targets (kiln::packet), with Inductor's meaning:
// _TargetExpr.__init__ expands an OpOverloadPacket (`aten.add`) into the
// packet plus every overload it has, so `CallFunction(aten.add, ...)` matches
// aten.add.Tensor, aten.add.Scalar, aten.add.out, ..., and PatternMatcherPass
// indexes the pattern under each of them.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"
#include "test_support.hpp"

using namespace kiln;
namespace p = kiln::pattern;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Overloads no header declares: as a graph read from a file brings them.
OpRef undeclared(const char* name) { return OpRegistry::instance().intern(name); }

// Records the roots a pass matched, leaving the graph as it is.
struct Record {
  std::vector<std::string>* seen;
  std::string tag;
  template <class M>
  void operator()(M&, Graph&, Node* root) const { seen->push_back(tag + ":" + root->name()); }
};

}  // namespace

TEST_CASE("packet() names an op's packet from any overload or from its own name") {
  // Inductor: torch.ops.aten.addmm is the packet of aten.addmm.default, .out, ...
  static_assert(packet(aten::addmm).name == "aten.addmm");
  static_assert(packet(aten::add_Scalar).hash == hash_op_name("aten.add"));
  static_assert(packet("aten.add").hash == packet(aten::add_Tensor).hash);
  static_assert(packet("aten.add.Tensor").name == "aten.add");
  // A name that is no overload stands for itself.
  static_assert(packet("torch.relu").name == "torch.relu");
  CHECK(op_packet_name("aten.addmm.default") == "aten.addmm");
  CHECK(op_packet_name("torch.nn.functional.linear").empty());
  CHECK(op_packet_name("operator.getitem").empty());
}

TEST_CASE("a packet target matches every overload, declared or not, and the packet itself") {
  // Inductor: _match_fns tests node.target in fns_set, which holds the packet
  // and all its overloads.
  Graph g;
  Node* x = g.placeholder("x");
  Node* t = g.call_function(aten::add_Tensor, {x, x});
  Node* s = g.call_function(aten::add_Scalar, {x, 2});
  Node* u = g.call_function(undeclared("aten.add.kiln_test_overload"), {x, x});
  Node* bare = g.call_function(undeclared("aten.add"), {x, x});
  Node* addmm = g.call_function(aten::addmm, {x, x});  // another packet that starts alike
  Node* mul = g.call_function(aten::mul_Tensor, {x, x});
  g.output(ArgList{t, s, u, bare, addmm, mul});
  auto pat = p::CallFunction(packet(aten::add_Tensor), p::kw<"a">, p::kw<"b">);
  CHECK(p::match(pat, t).has_value());
  CHECK(p::match(pat, s).has_value());
  CHECK(p::match(pat, u).has_value());
  CHECK(p::match(pat, bare).has_value());
  std::string why;
  CHECK_FALSE(p::match(pat, addmm, &why).has_value());
  CHECK(contains(why, "function_mismatch"));
  CHECK(contains(why, "aten.add.*"));
  CHECK_FALSE(p::match(pat, mul).has_value());
  // The same op as a method is not a call_function.
  Node* m = g.call_method("aten.add.Tensor", {x, x});
  CHECK_FALSE(p::match(pat, m).has_value());
}

TEST_CASE("a packet inside a pattern: a node reference's early rejection knows the overloads") {
  // Inductor matches children with the same _match_fns; kiln rejects a child
  // from the kind and target its reference carries, which must not reject an
  // overload it was never told about.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(undeclared("aten.add.kiln_test_child"), {x, x});
  Node* r1 = g.call_function(aten::relu, {a});
  Node* b = g.call_function(aten::mul_Tensor, {x, x});
  Node* r2 = g.call_function(aten::relu, {b});
  Node* c = g.call_function(aten::add_Scalar, {x, 1});
  Node* r3 = g.call_function(aten::relu, {c});
  g.output(ArgList{r1, r2, r3});
  auto pat = p::CallFunction(aten::relu, p::CallFunction(packet("aten.add"), p::kw<"a">, p::kw<"b">));
  auto m = p::match(pat, r1);
  REQUIRE(m.has_value());
  CHECK(m->get<"a">() == Arg(x));
  CHECK_FALSE(p::match(pat, r2).has_value());
  CHECK(p::match(pat, r3).has_value());
  // The pass asks the first argument before trying the pattern: with a packet
  // child that filter must not turn the overload away either.
  PatternMatcherPass pass("packets");
  std::vector<std::string> seen;
  pass.register_pattern(pat, Record{&seen, "relu(add.*)"});
  CHECK(pass.apply(g) == 2);
  CHECK(seen == std::vector<std::string>{"relu(add.*):relu_2", "relu(add.*):relu"});
}

TEST_CASE("a packet at the root of a PatternMatcherPass finds every overload's nodes, read from JSON") {
  // Inductor registers the pattern under (op, overload) for each overload the
  // packet expands to; kiln finds the overloads the graph has when applying,
  // so one it never declared (here aten.add.kiln_json_only) is found too.
  const std::string doc = R"({"format":"fx-graph-json","version":1,"name":"g","nodes":[
    {"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{}},
    {"name":"a","op":"call_function","target":"aten.add.Tensor","args":[{"node":"x"},{"node":"x"}],"kwargs":{}},
    {"name":"b","op":"call_function","target":"aten.add.kiln_json_only","args":[{"node":"a"},{"node":"x"}],"kwargs":{}},
    {"name":"c","op":"call_function","target":"aten.mul.Tensor","args":[{"node":"b"},{"node":"x"}],"kwargs":{}},
    {"name":"d","op":"call_function","target":"aten.add.Scalar","args":[{"node":"c"},2],"kwargs":{}},
    {"name":"output","op":"output","target":"output","args":[[{"node":"d"}]],"kwargs":{}}]})";
  io::GraphFile f = io::parse_fx_json(doc);
  PatternMatcherPass pass("packets");
  std::vector<std::string> seen;
  pass.register_pattern(p::CallFunction(packet(aten::add_Tensor), p::Arg(), p::Arg(), p::MULTIPLE), Record{&seen, "add.*"});
  Counters counters;
  CHECK(pass.apply(f.graph, &counters) == 3);
  // Reverse topological order, as Inductor's apply.
  CHECK(seen == std::vector<std::string>{"add.*:d", "add.*:b", "add.*:a"});
  CHECK(counters.get("pattern_matcher_count") == 3);

  // Another graph with another overload: the pass finds it on this apply.
  Graph g2;
  Node* x = g2.placeholder("x");
  Node* o = g2.call_function(undeclared("aten.add.kiln_second_graph"), {x, x});
  g2.output(ArgList{o});
  seen.clear();
  CHECK(pass.apply(g2) == 1);
  CHECK(seen == std::vector<std::string>{"add.*:add"});
}

TEST_CASE("patterns reaching a node by name and by packet are tried in registration order") {
  // Inductor appends each pattern to the list of every (op, target) it
  // registers under, so at a node they come in registration order (and
  // prepend=True puts one first); a pattern listing both an overload and its
  // packet is in that list once per registration... kiln tries it once.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten::add_Tensor, {x, x});
  g.output(ArgList{a});
  PatternMatcherPass pass("order");
  std::vector<std::string> tried;
  auto note = [&](const char* tag) {
    return [&tried, tag](const auto&) {
      tried.push_back(tag);
      return false;  // keep trying the next pattern
    };
  };
  auto none = [](auto&, Graph&, Node*) {};
  pass.register_pattern(p::CallFunction(aten::add_Tensor, p::Arg(), p::Arg()), none, note("exact1"));
  pass.register_pattern(p::CallFunction(packet(aten::add_Tensor), p::Arg(), p::Arg()), none, note("packet2"));
  pass.register_pattern(p::CallFunction({aten::add_Tensor, packet("aten.add")}, p::Arg(), p::Arg()), none,
                        note("both3"));
  pass.register_pattern(p::CallFunction(packet("aten.add"), p::Arg(), p::Arg()), none, note("packet0"),
                        PatternOptions{.prepend = true});
  pass.apply(g);
  CHECK(tried == std::vector<std::string>{"packet0", "exact1", "packet2", "both3"});
}
