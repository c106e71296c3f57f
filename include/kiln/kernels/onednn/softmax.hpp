#pragma once
// softmax and log_softmax along one dim, on oneDNN's softmax_v2 primitive.
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "kiln/kernels/shape/views.hpp"

namespace kiln::kernels {

namespace onednn_detail {

// Returns the result (also set as the node's).
inline runtime::ValueId lower_softmax(runtime::LowerContext& ctx, runtime::ValueId in, std::int64_t dim, bool log) {
  const runtime::Layout& l0 = ctx.layout(in);
  if (l0.dtype != DType::float32) ctx.fail("softmax takes float32, got " + std::string(dtype_name(l0.dtype)));
  const auto d = shape_detail::checked(ctx, [&] { return runtime::normalize_dim(dim, static_cast<std::int64_t>(l0.rank())); });
  // oneDNN wants a dense source: copy a strided one first.
  if (runtime::dense_like(l0, l0.dtype) != l0)
    in = shape_detail::copy_into_new(ctx, in, runtime::Layout::contiguous(l0.shape, l0.dtype));
  const runtime::Layout& l = ctx.layout(in);
  const auto out = ctx.buffer(l);
  const auto md = onednn::desc_of(l);
  dnnl::softmax_v2_forward::primitive_desc pd;
  try {
    pd = dnnl::softmax_v2_forward::primitive_desc(
        dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference,
                                       log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, md, md,
                                       static_cast<int>(d)),
        onednn::primitive_attr_for(ctx), onednn::engine());
  } catch (const dnnl::error& e) {
    ctx.fail(std::string("oneDNN refused the softmax: ") + e.what());
  }
  onednn::add_primitive_step(
      ctx,
      std::make_unique<onednn::PrimitiveStep>(dnnl::softmax_v2_forward(pd),
                                              std::vector<onednn::PrimitiveStep::Bound>{{DNNL_ARG_SRC, in, md}, {DNNL_ARG_DST, out, md}},
                                              pd.scratchpad_desc()),
      {in}, {out});
  ctx.set_result(out);
  return out;
}

template <bool Log>
struct AtenSoftmax {  // aten._softmax(x, dim, half_to_float)
  static void lower(runtime::LowerContext& ctx) {
    if (ctx.bool_arg(2, "half_to_float", false)) ctx.fail("half_to_float is not supported");
    lower_softmax(ctx, ctx.tensor(0, "self"), ctx.int_arg(1, "dim"), Log);
  }
};
template <bool Log>
struct TorchSoftmax {  // F.softmax(input, dim=None, _stacklevel=3, dtype=None), torch.softmax, Tensor.softmax
  static void lower(runtime::LowerContext& ctx) {
    const Arg dt = ctx.value(3, "dtype");
    if (const auto* d = dt.get_if<DType>(); d && *d != DType::float32) ctx.fail("softmax with a dtype other than float32");
    if (!ctx.has(1, "dim")) ctx.fail("softmax needs dim (PyTorch's implicit choice of dim is deprecated)");
    lower_softmax(ctx, ctx.tensor(0, "input"), ctx.int_arg(1, "dim"), Log);
  }
};

}  // namespace onednn_detail

}  // namespace kiln::kernels
