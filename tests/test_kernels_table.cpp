// The kernel table: made once from the compile-time kernel groups, sorted and
// looked up by key; a program's own kernels added to a copy of it.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "kiln/core.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;

namespace {
// myns.twice(x) = 2 * x, a kernel of the program's own.
struct Twice {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "self");
    const auto out = ctx.buffer_like(in, DType::float32);
    ctx.add_step(runtime::make_step([in, out](runtime::Frame& f) {
                   const std::int64_t n = f.layout(in).numel();
                   for (std::int64_t i = 0; i < n; ++i) f.data_as<float>(out)[i] = 2 * f.data_as<float>(in)[i];
                 }),
                 {in}, {out});
    ctx.set_result(out);
  }
};
using my_kernels = kernels::KernelGroup<kernels::KernelEntry<"myns.twice.default", Twice>>;
}  // namespace

TEST_CASE("the default table holds every group's keys once, in order, and finds them by key") {
  const kernels::KernelTable& t = kernels::default_kernels();
  const auto keys = t.targets();
  REQUIRE(keys.size() == t.size());
  CHECK(keys.size() > 300);
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
  for (const char* key : {"aten.mm.default", "aten.relu.default", "aten._reshape_alias.default", "Tensor.view",
                          "module:torch.nn.modules.conv.Conv2d", "quantized_decomposed.quantize_per_tensor.default"}) {
    const bool found = t.find(key) != nullptr;
    CHECK_MESSAGE(found, key);
  }
  CHECK(!t.find("aten.mm"));  // a prefix is no key
  CHECK(!t.find("aten.mm.default.x"));
  CHECK(!t.find(""));
  // The same kernel under every key of one op: aten.relu and torch.relu lower alike.
  CHECK((t.find("aten.relu.default") == t.find("torch.relu")));
}

TEST_CASE("a program's own kernel group added to a copy of the default table lowers its op, and a key given twice is refused") {
  kernels::KernelTable table = kernels::default_kernels();
  const std::size_t before = table.size();
  kernels::add_kernels<my_kernels>(table);
  CHECK(table.size() == before + 1);
  CHECK(!kernels::default_kernels().find("myns.twice.default"));  // the default is unchanged
  CHECK_THROWS_WITH_AS(kernels::add_kernels<my_kernels>(table), "kernel table: two kernels for 'myns.twice.default'", Error);
  CHECK_THROWS_WITH_AS(table.add("aten.mm.default", &Twice::lower), "kernel table: two kernels for 'aten.mm.default'", Error);

  Graph g;
  Node* x = g.placeholder("x", test::meta({5}));
  g.output(ArgList{g.call_function(aten::relu, {g.call_function(OpRef("myns.twice.default"), {x})})});
  const auto cg = runtime::CompiledGraph::compile(g, {}, {}, table);
  const runtime::Tensor tx = test::random_tensor({5}, 3);
  const auto out = cg.run({tx});
  int bad = 0;
  for (int i = 0; i < 5; ++i) bad += out[0].data<float>()[i] != std::max(2 * tx.data<float>()[i], 0.0f);
  CHECK(bad == 0);
  // Without it, the default table names the op it lacks.
  CHECK_THROWS_WITH_AS(runtime::CompiledGraph::compile(g, {}), doctest::Contains("1 node has no kernel:\n  myns.twice.default: twice"),
                       runtime::CompileError);
}

namespace {
// myns.refused(x): a kernel whose library throws an exception that is not kiln's.
struct Refused {
  static void lower(runtime::LowerContext&) { throw std::out_of_range("index 7 past the end"); }
};
}  // namespace

TEST_CASE("an exception of another library escaping a kernel becomes a compile error naming the node") {
  kernels::KernelTable table = kernels::default_kernels();
  table.add("myns.refused.default", &Refused::lower);
  Graph g;
  Node* x = g.placeholder("x", test::meta({5}));
  g.output(ArgList{g.call_function(OpRef("myns.refused.default"), {x}, {}, "refused")});
  CHECK_THROWS_WITH_AS(runtime::CompiledGraph::compile(g, {}, {}, table),
                       doctest::Contains("node refused (myns.refused.default): a library refused it while lowering: index 7 past the end"),
                       runtime::CompileError);
}
