// The numeric check: a graph and its rewrite on the same random inputs, every
// output compared; PassManager runs it after each pass and names the pass that
// changed an output.
#include <doctest/doctest.h>

#include "kiln/passes.hpp"
#include "kiln/executor/numeric_check.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::Tensor;

namespace {
// y = relu(x) @ w, x and w inputs.
Graph relu_mm() {
  Graph g;
  Node* x = g.placeholder("x", test::meta({5, 7}));
  Node* w = g.placeholder("w", test::meta({7, 3}));
  g.output(ArgList{g.call_function(aten::mm, {g.call_function(aten::relu, {x}), w})});
  return g;
}
// Drops every relu: changes the result for inputs with negative values.
Pass drop_relu() {
  return Pass{"drop_relu", "replaces relu(x) by x (wrong on purpose)", [](Graph& g, PassContext&) {
                bool changed = false;
                for (Node* n : g.find_nodes(OpKind::call_function, aten::relu)) {
                  n->replace_all_uses_with(n->arg(0).node());
                  g.erase_node(n);
                  changed = true;
                }
                return changed;
              }};
}
// Doubles every relu (relu(relu(x)) == relu(x)): changes the graph, not the result.
Pass double_relu() {
  return Pass{"double_relu", "relu(x) -> relu(relu(x))", [](Graph& g, PassContext&) {
                for (Node* n : g.find_nodes(OpKind::call_function, aten::relu)) {
                  Node* again = nullptr;
                  {
                    auto at = g.inserting_after(n);
                    again = g.call_function(aten::relu, {n});
                  }
                  n->replace_all_uses_with(again, [&](Node* u) { return u != again; });
                }
                return true;
              }};
}
}  // namespace

TEST_CASE("the numeric check passes a rewrite that keeps the outputs and reports one that does not") {
  Graph g = relu_mm();
  runtime::NumericCheck check(g, {});
  REQUIRE(check.inputs().size() == 2);
  CHECK(check.expected()[0].shape() == runtime::Shape{5, 3});

  Graph same = g.clone();
  auto r = check.compare(same);
  CHECK(r.ok);
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].max_abs == 0);

  Graph wrong = g.clone();
  Counters c;
  const nlohmann::json opts = nlohmann::json::object();
  PassContext ctx{c, opts};
  REQUIRE(drop_relu().run(wrong, ctx));
  r = check.compare(wrong);
  CHECK_FALSE(r.ok);
  CHECK(r.outputs[0].max_abs > 0.01);
  CHECK(r.outputs[0].mismatches > 0);
  CHECK(r.summary().find("output 0: max abs err") == 0);
}

TEST_CASE("compare_outputs applies atol + rtol * |expected| and reports shape differences") {
  const std::vector<float> a{1.0f, 2.0f, 100.0f}, b{1.0f, 2.00001f, 100.01f};
  std::vector<Tensor> x{Tensor::from_values<float>({3}, a)}, y{Tensor::from_values<float>({3}, b)};
  CHECK(runtime::compare_outputs(x, y, {1e-4, 1e-5}).ok);
  auto strict = runtime::compare_outputs(x, y, {1e-6, 1e-6});
  CHECK_FALSE(strict.ok);
  CHECK(strict.outputs[0].mismatches == 2);
  CHECK(strict.outputs[0].max_abs == doctest::Approx(0.01).epsilon(1e-3));
  std::vector<Tensor> z{Tensor::from_values<float>({1, 3}, b)};
  auto shape = runtime::compare_outputs(x, z);
  CHECK_FALSE(shape.ok);
  CHECK(shape.outputs[0].shape_mismatch == "float32 [3] where float32 [1, 3] was expected");
}

TEST_CASE("random inputs and compare_outputs take bfloat16, held as its bits") {
  Graph g;
  Node* x = g.placeholder("x", test::meta({4, 6}, DType::bfloat16));
  g.output(ArgList{g.call_function(OpRef("prims.convert_element_type.default"), {x, Arg(DType::float32)})});
  const auto cg = runtime::CompiledGraph::compile(g, {});
  const auto in = runtime::random_inputs(cg, 7);
  REQUIRE(in[0].dtype() == DType::bfloat16);
  int nonzero = 0;
  for (std::int64_t i = 0; i < in[0].numel(); ++i) nonzero += in[0].data<std::uint16_t>()[i] != 0;
  CHECK(nonzero > 20);
  Tensor near = Tensor::empty({4, 6}, DType::bfloat16);
  for (std::int64_t i = 0; i < 24; ++i) near.data<std::uint16_t>()[i] = in[0].data<std::uint16_t>()[i];
  CHECK(runtime::compare_outputs({in[0]}, {near}, {0, 0}).ok);
  near.data<std::uint16_t>()[5] = float_to_bf16(bf16_to_float(near.data<std::uint16_t>()[5]) + 1.0f);
  const auto r = runtime::compare_outputs({in[0]}, {near}, {0, 0});
  CHECK_FALSE(r.ok);
  CHECK(r.outputs[0].mismatches == 1);
  const auto out = cg.run(in);
  for (std::int64_t i = 0; i < 24; ++i) CHECK(out[0].data<float>()[i] == bf16_to_float(in[0].data<std::uint16_t>()[i]));
}

TEST_CASE("PassManager with the numeric check after each pass names the first pass that changes an output") {
  Graph g = relu_mm();
  runtime::NumericCheck check(g, {});
  PassRegistry registry;
  registry.add(double_relu());
  registry.add(drop_relu());
  PassManager pm(registry);
  pm.set_after_each_pass(check.hook());
  CHECK_NOTHROW(pm.run(g, {"double_relu"}));
  CHECK_THROWS_WITH_AS(pm.run(g, {"drop_relu"}), doctest::Contains("numeric check after pass 'drop_relu': output 0"),
                       runtime::NumericMismatch);
}
