// The executor on the graphs PyTorch exported (../shared/fixtures/): every one
// compiles and runs, and where the fixture holds Inductor's rewrite of a graph,
// the rewrite gives the original's outputs on the same random inputs.
#include <doctest/doctest.h>

#include <cmath>

#include "kiln/io/fx_json_read.hpp"
#include "kiln/executor/numeric_check.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;

namespace {
std::string fixture(const std::string& name) { return std::string(KILN_FIXTURES_DIR) + "/inductor/" + name; }

bool all_finite(const runtime::Tensor& t) {
  if (t.dtype() != DType::float32) return true;
  const runtime::Tensor c = t.contiguous();
  for (std::int64_t i = 0; i < c.numel(); ++i)
    if (!std::isfinite(c.data<float>()[i])) return false;
  return true;
}
}  // namespace

TEST_CASE("every fixture graph compiles and runs on random inputs, with finite outputs") {
  // qmlp's lifted int8 weights and int64 zero points are inputs: random small integers.
  for (const char* name : {"towers_n8_pregrad.json.gz", "towers_n8_after_gbf.json.gz", "postgrad_net_pre.json.gz",
                           "qmlp_exported.json.gz", "splitcat_b_pregrad.json.gz", "splitcat_b_after.json.gz"}) {
    CAPTURE(name);
    io::GraphFile f = io::read_fx_json(fixture(name));
    runtime::CompiledGraph cg = runtime::CompiledGraph::compile(f.graph, runtime::Weights{});
    const std::vector<runtime::Tensor> out = cg.run(runtime::random_inputs(cg, 7));
    REQUIRE_FALSE(out.empty());
    for (const runtime::Tensor& t : out) CHECK(all_finite(t));
  }
}

TEST_CASE("Inductor's rewrites in the fixtures give the original graph's outputs") {
  // splitcat_b_after holds torch.Tensor.view called as a function, written by
  // its bare name: it runs as the view method.
  const std::pair<const char*, const char*> pairs[] = {{"towers_n8_pregrad.json.gz", "towers_n8_after_gbf.json.gz"},
                                                       {"splitcat_b_pregrad.json.gz", "splitcat_b_after.json.gz"}};
  for (const auto& [before, after] : pairs) {
    CAPTURE(after);
    const io::GraphFile a = io::read_fx_json(fixture(before)), b = io::read_fx_json(fixture(after));
    runtime::NumericCheck check(a.graph, runtime::Weights{});
    const runtime::NumericReport r = check.compare(b.graph);
    CAPTURE(r.summary());
    CHECK(r.ok);
    REQUIRE(a.graph.output_node()->arg(0).list());
    CHECK(r.outputs.size() == a.graph.output_node()->arg(0).list()->size());
  }
}

TEST_CASE("a Tensor method called as a function runs as the method") {
  // torch.Tensor.view(x, shape), as Inductor's split/cat rewrites write it, and the bare name "view".
  for (const char* target : {"torch.Tensor.view", "view"}) {
    CAPTURE(target);
    Graph g;
    Node* x = g.placeholder("x", test::meta({4, 6}));
    g.output(ArgList{g.call_function(OpRef(target), {x, ArgList{3, 8}})});
    runtime::CompiledGraph cg = runtime::CompiledGraph::compile(g, runtime::Weights{});
    runtime::Tensor tx = test::random_tensor({4, 6}, 3);
    const std::vector<runtime::Tensor> out = cg.run({tx});
    REQUIRE(out[0].shape() == runtime::Shape{3, 8});
    const runtime::Tensor c = out[0].contiguous();
    for (std::int64_t i = 0; i < 24; ++i) CHECK(c.data<float>()[i] == tx.data<float>()[i]);
  }
}
