#pragma once
// torchvision's Swin Transformer functions that torch.fx keeps as leaves
// (torch.fx.wrap): _get_relative_position_bias, _patch_merging_pad and
// shifted_window_attention (Swin V1, and V2's cosine attention with its
// logit_scale). Each is lowered as the
// ops torchvision's code runs, through the kernels of those ops (lower_piece);
// the shifted-window mask depends only on shapes and is made when lowering.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/shape/copies.hpp"
#include "kiln/kernels/shape/indexing.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace swin_detail {

using runtime::CallArg;
using runtime::Layout;
using runtime::ValueId;

// A reshape of `v` (a view where strides allow, else a copy).
inline ValueId reshaped(runtime::LowerContext& ctx, ValueId v, const std::vector<std::int64_t>& sizes) {
  shape_detail::reshape(ctx, v, sizes, false);
  return ctx.take_result().id;
}
inline ValueId permuted(runtime::LowerContext& ctx, ValueId v, const std::vector<std::int64_t>& dims) {
  return ctx.view(v, runtime::permuted(ctx.layout(v), dims));
}
inline ValueId padded(runtime::LowerContext& ctx, ValueId v, const std::vector<std::int64_t>& pad) {
  shape_detail::constant_pad(ctx, v, pad, 0.0);
  return ctx.take_result().id;
}

// _get_relative_position_bias(table, index, window_size): table[index] as
// [N, N, heads] (N = window_size[0] * window_size[1]), heads first, [1, heads, N, N].
struct RelativePositionBias {
  static void lower(runtime::LowerContext& ctx) {
    const ValueId table = ctx.tensor(0, "relative_position_bias_table");
    const ValueId index = ctx.tensor(1, "relative_position_index");
    const auto ws = ctx.ints_arg(2, "window_size");
    if (ws.size() != 2) ctx.fail("window_size must hold 2 sizes, got " + runtime::shape_str(ws));
    const Layout& tl = ctx.layout(table);
    const Layout& il = ctx.layout(index);
    if (tl.rank() == 0) ctx.fail("the table is 0-d");
    if (il.dtype != DType::int64 && il.dtype != DType::int32) ctx.fail("the index must be int64 or int32");
    const std::int64_t n = ws[0] * ws[1];
    shape_detail::IndexOperand op{0, tl.shape[0], tl.strides[0], index, il.dtype == DType::int64, il.strides};
    shape_detail::IndexTensor::lower_gather(ctx, table, {op}, il.shape);
    const ValueId rows = ctx.take_result().id;
    const ValueId nnh = reshaped(ctx, rows, {n, n, -1});
    const ValueId hnn_view = permuted(ctx, nnh, {2, 0, 1});
    const ValueId hnn = shape_detail::copy_into_new(ctx, hnn_view, Layout::contiguous(ctx.layout(hnn_view).shape, tl.dtype));
    ctx.set_result(ctx.view(hnn, runtime::unsqueezed(ctx.layout(hnn), 0)));
  }
};

// _patch_merging_pad(x): [..., H, W, C] padded to even H and W, then the four
// interleaved quarters x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]
// side by side on the channels: [..., H/2, W/2, 4C].
struct PatchMergingPad {
  static void lower(runtime::LowerContext& ctx) {
    const ValueId in = ctx.tensor(0, "x");
    const Layout& l = ctx.layout(in);
    if (l.rank() < 3) ctx.fail("the input must be [..., H, W, C], got " + runtime::shape_str(l.shape));
    const auto r = static_cast<std::int64_t>(l.rank());
    const std::int64_t h = l.shape[r - 3], w = l.shape[r - 2];
    const ValueId p = padded(ctx, in, {0, 0, 0, w % 2, 0, h % 2});
    std::vector<ValueId> parts;
    std::vector<Layout> layouts;
    for (const auto& [dh, dw] : std::initializer_list<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}}) {
      const auto rows = runtime::sliced(ctx.layout(p), r - 3, dh, std::nullopt, 2);
      const auto cols = runtime::sliced(rows.layout, r - 2, dw, std::nullopt, 2);
      parts.push_back(ctx.view(p, cols.layout, rows.offset + cols.offset));
      layouts.push_back(cols.layout);
    }
    shape_detail::concatenate(ctx, parts, layouts, r - 1);
  }
};

// Python's slice(start, stop) of n items, as [begin, end).
inline std::pair<std::int64_t, std::int64_t> python_slice(std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                                                          std::int64_t n) {
  auto at = [n](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + n : i, 0, n); };
  const std::int64_t b = start ? at(*start) : 0, e = stop ? at(*stop) : n;
  return {b, std::max(b, e)};
}

// The attention mask of shifted windows, [windows, N, N]: 0 between tokens of
// one region of the rolled map, -100 between tokens of different regions.
inline runtime::Tensor shifted_window_mask(std::int64_t ph, std::int64_t pw, const std::vector<std::int64_t>& ws,
                                           const std::vector<std::int64_t>& shift) {
  std::vector<float> region(static_cast<std::size_t>(ph * pw), 0.0f);
  const std::optional<std::int64_t> none;
  const std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>> hs[3] = {
      {0, -ws[0]}, {-ws[0], -shift[0]}, {-shift[0], none}};
  const std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>> wss[3] = {
      {0, -ws[1]}, {-ws[1], -shift[1]}, {-shift[1], none}};
  float count = 0;
  for (const auto& hsl : hs)
    for (const auto& wsl : wss) {
      const auto [h0, h1] = python_slice(hsl.first, hsl.second, ph);
      const auto [w0, w1] = python_slice(wsl.first, wsl.second, pw);
      for (std::int64_t i = h0; i < h1; ++i)
        for (std::int64_t j = w0; j < w1; ++j) region[static_cast<std::size_t>(i * pw + j)] = count;
      count += 1;
    }
  const std::int64_t nh = ph / ws[0], nw = pw / ws[1], n = ws[0] * ws[1];
  runtime::Tensor mask = runtime::Tensor::empty({nh * nw, n, n}, DType::float32);
  float* m = mask.data<float>();
  // Token t of window (a, b) sits at row a * ws0 + t / ws1, column b * ws1 + t % ws1.
  auto label = [&](std::int64_t win, std::int64_t t) {
    const std::int64_t a = win / nw, b = win % nw;
    return region[static_cast<std::size_t>((a * ws[0] + t / ws[1]) * pw + b * ws[1] + t % ws[1])];
  };
  for (std::int64_t win = 0; win < nh * nw; ++win)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) *m++ = label(win, j) - label(win, i) != 0 ? -100.0f : 0.0f;
  return mask;
}

// shifted_window_attention(input [B, H, W, C], qkv_weight, proj_weight,
// relative_position_bias, window_size, num_heads, shift_size, attention_dropout,
// dropout, qkv_bias, proj_bias, logit_scale): torchvision's steps, in its order.
struct ShiftedWindowAttention {
  struct Args {
    ValueId in, qkv_w, proj_w, bias;
    std::optional<ValueId> qkv_b, proj_b, logit_scale;
    std::vector<std::int64_t> ws, shift;
    std::int64_t heads;
  };
  static Args read(runtime::LowerContext& ctx) {
    Args a{ctx.tensor(0, "input"), ctx.tensor(1, "qkv_weight"), ctx.tensor(2, "proj_weight"),
           ctx.tensor(3, "relative_position_bias"), ctx.optional_tensor(9, "qkv_bias"), ctx.optional_tensor(10, "proj_bias"),
           ctx.optional_tensor(11, "logit_scale"), ctx.ints_arg(4, "window_size"), ctx.ints_arg(6, "shift_size"),
           ctx.int_arg(5, "num_heads")};
    // torchvision calls F.dropout with training left on: only p = 0 is deterministic.
    for (auto [pos, name] : std::initializer_list<std::pair<std::size_t, const char*>>{{7, "attention_dropout"}, {8, "dropout"}})
      if (ctx.scalar_arg(pos, name, 0.0) != 0.0) ctx.fail(std::string(name) + " is not 0: dropout drops at random while the graph runs");
    if (a.ws.size() != 2 || a.shift.size() != 2) ctx.fail("window_size and shift_size must hold 2 sizes each");
    if (a.ws[0] <= 0 || a.ws[1] <= 0) ctx.fail("window_size must be positive, got " + runtime::shape_str(a.ws));
    const Layout& l = ctx.layout(a.in);
    if (l.rank() != 4) ctx.fail("the input must be [B, H, W, C], got " + runtime::shape_str(l.shape));
    if (a.heads <= 0 || l.shape[3] % a.heads != 0)
      ctx.fail("num_heads " + std::to_string(a.heads) + " does not divide the " + std::to_string(l.shape[3]) + " channels");
    return a;
  }

  static void lower(runtime::LowerContext& ctx) {
    Args a = read(ctx);
    const Layout l = ctx.layout(a.in);
    const std::int64_t B = l.shape[0], H = l.shape[1], W = l.shape[2], C = l.shape[3];
    const auto& ws = a.ws;
    ValueId x = padded(ctx, a.in, {0, 0, 0, (ws[1] - W % ws[1]) % ws[1], 0, (ws[0] - H % ws[0]) % ws[0]});
    const std::int64_t ph = ctx.layout(x).shape[1], pw = ctx.layout(x).shape[2];
    std::vector<std::int64_t> shift = a.shift;
    if (ws[0] >= ph) shift[0] = 0;
    if (ws[1] >= pw) shift[1] = 0;
    const bool shifted = shift[0] + shift[1] > 0;
    if (shifted) x = piece(ctx, "torch.roll", {CallArg::of_tensor(x), CallArg::of(ArgList{-shift[0], -shift[1]}), CallArg::of(ArgList{1, 2})});
    const std::int64_t nw = (ph / ws[0]) * (pw / ws[1]), n = ws[0] * ws[1], hd = C / a.heads;
    x = reshaped(ctx, x, {B, ph / ws[0], ws[0], pw / ws[1], ws[1], C});
    x = reshaped(ctx, permuted(ctx, x, {0, 1, 3, 2, 4, 5}), {B * nw, n, C});
    auto opt = [](std::optional<ValueId> v) { return v ? CallArg::of_tensor(*v) : CallArg::of(Arg()); };
    if (a.logit_scale && a.qkv_b) a.qkv_b = key_bias_cleared(ctx, *a.qkv_b);
    ValueId qkv = piece(ctx, "torch.nn.functional.linear", {CallArg::of_tensor(x), CallArg::of_tensor(a.qkv_w), opt(a.qkv_b)});
    qkv = permuted(ctx, reshaped(ctx, qkv, {B * nw, n, 3, a.heads, hd}), {2, 0, 3, 1, 4});
    auto part = [&](std::int64_t i) {
      auto s = runtime::selected(ctx.layout(qkv), 0, i);
      return ctx.view(qkv, s.layout, s.offset);
    };
    const ValueId attn = a.logit_scale ? cosine_scores(ctx, part(0), part(1), *a.logit_scale)
                                       : dot_scores(ctx, part(0), part(1), std::pow(static_cast<double>(hd), -0.5));
    std::optional<ValueId> mask;
    if (shifted) mask = ctx.constant_value(shifted_window_mask(ph, pw, ws, shift), ctx.node().name() + ".attn_mask");
    add_bias_and_mask(ctx, attn, a.bias, mask, nw);
    const ValueId probs = piece(ctx, "torch.nn.functional.softmax", {CallArg::of_tensor(attn), CallArg::of(Arg(std::int64_t{-1}))});
    ValueId o = piece(ctx, "torch.matmul", {CallArg::of_tensor(probs), CallArg::of_tensor(part(2))});
    o = reshaped(ctx, ctx.view(o, runtime::transposed(ctx.layout(o), 1, 2)), {B * nw, n, C});
    o = piece(ctx, "torch.nn.functional.linear", {CallArg::of_tensor(o), CallArg::of_tensor(a.proj_w), opt(a.proj_b)});
    o = reshaped(ctx, o, {B, ph / ws[0], pw / ws[1], ws[0], ws[1], C});
    o = reshaped(ctx, permuted(ctx, o, {0, 1, 3, 2, 4, 5}), {B, ph, pw, C});
    if (shifted) o = piece(ctx, "torch.roll", {CallArg::of_tensor(o), CallArg::of(ArgList{shift[0], shift[1]}), CallArg::of(ArgList{1, 2})});
    const auto rows = runtime::sliced(ctx.layout(o), 1, 0, H, 1);
    const auto cols = runtime::sliced(rows.layout, 2, 0, W, 1);
    const ValueId kept = ctx.view(o, cols.layout, rows.offset + cols.offset);
    ctx.set_result(ctx.layout(kept).is_contiguous() ? kept
                                                    : shape_detail::copy_into_new(ctx, kept, Layout::contiguous(cols.layout.shape, l.dtype)));
  }

  // V1: (q * scale) @ k^T (PyTorch scales q before the product).
  static ValueId dot_scores(runtime::LowerContext& ctx, ValueId q, ValueId k, double scale) {
    const ValueId kt = ctx.view(k, runtime::transposed(ctx.layout(k), -2, -1));
    return piece(ctx, "torch.matmul", {CallArg::of_tensor(scaled(ctx, q, scale)), CallArg::of_tensor(kt)});
  }

  // V2: normalize(q) @ normalize(k)^T, times exp(min(logit_scale, log 100)) per head.
  static ValueId cosine_scores(runtime::LowerContext& ctx, ValueId q, ValueId k, ValueId logit_scale) {
    auto normalized = [&](ValueId v) {
      return piece(ctx, "torch.nn.functional.normalize", {CallArg::of_tensor(v), CallArg::of(Arg(2.0)), CallArg::of(Arg(std::int64_t{-1}))});
    };
    const ValueId qn = normalized(q), kn = normalized(k);
    const ValueId attn = piece(ctx, "torch.matmul", {CallArg::of_tensor(qn), CallArg::of_tensor(ctx.view(kn, runtime::transposed(ctx.layout(kn), -2, -1)))});
    scale_by_head(ctx, attn, logit_scale);
    return attn;
  }

  // attn [B * windows, heads, N, N] *= exp(min(logit_scale[head], log 100)), in float32 as PyTorch computes it.
  static void scale_by_head(runtime::LowerContext& ctx, ValueId attn, ValueId logit_scale) {
    const Layout al = ctx.layout(attn);
    Layout sl = ctx.layout(logit_scale);
    if (sl.dtype != DType::float32 || sl.numel() != al.shape[1])
      ctx.fail("logit_scale must hold one float32 per head (" + std::to_string(al.shape[1]) + "), got " +
               std::string(dtype_name(sl.dtype)) + " " + runtime::shape_str(sl.shape));
    if (!sl.is_contiguous()) logit_scale = shape_detail::copy_into_new(ctx, logit_scale, Layout::contiguous(sl.shape, sl.dtype));
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   float* a = f.data_as<float>(attn);
                   const float* ls = f.data_as<float>(logit_scale);
                   const float cap = static_cast<float>(std::log(100.0));
                   for (std::int64_t h = 0; h < al.shape[1]; ++h) {
                     const float s = std::exp(std::min(ls[h], cap));
                     for (std::int64_t bw = 0; bw < al.shape[0]; ++bw)
                       for (std::int64_t i = 0; i < al.shape[2]; ++i)
                         for (std::int64_t j = 0; j < al.shape[3]; ++j)
                           a[bw * al.strides[0] + h * al.strides[1] + i * al.strides[2] + j * al.strides[3]] *= s;
                   }
                 }),
                 {attn, logit_scale}, {attn});
  }

  // V2 zeroes the key third of its qkv bias, in a copy (the weight stays as it is).
  static ValueId key_bias_cleared(runtime::LowerContext& ctx, ValueId bias) {
    const Layout bl = ctx.layout(bias);
    if (bl.rank() != 1 || bl.dtype != DType::float32)
      ctx.fail("qkv_bias must be a 1-d float32 tensor, got " + std::string(dtype_name(bl.dtype)) + " " + runtime::shape_str(bl.shape));
    const ValueId out = shape_detail::copy_into_new(ctx, bias, Layout::contiguous(bl.shape, bl.dtype));
    const std::int64_t third = bl.shape[0] / 3;
    ctx.add_step(runtime::make_step([out, third](runtime::Frame& f) { std::fill_n(f.data_as<float>(out) + third, third, 0.0f); }),
                 {out}, {out});
    return out;
  }

  // q * scale into a new buffer (PyTorch scales q before the product).
  static ValueId scaled(runtime::LowerContext& ctx, ValueId q, double scale) {
    const ValueId out = shape_detail::copy_into_new(ctx, q, Layout::contiguous(ctx.layout(q).shape, ctx.layout(q).dtype));
    const auto s = static_cast<float>(scale);
    ctx.add_step(runtime::make_step([out, s](runtime::Frame& f) {
                   float* p = f.data_as<float>(out);
                   for (std::int64_t i = 0, e = f.layout(out).numel(); i < e; ++i) p[i] *= s;
                 }),
                 {out}, {out});
    return out;
  }

  // attn [B * windows, heads, N, N] += bias (broadcast), then += mask[window] where shifted.
  static void add_bias_and_mask(runtime::LowerContext& ctx, ValueId attn, ValueId bias, std::optional<ValueId> mask,
                                std::int64_t windows) {
    const Layout al = ctx.layout(attn);
    if (al.dtype != DType::float32 || ctx.layout(bias).dtype != DType::float32) ctx.fail("attention in float32 only");
    Layout bl;
    try {
      bl = runtime::expanded(ctx.layout(bias), al.shape);
    } catch (const runtime::ShapeError&) {
      ctx.fail("relative_position_bias " + runtime::shape_str(ctx.layout(bias).shape) + " does not broadcast to the attention's " +
               runtime::shape_str(al.shape));
    }
    std::vector<ValueId> reads{attn, bias};
    if (mask) reads.push_back(*mask);
    const ValueId m = mask.value_or(0);
    const bool has_mask = mask.has_value();
    ctx.add_step(runtime::make_step([=](runtime::Frame& f) {
                   float* a = f.data_as<float>(attn);
                   const float* b = f.data_as<float>(bias);
                   const float* mk = has_mask ? f.data_as<float>(m) : nullptr;
                   const std::int64_t n = al.shape[2], heads = al.shape[1];
                   for (std::int64_t bw = 0; bw < al.shape[0]; ++bw)
                     for (std::int64_t h = 0; h < heads; ++h)
                       for (std::int64_t i = 0; i < n; ++i)
                         for (std::int64_t j = 0; j < n; ++j) {
                           float& v = a[bw * al.strides[0] + h * al.strides[1] + i * al.strides[2] + j * al.strides[3]];
                           v = v + b[bw * bl.strides[0] + h * bl.strides[1] + i * bl.strides[2] + j * bl.strides[3]];
                           if (mk) v = v + mk[((bw % windows) * n + i) * n + j];
                         }
                 }),
                 reads, {attn});
  }
};

}  // namespace swin_detail

using swin_kernels = KernelGroup<
    KernelEntry<"torchvision.models.swin_transformer._get_relative_position_bias", swin_detail::RelativePositionBias>,
    KernelEntry<"torchvision.models.swin_transformer._patch_merging_pad", swin_detail::PatchMergingPad>,
    KernelEntry<"torchvision.models.swin_transformer.shifted_window_attention", swin_detail::ShiftedWindowAttention>>;

}  // namespace kiln::kernels
