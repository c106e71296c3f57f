#pragma once
// Bilinear maps on float32: torch.bilinear / F.bilinear (and, through
// modules.hpp, the Bilinear module), y = x1^T W[o] x2 + b[o] over the last
// dims of x1 [..., I] and x2 [..., J] with W [O, I, J]; and
// aten._trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim),
// what bilinear becomes at aten level: each input gets size-1 dims inserted at
// its expand positions (of the common rank), the three broadcast and multiply,
// and the sumdim dims are summed away. Bilinear is that product with
// expands chosen to line x1, W and x2 up, so both run one loop: every output
// element sums its products over the summed dims (unroll_dim only changes
// PyTorch's evaluation order, not the result).
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace bilinear_detail {

inline constexpr std::int64_t kParallelElements = 32768;

// The three inputs broadcast to one shape, split into output dims and summed dims.
struct TrilinearPlan {
  std::array<runtime::ValueId, 3> in{};
  runtime::ValueId out = 0;
  std::optional<runtime::ValueId> bias;  // added along the output's last dim (bilinear)
  std::int64_t bias_stride = 0, last_size = 1;
  runtime::Shape out_shape, sum_shape;
  std::array<std::vector<std::int64_t>, 3> out_strides, sum_strides;
  std::int64_t out_numel = 1, sum_numel = 1;
  std::vector<std::array<std::int64_t, 3>> sum_offsets;  // per summed index, made once at lowering
};

// Which of `total` dims `dims` names; an error unless they are distinct and in range.
inline std::vector<bool> marked_dims(const runtime::LowerContext& ctx, const std::vector<std::int64_t>& dims, std::size_t total,
                                     const std::string& what) {
  std::vector<bool> marked(total, false);
  for (const std::int64_t d : dims) {
    if (d < 0 || d >= static_cast<std::int64_t>(total) || marked[static_cast<std::size_t>(d)])
      ctx.fail(what + " " + runtime::shape_str(dims) + " must hold distinct dims below " + std::to_string(total));
    marked[static_cast<std::size_t>(d)] = true;
  }
  return marked;
}

// `l` with size-1 dims inserted at the `expand` positions, to rank `total`.
inline runtime::Layout expand_to(const runtime::LowerContext& ctx, const runtime::Layout& l, const std::vector<std::int64_t>& expand,
                                 std::size_t total, const std::string& what) {
  const std::vector<bool> inserted = marked_dims(ctx, expand, total, what);
  runtime::Layout out{l.dtype, {}, {}};
  for (std::size_t d = 0, k = 0; d < total; ++d) {
    out.shape.push_back(inserted[d] ? 1 : l.shape[k]);
    out.strides.push_back(inserted[d] ? 0 : l.strides[k]);
    if (!inserted[d]) ++k;
  }
  return out;
}

// Offsets of the three inputs at flat index `f` of `shape` (row-major), through `strides`.
inline std::array<std::int64_t, 3> offsets_at(std::int64_t f, const runtime::Shape& shape,
                                              const std::array<std::vector<std::int64_t>, 3>& strides) {
  std::array<std::int64_t, 3> off{};
  for (std::size_t k = shape.size(); k-- > 0;) {
    const std::int64_t i = f % shape[k];
    f /= shape[k];
    for (std::size_t t = 0; t < 3; ++t) off[t] += i * strides[t][k];
  }
  return off;
}

// Plans the product of `in` (each with its expand list) summed over `sumdim`; the output is a new buffer.
inline TrilinearPlan plan_trilinear(runtime::LowerContext& ctx, const std::array<runtime::ValueId, 3>& in,
                                    const std::array<std::vector<std::int64_t>, 3>& expand, const std::vector<std::int64_t>& sumdim) {
  const std::array<runtime::Layout, 3> l{ctx.layout(in[0]), ctx.layout(in[1]), ctx.layout(in[2])};
  for (const auto& x : l)
    if (x.dtype != DType::float32) ctx.fail("takes float32 inputs, got " + std::string(dtype_name(x.dtype)));
  const std::size_t total = l[0].rank() + expand[0].size();
  for (std::size_t i = 1; i < 3; ++i)
    if (l[i].rank() + expand[i].size() != total)
      ctx.fail("input " + std::to_string(i + 1) + " " + runtime::shape_str(l[i].shape) + " with expand" + std::to_string(i + 1) + " " +
               runtime::shape_str(expand[i]) + " does not reach the rank " + std::to_string(total) + " of input 1 with its expands");
  std::array<runtime::Layout, 3> e;
  for (std::size_t i = 0; i < 3; ++i) e[i] = expand_to(ctx, l[i], expand[i], total, "expand" + std::to_string(i + 1));
  const runtime::Shape shape = shape_detail::checked(
      ctx, [&] { return runtime::broadcast_shapes(e[0].shape, runtime::broadcast_shapes(e[1].shape, e[2].shape)); });
  for (auto& x : e) x = runtime::expanded(x, shape);
  const std::vector<bool> summed = marked_dims(ctx, sumdim, total, "sumdim");
  TrilinearPlan p;
  p.in = in;
  for (std::size_t d = 0; d < total; ++d) {
    (summed[d] ? p.sum_shape : p.out_shape).push_back(shape[d]);
    (summed[d] ? p.sum_numel : p.out_numel) *= shape[d];
    for (std::size_t i = 0; i < 3; ++i) (summed[d] ? p.sum_strides : p.out_strides)[i].push_back(e[i].strides[d]);
  }
  for (std::int64_t k = 0; k < p.sum_numel; ++k) p.sum_offsets.push_back(offsets_at(k, p.sum_shape, p.sum_strides));
  p.out = ctx.buffer(p.out_shape, DType::float32);
  return p;
}

inline void run_trilinear(const runtime::Frame& fr, const TrilinearPlan& p) {
  const std::array<const float*, 3> x{fr.data_as<float>(p.in[0]), fr.data_as<float>(p.in[1]), fr.data_as<float>(p.in[2])};
  const float* bias = p.bias ? fr.data_as<float>(*p.bias) : nullptr;
  float* y = fr.data_as<float>(p.out);
  auto one = [&](std::int64_t o) {
    const auto base = offsets_at(o, p.out_shape, p.out_strides);
    double acc = 0;
    for (const auto& off : p.sum_offsets)
      acc += double(x[0][base[0] + off[0]]) * x[1][base[1] + off[1]] * x[2][base[2] + off[2]];
    if (bias) acc += bias[(o % p.last_size) * p.bias_stride];
    y[o] = static_cast<float>(acc);
  };
  if (fr.threads() > 1 && p.out_numel > 1 && p.out_numel * p.sum_numel >= kParallelElements) {
#pragma omp parallel for num_threads(fr.threads()) schedule(static)
    for (std::int64_t o = 0; o < p.out_numel; ++o) one(o);
  } else {
    for (std::int64_t o = 0; o < p.out_numel; ++o) one(o);
  }
}

inline void add_trilinear_step(runtime::LowerContext& ctx, const TrilinearPlan& p) {
  std::vector<runtime::ValueId> reads(p.in.begin(), p.in.end());
  if (p.bias) reads.push_back(*p.bias);
  ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_trilinear(fr, p); }), reads, {p.out});
  ctx.set_result(p.out);
}

// aten._trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1).
struct Trilinear {
  static void lower(runtime::LowerContext& ctx) {
    (void)ctx.int_arg(7, "unroll_dim", 1);
    add_trilinear_step(ctx, plan_trilinear(ctx, {ctx.tensor(0, "i1"), ctx.tensor(1, "i2"), ctx.tensor(2, "i3")},
                                           {ctx.ints_arg(3, "expand1"), ctx.ints_arg(4, "expand2"), ctx.ints_arg(5, "expand3")},
                                           ctx.ints_arg(6, "sumdim")));
  }
};

// The checks torch.bilinear makes, as errors naming the shapes.
inline void check_bilinear(const runtime::LowerContext& ctx, const runtime::Layout& a, const runtime::Layout& b,
                           const runtime::Layout& w) {
  if (a.rank() == 0 || a.rank() != b.rank() || !std::equal(a.shape.begin(), a.shape.end() - 1, b.shape.begin()))
    ctx.fail("input1 " + runtime::shape_str(a.shape) + " and input2 " + runtime::shape_str(b.shape) +
             " must have the same dims but the last");
  if (w.rank() != 3 || w.shape[1] != a.shape.back() || w.shape[2] != b.shape.back())
    ctx.fail("weight " + runtime::shape_str(w.shape) + " must be [out, " + std::to_string(a.shape.back()) + ", " +
             std::to_string(b.shape.back()) + "] for input1 " + runtime::shape_str(a.shape) + " and input2 " +
             runtime::shape_str(b.shape));
}

// torch.bilinear(input1, input2, weight, bias=None): [..., I] x [O, I, J] x [..., J] -> [..., O], as
// _trilinear over [..., O, I, J] summing I and J.
struct Bilinear {
  static void lower(runtime::LowerContext& ctx) {
    const runtime::ValueId a = ctx.tensor(0, "input1"), b = ctx.tensor(1, "input2"), w = ctx.tensor(2, "weight");
    const runtime::Layout la = ctx.layout(a), lb = ctx.layout(b), lw = ctx.layout(w);
    check_bilinear(ctx, la, lb, lw);
    const auto lead = static_cast<std::int64_t>(la.rank()) - 1;
    std::vector<std::int64_t> lead_dims;
    for (std::int64_t d = 0; d < lead; ++d) lead_dims.push_back(d);
    const auto bias = ctx.optional_tensor(3, "bias");
    if (bias) {
      const runtime::Layout& lbias = ctx.layout(*bias);
      if (lbias.dtype != DType::float32 || lbias.rank() != 1 || lbias.shape[0] != lw.shape[0])
        ctx.fail("bias " + runtime::shape_str(lbias.shape) + " (" + std::string(dtype_name(lbias.dtype)) + ") must be float32 [" +
                 std::to_string(lw.shape[0]) + "]");
    }
    TrilinearPlan p = plan_trilinear(ctx, {a, w, b}, {std::vector<std::int64_t>{lead, lead + 2}, lead_dims, {lead, lead + 1}},
                                     {lead + 1, lead + 2});
    if (bias) {
      p.bias = *bias;
      p.bias_stride = ctx.layout(*bias).strides[0];
      p.last_size = lw.shape[0];
    }
    add_trilinear_step(ctx, p);
  }
};

}  // namespace bilinear_detail

using bilinear_kernels = KernelGroup<
    KernelEntry<"torch.bilinear", bilinear_detail::Bilinear>,
    KernelEntry<"torch.nn.functional.bilinear", bilinear_detail::Bilinear>,
    KernelEntry<"aten.bilinear.default", bilinear_detail::Bilinear>,
    KernelEntry<"aten._trilinear.default", bilinear_detail::Trilinear>>;

}  // namespace kiln::kernels
