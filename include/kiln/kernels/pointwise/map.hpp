#pragma once
// The engine of every element-wise kernel: out = f(in0, in1, ...) where each
// input has been expanded (stride 0) to the output's shape when lowering. The
// plan turns the operands into rows of one inner run; xtensor assigns each run
// linearly with xsimd (strided runs are gathered into stack blocks first), and
// rows, or pieces of a single run, spread over OpenMP threads above a size
// threshold.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/kernels/detail/xtensor.hpp"
#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels::pointwise_detail {

// Below this many elements a loop runs on the calling thread only.
inline constexpr std::int64_t kParallelElements = 32768;
inline constexpr std::size_t kMaxMapRank = 8;

// Operands (the output first) as rows of one inner dimension: the outer dims,
// walked by index, and the inner run that xtensor assigns. Adjacent dims that
// are contiguous with each other in every operand merge, so contiguous
// operands are a single run and broadcasting a bias is a run per row.
template <std::size_t N>
struct MapPlan {
  std::array<runtime::ValueId, N + 1> ids{};
  std::size_t outer_rank = 0;
  std::array<std::int64_t, kMaxMapRank> outer_shape{};
  std::array<std::array<std::int64_t, kMaxMapRank>, N + 1> outer_strides{};
  std::array<std::int64_t, N + 1> inner_stride{};
  std::int64_t rows = 1, inner = 1;
  std::int64_t rows_per_chunk = 1;  // rows per OpenMP work item, or
  std::int64_t inner_chunk = 1;     // elements per work item when there is one row
};

// Plans a map of inputs (any layouts that broadcast to it) into a new contiguous `out`.
template <std::size_t N>
MapPlan<N> plan_map(runtime::ValueId out, const runtime::Layout& out_layout,
                    const std::array<runtime::ValueId, N>& ins, const std::array<runtime::Layout, N>& in_layouts) {
  MapPlan<N> p;
  std::array<runtime::Layout, N + 1> ls;
  ls[0] = out_layout;
  p.ids[0] = out;
  for (std::size_t i = 0; i < N; ++i) {
    ls[i + 1] = runtime::expanded(in_layouts[i], out_layout.shape);
    p.ids[i + 1] = ins[i];
  }
  // Dims of size 1 drop out; the rest merge right to left while every operand allows.
  runtime::Shape shape;
  std::array<runtime::Shape, N + 1> strides;
  // Dims walked in the output's memory order (outermost first), so that its
  // inner run has stride 1 whatever its dim order (channels-last included).
  std::array<std::size_t, kMaxMapRank + 1> order{};
  const std::size_t rank = out_layout.rank();
  if (rank > order.size()) throw runtime::ShapeError("element-wise ops take tensors of rank <= 9");
  for (std::size_t k = 0; k < rank; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.begin() + rank,
                   [&](std::size_t a, std::size_t b) { return out_layout.strides[a] > out_layout.strides[b]; });
  for (std::size_t kk = 0; kk < rank; ++kk) {
    const std::size_t k = order[kk];
    if (out_layout.shape[k] == 1) continue;
    bool merge = !shape.empty();
    for (std::size_t i = 0; merge && i <= N; ++i) merge = strides[i].back() == out_layout.shape[k] * ls[i].strides[k];
    if (merge) {
      shape.back() *= out_layout.shape[k];
      for (std::size_t i = 0; i <= N; ++i) strides[i].back() = ls[i].strides[k];
    } else {
      shape.push_back(out_layout.shape[k]);
      for (std::size_t i = 0; i <= N; ++i) strides[i].push_back(ls[i].strides[k]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (auto& st : strides) st.push_back(1);
  }
  if (shape.size() > kMaxMapRank + 1) throw runtime::ShapeError("element-wise ops take up to 9 dims that do not merge");
  p.outer_rank = shape.size() - 1;
  for (std::size_t k = 0; k < p.outer_rank; ++k) {
    p.outer_shape[k] = shape[k];
    p.rows *= shape[k];
    for (std::size_t i = 0; i <= N; ++i) p.outer_strides[i][k] = strides[i][k];
  }
  p.inner = shape.back();
  for (std::size_t i = 0; i <= N; ++i) p.inner_stride[i] = strides[i].back();
  p.rows_per_chunk = std::max<std::int64_t>(1, kParallelElements / std::max<std::int64_t>(p.inner, 1));
  p.inner_chunk = kParallelElements;
  if (out_layout.numel() == 0) p.rows = 0;
  return p;
}

// Strided runs are gathered into stack blocks of this many elements, so that
// xtensor only ever sees contiguous 1-d runs.
inline constexpr std::int64_t kGatherBlock = 256;

// A contiguous 1-d adaptor over n elements (fixed rank and row-major layout).
template <class T>
auto xrun(T* data, std::int64_t n) {
  return xt::adapt(data, static_cast<std::size_t>(n), xt::no_ownership(),
                   std::array<std::size_t, 1>{static_cast<std::size_t>(n)});
}

// out = e over contiguous runs: xtensor's linear assignment (xsimd where the
// types allow) called directly, so its strided and stepper paths, which these
// runs never need, are not instantiated for every op.
template <class O, class E>
void assign_run(O&& out, const E& e) {
  using traits = xt::xassign_traits<std::decay_t<O>, E>;
  xt::linear_assigner<traits::simd_assign()>::run(out, e);
}

// Assigns elements [from, from + n) of the inner run of `row`.
template <class Out, class... Ins, class F, std::size_t... I>
void run_map_piece(const runtime::Frame& fr, const MapPlan<sizeof...(Ins)>& p, const F& f, std::int64_t row,
                   std::int64_t from, std::int64_t n, std::index_sequence<I...>) {
  std::array<std::int64_t, sizeof...(Ins) + 1> off{};
  for (std::size_t k = p.outer_rank, rest = static_cast<std::size_t>(row); k-- > 0;) {
    const auto idx = static_cast<std::int64_t>(rest % static_cast<std::size_t>(p.outer_shape[k]));
    rest /= static_cast<std::size_t>(p.outer_shape[k]);
    for (std::size_t i = 0; i < off.size(); ++i) off[i] += idx * p.outer_strides[i][k];
  }
  for (std::size_t i = 0; i < off.size(); ++i) off[i] += from * p.inner_stride[i];
  Out* out = fr.data_as<Out>(p.ids[0]) + off[0];  // the output's inner run has stride 1
  const std::tuple<const Ins*...> src{fr.data_as<Ins>(p.ids[I + 1]) + off[I + 1]...};
  if (((p.inner_stride[I + 1] == 1) && ...)) {
    assign_run(xrun(out, n), f(xrun(std::get<I>(src), n)...));
    return;
  }
  std::tuple<std::array<Ins, kGatherBlock>...> blocks;
  for (std::int64_t b = 0; b < n; b += kGatherBlock) {
    const std::int64_t m = std::min(kGatherBlock, n - b);
    // Each operand's run: in place when it has stride 1, else gathered into its block.
    const auto run_of = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      const auto* s = std::get<J>(src);
      const std::int64_t st = p.inner_stride[J + 1];
      if (st == 1) return s + b;
      auto& blk = std::get<J>(blocks);
      for (std::int64_t i = 0; i < m; ++i) blk[i] = s[(b + i) * st];
      return static_cast<const std::tuple_element_t<J, std::tuple<Ins...>>*>(blk.data());
    };
    assign_run(xrun(out + b, m), f(xrun(run_of(std::integral_constant<std::size_t, I>{}), m)...));
  }
}

// Whether rows of a short inner run can be taken several at a time: the
// output and every input have stride 1 in the run and, along the innermost
// outer dim, either continue from one row to the next or repeat the same run
// (stride 0: a per-channel scale over a channels-last activation, the
// squeeze-and-excitation multiply). Each call then assigns up to
// kGatherBlock elements instead of one short run.
template <std::size_t N>
bool rows_group(const MapPlan<N>& p) {
  if (p.outer_rank == 0 || p.inner * 2 > kGatherBlock) return false;
  const std::size_t last = p.outer_rank - 1;
  for (std::size_t i = 0; i <= N; ++i) {
    if (p.inner_stride[i] != 1) return false;
    const std::int64_t st = p.outer_strides[i][last];
    if (st != p.inner && (i == 0 || st != 0)) return false;
  }
  return true;
}

// Assigns rows [row, row + k) of a rows_group plan in one run: the rows lie
// within one step of the innermost outer dim; a repeating input is tiled into
// a stack block.
template <class Out, class... Ins, class F, std::size_t... I>
void run_map_rows(const runtime::Frame& fr, const MapPlan<sizeof...(Ins)>& p, const F& f, std::int64_t row, std::int64_t k,
                  std::index_sequence<I...>) {
  std::array<std::int64_t, sizeof...(Ins) + 1> off{};
  for (std::size_t d = p.outer_rank, rest = static_cast<std::size_t>(row); d-- > 0;) {
    const auto idx = static_cast<std::int64_t>(rest % static_cast<std::size_t>(p.outer_shape[d]));
    rest /= static_cast<std::size_t>(p.outer_shape[d]);
    for (std::size_t i = 0; i < off.size(); ++i) off[i] += idx * p.outer_strides[i][d];
  }
  const std::int64_t n = k * p.inner;
  Out* out = fr.data_as<Out>(p.ids[0]) + off[0];
  std::tuple<std::array<Ins, kGatherBlock>...> blocks;
  const auto run_of = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
    using T = std::tuple_element_t<J, std::tuple<Ins...>>;
    const T* s = fr.data_as<T>(p.ids[J + 1]) + off[J + 1];
    if (p.outer_strides[J + 1][p.outer_rank - 1] != 0) return s;
    auto& blk = std::get<J>(blocks);
    for (std::int64_t r = 0; r < k; ++r) std::copy_n(s, p.inner, blk.data() + r * p.inner);
    return static_cast<const T*>(blk.data());
  };
  assign_run(xrun(out, n), f(xrun(run_of(std::integral_constant<std::size_t, I>{}), n)...));
}

// Rows [begin, end) of a plan: grouped where rows_group allows, else one by one.
template <class Out, class... Ins, class F>
void run_map_row_range(const runtime::Frame& fr, const MapPlan<sizeof...(Ins)>& p, const F& f, bool grouped,
                       std::int64_t begin, std::int64_t end) {
  const auto seq = std::index_sequence_for<Ins...>{};
  if (!grouped) {
    for (std::int64_t r = begin; r < end; ++r) run_map_piece<Out, Ins...>(fr, p, f, r, 0, p.inner, seq);
    return;
  }
  const std::int64_t per_call = kGatherBlock / p.inner, extent = p.outer_shape[p.outer_rank - 1];
  for (std::int64_t r = begin; r < end;) {
    const std::int64_t k = std::min({per_call, end - r, extent - r % extent});
    run_map_rows<Out, Ins...>(fr, p, f, r, k, seq);
    r += k;
  }
}

// Runs a planned map; F takes one xtensor expression per input.
template <class Out, class... Ins, class F>
void run_map(const runtime::Frame& fr, const MapPlan<sizeof...(Ins)>& p, const F& f) {
  const auto seq = std::index_sequence_for<Ins...>{};
  const bool parallel = fr.threads() > 1 && p.rows * p.inner >= kParallelElements;
  const bool grouped = rows_group(p);
  if (!parallel) {
    run_map_row_range<Out, Ins...>(fr, p, f, grouped, 0, p.rows);
  } else if (p.rows == 1) {
    // One long run: pieces of it.
    const std::int64_t pieces = (p.inner + p.inner_chunk - 1) / p.inner_chunk;
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t c = 0; c < pieces; ++c) {
      const std::int64_t b = c * p.inner_chunk;
      run_map_piece<Out, Ins...>(fr, p, f, 0, b, std::min(p.inner_chunk, p.inner - b), seq);
    }
  } else {
    const std::int64_t chunks = (p.rows + p.rows_per_chunk - 1) / p.rows_per_chunk;
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c)
      run_map_row_range<Out, Ins...>(fr, p, f, grouped, c * p.rows_per_chunk, std::min(p.rows, (c + 1) * p.rows_per_chunk));
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
  if (shape.size() > kMaxMapRank + 1) ctx.fail("element-wise ops take tensors of rank <= 9, got " + runtime::shape_str(shape));
  // Laid out in the dim order of the first input of the result's shape, so that
  // channels-last activations stay channels-last and a map over same-layout
  // operands is one contiguous run.
  runtime::Layout out_layout = runtime::Layout::contiguous(shape, out_dtype);
  for (std::size_t i = 0; i < N; ++i)
    if (layouts[i].shape == shape) {
      out_layout = runtime::dense_in_order_of(layouts[i], shape, out_dtype);
      break;
    }
  const auto out = ctx.buffer(out_layout);
  auto plan = plan_map<N>(out, ctx.layout(out), ins, layouts);
  ctx.add_step(runtime::make_step([plan = std::move(plan), f = std::move(f)](runtime::Frame& fr) {
                 run_map<Out, Ins...>(fr, plan, f);
               }),
               std::vector<runtime::ValueId>(ins.begin(), ins.end()), {out});
  return out;
}

// A map of one input whose function depends on values only known when the step
// runs (a scale held in a tensor): make_f(frame) builds it each run; `params`
// are the values it reads, so that the plan keeps them alive until then.
template <class Out, class In, class MakeF>
runtime::ValueId lower_map_late(runtime::LowerContext& ctx, DType out_dtype, runtime::ValueId in,
                                const std::vector<runtime::ValueId>& params, MakeF make_f) {
  const runtime::Layout layout = ctx.layout(in);
  if (layout.rank() > kMaxMapRank + 1)
    ctx.fail("element-wise ops take tensors of rank <= 9, got " + runtime::shape_str(layout.shape));
  const auto out = ctx.buffer(runtime::dense_in_order_of(layout, layout.shape, out_dtype));
  auto plan = plan_map<1>(out, ctx.layout(out), {in}, {layout});
  std::vector<runtime::ValueId> reads{in};
  reads.insert(reads.end(), params.begin(), params.end());
  ctx.add_step(runtime::make_step([plan = std::move(plan), make_f = std::move(make_f)](runtime::Frame& fr) {
                 run_map<Out, In>(fr, plan, make_f(fr));
               }),
               std::move(reads), {out});
  return out;
}

}  // namespace kiln::kernels::pointwise_detail
