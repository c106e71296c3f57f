// The quantization passes: dequant promotion on graphs built here (each chain
// Inductor registers, the near misses, the counters) and on the qmlp fixture
// against Inductor's counters.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/quantization/dequant_promotion.hpp"
#include "quant_graph_support.hpp"

using namespace kiln;
using test::count;

namespace {

TensorMeta meta(std::vector<Dim> shape, DType dtype = DType::float32) { return TensorMeta{std::move(shape), dtype, std::nullopt}; }

// x -> quantize -> dequantize (-> to bf16) (-> reshape), read by `users`
// linears, and by a relu too when `dq_read_elsewhere`.
struct QdqGraph {
  Graph g;
  Node *q, *dq, *end, *other = nullptr;
  std::vector<Node*> users;
  QdqGraph(int n_users, std::vector<Dim> shape, bool to_bf16 = false, bool reshape = false, bool tensor_overload = false,
           bool dq_read_elsewhere = false) {
    Node* x = g.placeholder("x", meta(shape));
    Node* w = g.placeholder("w", meta({8, shape.back()}));
    q = g.call_function(quantized_decomposed::quantize_per_tensor, {x, 0.05, 128, 0, 255, Arg(DType::uint8)});
    q->meta.val = meta(shape, DType::uint8);
    dq = test::dequantize_uint8(g, q, shape, tensor_overload);
    end = dq;
    if (to_bf16) {
      end = g.call_function(prims::convert_element_type, {end, Arg(DType::bfloat16)});
      end->meta.val = meta(shape, DType::bfloat16);
    }
    if (reshape) {
      const std::int64_t last = std::get<std::int64_t>(shape.back());
      end = g.call_function(aten::reshape, {end, ArgList{-1, last}});
      end->meta.val = meta({-1, last});
    }
    ArgList outs;
    for (int i = 0; i < n_users; ++i) {
      users.push_back(g.call_function(aten::linear, {end, w}));
      outs.push_back(users.back());
    }
    if (dq_read_elsewhere) outs.push_back(other = g.call_function(aten::relu, {dq}));
    g.output(outs);
  }
};

}  // namespace

TEST_CASE("dequant_promotion gives each user of a shared dequantize its own, the first user keeping the original") {
  QdqGraph t(3, {16, 32});
  Counters c;
  CHECK(dequant_promotion(t.g, &c) == 1);
  lint(t.g);
  CHECK(count(t.g, quantized_decomposed::dequantize_per_tensor) == 3);
  CHECK(t.users[0]->arg(0).node() == t.dq);
  for (std::size_t i = 1; i < 3; ++i) {
    const Node* copy = t.users[i]->arg(0).node();
    CHECK(copy != t.dq);
    CHECK(copy->target() == quantized_decomposed::dequantize_per_tensor);
    CHECK(copy->args() == t.dq->args());  // the same quantized input and parameters
    CHECK(copy->num_users() == 1);
    CHECK(copy->next() == t.users[i]);  // placed right before its user
    CHECK(copy->meta.val.tensor()->shape == t.dq->meta.val.tensor()->shape);
  }
  CHECK(t.dq->num_users() == 1);
  CHECK(t.q->num_users() == 3);
  CHECK(c.get("dequant_promotion_matcher_count") == 1);
  CHECK(c.get("dequant_promotion_matcher_nodes") == 1);
  CHECK(c.get("pattern_matcher_count") == 1);
  // A second run finds nothing left to promote.
  Counters again;
  CHECK(dequant_promotion(t.g, &again) == 0);
}

TEST_CASE("dequant_promotion copies the whole chain: the tensor overload, to bfloat16 and reshape") {
  for (const bool tensor_overload : {false, true})
    for (const bool to_bf16 : {false, true})
      for (const bool reshape : {false, true}) {
        CAPTURE(tensor_overload);
        CAPTURE(to_bf16);
        CAPTURE(reshape);
        QdqGraph t(2, {16, 32}, to_bf16, reshape, tensor_overload);
        Counters c;
        CHECK(dequant_promotion(t.g, &c) == 1);
        lint(t.g);
        const std::int64_t chain = 1 + to_bf16 + reshape;
        CHECK(c.get("dequant_promotion_matcher_nodes") == chain);
        // The second user's chain is a copy ending at the same quantize.
        const Node* n = t.users[1]->arg(0).node();
        CHECK(n != t.end);
        for (std::int64_t k = 1; k < chain; ++k) n = n->arg(0).node();
        CHECK(n != t.dq);
        CHECK(n->arg(0).node() == t.q);
        CHECK(t.users[0]->arg(0).node() == t.end);
        CHECK(t.end->num_users() == 1);
      }
}

TEST_CASE("dequant_promotion leaves alone a dequantize with one user, per-channel dequantizes, and an interior node read elsewhere") {
  SUBCASE("one user") {
    QdqGraph t(1, {16, 32});
    Counters c;
    CHECK(dequant_promotion(t.g, &c) == 0);
    CHECK(c.get("dequant_promotion_matcher_count") == 0);
  }
  SUBCASE("per-channel weights read twice") {
    Graph g;
    Node* wq = g.placeholder("wq", meta({8, 4}, DType::int8));
    Node* s = g.placeholder("s", meta({8}));
    Node* z = g.placeholder("z", meta({8}, DType::int64));
    Node* w = g.call_function(quantized_decomposed::dequantize_per_channel, {wq, s, z, 0, -128, 127, Arg(DType::int8)});
    g.output(ArgList{g.call_function(aten::relu, {w}), g.call_function(aten::neg, {w})});
    CHECK(dequant_promotion(g) == 0);
  }
  SUBCASE("a reshape with two users over a dequantize that has another user") {
    // reshape(dequant) cannot match (its dequantize has two users), so the
    // dequantize alone is promoted: the reshape keeps it, the other user gets a copy.
    QdqGraph t(2, {16, 32}, false, true, false, true);
    Node* other = t.other;
    Counters c;
    CHECK(dequant_promotion(t.g, &c) == 1);
    lint(t.g);
    CHECK(t.end->num_users() == 2);
    CHECK(t.end->arg(0).node() == t.dq);
    CHECK(other->arg(0).node() != t.dq);
    CHECK(c.get("dequant_promotion_matcher_nodes") == 1);
  }
}

TEST_CASE("dequant_promotion counts a linear over a 3-D input as Inductor does, through the reshape it decomposes into") {
  QdqGraph t(2, {4, 8, 32});
  Counters c;
  CHECK(dequant_promotion(t.g, &c) == 1);
  CHECK(c.get("dequant_promotion_matcher_count") == 1);
  CHECK(c.get("dequant_promotion_matcher_nodes") == 2);
  QdqGraph t2(2, {4, 8, 32}, false, false, false, true);
  Counters c2;
  CHECK(dequant_promotion(t2.g, &c2) == 1);
  CHECK(c2.get("dequant_promotion_matcher_nodes") == 1);  // a user that is no linear: no shared reshape
}

TEST_CASE("dequant_promotion on the qmlp fixture gives Inductor's counters, through the registry") {
  const std::string dir = std::string(KILN_FIXTURES_DIR) + "/inductor/";
  auto file = io::read_fx_json(dir + "qmlp_exported.json.gz");
  std::ifstream in(dir + "qmlp.expected.json");
  const auto want = nlohmann::json::parse(in)["counters"];
  PassRegistry registry;
  register_quantization_passes(registry);
  PassManager pm(registry);
  pm.run(file.graph, {"dequant_promotion"});
  lint(file.graph);
  CHECK(pm.counters().get("dequant_promotion_matcher_count") == want["dequant_promotion_matcher_count"].get<std::int64_t>());
  CHECK(pm.counters().get("dequant_promotion_matcher_nodes") == want["dequant_promotion_matcher_nodes"].get<std::int64_t>());
  CHECK(count(file.graph, quantized_decomposed::dequantize_per_tensor) == 5);
  for (const Node* n : file.graph.find_nodes(OpKind::call_function, quantized_decomposed::dequantize_per_tensor))
    CHECK(n->num_users() == 1);
}
