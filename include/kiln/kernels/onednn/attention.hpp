#pragma once
// Multi-head attention as torch.nn.MultiheadAttention computes it in eval
// mode, from the products and the softmax of onednn/: the packed (or
// separate) in-projection, each head's scaled dot product read in place from
// the projection (no per-head copies), the masks, the softmax, the weighted
// sum of the values, one copy back to token order and the out-projection.
// Three ops use it: F.multi_head_attention_forward (sequence first),
// aten._native_multi_head_attention (batch first; what the module runs in
// eval without grad) and aten._transformer_encoder_layer_fwd (a whole
// nn.TransformerEncoderLayer: attention, residuals, layer norms, feed-forward).
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/layer_norm.hpp"
#include "kiln/kernels/onednn/matmul.hpp"
#include "kiln/kernels/onednn/softmax.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace onednn_detail {

// One attention call. Inputs are [L, N, E] (sequence first) or [N, L, E]
// (batch_first); key and value have S tokens.
struct AttentionSpec {
  ValueId query = 0, key = 0, value = 0;
  bool batch_first = false;
  std::int64_t heads = 1;
  ValueId in_weight = 0;  // [3E, E], rows q, k, v; unused where separate weights are given
  std::optional<ValueId> in_bias;
  std::optional<ValueId> q_weight, k_weight, v_weight;  // use_separate_proj_weight
  ValueId out_weight = 0;
  std::optional<ValueId> out_bias;
  std::optional<ValueId> attn_mask;         // [L, S] or [N * heads, L, S]: float added, bool true = -inf
  std::optional<ValueId> key_padding_mask;  // [N, S], likewise
  bool need_weights = false, average_weights = true;
  std::optional<ValueId> out_addend;  // summed into the output (a transformer layer's residual)
};
struct AttentionResult {
  ValueId out = 0;
  std::optional<ValueId> weights;  // [N, L, S] averaged over heads, else [N, heads, L, S]
};

namespace attention_detail {

// x [A, B, K] @ rows [row0, row0 + rows) of `weight` ([*, K]) transposed, plus that slice of `bias`, then `activation`.
inline ValueId project(runtime::LowerContext& ctx, ValueId x, ValueId weight, std::optional<ValueId> bias, std::int64_t row0,
                       std::int64_t rows, std::optional<dnnl::algorithm> activation = std::nullopt) {
  const Layout& w = ctx.layout(weight);
  const Layout& lx = ctx.layout(x);
  if (w.rank() != 2 || w.shape[1] != lx.shape.back() || w.shape[0] < row0 + rows)
    ctx.fail("a projection weight of " + runtime::shape_str(w.shape) + " does not fit an input of " +
             runtime::shape_str(lx.shape));
  MatmulSpec s{x, ctx.view(weight, Layout{w.dtype, {w.shape[1], rows}, {w.strides[1], w.strides[0]}}, row0 * w.strides[0])};
  s.fold_epilogue = false;
  s.activation = activation;
  if (bias) {
    const Layout& b = ctx.layout(*bias);
    if (b.rank() != 1 || b.shape[0] < row0 + rows)
      ctx.fail("a projection bias of " + runtime::shape_str(b.shape) + " does not fit " + std::to_string(row0 + rows) + " rows");
    s.bias = ctx.view(*bias, Layout{b.dtype, {rows}, {b.strides[0]}}, row0 * b.strides[0]);
  }
  runtime::Shape out = lx.shape;
  out.back() = rows;
  return lower_flattened(ctx, s, out);
}

// Columns [col0, col0 + cols) of a projection [A, B, *].
inline ValueId columns(runtime::LowerContext& ctx, ValueId p, std::int64_t col0, std::int64_t cols) {
  const Layout& l = ctx.layout(p);
  return ctx.view(p, Layout{l.dtype, {l.shape[0], l.shape[1], cols}, l.strides}, col0 * l.strides[2]);
}

// A projection [A, B, heads * D] seen as [N, heads, T, D], or as [N, heads, D, T] (`transpose`).
inline ValueId heads_view(runtime::LowerContext& ctx, ValueId p, bool batch_first, std::int64_t heads, bool transpose) {
  const Layout& l = ctx.layout(p);
  const std::int64_t n = batch_first ? 0 : 1, t = 1 - n, D = l.shape[2] / heads;
  runtime::Shape shape{l.shape[n], heads, l.shape[t], D};
  runtime::Shape strides{l.strides[n], D * l.strides[2], l.strides[t], l.strides[2]};
  if (transpose) {
    std::swap(shape[2], shape[3]);
    std::swap(strides[2], strides[3]);
  }
  return ctx.view(p, Layout{l.dtype, shape, strides});
}

// The projected q, k and v: one product per distinct input (self-attention is one product of all 3E rows).
struct Projected {
  ValueId q = 0, k = 0, v = 0;
};
inline Projected project_qkv(runtime::LowerContext& ctx, const AttentionSpec& a, std::int64_t E) {
  Projected p;
  if (a.q_weight) {
    p.q = project(ctx, a.query, *a.q_weight, a.in_bias, 0, E);
    // The key's and value's biases are the in-projection bias's later thirds; their weights start at row 0.
    auto shifted = [&](ValueId x, ValueId w, std::int64_t b0) {
      std::optional<ValueId> b;
      if (a.in_bias) {
        const Layout& bl = ctx.layout(*a.in_bias);
        b = ctx.view(*a.in_bias, Layout{bl.dtype, {E}, bl.strides}, b0 * bl.strides[0]);
      }
      return project(ctx, x, w, b, 0, E);
    };
    p.k = shifted(a.key, *a.k_weight, E);
    p.v = shifted(a.value, *a.v_weight, 2 * E);
    return p;
  }
  if (a.query == a.key && a.key == a.value) {
    const ValueId qkv = project(ctx, a.query, a.in_weight, a.in_bias, 0, 3 * E);
    return {columns(ctx, qkv, 0, E), columns(ctx, qkv, E, E), columns(ctx, qkv, 2 * E, E)};
  }
  p.q = project(ctx, a.query, a.in_weight, a.in_bias, 0, E);
  if (a.key == a.value) {
    const ValueId kv = project(ctx, a.key, a.in_weight, a.in_bias, E, 2 * E);
    p.k = columns(ctx, kv, 0, E);
    p.v = columns(ctx, kv, E, E);
  } else {
    p.k = project(ctx, a.key, a.in_weight, a.in_bias, E, E);
    p.v = project(ctx, a.value, a.in_weight, a.in_bias, 2 * E, E);
  }
  return p;
}

// A mask read as [N, heads, L, S] (strides 0 where it broadcasts).
struct MaskTerm {
  ValueId value;
  bool is_bool;
  std::array<std::int64_t, 4> strides;
};
inline MaskTerm mask_term(runtime::LowerContext& ctx, ValueId m, const char* name, const runtime::Shape& expected,
                          std::array<std::int64_t, 4> dim_of) {
  const Layout& l = ctx.layout(m);
  if (l.dtype != DType::float32 && l.dtype != DType::bool_ && l.dtype != DType::uint8)
    ctx.fail(std::string("argument '") + name + "' must be float32 or bool, got " + std::string(dtype_name(l.dtype)));
  if (l.shape != expected)
    ctx.fail(std::string("argument '") + name + "' has shape " + runtime::shape_str(l.shape) + ", expected " +
             runtime::shape_str(expected));
  MaskTerm t{m, l.dtype != DType::float32, {0, 0, 0, 0}};
  for (std::size_t k = 0; k < 4; ++k)
    if (dim_of[k] >= 0) t.strides[k] = l.strides[static_cast<std::size_t>(dim_of[k])];
  return t;
}

// scores [N, heads, L, S] += each mask (a bool one as -inf where true), in place.
inline void add_masks(runtime::LowerContext& ctx, ValueId scores, std::vector<MaskTerm> terms) {
  const runtime::Shape shape = ctx.layout(scores).shape;
  std::vector<ValueId> reads{scores};
  for (const MaskTerm& t : terms) reads.push_back(t.value);
  ctx.add_step(runtime::make_step([scores, shape, terms](runtime::Frame& f) {
                 float* s = f.data_as<float>(scores);
                 const float inf = std::numeric_limits<float>::infinity();
                 std::int64_t i = 0;
                 for (std::int64_t n = 0; n < shape[0]; ++n)
                   for (std::int64_t h = 0; h < shape[1]; ++h)
                     for (std::int64_t l = 0; l < shape[2]; ++l)
                       for (std::int64_t c = 0; c < shape[3]; ++c, ++i)
                         for (const MaskTerm& t : terms) {
                           const std::int64_t at = n * t.strides[0] + h * t.strides[1] + l * t.strides[2] + c * t.strides[3];
                           if (t.is_bool)
                             s[i] = f.data_as<std::uint8_t>(t.value)[at] ? -inf : s[i];
                           else
                             s[i] += f.data_as<float>(t.value)[at];
                         }
               }),
               reads, {scores});
}

// The masks of `a` for scores of [N, heads, L, S].
inline std::vector<MaskTerm> masks(runtime::LowerContext& ctx, const AttentionSpec& a, const runtime::Shape& scores) {
  const std::int64_t N = scores[0], H = scores[1], L = scores[2], S = scores[3];
  std::vector<MaskTerm> terms;
  if (a.attn_mask) {
    if (ctx.layout(*a.attn_mask).rank() == 3) {
      // [N * heads, L, S]: n and h split the first dim.
      const MaskTerm t = mask_term(ctx, *a.attn_mask, "attn_mask", {N * H, L, S}, {0, -1, 1, 2});
      terms.push_back({t.value, t.is_bool, {H * t.strides[0], t.strides[0], t.strides[2], t.strides[3]}});
    } else {
      terms.push_back(mask_term(ctx, *a.attn_mask, "attn_mask", {L, S}, {-1, -1, 0, 1}));
    }
  }
  if (a.key_padding_mask) {
    terms.push_back(mask_term(ctx, *a.key_padding_mask, "key_padding_mask", {N, S}, {0, -1, -1, 1}));
    if (!terms.back().is_bool && a.attn_mask)
      ctx.fail("a float key_padding_mask together with attn_mask is not supported (PyTorch fills a bool one)");
  }
  return terms;
}

// weights [N, heads, L, S] averaged over the heads: [N, L, S], summed in head order then divided, as PyTorch does.
inline ValueId average_heads(runtime::LowerContext& ctx, ValueId probs) {
  const runtime::Shape s = ctx.layout(probs).shape;
  const ValueId out = ctx.buffer(runtime::Shape{s[0], s[2], s[3]}, DType::float32);
  ctx.add_step(runtime::make_step([probs, out, s](runtime::Frame& f) {
                 const float* p = f.data_as<float>(probs);
                 float* o = f.data_as<float>(out);
                 const std::int64_t plane = s[2] * s[3];
                 const auto H = static_cast<float>(s[1]);
                 for (std::int64_t n = 0; n < s[0]; ++n) {
                   float* on = o + n * plane;
                   const float* pn = p + n * s[1] * plane;
                   std::copy(pn, pn + plane, on);
                   for (std::int64_t h = 1; h < s[1]; ++h)
                     for (std::int64_t i = 0; i < plane; ++i) on[i] += pn[h * plane + i];
                   for (std::int64_t i = 0; i < plane; ++i) on[i] /= H;
                 }
               }),
               {probs}, {out});
  return out;
}

}  // namespace attention_detail

// Lowers one attention call (see AttentionSpec); the node's result is left to the caller.
inline AttentionResult lower_attention(runtime::LowerContext& ctx, const AttentionSpec& a) {
  using namespace attention_detail;
  const Layout lq = ctx.layout(a.query), lk = ctx.layout(a.key), lv = ctx.layout(a.value);
  if (lq.rank() != 3 || lk.rank() != 3 || lv.rank() != 3)
    ctx.fail("query, key and value must be 3-d, got " + runtime::shape_str(lq.shape) + ", " + runtime::shape_str(lk.shape) +
             " and " + runtime::shape_str(lv.shape));
  const std::size_t nd = a.batch_first ? 0 : 1, td = 1 - nd;
  const std::int64_t E = lq.shape[2], H = a.heads, N = lq.shape[nd], L = lq.shape[td], S = lk.shape[td];
  if (H <= 0 || E % H != 0) ctx.fail("embed_dim " + std::to_string(E) + " is not divisible by num_heads " + std::to_string(H));
  if (lk.shape[nd] != N || lv.shape[nd] != N || lv.shape[td] != S)
    ctx.fail("query " + runtime::shape_str(lq.shape) + ", key " + runtime::shape_str(lk.shape) + " and value " +
             runtime::shape_str(lv.shape) + " do not agree on batch and sequence sizes");
  const std::int64_t D = E / H;
  const Projected p = project_qkv(ctx, a, E);

  // scores = q k^T / sqrt(D) (the scale as the product's output scale), masked, softmaxed.
  MatmulSpec qk{heads_view(ctx, p.q, a.batch_first, H, false), heads_view(ctx, p.k, a.batch_first, H, true)};
  qk.alpha = 1.0 / std::sqrt(static_cast<double>(D));
  qk.fold_epilogue = false;
  const ValueId scores = lower_matmul(ctx, qk, ctx.layout(qk.a), ctx.layout(qk.b));
  if (auto terms = masks(ctx, a, {N, H, L, S}); !terms.empty()) add_masks(ctx, scores, std::move(terms));
  const ValueId probs = lower_softmax(ctx, scores, -1, false);

  // Each head's weighted values [N, H, L, D], copied to token order [.., .., H, D].
  MatmulSpec pv{probs, heads_view(ctx, p.v, a.batch_first, H, false)};
  pv.fold_epilogue = false;
  const ValueId ctxv = lower_matmul(ctx, pv, ctx.layout(pv.a), ctx.layout(pv.b));
  const std::vector<std::int64_t> order = a.batch_first ? std::vector<std::int64_t>{0, 2, 1, 3}   // [N, L, H, D]
                                                        : std::vector<std::int64_t>{2, 0, 1, 3};  // [L, N, H, D]
  const ValueId tokens =
      shape_detail::copy_into_new(ctx, ctx.view(ctxv, runtime::permuted(ctx.layout(ctxv), order)),
                                  Layout::contiguous(a.batch_first ? runtime::Shape{N, L, H, D} : runtime::Shape{L, N, H, D}));

  MatmulSpec out{ctx.view(tokens, Layout::contiguous(runtime::Shape{lq.shape[0], lq.shape[1], E})), 0};
  const Layout& w = ctx.layout(a.out_weight);
  if (w.rank() != 2 || w.shape[1] != E)
    ctx.fail("out_proj_weight " + runtime::shape_str(w.shape) + " does not take " + std::to_string(E) + " features");
  out.b = ctx.view(a.out_weight, runtime::transposed(w, 0, 1));
  out.bias = a.out_bias;
  out.addend = a.out_addend;
  out.fold_epilogue = false;
  AttentionResult r;
  r.out = lower_flattened(ctx, out, runtime::Shape{lq.shape[0], lq.shape[1], w.shape[0]});
  if (a.need_weights) r.weights = a.average_weights ? average_heads(ctx, probs) : probs;
  return r;
}

// F.multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
// in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
// out_proj_weight, out_proj_bias, training=True, key_padding_mask=None,
// need_weights=True, attn_mask=None, use_separate_proj_weight=False,
// q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
// static_v=None, average_attn_weights=True) -> (output, weights or None).
// Sequence first; a 2-d query is one unbatched sequence.
struct FunctionalMultiHeadAttention {
  static void lower(runtime::LowerContext& ctx) {
    for (auto [pos, name] : {std::pair<std::size_t, const char*>{7, "bias_k"}, {8, "bias_v"}, {21, "static_k"}, {22, "static_v"}})
      if (ctx.has(pos, name)) ctx.fail(std::string("argument '") + name + "' is set; only attention without it is supported");
    if (ctx.bool_arg(9, "add_zero_attn", false)) ctx.fail("argument 'add_zero_attn' is true; it is not supported");
    if (ctx.bool_arg(13, "training", true) && ctx.scalar_arg(10, "dropout_p") > 0.0)
      ctx.fail("argument 'training' is true with dropout_p > 0: dropout in training is not supported");
    AttentionSpec a;
    a.query = ctx.tensor(0, "query");
    a.key = ctx.tensor(1, "key");
    a.value = ctx.tensor(2, "value");
    a.heads = ctx.int_arg(4, "num_heads");
    const bool batched = ctx.layout(a.query).rank() != 2;
    if (!batched) {  // one sequence: [L, 1, E]
      for (ValueId* v : {&a.query, &a.key, &a.value}) *v = ctx.view(*v, runtime::unsqueezed(ctx.layout(*v), 1));
    }
    if (const std::int64_t e = ctx.int_arg(3, "embed_dim_to_check"); e != ctx.layout(a.query).shape.back())
      ctx.fail("embed_dim_to_check is " + std::to_string(e) + " but the query has " +
               std::to_string(ctx.layout(a.query).shape.back()) + " features");
    if (ctx.bool_arg(17, "use_separate_proj_weight", false)) {
      a.q_weight = ctx.tensor(18, "q_proj_weight");
      a.k_weight = ctx.tensor(19, "k_proj_weight");
      a.v_weight = ctx.tensor(20, "v_proj_weight");
    } else {
      a.in_weight = ctx.tensor(5, "in_proj_weight");
    }
    a.in_bias = ctx.optional_tensor(6, "in_proj_bias");
    a.out_weight = ctx.tensor(11, "out_proj_weight");
    a.out_bias = ctx.optional_tensor(12, "out_proj_bias");
    a.attn_mask = ctx.optional_tensor(16, "attn_mask");
    a.key_padding_mask = ctx.optional_tensor(14, "key_padding_mask");
    if (!batched && a.key_padding_mask)
      a.key_padding_mask = ctx.view(*a.key_padding_mask, runtime::unsqueezed(ctx.layout(*a.key_padding_mask), 0));
    a.need_weights = ctx.bool_arg(15, "need_weights", true);
    a.average_weights = ctx.bool_arg(23, "average_attn_weights", true);
    AttentionResult r = lower_attention(ctx, a);
    if (!batched) {  // drop the batch dim of one again
      r.out = ctx.view(r.out, runtime::squeezed(ctx.layout(r.out), std::vector<std::int64_t>{1}));
      if (r.weights) r.weights = ctx.view(*r.weights, runtime::squeezed(ctx.layout(*r.weights), std::vector<std::int64_t>{0}));
    }
    set_attention_result(ctx, r);
  }
  static void set_attention_result(runtime::LowerContext& ctx, const AttentionResult& r) {
    ctx.set_result(runtime::Lowered::tuple(
        {runtime::Lowered::tensor(r.out), r.weights ? runtime::Lowered::tensor(*r.weights) : runtime::Lowered::constant(Arg())}));
  }
};

// aten._native_multi_head_attention(query, key, value, embed_dim, num_head,
// qkv_weight, qkv_bias, proj_weight, proj_bias, mask=None, need_weights=True,
// average_attn_weights=True, mask_type=None) -> (output, weights): batch first.
// A mask is refused: PyTorch's masked softmax there gives a fully masked row
// zeros where the composed form gives NaN, a difference kiln does not copy.
struct NativeMultiHeadAttention {
  static void lower(runtime::LowerContext& ctx) {
    if (ctx.has(9, "mask")) ctx.fail("argument 'mask' is set; only the unmasked fused attention is supported");
    AttentionSpec a;
    a.query = ctx.tensor(0, "query");
    a.key = ctx.tensor(1, "key");
    a.value = ctx.tensor(2, "value");
    a.batch_first = true;
    a.heads = ctx.int_arg(4, "num_head");
    if (const std::int64_t e = ctx.int_arg(3, "embed_dim"); e != ctx.layout(a.query).shape.back())
      ctx.fail("embed_dim is " + std::to_string(e) + " but the query has " + std::to_string(ctx.layout(a.query).shape.back()) +
               " features");
    a.in_weight = ctx.tensor(5, "qkv_weight");
    a.in_bias = ctx.tensor(6, "qkv_bias");
    a.out_weight = ctx.tensor(7, "proj_weight");
    a.out_bias = ctx.tensor(8, "proj_bias");
    a.need_weights = ctx.bool_arg(10, "need_weights", true);
    a.average_weights = ctx.bool_arg(11, "average_attn_weights", true);
    FunctionalMultiHeadAttention::set_attention_result(ctx, lower_attention(ctx, a));
  }
};

// aten._transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight,
// qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps, norm_weight_1,
// norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
// ffn_weight_2, ffn_bias_2, mask=None, mask_type=None): src [N, L, E];
//   x = src + attention(norm_first ? norm1(src) : src), then norm1 unless norm_first;
//   out = x + ffn(norm_first ? norm2(x) : x), then norm2 unless norm_first;
// ffn = linear2(relu or gelu(linear1)). The residuals are summed inside the products.
struct TransformerEncoderLayer {
  static void lower(runtime::LowerContext& ctx) {
    if (ctx.has(18, "mask")) ctx.fail("argument 'mask' is set; only the unmasked fused encoder layer is supported");
    const ValueId src = ctx.tensor(0, "src");
    const std::int64_t E = ctx.int_arg(1, "embed_dim");
    if (ctx.layout(src).rank() != 3 || ctx.layout(src).shape[2] != E)
      ctx.fail("src must be [N, L, embed_dim=" + std::to_string(E) + "], got " + runtime::shape_str(ctx.layout(src).shape));
    const bool gelu = ctx.bool_arg(7, "use_gelu"), norm_first = ctx.bool_arg(8, "norm_first");
    const double eps = ctx.scalar_arg(9, "eps");
    auto norm = [&](ValueId x, std::size_t pos, const char* w, const char* b) {
      return lower_layer_norm(ctx, x, {E}, ctx.tensor(pos, w), ctx.tensor(pos + 1, b), eps);
    };
    AttentionSpec a;
    a.query = a.key = a.value = norm_first ? norm(src, 10, "norm_weight_1", "norm_bias_1") : src;
    a.batch_first = true;
    a.heads = ctx.int_arg(2, "num_heads");
    a.in_weight = ctx.tensor(3, "qkv_weight");
    a.in_bias = ctx.tensor(4, "qkv_bias");
    a.out_weight = ctx.tensor(5, "proj_weight");
    a.out_bias = ctx.tensor(6, "proj_bias");
    a.out_addend = src;
    ValueId x = lower_attention(ctx, a).out;
    if (!norm_first) x = norm(x, 10, "norm_weight_1", "norm_bias_1");
    const ValueId h = norm_first ? norm(x, 12, "norm_weight_2", "norm_bias_2") : x;
    const ValueId w1 = ctx.tensor(14, "ffn_weight_1");
    const ValueId f1 = attention_detail::project(ctx, h, w1, ctx.tensor(15, "ffn_bias_1"), 0, ctx.layout(w1).shape[0],
                                                 gelu ? dnnl::algorithm::eltwise_gelu_erf : dnnl::algorithm::eltwise_relu);
    const ValueId w2 = ctx.tensor(16, "ffn_weight_2");
    const Layout& lw2 = ctx.layout(w2);
    if (lw2.rank() != 2 || lw2.shape[0] != E || lw2.shape[1] != ctx.layout(f1).shape[2])
      ctx.fail("ffn_weight_2 " + runtime::shape_str(lw2.shape) + " does not map the feed-forward back to embed_dim");
    MatmulSpec s{f1, ctx.view(w2, runtime::transposed(lw2, 0, 1))};
    s.bias = ctx.tensor(17, "ffn_bias_2");
    s.addend = x;
    s.fold_epilogue = false;
    ValueId y = lower_flattened(ctx, s, ctx.layout(src).shape);
    if (!norm_first) y = norm(y, 12, "norm_weight_2", "norm_bias_2");
    ctx.set_result(y);
  }
};

}  // namespace onednn_detail

}  // namespace kiln::kernels
