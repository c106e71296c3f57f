#pragma once
// Matrix products on oneDNN's matmul primitive: mm, addmm, bmm, baddbmm,
// matmul (with torch.matmul's 1-d and batch-broadcast rules) and linear, at
// the aten, torch and method levels. Constant weights are reordered once into
// the layout the primitive chooses; a bias of one row goes into the
// primitive, a full one (or scaled by beta) is summed in; a following
// gelu/relu/... and a residual add are folded in (onednn/epilogue.hpp).
// Operands are float32, or both bfloat16 (a bfloat16 result, summed in float32
// by oneDNN and rounded once), as torch computes a bfloat16 mm.
#include <optional>

#include "kiln/runtime/strided_copy.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/onednn/epilogue.hpp"

namespace kiln::kernels {

namespace onednn_detail {

using runtime::Layout;
using runtime::ValueId;

// `l` with `rank` dims: leading 1s added (stride of the whole), as matmul's batch broadcast reads it.
inline Layout with_rank(const Layout& l, std::size_t rank) {
  Layout out = l;
  while (out.rank() < rank) {
    out.shape.insert(out.shape.begin(), 1);
    out.strides.insert(out.strides.begin(), out.rank() > 1 ? out.shape[1] * out.strides[1] : 1);
  }
  return out;
}

// Whether oneDNN's matmul takes this strided operand as it is: the last two
// dims must be row- or column-major (one of them unit-stride); batch dims may
// interleave with them (attention's heads, [1, 12, 128, 64] seen in a
// [1, 128, 768] buffer, are read where they are), but none is broadcast.
inline bool matmul_friendly(const Layout& l) {
  const std::size_t r = l.rank();
  if (r < 2) return false;
  const auto rows = l.shape[r - 2], cols = l.shape[r - 1];
  const auto rs = l.strides[r - 2], cs = l.strides[r - 1];
  const bool row_major = cs == 1 || cols == 1;
  const bool col_major = rs == 1 || rows == 1;
  if (!row_major && !col_major) return false;
  for (auto s : l.strides)
    if (s == 0) return false;
  return true;
}

// The operand as the primitive reads it: itself, or reordered into a
// contiguous copy in the step's scratch when oneDNN cannot read its strides.
struct Operand {
  ValueId value;
  Layout layout;             // as the primitive sees it
  dnnl::memory::desc md;     // its descriptor (a packed weight's is the primitive's choice)
  dnnl::memory::desc given;  // the value's own, when staged
  bool staged = false;
  std::size_t scratch_offset = 0;
};

struct MatmulSpec {
  MatmulSpec(ValueId lhs, ValueId rhs) : a(lhs), b(rhs) {}
  ValueId a, b;
  std::optional<ValueId> bias;  // broadcast to the result
  double alpha = 1.0, beta = 1.0;
  bool fold_epilogue = true;
  // For kernels that chain products themselves (attention, a transformer
  // layer): a tensor of the result's shape summed into it (a residual), then
  // an element-wise op on the sum (relu, gelu), both inside the primitive.
  std::optional<ValueId> addend;
  std::optional<dnnl::algorithm> activation;
};


// The shape of a [..., M, K] @ [..., K, N] product of operands `la` and `lb`,
// brought to one rank (the originals for messages).
inline runtime::Shape product_shape(const runtime::LowerContext& ctx, const Layout& la, const Layout& lb, const Layout& la_in,
                                    const Layout& lb_in) {
  const std::size_t rank = la.rank();
  const auto M = la.shape[rank - 2], K = la.shape[rank - 1], N = lb.shape[rank - 1];
  if (lb.shape[rank - 2] != K)
    ctx.fail("the operands " + runtime::shape_str(la_in.shape) + " and " + runtime::shape_str(lb_in.shape) + " do not chain");
  runtime::Shape out_shape(rank);
  for (std::size_t k = 0; k + 2 < rank; ++k) {
    if (la.shape[k] != lb.shape[k] && la.shape[k] != 1 && lb.shape[k] != 1)
      ctx.fail("batch dims of " + runtime::shape_str(la_in.shape) + " and " + runtime::shape_str(lb_in.shape) + " do not broadcast");
    if (la.shape[k] == 1 && lb.shape[k] != 1) ctx.fail("broadcasting the first operand's batch dims is not supported");
    out_shape[k] = la.shape[k];
  }
  out_shape[rank - 2] = M;
  out_shape[rank - 1] = N;
  return out_shape;
}

// The bias as the primitive reads it: one row [1, ..., 1, N].
inline Layout bias_row_layout(std::size_t rank, std::int64_t n, DType d) {
  runtime::Shape shape(rank, 1);
  shape[rank - 1] = n;
  return Layout::contiguous(std::move(shape), d);
}

// Where the bias goes: one row into the primitive (`row`, pre-divided by alpha
// where it is a constant and alpha or beta is not 1, since oneDNN adds the bias
// before the output scale), or anything else copied into dst first and summed
// (`summed`, with a sum post-op of beta).
struct BiasPlan {
  std::optional<ValueId> row, summed;
};
inline BiasPlan plan_bias(runtime::LowerContext& ctx, const MatmulSpec& spec, std::int64_t n) {
  if (!spec.bias) return {};
  const Layout& bl = ctx.layout(*spec.bias);
  if (bl.dtype != DType::float32 && bl.dtype != DType::bfloat16)
    ctx.fail("a product's bias must be float32 or bfloat16, got " + std::string(dtype_name(bl.dtype)));
  const auto bconst = ctx.constant(*spec.bias);
  const bool row = bl.numel() == n && (bl.rank() == 1 || bl.shape[bl.rank() - 1] == n);
  if (!row || !(bconst || (spec.alpha == 1.0 && spec.beta == 1.0))) return {std::nullopt, *spec.bias};
  if (!bconst || (spec.alpha == 1.0 && spec.beta == 1.0)) return {*spec.bias, std::nullopt};
  if (bl.dtype != DType::float32) return {std::nullopt, *spec.bias};
  const runtime::Tensor b = bconst->contiguous();
  runtime::Tensor scaled = runtime::Tensor::empty({n});
  for (std::int64_t j = 0; j < n; ++j) scaled.data<float>()[j] = static_cast<float>(spec.beta / spec.alpha * b.data<float>()[j]);
  return {ctx.constant_value(std::move(scaled), ctx.node().name() + ".bias"), std::nullopt};
}

// Refuses what oneDNN's matmul cannot take: anything but two float32 or two
// bfloat16 operands, and an empty operand (oneDNN 2.6 divides by a zero dim
// while making the primitive).
inline void check_product_operands(const runtime::LowerContext& ctx, const Layout& la, const Layout& lb) {
  const bool f32 = la.dtype == DType::float32 && lb.dtype == DType::float32;
  const bool bf16 = la.dtype == DType::bfloat16 && lb.dtype == DType::bfloat16;
  if (!f32 && !bf16)
    ctx.fail("matrix products take two float32 or two bfloat16 operands, got " + std::string(dtype_name(la.dtype)) + " and " +
             std::string(dtype_name(lb.dtype)));
  if (la.numel() == 0 || lb.numel() == 0)
    ctx.fail("matrix products of an empty operand are not supported, got " + runtime::shape_str(la.shape) + " and " +
             runtime::shape_str(lb.shape));
}

// The layouts of one product: the operands brought to one rank, the
// primitive's dst, and the node's result, which is the dst's memory maybe seen
// with another shape (a linear on [batch, seq, K] runs as one [batch*seq, K] product).
struct ProductLayouts {
  Layout a, b, out, result;
  std::size_t rank() const { return out.rank(); }
  std::int64_t n() const { return out.shape.back(); }
};
inline ProductLayouts product_layouts(const runtime::LowerContext& ctx, const Layout& la_in, const Layout& lb_in,
                                      const std::optional<runtime::Shape>& result_shape) {
  const std::size_t rank = std::max(la_in.rank(), lb_in.rank());
  ProductLayouts p{with_rank(la_in, rank), with_rank(lb_in, rank), {}, {}};
  p.out = Layout::contiguous(product_shape(ctx, p.a, p.b, la_in, lb_in), la_in.dtype);
  p.result = result_shape ? Layout::contiguous(*result_shape, la_in.dtype) : p.out;
  return p;
}

using onednn::ScratchPlan;

inline Operand operand_for(ValueId v, const Layout& l, ScratchPlan& scratch) {
  Operand o{v, l, {}, {}};
  if (!matmul_friendly(l)) {
    o.staged = true;
    o.given = onednn::desc_of(l);
    o.layout = Layout::contiguous(l.shape, l.dtype);
    o.scratch_offset = scratch.take(o.layout.nbytes());
  }
  o.md = onednn::desc_of(o.layout);
  return o;
}

// What the primitive adds to the product: a bias row as its bias argument,
// a tensor copied into dst first and summed onto (a full bias, an addend), and
// the post-ops that do it.
struct ProductSums {
  dnnl::post_ops po;
  std::optional<ValueId> bias_row, pre_fill;
};
inline ProductSums plan_sums(runtime::LowerContext& ctx, const MatmulSpec& spec, std::int64_t n) {
  ProductSums s;
  const BiasPlan bias = plan_bias(ctx, spec, n);
  s.bias_row = bias.row;
  s.pre_fill = bias.summed;
  if (s.pre_fill) s.po.append_sum(static_cast<float>(spec.beta));
  if (spec.addend) {
    if (s.pre_fill) ctx.fail("a product cannot sum both a full bias and an addend");
    s.pre_fill = spec.addend;
    s.po.append_sum(1.0f);
  }
  if (spec.activation) s.po.append_eltwise(1.0f, *spec.activation, 0.0f, 0.0f);
  return s;
}

// The ops after the node folded in, unless the product already sums something into dst.
inline onednn::Epilogue product_epilogue(runtime::LowerContext& ctx, const MatmulSpec& spec, const ProductSums& sums,
                                         const ProductLayouts& lay) {
  if (!spec.fold_epilogue || sums.pre_fill) return {};
  return onednn::find_epilogue(ctx, ctx.node(), lay.result, lay.n(), false);
}

inline void append_epilogue(dnnl::post_ops& po, const onednn::Epilogue& e) {
  for (int i = 0; i < e.post_ops.len(); ++i) {
    if (e.post_ops.kind(i) == dnnl::primitive::kind::eltwise) {
      dnnl::algorithm alg;
      float scale, alpha, beta;
      e.post_ops.get_params_eltwise(i, scale, alg, alpha, beta);
      po.append_eltwise(scale, alg, alpha, beta);
    } else {
      po.append_sum(1.0f);
    }
  }
}

// The primitive's dst. A folded residual add sums over its addend in place
// when no later step reads the addend (a view of it read later would see the
// sum otherwise); else the addend is copied into a new dst first.
inline ValueId product_dst(runtime::LowerContext& ctx, const onednn::Epilogue& e, const ProductLayouts& lay,
                           std::optional<ValueId>& pre_fill) {
  if (!e.addend) return ctx.buffer(lay.out);
  if (ctx.info(*e.addend).layout == lay.result && ctx.may_overwrite(*e.addend_node, *e.addend, *e.add_node))
    return ctx.view(*e.addend, lay.out);
  pre_fill = *e.addend;
  return ctx.buffer(lay.out);
}

// Makes the primitive's descriptor for given source and weights descriptors.
struct ProductDesc {
  dnnl::memory::desc c_md;
  std::optional<dnnl::memory::desc> bias_md;
  dnnl::primitive_attr attr;
  dnnl::matmul::primitive_desc make(const dnnl::memory::desc& a_md, const dnnl::memory::desc& b_md) const {
    if (!bias_md) return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, onednn::engine());
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, *bias_md, c_md), attr, onednn::engine());
  }
};

// Under --fpmath bf16 a product with a constant weight reads a bf16 copy of
// its source (made in the step's scratch) and the weight packed as bf16;
// nullopt where oneDNN has no bf16 implementation that runs natively here.
inline std::optional<dnnl::matmul::primitive_desc> bf16_product(const ProductDesc& d, const Operand& A,
                                                                const dnnl::memory::desc& b_md) {
  try {
    auto pd = d.make(onednn::desc_of(Layout::contiguous(A.layout.shape, DType::bfloat16)),
                     dnnl::memory::desc(b_md.dims(), dnnl::memory::data_type::bf16, dnnl::memory::format_tag::any));
    if (onednn::runs_bf16_natively(pd.impl_info_str())) return pd;
  } catch (const dnnl::error&) {
    // no bf16 implementation here: fp32
  }
  return std::nullopt;
}

// The source converted to bf16 in the step's scratch (as the staging copy when it is staged anyway).
inline void stage_as_bf16(Operand& A, ScratchPlan& scratch) {
  const Layout a_bf16 = Layout::contiguous(A.layout.shape, DType::bfloat16);
  if (!A.staged) {
    A.staged = true;
    A.given = A.md;
    A.scratch_offset = scratch.take(a_bf16.nbytes());
  }
  A.layout = a_bf16;
  A.md = onednn::desc_of(a_bf16);
}

inline dnnl::matmul::primitive_desc product_primitive(runtime::LowerContext& ctx, const ProductDesc& d, Operand& A,
                                                      const dnnl::memory::desc& b_md, bool constant_weight,
                                                      ScratchPlan& scratch) {
  if (constant_weight && A.layout.dtype == DType::float32 && onednn::bf16_products(ctx))
    if (auto pd = bf16_product(d, A, b_md)) {
      stage_as_bf16(A, scratch);
      return *pd;
    }
  try {
    return d.make(onednn::desc_of(A.layout), b_md);
  } catch (const dnnl::error& err) {
    ctx.fail(std::string("oneDNN refused the matmul: ") + err.what());
  }
}

// A constant weight packed once in the layout the primitive chose; `w` is the
// weight seen with lb's strides (a transposed view of a linear's [N, K] weight, say).
inline Operand packed_weight(runtime::LowerContext& ctx, const runtime::Tensor& w, const Layout& lb,
                             const dnnl::matmul::primitive_desc& pd) {
  const ValueId packed = ctx.constant_value(onednn::reorder_once(w, onednn::desc_of(lb), pd.weights_desc()),
                                            ctx.node().name() + ".packed_weight");
  return Operand{packed, lb, pd.weights_desc(), {}};
}

// How pre_fill is copied into dst: a bias broadcasts to the product's shape; an addend has the node's result shape.
inline runtime::CopyPlan pre_fill_copy(const runtime::LowerContext& ctx, const MatmulSpec& spec, const onednn::Epilogue& e,
                                       const ProductLayouts& lay, std::optional<ValueId> pre_fill) {
  if (!pre_fill) return {};
  const bool is_addend = (e.addend && *pre_fill == *e.addend) || (spec.addend && *pre_fill == *spec.addend);
  const Layout& target = is_addend ? lay.result : lay.out;
  return runtime::plan_copy(runtime::expanded(ctx.layout(*pre_fill), target.shape), target);
}

// The step: the primitive on its source, weights and bias row, reading pre_fill into dst first.
inline void add_product_step(runtime::LowerContext& ctx, const dnnl::matmul::primitive_desc& pd, const ProductDesc& d,
                             const std::vector<std::pair<int, Operand>>& ins, ValueId out, std::optional<ValueId> pre_fill,
                             runtime::CopyPlan pre_copy, ScratchPlan scratch) {
  const dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  const std::size_t pad_offset = scratch.take(scratchpad.get_size());
  std::vector<ValueId> reads;
  std::vector<onednn::PrimitiveStep::In> step_ins;
  for (const auto& [arg, o] : ins) {
    reads.push_back(o.value);
    step_ins.push_back({arg, o.value, o.staged ? o.given : o.md, o.md, o.scratch_offset});
  }
  if (pre_fill) reads.push_back(*pre_fill);
  ctx.add_step(std::make_unique<onednn::PrimitiveStep>(dnnl::matmul(pd), std::move(step_ins), out, d.c_md, pre_fill, pre_copy,
                                                       scratchpad, pad_offset),
               reads, {out}, scratch.bytes);
}

// Lowers out = alpha * (a @ b) + beta * bias for a of [..., M, K] and b of
// [..., K, N] (equal ranks >= 2, batch dims equal or 1 in b).
inline ValueId lower_matmul(runtime::LowerContext& ctx, const MatmulSpec& spec, const Layout& la_in, const Layout& lb_in,
                            std::optional<runtime::Shape> result_shape = std::nullopt) {
  check_product_operands(ctx, la_in, lb_in);
  const ProductLayouts lay = product_layouts(ctx, la_in, lb_in, result_shape);
  ScratchPlan scratch;
  Operand A = operand_for(spec.a, lay.a, scratch);
  // A constant weight is packed once in the layout the primitive prefers.
  const std::optional<runtime::Tensor> wconst = ctx.constant(spec.b);
  Operand B = wconst ? Operand{spec.b, lay.b, {}, {}} : operand_for(spec.b, lay.b, scratch);
  const dnnl::memory::desc b_md =
      wconst ? dnnl::memory::desc(dnnl::memory::dims(lay.b.shape.begin(), lay.b.shape.end()), onednn::data_type(lay.b.dtype),
                                  dnnl::memory::format_tag::any)
             : B.md;

  ProductDesc d{onednn::desc_of(lay.out), std::nullopt, onednn::primitive_attr_for(ctx)};
  if (spec.alpha != 1.0) d.attr.set_output_scales(0, {static_cast<float>(spec.alpha)});
  ProductSums sums = plan_sums(ctx, spec, lay.n());
  const onednn::Epilogue e = product_epilogue(ctx, spec, sums, lay);
  append_epilogue(sums.po, e);
  const ValueId out = product_dst(ctx, e, lay, sums.pre_fill);
  d.attr.set_post_ops(sums.po);
  const DType bias_dtype = sums.bias_row ? ctx.layout(*sums.bias_row).dtype : DType::float32;
  if (sums.bias_row) d.bias_md = onednn::desc_of(bias_row_layout(lay.rank(), lay.n(), bias_dtype));

  const dnnl::matmul::primitive_desc pd = product_primitive(ctx, d, A, b_md, wconst.has_value(), scratch);
  if (wconst) B = packed_weight(ctx, *wconst, lay.b, pd);
  std::vector<std::pair<int, Operand>> ins{{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}};
  if (sums.bias_row) {
    const Layout bl = bias_row_layout(lay.rank(), lay.n(), bias_dtype);
    ins.push_back({DNNL_ARG_BIAS, Operand{*sums.bias_row, bl, onednn::desc_of(bl), {}}});
  }
  add_product_step(ctx, pd, d, ins, out, sums.pre_fill, pre_fill_copy(ctx, spec, e, lay, sums.pre_fill), scratch);

  const ValueId result = result_shape ? ctx.view(out, lay.result) : out;
  for (const Node* n : e.nodes) ctx.absorb(*n, runtime::Lowered::tensor(result));
  ctx.set_result(result);
  return result;
}

// a [M, K] @ b [K, N] with M from every leading dim of a when they fold into
// one (linear on [batch, seq, hidden]), else batched; the result viewed as `out_shape`.
inline ValueId lower_flattened(runtime::LowerContext& ctx, MatmulSpec spec, runtime::Shape out_shape) {
  const Layout& la = ctx.layout(spec.a);
  if (la.rank() > 2 && ctx.layout(spec.b).rank() == 2) {
    const auto K = la.shape.back();
    if (auto flat = runtime::viewed(la, std::vector<std::int64_t>{la.numel() / std::max<std::int64_t>(K, 1), K})) {
      spec.a = ctx.view(spec.a, *flat);
      return lower_matmul(ctx, spec, ctx.layout(spec.a), ctx.layout(spec.b), out_shape);
    }
  }
  return lower_matmul(ctx, spec, ctx.layout(spec.a), ctx.layout(spec.b),
                      out_shape == runtime::Shape() ? std::nullopt : std::optional<runtime::Shape>(out_shape));
}

struct Mm {
  static void lower(runtime::LowerContext& ctx) {
    MatmulSpec s{ctx.tensor(0, "self"), ctx.tensor(1, "mat2")};
    if (ctx.layout(s.a).rank() != 2 || ctx.layout(s.b).rank() != 2)
      ctx.fail("mm takes two 2-d tensors, got " + runtime::shape_str(ctx.layout(s.a).shape) + " and " +
               runtime::shape_str(ctx.layout(s.b).shape));
    lower_matmul(ctx, s, ctx.layout(s.a), ctx.layout(s.b));
  }
};
struct Bmm {
  static void lower(runtime::LowerContext& ctx) {
    MatmulSpec s{ctx.tensor(0, "self"), ctx.tensor(1, "mat2")};
    if (ctx.layout(s.a).rank() != 3 || ctx.layout(s.b).rank() != 3 || ctx.layout(s.a).shape[0] != ctx.layout(s.b).shape[0])
      ctx.fail("bmm takes two 3-d tensors of one batch, got " + runtime::shape_str(ctx.layout(s.a).shape) + " and " +
               runtime::shape_str(ctx.layout(s.b).shape));
    lower_matmul(ctx, s, ctx.layout(s.a), ctx.layout(s.b));
  }
};
// addmm(bias, a, b, beta=1, alpha=1) and baddbmm likewise.
template <std::size_t Rank>
struct AddMm {
  static void lower(runtime::LowerContext& ctx) {
    MatmulSpec s{ctx.tensor(1, "mat1"), ctx.tensor(2, "mat2")};
    if (Rank == 3) s = MatmulSpec{ctx.tensor(1, "batch1"), ctx.tensor(2, "batch2")};
    s.bias = ctx.tensor(0, "input");
    s.beta = ctx.scalar_arg(3, "beta", 1.0);
    s.alpha = ctx.scalar_arg(4, "alpha", 1.0);
    if (ctx.layout(s.a).rank() != Rank || ctx.layout(s.b).rank() != Rank)
      ctx.fail("expects " + std::to_string(Rank) + "-d operands, got " + runtime::shape_str(ctx.layout(s.a).shape) + " and " +
               runtime::shape_str(ctx.layout(s.b).shape));
    lower_matmul(ctx, s, ctx.layout(s.a), ctx.layout(s.b));
  }
};
// torch.matmul: 1-d operands become a row or a column (dropped again in the result); batch dims broadcast.
struct Matmul {
  static void lower(runtime::LowerContext& ctx) {
    MatmulSpec s{ctx.tensor(0, "input"), ctx.tensor(1, "other")};
    const Layout la = ctx.layout(s.a), lb = ctx.layout(s.b);
    if (la.rank() == 0 || lb.rank() == 0) ctx.fail("matmul of a 0-d tensor");
    runtime::Shape out;
    if (la.rank() == 1) s.a = ctx.view(s.a, runtime::unsqueezed(la, 0));
    if (lb.rank() == 1) s.b = ctx.view(s.b, runtime::unsqueezed(lb, 1));
    const Layout& a = ctx.layout(s.a);
    const Layout& b = ctx.layout(s.b);
    const std::size_t rank = std::max(a.rank(), b.rank());
    const Layout ar = with_rank(a, rank), br = with_rank(b, rank);
    for (std::size_t k = 0; k + 2 < rank; ++k) out.push_back(std::max(ar.shape[k], br.shape[k]));
    if (la.rank() > 1) out.push_back(a.shape[a.rank() - 2]);
    if (lb.rank() > 1) out.push_back(b.shape.back());
    if (b.rank() < a.rank() && la.rank() > 2) {
      lower_flattened(ctx, s, out);
      return;
    }
    lower_matmul(ctx, s, a, b, out);
  }
};
// linear(input, weight [N, K], bias=None) = input @ weight.T + bias.
struct Linear {
  static void lower(runtime::LowerContext& ctx) {
    MatmulSpec s{ctx.tensor(0, "input"), ctx.tensor(1, "weight")};
    const Layout& w = ctx.layout(s.b);
    if (w.rank() != 2) ctx.fail("linear's weight must be 2-d, got " + runtime::shape_str(w.shape));
    s.b = ctx.view(s.b, runtime::transposed(w, 0, 1));
    s.bias = ctx.optional_tensor(2, "bias");
    runtime::Shape out = ctx.layout(s.a).shape;
    if (out.empty()) ctx.fail("linear of a 0-d input");
    out.back() = ctx.layout(s.b).shape[1];
    if (ctx.layout(s.a).rank() == 1) {
      s.a = ctx.view(s.a, runtime::unsqueezed(ctx.layout(s.a), 0));
      lower_matmul(ctx, s, ctx.layout(s.a), ctx.layout(s.b), out);
      return;
    }
    lower_flattened(ctx, s, out);
  }
};

// kiln.grouped_mm(inputs, weights, biases or None): one product per group, a tuple of results.
struct GroupedMm {
  static void lower(runtime::LowerContext& ctx) {
    const auto lhs = ctx.tensors(0, "inputs"), rhs = ctx.tensors(1, "weights");
    const auto biases = ctx.has(2, "biases") ? ctx.tensors(2, "biases") : std::vector<ValueId>{};
    if (lhs.size() != rhs.size() || (!biases.empty() && biases.size() != lhs.size()))
      ctx.fail("grouped_mm needs as many weights (and biases) as inputs");
    std::vector<runtime::Lowered> results;
    for (std::size_t i = 0; i < lhs.size(); ++i) {
      MatmulSpec s{lhs[i], rhs[i]};
      s.fold_epilogue = false;
      if (!biases.empty()) s.bias = biases[i];
      if (ctx.layout(s.a).rank() != 2 || ctx.layout(s.b).rank() != 2) ctx.fail("grouped_mm takes 2-d operands");
      results.push_back(runtime::Lowered::tensor(lower_matmul(ctx, s, ctx.layout(s.a), ctx.layout(s.b))));
    }
    ctx.set_result(runtime::Lowered::tuple(std::move(results)));
  }
};

}  // namespace onednn_detail

}  // namespace kiln::kernels
