#pragma once
// _c10d_functional's collectives on Open MPI. A collective starts a
// non-blocking MPI call at its own step (MPI_Iallgather,
// MPI_Ireduce_scatter_block, MPI_Iallreduce) and its wait_tensor completes it
// (MPI_Wait), so the steps in between overlap the communication. The request
// lives in a small arena buffer of the collective's, so each RunContext has its
// own; the wait step reads that buffer and the collective's input and output,
// which keeps all three alive in the buffer plan until the wait.
//
// Built without MPI (no kiln::mpi component), every collective is refused when
// lowered, naming the node.
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/shape/views.hpp"

#ifdef KILN_HAVE_MPI
#include <cstring>

#include "kiln/kernels/mpi/world.hpp"
#endif

namespace kiln::kernels {

namespace collective_detail {

inline bool is_collective(const Node& n) {
  const std::string_view t = n.target_name();
  return n.op() == OpKind::call_function && t.starts_with("_c10d_functional.") && !t.starts_with("_c10d_functional.wait_tensor");
}

#ifndef KILN_HAVE_MPI

struct NoMpi {
  static void lower(runtime::LowerContext& ctx) {
    ctx.fail("collectives need MPI, and kiln was built without MPI (install libopenmpi-dev and reconfigure)");
  }
};
using Gather = NoMpi;
using ReduceScatter = NoMpi;
using AllReduce = NoMpi;
using Wait = NoMpi;

#else

enum class Kind : std::uint8_t { gather, reduce_scatter, all_reduce };

// The MPI type that moves `dt` unchanged (a gather only copies bytes).
inline MPI_Datatype move_type(runtime::LowerContext& ctx, DType dt) {
  switch (dtype_itemsize(dt)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    case 8: return MPI_UINT64_T;
    default: ctx.fail("an all_gather of " + std::string(dtype_name(dt)) + " is not supported");
  }
}

// The MPI type that reduces `dt`; bf16 and fp16 would need an MPI_Op of kiln's own.
inline MPI_Datatype reduce_type(runtime::LowerContext& ctx, DType dt) {
  switch (dt) {
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::int32: return MPI_INT32_T;
    case DType::int64: return MPI_INT64_T;
    default: ctx.fail("a reduction of " + std::string(dtype_name(dt)) + " is not supported (float32, float64, int32, int64 are)");
  }
}

// The MPI operation of a reduce_op as the schema spells it; "avg" sums, and the wait divides.
inline MPI_Op reduce_op(runtime::LowerContext& ctx, const std::string& op, DType dt) {
  if (op == "sum") return MPI_SUM;
  if (op == "avg") {
    if (!is_floating_point(dt)) ctx.fail("reduce_op 'avg' of an integer tensor is not supported");
    return MPI_SUM;
  }
  if (op == "max") return MPI_MAX;
  if (op == "min") return MPI_MIN;
  if (op == "product") return MPI_PROD;
  ctx.fail("reduce_op '" + op + "' is not supported (sum, avg, max, min and product are)");
}

// The group's communicator; the group must be every rank the launcher started.
inline MPI_Comm group_comm(runtime::LowerContext& ctx, std::int64_t group_size, const std::string& group) {
  if (!mpi::initialized()) ctx.fail("MPI is not initialized: run it under mpirun (kiln-run), in a program holding a kiln::kernels::mpi::World");
  if (group_size != mpi::world_size())
    ctx.fail("group_size " + std::to_string(group_size) + " of group '" + group + "' is not the number of ranks (" +
             std::to_string(mpi::world_size()) + "): only groups of every rank are supported");
  return mpi::communicator(group);
}

// The collective needs its one wait, which completes the MPI request.
inline void check_waited(runtime::LowerContext& ctx) {
  int waits = 0;
  for (const Node* u : ctx.node().users())
    if (u->target_name() == "_c10d_functional.wait_tensor.default") ++waits;
  if (waits != 1) ctx.fail("a collective needs exactly one wait_tensor, it has " + std::to_string(waits));
}

struct CollectiveStep final : runtime::Step {
  Kind kind;
  MPI_Comm comm;
  MPI_Datatype type;
  MPI_Op op;
  int count;  // elements each rank sends (gather), receives (reduce_scatter), or reduces (all_reduce)
  runtime::ValueId in, out, request;
  void run(runtime::Frame& f) const override {
    auto* req = reinterpret_cast<MPI_Request*>(f.data(request));
    const void* src = f.data(in);
    void* dst = f.data(out);
    int rc = MPI_SUCCESS;
    if (kind == Kind::gather) rc = MPI_Iallgather(src, count, type, dst, count, type, comm, req);
    else if (kind == Kind::reduce_scatter) rc = MPI_Ireduce_scatter_block(src, dst, count, type, op, comm, req);
    else rc = MPI_Iallreduce(src, dst, count, type, op, comm, req);
    if (rc != MPI_SUCCESS) throw Error("node " + node + ": MPI collective failed to start");
  }
};

// Lowers a collective: input made contiguous, output buffer, request buffer,
// and the step that starts it. The result carries the request buffer as its one item.
inline void lower_collective(runtime::LowerContext& ctx, Kind kind, runtime::ValueId in, runtime::Shape out_shape,
                             MPI_Datatype type, MPI_Op op, MPI_Comm comm, std::int64_t count) {
  check_waited(ctx);
  const auto& il = ctx.layout(in);
  if (!il.is_contiguous()) in = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(il.shape, il.dtype));
  if (count > INT32_MAX) ctx.fail("a collective of more than 2^31 elements per rank is not supported");
  const auto out = ctx.buffer(std::move(out_shape), ctx.layout(in).dtype);
  const auto request = ctx.buffer(runtime::Shape{static_cast<std::int64_t>(sizeof(MPI_Request))}, DType::uint8);
  auto step = std::make_unique<CollectiveStep>();
  step->kind = kind;
  step->comm = comm;
  step->type = type;
  step->op = op;
  step->count = static_cast<int>(count);
  step->in = in;
  step->out = out;
  step->request = request;
  step->implementation = "MPI";
  step->has_effects = true;  // of a constant (a shard_parameters shard) too: every rank takes part in every run
  ctx.add_step(std::move(step), {in}, {out, request});
  runtime::Lowered r = runtime::Lowered::tensor(out);
  r.items = {runtime::Lowered::tensor(request), runtime::Lowered::tensor(in)};
  ctx.set_result(std::move(r));
}

// all_gather_into_tensor(input, group_size, group_name): the ranks' inputs stacked along dim 0.
struct Gather {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const std::int64_t g = ctx.int_arg(1, "group_size");
    const MPI_Comm comm = group_comm(ctx, g, ctx.string_arg(2, "group_name"));
    const auto& l = ctx.layout(in);
    runtime::Shape shape = l.shape;
    if (shape.empty()) ctx.fail("all_gather of a 0-d tensor is not supported");
    shape[0] *= g;
    lower_collective(ctx, Kind::gather, in, shape, move_type(ctx, l.dtype), MPI_OP_NULL, comm, l.numel());
  }
};

// reduce_scatter_tensor(input, reduce_op, group_size, group_name): rank r gets the reduction of every rank's r-th block of dim 0.
struct ReduceScatter {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const std::string op = ctx.string_arg(1, "reduce_op");
    const std::int64_t g = ctx.int_arg(2, "group_size");
    const MPI_Comm comm = group_comm(ctx, g, ctx.string_arg(3, "group_name"));
    const auto& l = ctx.layout(in);
    runtime::Shape shape = l.shape;
    if (shape.empty() || shape[0] % g != 0)
      ctx.fail("reduce_scatter needs dim 0 of its input divisible by group_size " + std::to_string(g));
    shape[0] /= g;
    const auto type = reduce_type(ctx, l.dtype);
    lower_collective(ctx, Kind::reduce_scatter, in, shape, type, reduce_op(ctx, op, l.dtype), comm, l.numel() / g);
  }
};

// all_reduce(input, reduce_op, group_name): every rank gets the reduction of every rank's input.
struct AllReduce {
  static void lower(runtime::LowerContext& ctx) {
    const auto in = ctx.tensor(0, "input");
    const std::string op = ctx.string_arg(1, "reduce_op");
    const MPI_Comm comm = group_comm(ctx, mpi::initialized() ? mpi::world_size() : 0, ctx.string_arg(2, "group_name"));
    const auto& l = ctx.layout(in);
    const auto type = reduce_type(ctx, l.dtype);
    lower_collective(ctx, Kind::all_reduce, in, l.shape, type, reduce_op(ctx, op, l.dtype), comm, l.numel());
  }
};

struct WaitStep final : runtime::Step {
  runtime::ValueId request, out;
  double scale = 0;  // "avg": the sum times 1/group_size
  void run(runtime::Frame& f) const override {
    auto* req = reinterpret_cast<MPI_Request*>(f.data(request));
    if (MPI_Wait(req, MPI_STATUS_IGNORE) != MPI_SUCCESS) throw Error("node " + node + ": MPI_Wait failed");
    if (scale == 0) return;
    const auto n = f.layout(out).numel();
    if (f.layout(out).dtype == DType::float32)
      for (float* p = f.data_as<float>(out); p != f.data_as<float>(out) + n; ++p) *p *= static_cast<float>(scale);
    else
      for (double* p = f.data_as<double>(out); p != f.data_as<double>(out) + n; ++p) *p *= scale;
  }
};

// wait_tensor(tensor): completes the collective that made `tensor`; of any other tensor, that tensor.
struct Wait {
  static void lower(runtime::LowerContext& ctx) {
    const auto v = ctx.tensor(0, "tensor");
    const Arg* a = ctx.find_arg(0, "tensor");
    const Node* c = a ? a->node() : nullptr;
    if (!c || !is_collective(*c) || ctx.lowered(c).items.size() != 2) {
      ctx.set_result(v);
      return;
    }
    const runtime::Lowered& l = ctx.lowered(c);
    auto step = std::make_unique<WaitStep>();
    step->request = l.items[0].id;
    step->out = l.id;
    const Arg* op_arg = c->args().size() > 1 ? &c->arg(1) : c->kwargs().find("reduce_op");
    const auto* op = op_arg ? op_arg->get_if<std::string>() : nullptr;
    if (op && *op == "avg") step->scale = 1.0 / mpi::world_size();
    step->implementation = "MPI";
    step->has_effects = true;
    const bool writes = step->scale != 0;
    // Reading the collective's input and output keeps them alive (and unmoved) until MPI is done with them.
    ctx.add_step(std::move(step), {l.items[0].id, l.items[1].id, l.id}, writes ? std::vector<runtime::ValueId>{l.id} : std::vector<runtime::ValueId>{});
    ctx.set_result(l.id);
  }
};

#endif

}  // namespace collective_detail

using collective_kernels = KernelGroup<
    KernelEntry<"_c10d_functional.all_gather_into_tensor.default", collective_detail::Gather>,
    KernelEntry<"_c10d_functional.reduce_scatter_tensor.default", collective_detail::ReduceScatter>,
    KernelEntry<"_c10d_functional.all_reduce.default", collective_detail::AllReduce>,
    KernelEntry<"_c10d_functional.wait_tensor.default", collective_detail::Wait>>;

}  // namespace kiln::kernels
