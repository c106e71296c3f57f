// The collectives on Open MPI, run under mpirun (CTest starts it at 2 and 4
// ranks): graphs built by hand whose inputs each rank fills from its rank,
// unbucketed and bucketed by the bucketing passes, checked against the result
// a loop over every rank's inputs gives.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/core/bfloat16.hpp"
#include "kiln/io/fx_json_write.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/kernels/mpi/world.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_meta.hpp"
#include "kiln/passes/bucketing/bucket_collectives.hpp"

using namespace kiln;
namespace c10d = kiln::c10d_functional;
using runtime::Tensor;

namespace {

// The group size the graphs are built for: every rank, or what --write-graph asks.
int g_ranks = 0;
int ranks() { return g_ranks ? g_ranks : kernels::mpi::world_size(); }
int my_rank() { return kernels::mpi::world_rank(); }

// Input `p`'s element i on rank r: exact in float32, so sums over ranks are exact.
float value(int p, int r, std::int64_t i) { return static_cast<float>((r + 1) * 64 - p * 8) + 0.25f * static_cast<float>(i % 13) - 20.0f; }

TensorMeta meta(std::vector<Dim> shape, DType dt = DType::float32) { return c10d_meta::contiguous(std::move(shape), dt); }

struct Builder {
  Graph g;
  std::vector<Node*> outs;
  std::vector<std::vector<std::int64_t>> shapes;
  Node* input(std::vector<std::int64_t> shape) {
    shapes.push_back(shape);
    return g.placeholder("p" + std::to_string(shapes.size() - 1), meta(std::vector<Dim>(shape.begin(), shape.end())));
  }
  Node* with_rule(Node* n) {
    n->meta.val = *c10d_meta::infer(*n);
    return n;
  }
  Node* wait(Node* c) { return with_rule(g.call_function(c10d::wait_tensor, {c})); }
  Node* ag(Node* x) { return wait(with_rule(g.call_function(c10d::all_gather_into_tensor, {x, Arg(std::int64_t{ranks()}), Arg("0")}))); }
  Node* rs(Node* x, const char* op) {
    return wait(with_rule(g.call_function(c10d::reduce_scatter_tensor, {x, Arg(op), Arg(std::int64_t{ranks()}), Arg("0")})));
  }
  Node* ar(Node* x, const char* op) { return wait(with_rule(g.call_function(c10d::all_reduce, {x, Arg(op), Arg("0")}))); }
  // A use of a collective's result: relu, so computation sits between the waits.
  Node* relu(Node* x) {
    Node* r = g.call_function(aten::relu, {x});
    r->meta.val = x->meta.val;
    return r;
  }
  void finish() {
    ArgList l;
    for (Node* o : outs) l.push_back(Arg(o));
    g.output(Arg(std::move(l)));
  }
  // This rank's inputs.
  std::vector<Tensor> inputs(int rank) const {
    std::vector<Tensor> in;
    for (std::size_t p = 0; p < shapes.size(); ++p) {
      Tensor t = Tensor::empty(shapes[p], DType::float32);
      for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = value(static_cast<int>(p), rank, i);
      in.push_back(std::move(t));
    }
    return in;
  }
};

std::int64_t numel(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

void bucket(Graph& g, std::string_view name) {
  for (const auto& p : bucketing::bucketing_passes())
    if (p.name == name) {
      CHECK(bucketing::bucket_collectives(g, p) > 0);
      return;
    }
  FAIL("no pass " << name);
}

std::vector<Tensor> run(const Graph& g, const std::vector<Tensor>& in) {
  auto cg = runtime::CompiledGraph::compile(g, {});
  return cg.run(std::span<const Tensor>(in.data(), in.size()));
}

// Element `flat` (row-major) of a float tensor of any strides.
float element(const Tensor& t, std::int64_t flat) {
  std::int64_t off = 0;
  for (std::size_t k = t.rank(); k-- > 0;) {
    off += (flat % t.shape()[k]) * t.strides()[k];
    flat /= t.shape()[k];
  }
  return t.data<float>()[off];
}

void check_equal(const Tensor& got, const std::vector<float>& want) {
  REQUIRE(got.numel() == static_cast<std::int64_t>(want.size()));
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += element(got, static_cast<std::int64_t>(i)) != want[i];
  CHECK(bad == 0);
}

// The reduction `op` over ranks of input p's element i.
float reduce(const std::string& op, int p, std::int64_t i) {
  float acc = value(p, 0, i);
  for (int r = 1; r < ranks(); ++r) {
    const float v = value(p, r, i);
    if (op == "sum" || op == "avg") acc += v;
    else if (op == "max") acc = std::max(acc, v);
    else if (op == "min") acc = std::min(acc, v);
  }
  return op == "avg" ? acc / static_cast<float>(ranks()) : acc;
}

// Three all-gathers (used through relu) in one graph; `pass` buckets it first unless empty.
void all_gather_case(std::string_view pass) {
  Builder b;
  const std::vector<std::vector<std::int64_t>> shapes{{4, 3}, {5}, {2, 2, 3}};
  for (const auto& s : shapes) b.outs.push_back(b.relu(b.ag(b.input(s))));
  b.finish();
  if (!pass.empty()) bucket(b.g, pass);
  const auto out = run(b.g, b.inputs(my_rank()));
  REQUIRE(out.size() == shapes.size());
  for (std::size_t p = 0; p < shapes.size(); ++p) {
    CHECK(out[p].shape()[0] == shapes[p][0] * ranks());
    std::vector<float> want;
    for (int r = 0; r < ranks(); ++r)
      for (std::int64_t i = 0; i < numel(shapes[p]); ++i) want.push_back(std::max(0.0f, value(static_cast<int>(p), r, i)));
    check_equal(out[p], want);
  }
}

// Reduce-scatters with `op`, waits as outputs; dim 0 of each input is ranks() * k.
void reduce_scatter_case(const char* op, std::string_view pass) {
  Builder b;
  const std::vector<std::vector<std::int64_t>> shapes{{2L * ranks(), 3}, {1L * ranks()}, {3L * ranks(), 2}};
  for (const auto& s : shapes) b.outs.push_back(b.rs(b.input(s), op));
  b.finish();
  if (!pass.empty()) bucket(b.g, pass);
  const auto out = run(b.g, b.inputs(my_rank()));
  REQUIRE(out.size() == shapes.size());
  for (std::size_t p = 0; p < shapes.size(); ++p) {
    const std::int64_t block = numel(shapes[p]) / ranks();
    std::vector<float> want;
    for (std::int64_t i = 0; i < block; ++i) want.push_back(reduce(op, static_cast<int>(p), my_rank() * block + i));
    check_equal(out[p], want);
  }
}

void all_reduce_case(const char* op, std::string_view pass) {
  Builder b;
  const std::vector<std::vector<std::int64_t>> shapes{{3, 3}, {7}};
  for (const auto& s : shapes) b.outs.push_back(b.relu(b.ar(b.input(s), op)));
  b.finish();
  if (!pass.empty()) bucket(b.g, pass);
  const auto out = run(b.g, b.inputs(my_rank()));
  REQUIRE(out.size() == shapes.size());
  for (std::size_t p = 0; p < shapes.size(); ++p) {
    std::vector<float> want;
    for (std::int64_t i = 0; i < numel(shapes[p]); ++i) want.push_back(std::max(0.0f, reduce(op, static_cast<int>(p), i)));
    check_equal(out[p], want);
  }
}

// The compile error of a graph holding one collective made by `make`.
std::string compile_error(const std::function<Node*(Builder&)>& make) {
  Builder b;
  b.outs.push_back(make(b));
  b.finish();
  try {
    runtime::CompiledGraph::compile(b.g, {});
  } catch (const runtime::CompileError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("mpi all_gather_into_tensor stacks every rank's input, unbucketed and bucketed") {
  all_gather_case("");
  all_gather_case("bucket_all_gather");
  all_gather_case("bucket_fsdp_all_gather");
}

TEST_CASE("mpi reduce_scatter_tensor with sum, avg, max and min, unbucketed and bucketed") {
  for (const char* op : {"sum", "avg", "max", "min"}) {
    CAPTURE(op);
    reduce_scatter_case(op, "");
    reduce_scatter_case(op, "bucket_reduce_scatter");
    reduce_scatter_case(op, "bucket_fsdp_reduce_scatter");
  }
}

TEST_CASE("mpi all_reduce with sum and max, unbucketed and bucketed") {
  for (const char* op : {"sum", "max"}) {
    CAPTURE(op);
    all_reduce_case(op, "");
    all_reduce_case(op, "bucket_all_reduce");
  }
}

TEST_CASE("mpi collectives run again in a second run and in a second context of the same compiled graph") {
  Builder b;
  b.outs.push_back(b.relu(b.ag(b.input({3, 2}))));
  b.outs.push_back(b.rs(b.input({2L * ranks()}), "sum"));
  b.finish();
  const auto cg = runtime::CompiledGraph::compile(b.g, {});
  const auto in = b.inputs(my_rank());
  auto c1 = cg.make_context();
  auto c2 = cg.make_context();
  for (int k = 0; k < 2; ++k) {
    for (auto* c : {&c1, &c2}) {
      const auto& out = c->run(std::span<const Tensor>(in.data(), in.size()));
      std::vector<float> gathered, scattered;
      for (int r = 0; r < ranks(); ++r)
        for (std::int64_t i = 0; i < 6; ++i) gathered.push_back(std::max(0.0f, value(0, r, i)));
      for (std::int64_t i = 0; i < 2; ++i) scattered.push_back(reduce("sum", 1, my_rank() * 2 + i));
      check_equal(out[0], gathered);
      check_equal(out[1], scattered);
    }
  }
}

TEST_CASE("mpi all_gather_into_tensor of bfloat16 moves each rank's bits unchanged") {
  Graph g;
  Node* x = g.placeholder("x", meta({5}, DType::bfloat16));
  Node* ag = g.call_function(c10d::all_gather_into_tensor, {x, Arg(std::int64_t{ranks()}), Arg("0")});
  ag->meta.val = *c10d_meta::infer(*ag);
  Node* w = g.call_function(c10d::wait_tensor, {ag});
  w->meta.val = *c10d_meta::infer(*w);
  g.output(Arg(ArgList{Arg(w)}));
  Tensor in = Tensor::empty({5}, DType::bfloat16);
  for (std::int64_t i = 0; i < 5; ++i) in.data<std::uint16_t>()[i] = float_to_bf16(value(0, my_rank(), i));
  const auto out = run(g, {in});
  REQUIRE(out[0].numel() == 5L * ranks());
  REQUIRE(out[0].is_contiguous());
  std::int64_t bad = 0;
  for (int r = 0; r < ranks(); ++r)
    for (std::int64_t i = 0; i < 5; ++i) bad += out[0].data<std::uint16_t>()[r * 5 + i] != float_to_bf16(value(0, r, i));
  CHECK(bad == 0);
}

TEST_CASE("mpi collective buffers stay alive until the wait while other ops run in between") {
  // a = relu(x) is gathered; ops between the collective and its wait make new
  // buffers and read a last (add in place could reuse it); then the wait.
  Builder b;
  Node* x = b.input({8, 4});
  Node* a = b.relu(x);
  Node* ag = b.with_rule(b.g.call_function(c10d::all_gather_into_tensor, {a, Arg(std::int64_t{ranks()}), Arg("0")}));
  Node* t = a;
  for (int k = 0; k < 4; ++k) {
    Node* n = b.g.call_function(aten::add_Tensor, {t, t});
    n->meta.val = a->meta.val;
    t = n;
  }
  Node* w = b.wait(ag);
  b.outs.push_back(w);
  b.outs.push_back(t);
  b.finish();
  const auto out = run(b.g, b.inputs(my_rank()));
  std::vector<float> gathered, sixteen;
  for (int r = 0; r < ranks(); ++r)
    for (std::int64_t i = 0; i < 32; ++i) gathered.push_back(std::max(0.0f, value(0, r, i)));
  for (std::int64_t i = 0; i < 32; ++i) sixteen.push_back(16 * std::max(0.0f, value(0, my_rank(), i)));
  check_equal(out[0], gathered);
  check_equal(out[1], sixteen);
}

TEST_CASE("mpi collectives refuse a group that is not every rank, a bf16 reduction, an unknown reduce_op and a missing wait") {
  const std::string wrong_size = compile_error([](Builder& b) {
    Node* x = b.input({2});
    return b.wait(b.with_rule(b.g.call_function(c10d::all_gather_into_tensor, {x, Arg(std::int64_t{ranks() + 1}), Arg("0")})));
  });
  CHECK(wrong_size.find("all_gather_into_tensor") != std::string::npos);
  CHECK(wrong_size.find("is not the number of ranks") != std::string::npos);

  const std::string bf16 = compile_error([](Builder& b) {
    Node* x = b.g.placeholder("x", meta({2L * ranks()}, DType::bfloat16));
    return b.rs(x, "sum");
  });
  CHECK(bf16.find("reduction of bfloat16 is not supported") != std::string::npos);

  const std::string bad_op = compile_error([](Builder& b) { return b.ar(b.input({4}), "bxor"); });
  CHECK(bad_op.find("reduce_op 'bxor' is not supported") != std::string::npos);

  const std::string no_wait = compile_error([](Builder& b) {
    return b.relu(b.with_rule(b.g.call_function(c10d::all_reduce, {b.input({4}), Arg("sum"), Arg("0")})));
  });
  CHECK(no_wait.find("exactly one wait_tensor") != std::string::npos);
}

namespace {

// For CTest's run of `mpirun -np N kiln-run`: DIR/graph.json (two all-gathers of
// inputs, FSDP's shape, and an all-reduce, for N ranks), its inputs, which every
// rank reads alike, and the outputs N ranks give (DIR/outputs).
int write_graph(const std::filesystem::path& dir, int n) {
  g_ranks = n;
  Builder b;
  Node* x0 = b.input({4, 3});
  Node* x1 = b.input({6});
  b.outs.push_back(b.relu(b.ag(x0)));
  b.outs.push_back(b.relu(b.ag(x1)));
  b.outs.push_back(b.ar(x1, "sum"));
  b.finish();
  std::filesystem::create_directories(dir / "outputs");
  io::write_fx_json(b.g, dir / "graph.json");
  const auto in = b.inputs(0);
  for (std::size_t k = 0; k < in.size(); ++k) io::write_npy(dir / ("input_" + std::to_string(k) + ".npy"), in[k].to_weight());
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < 2; ++k) {
    std::vector<std::int64_t> shape = b.shapes[k];
    shape[0] *= n;
    Tensor t = Tensor::empty(shape, DType::float32);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::max(0.0f, in[k].data<float>()[i % in[k].numel()]);
    out.push_back(std::move(t));
  }
  Tensor sum = Tensor::empty(b.shapes[1], DType::float32);
  for (std::int64_t i = 0; i < sum.numel(); ++i) sum.data<float>()[i] = static_cast<float>(n) * in[1].data<float>()[i];
  out.push_back(std::move(sum));
  for (std::size_t k = 0; k < out.size(); ++k)
    io::write_npy(dir / "outputs" / ("output_" + std::to_string(k) + ".npy"), out[k].to_weight());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--write-graph") return write_graph(argv[2], std::stoi(argv[3]));
  kernels::mpi::World world(&argc, &argv);
  doctest::Context context(argc, argv);
  return context.run();
}
