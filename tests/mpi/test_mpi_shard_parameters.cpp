// shard_parameters run under mpirun (CTest starts it at 2 and 4 ranks): a
// small graph with weights, sharded for this rank, unbucketed and bucketed,
// gives the outputs the whole graph gives in one process, while this rank
// holds only its shards as constants.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/kernels/mpi/world.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_meta.hpp"
#include "kiln/passes/bucketing/bucket_collectives.hpp"
#include "kiln/passes/sharding/shard_parameters.hpp"

using namespace kiln;
using runtime::Tensor;

namespace {

TensorMeta meta(std::vector<std::int64_t> shape) {
  return c10d_meta::contiguous(std::vector<Dim>(shape.begin(), shape.end()), DType::float32);
}

io::WeightTensor weight(std::vector<std::int64_t> shape, float seed) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(seed + 0.37f * static_cast<float>(i));
  return io::make_weight<float>(std::move(shape), v);
}

// relu(x @ w1 + b1) @ w2 * scale + (x @ w1): w1 read twice, a 0-d weight, and
// numels (35, 5, 15, 1) that need padding at 2 and 4 ranks.
struct Model {
  Graph g;
  io::WeightStore store;
  Model() {
    store.add("w1", weight({7, 5}, 0.1f));
    store.add("b1", weight({5}, 1.3f));
    store.add("w2", weight({5, 3}, 2.9f));
    store.add("scale", io::make_weight<float>({}, {0.5f}));
    Node* x = g.placeholder("x", meta({3, 7}));
    auto call = [&](OpRef op, std::initializer_list<Arg> args, std::vector<std::int64_t> shape) {
      Node* n = g.call_function(op, args);
      n->meta.val = meta(std::move(shape));
      return n;
    };
    Node* w1 = g.get_attr("w1", meta({7, 5}));
    Node* h = call(aten::mm, {x, w1}, {3, 5});
    Node* b1 = g.get_attr("b1", meta({5}));
    Node* r = call(aten::relu, {call(aten::add_Tensor, {h, b1}, {3, 5})}, {3, 5});
    Node* w2 = g.get_attr("w2", meta({5, 3}));
    Node* scale = g.get_attr("scale", meta({}));
    Node* y = call(aten::mul_Tensor, {call(aten::mm, {r, w2}, {3, 3}), scale}, {3, 3});
    Node* again = call(aten::mm, {x, w1}, {3, 5});
    g.output(Arg(ArgList{Arg(y), Arg(again)}));
  }
};

std::vector<Tensor> input() {
  Tensor x = Tensor::empty({3, 7}, DType::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::cos(0.21f * static_cast<float>(i));
  return {x};
}

std::vector<Tensor> run(const runtime::CompiledGraph& cg) {
  const auto in = input();
  return cg.run(std::span<const Tensor>(in.data(), in.size()));
}

// The largest error over the largest magnitude of each output.
void check_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    REQUIRE(got[k].shape() == want[k].shape());
    const Tensor g = got[k].contiguous(), w = want[k].contiguous();
    double err = 0, scale = 0;
    for (std::int64_t i = 0; i < g.numel(); ++i) {
      err = std::max(err, static_cast<double>(std::abs(g.data<float>()[i] - w.data<float>()[i])));
      scale = std::max(scale, static_cast<double>(std::abs(w.data<float>()[i])));
    }
    CHECK(err <= 1e-6 * scale);
  }
}

bool has_step(const runtime::CompiledGraph& cg, std::string_view op) {
  for (std::size_t s = 0; s < cg.num_steps(); ++s)
    if (cg.step(s).op_type.find(op) != std::string::npos) return true;
  return false;
}

// The model sharded for this rank, bucketed by `cap_mb` unless 0, against the whole model.
void sharded_case(double cap_mb) {
  Model whole;
  const auto want = run(runtime::CompiledGraph::compile(whole.g, runtime::take_weights(whole.store)));
  Model m;
  sharding::ShardOptions o;
  o.world_size = kernels::mpi::world_size();
  o.rank = kernels::mpi::world_rank();
  const auto report = sharding::shard_parameters(m.g, m.store, o);
  CHECK(report.sharded == 4);
  if (cap_mb > 0) {
    for (const auto& p : bucketing::bucketing_passes())
      if (p.name == "bucket_fsdp_all_gather") CHECK(bucketing::bucket_collectives(m.g, p, bucketing::BucketCap({cap_mb})) > 0);
  }
  lint(m.g);
  const auto cg = runtime::CompiledGraph::compile(m.g, runtime::take_weights(m.store));
  // The gathers are steps of every run, not constants folded once.
  CHECK(has_step(cg, "all_gather_into_tensor"));
  CHECK(has_step(cg, "wait_tensor"));
  check_close(run(cg), want);
  check_close(run(cg), want);  // and again: the gathers run every time
}

}  // namespace

TEST_CASE("mpi shard_parameters gives the whole model's outputs, unbucketed and bucketed") {
  sharded_case(0);
  sharded_case(2000);
  sharded_case(1e-4);  // 104 bytes: several buckets
}

TEST_CASE("mpi shard_parameters leaves this rank only its shards as constants") {
  Model whole;
  const auto full = runtime::CompiledGraph::compile(whole.g, runtime::take_weights(whole.store));
  Model m;
  sharding::ShardOptions o;
  o.world_size = kernels::mpi::world_size();
  o.rank = kernels::mpi::world_rank();
  const auto report = sharding::shard_parameters(m.g, m.store, o);
  const auto cg = runtime::CompiledGraph::compile(m.g, runtime::take_weights(m.store));
  // The whole model also keeps weights packed for its products; the sharded one has nothing to pack.
  CHECK(full.constant_bytes() >= static_cast<std::size_t>(report.bytes_sharded));
  CHECK(cg.constant_bytes() == static_cast<std::size_t>(report.bytes_per_rank));
  // Each weight's shard: numel / ranks rounded up.
  std::int64_t per_rank = 0;
  for (std::int64_t numel : {35, 5, 15, 1}) per_rank += sharding::shard_numel(numel, o.world_size) * 4;
  CHECK(report.bytes_per_rank == per_rank);
}

int main(int argc, char** argv) {
  kernels::mpi::World world(&argc, &argv);
  doctest::Context context(argc, argv);
  return context.run();
}
