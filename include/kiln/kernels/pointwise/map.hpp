#pragma once
// The engine of every element-wise kernel: out = f(in0, in1, ...) where each
// input has been expanded (stride 0) to the output's shape when lowering. The
// plan picks a flat 1-d form when every operand is contiguous (xtensor then
// assigns linearly with xsimd) and keeps the strided layouts otherwise; runs
// split dim 0 into chunks, over OpenMP threads above a size threshold.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <xtensor/xnoalias.hpp>

#include "kiln/kernels/detail/xt_adapt.hpp"
#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels::detail {

// Below this many elements a loop runs on the calling thread only.
inline constexpr std::int64_t kParallelElements = 32768;

template <std::size_t N>
struct MapPlan {
  runtime::ValueId out = 0;
  runtime::Layout out_layout;
  std::array<runtime::ValueId, N> in{};
  std::array<runtime::Layout, N> in_layout;  // same shape as out_layout
  std::int64_t rows_per_chunk = 1;           // of dim 0
};

// Plans a map of inputs (with their own layouts) into a new contiguous `out`.
template <std::size_t N>
MapPlan<N> plan_map(runtime::ValueId out, const runtime::Layout& out_layout,
                    const std::array<runtime::ValueId, N>& ins, const std::array<runtime::Layout, N>& in_layouts) {
  MapPlan<N> p;
  p.out = out;
  p.in = ins;
  bool flat = true;
  for (std::size_t i = 0; i < N; ++i) {
    p.in_layout[i] = runtime::expanded(in_layouts[i], out_layout.shape);
    flat = flat && p.in_layout[i].is_contiguous();
  }
  p.out_layout = out_layout;
  if (flat || out_layout.rank() == 0) {
    // One dimension of numel elements for every operand.
    const runtime::Shape n{out_layout.numel()};
    p.out_layout = runtime::Layout{out_layout.dtype, n, {1}};
    for (auto& l : p.in_layout) l = runtime::Layout{l.dtype, n, {1}};
  }
  const std::int64_t rows = p.out_layout.shape[0];
  const std::int64_t per_row = rows ? p.out_layout.numel() / rows : 1;
  p.rows_per_chunk = std::max<std::int64_t>(1, kParallelElements / std::max<std::int64_t>(per_row, 1));
  return p;
}

// An adaptor over rows [begin, begin + count) of dim 0 of `l` at `base`.
// xtensor wants the storage size of a strided adaptor to be the element count
// (it never reads the storage linearly unless the strides are row-major), so
// broadcast (stride 0) and sliced layouts pass numel, not the addressed span.
template <class T>
auto xadapt_rows(T* base, const runtime::Layout& l, std::int64_t begin, std::int64_t count) {
  XShape shape = xshape(l);
  shape[0] = static_cast<std::size_t>(count);
  std::size_t numel = 1;
  for (auto d : shape) numel *= d;
  return xt::adapt(base + begin * l.strides[0], numel, xt::no_ownership(), std::move(shape), xstrides(l));
}

template <class Out, class... Ins, class F, std::size_t... I>
void run_map_rows(const runtime::Frame& fr, const MapPlan<sizeof...(Ins)>& p, const F& f, std::int64_t begin,
                  std::int64_t count, std::index_sequence<I...>) {
  auto o = xadapt_rows(fr.data_as<Out>(p.out), p.out_layout, begin, count);
  xt::noalias(o) = f(xadapt_rows(static_cast<const Ins*>(fr.data_as<Ins>(p.in[I])), p.in_layout[I], begin, count)...);
}

// Runs a planned map; F takes one xtensor expression per input.
template <class Out, class... Ins, class F>
void run_map(const runtime::Frame& fr, const MapPlan<sizeof...(Ins)>& p, const F& f) {
  const std::int64_t rows = p.out_layout.shape[0];
  if (p.out_layout.numel() == 0) return;
  const std::int64_t chunks = (rows + p.rows_per_chunk - 1) / p.rows_per_chunk;
  const auto seq = std::index_sequence_for<Ins...>{};
  if (chunks <= 1 || fr.threads() <= 1) {
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t b = c * p.rows_per_chunk;
      run_map_rows<Out, Ins...>(fr, p, f, b, std::min(p.rows_per_chunk, rows - b), seq);
    }
    return;
  }
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t b = c * p.rows_per_chunk;
    run_map_rows<Out, Ins...>(fr, p, f, b, std::min(p.rows_per_chunk, rows - b), seq);
  }
}

// Lowers a map into a new buffer of `out_dtype` with the broadcast shape of the inputs.
template <class Out, class... Ins, class F>
runtime::ValueId lower_map(runtime::LowerContext& ctx, DType out_dtype,
                           const std::array<runtime::ValueId, sizeof...(Ins)>& ins, F f) {
  constexpr std::size_t N = sizeof...(Ins);
  std::array<runtime::Layout, N> layouts;
  runtime::Shape shape;
  for (std::size_t i = 0; i < N; ++i) {
    layouts[i] = ctx.layout(ins[i]);
    try {
      shape = i == 0 ? layouts[i].shape : runtime::broadcast_shapes(shape, layouts[i].shape);
    } catch (const runtime::ShapeError& e) {
      ctx.fail(e.what());
    }
  }
  const auto out = ctx.buffer(shape, out_dtype);
  auto plan = plan_map<N>(out, ctx.layout(out), ins, layouts);
  ctx.add_step(runtime::make_step([plan = std::move(plan), f = std::move(f)](runtime::Frame& fr) {
                 run_map<Out, Ins...>(fr, plan, f);
               }),
               std::vector<runtime::ValueId>(ins.begin(), ins.end()), {out});
  return out;
}

}  // namespace kiln::kernels::detail
