// fuse_addmm: add(mm(a, b), bias) -> addmm(bias, a, b), on graphs built here and
// through kiln-opt's registry.
#include <doctest/doctest.h>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes.hpp"

using namespace kiln;

namespace {

TensorMeta f32(std::vector<Dim> shape) { return TensorMeta{std::move(shape), DType::float32, std::nullopt}; }

struct MmAdd {
  Graph g;
  Node *a, *b, *bias, *mm, *add, *out;
  explicit MmAdd(std::vector<Dim> bias_shape, ArgDict add_kwargs = {}) {
    a = g.placeholder("a", f32({16, 32}));
    b = g.placeholder("b", f32({32, 64}));
    bias = g.placeholder("bias", f32(std::move(bias_shape)));
    mm = g.call_function(aten::mm, {a, b});
    mm->meta.val = f32({16, 64});
    add = g.call_function(aten::add_Tensor, {mm, bias}, std::move(add_kwargs));
    add->meta.val = f32({16, 64});
    Node* r = g.call_function(aten::relu, {add});
    out = g.output(ArgList{r});
  }
};

std::size_t run(Graph& g, Counters& c) { return make_fuse_addmm_pass().apply(g, &c); }

}  // namespace

TEST_CASE("fuse_addmm rewrites add(mm(a, b), bias) into addmm(bias, a, b)") {
  MmAdd t({64});
  Counters c;
  CHECK(run(t.g, c) == 1);
  lint(t.g);
  auto fused = t.g.find_nodes(OpKind::call_function, aten::addmm);
  REQUIRE(fused.size() == 1);
  CHECK(fused[0]->args() == ArgList{t.bias, t.a, t.b});
  CHECK(fused[0]->meta.val.tensor()->shape == std::vector<Dim>{16, 64});
  CHECK(t.g.find_nodes(OpKind::call_function, aten::mm).empty());
  CHECK(t.g.find_nodes(OpKind::call_function, aten::add_Tensor).empty());
  CHECK(c.get("pattern_matcher_count") == 1);
  CHECK(c.get("pattern_matcher_nodes") == 2);
}

TEST_CASE("fuse_addmm accepts every bias that broadcasts from rank <= 2") {
  for (auto shape : std::vector<std::vector<Dim>>{{64}, {1, 64}, {16, 64}, {16, 1}, {1}}) {
    CAPTURE(shape.size());
    MmAdd t(shape);
    Counters c;
    CHECK(run(t.g, c) == 1);
  }
}

TEST_CASE("fuse_addmm leaves the graph alone when the fusion would be wrong or cannot be proven") {
  SUBCASE("a bias that does not broadcast") {
    MmAdd t({32});
    Counters c;
    CHECK(run(t.g, c) == 0);
  }
  SUBCASE("a rank-3 bias") {
    MmAdd t({1, 16, 64});
    Counters c;
    CHECK(run(t.g, c) == 0);
  }
  SUBCASE("alpha other than 1") {
    MmAdd t({64}, {{"alpha", Arg(2)}});
    Counters c;
    CHECK(run(t.g, c) == 0);
  }
  SUBCASE("a bias without a known shape") {
    MmAdd t({64});
    t.bias->meta.val = MetaVal{};
    Counters c;
    CHECK(run(t.g, c) == 0);
  }
  SUBCASE("the product has another user") {
    MmAdd t({64});
    {
      auto guard = t.g.inserting_before(t.out);
      t.g.call_function(aten::neg, {t.mm});
    }
    Counters c;
    CHECK(run(t.g, c) == 0);
  }
}

TEST_CASE("fuse_addmm is in the default registry and counts under its own name") {
  PassRegistry reg = default_pass_registry();
  REQUIRE(reg.find("fuse_addmm") != nullptr);
  MmAdd t({64});
  PassManager pm(reg);
  auto records = pm.run(t.g, {"fuse_addmm", "dce"});
  CHECK(records[0].changed);
  CHECK(pm.counters().get("fuse_addmm") == 1);
  CHECK(pm.counters().get("pattern_matcher_count") == 1);
  CHECK(t.g.find_nodes(OpKind::call_function, aten::addmm).size() == 1);
}
