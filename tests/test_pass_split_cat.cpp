// The split/cat family (kiln/passes/split_cat/) against Inductor 2.11's
// results on ../shared/fixtures/inductor/splitcat_b*.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/ops/torch.hpp"
#include "kiln/passes/default_registry.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "test_support.hpp"

using namespace kiln;

namespace {
const std::string kInductor = std::string(KILN_FIXTURES_DIR) + "/inductor/";
nlohmann::json expected() {
  std::ifstream in(kInductor + "splitcat_b.expected.json");
  return nlohmann::json::parse(in);
}
TensorMeta f32(std::vector<Dim> shape) { return TensorMeta{std::move(shape), DType::float32, std::nullopt}; }
}  // namespace

TEST_CASE("normalization_pass on splitcat_b gives Inductor's counters") {
  Graph g = io::read_fx_json(kInductor + "splitcat_b_pregrad.json.gz").graph;
  const auto want = expected()["each_pass_alone_after_normalization"]["normalization_pass"];
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.run(g, {"normalization_pass"});
  for (const auto& [name, value] : want.items()) {
    INFO(name);
    CHECK(pm.counters().get(name) == value.get<std::int64_t>());
  }
  lint(g);
  // Every split, unbind, cat and stack is now the canonical call.
  for (const Node* n : g.nodes()) {
    if (n->op() == OpKind::call_method) {
      const std::string_view t = n->target_name();
      CHECK_MESSAGE((t != "split" && t != "unbind" && t != "squeeze" && t != "reshape" && t != "clamp" && t != "detach"), t);
    }
    if (n->is_call(torch::split)) {
      REQUIRE(n->args().size() == 2);
      CHECK(n->args()[1].is_list());
      REQUIRE(n->kwargs().find("dim"));
      CHECK(*n->kwargs().find("dim")->get_if<std::int64_t>() >= 0);
    }
    if (n->is_call(torch::cat) || n->is_call(torch::stack) || n->is_call(torch::unbind)) {
      REQUIRE(n->kwargs().find("dim"));
      CHECK(*n->kwargs().find("dim")->get_if<std::int64_t>() >= 0);
    }
  }
}

TEST_CASE("normalization_pass: a split by size gets its sections from meta and a non-negative dim") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 10}));
  Node* s = g.call_method("split", {Arg(x), Arg(4)}, ArgDict{{"dim", Arg(-1)}});
  s->meta.val = MetaVal(MetaVal::List{MetaVal(f32({4, 4})), MetaVal(f32({4, 4})), MetaVal(f32({4, 2}))});
  Node* a = g.call_function(OpRef("operator.getitem"), {Arg(s), Arg(2)});
  a->meta.val = f32({4, 2});
  g.output(ArgList{Arg(a)});
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.run(g, {"normalization_pass", "normalization_pass"});
  const Node* split = g.find_nodes(OpKind::call_function, torch::split).at(0);
  CHECK(format_arg(split->args()[1]) == "[4, 4, 2]");
  CHECK(*split->kwargs().find("dim")->get_if<std::int64_t>() == 1);
  CHECK(pm.counters().get("normalization_pass") == 1);  // canonical the second time: not rewritten again
  CHECK(a->args()[0].node() == split);
  lint(g);
}

TEST_CASE("each split/cat pass kiln has, alone after normalization on splitcat_b, gives Inductor's counters") {
  const auto all = expected()["each_pass_alone_after_normalization"];
  const PassRegistry registry = default_pass_registry();
  int checked = 0;
  for (const auto& [pass, want] : all.items()) {
    if (!registry.find(pass)) continue;  // not in kiln yet
    INFO(pass);
    Graph g = io::read_fx_json(kInductor + "splitcat_b_pregrad.json.gz").graph;
    PassManager pm(registry);
    pm.run(g, pass == "normalization_pass" ? std::vector<std::string>{pass} : std::vector<std::string>{"normalization_pass", pass});
    for (const auto& [name, value] : want.items()) {
      INFO(name);
      CHECK(pm.counters().get(name) == value.get<std::int64_t>());
    }
    lint(g);
    ++checked;
  }
  CHECK(checked >= 2);
}

TEST_CASE("remove_split_with_size_one_pass: a one-piece split becomes its input, every getitem of it too") {
  Graph g;
  Node* x = g.placeholder("x", f32({4, 8}));
  Node* s = g.call_function(torch::split, {Arg(x), Arg(ArgList{Arg(8)})}, ArgDict{{"dim", Arg(1)}});
  s->meta.val = MetaVal(MetaVal::List{MetaVal(f32({4, 8}))});
  Node* a = g.call_function(OpRef("operator.getitem"), {Arg(s), Arg(0)});
  Node* b = g.call_function(OpRef("operator.getitem"), {Arg(s), Arg(0)});  // taken twice
  Node* t = g.call_function(torch::tanh, {Arg(a)});
  Node* u = g.call_function(torch::tanh, {Arg(b)});
  g.output(ArgList{Arg(t), Arg(u)});
  const PassRegistry registry = default_pass_registry();
  PassManager pm(registry);
  pm.run(g, {"remove_split_with_size_one_pass"});
  CHECK(pm.counters().get("remove_split_with_size_one_pass") == 1);
  CHECK(t->args()[0].node() == x);
  CHECK(u->args()[0].node() == x);
  CHECK(g.size() == 4);
  lint(g);
  // A split whose list is used whole (not through getitem) is left.
  Graph h;
  Node* y = h.placeholder("y", f32({4, 8}));
  Node* s2 = h.call_function(torch::split, {Arg(y), Arg(ArgList{Arg(8)})}, ArgDict{{"dim", Arg(1)}});
  s2->meta.val = MetaVal(MetaVal::List{MetaVal(f32({4, 8}))});
  Node* c = h.call_function(torch::cat, {Arg(s2)}, ArgDict{{"dim", Arg(1)}});
  h.output(ArgList{Arg(c)});
  PassManager pm2(registry);
  pm2.run(h, {"remove_split_with_size_one_pass"});
  CHECK(pm2.counters().get("remove_split_with_size_one_pass") == 0);
  CHECK(c->args()[0].node() == s2);
}
