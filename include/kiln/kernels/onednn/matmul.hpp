#pragma once
// Matrix products on oneDNN's matmul primitive.
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/common.hpp"

namespace kiln::kernels {

template <>
struct Kernel<"aten.mm.default"> {
  static void lower(runtime::LowerContext& ctx) {
    const auto a = ctx.tensor(0, "self");
    const auto b = ctx.tensor(1, "mat2");
    const auto& la = ctx.layout(a);
    const auto& lb = ctx.layout(b);
    if (la.rank() != 2 || lb.rank() != 2) ctx.fail("mm takes two 2-d tensors, got " + runtime::shape_str(la.shape) + " and " + runtime::shape_str(lb.shape));
    if (la.shape[1] != lb.shape[0]) ctx.fail("mm: " + runtime::shape_str(la.shape) + " @ " + runtime::shape_str(lb.shape) + " do not chain");
    if (la.dtype != DType::float32 || lb.dtype != DType::float32) ctx.fail("mm takes float32");
    const auto out = ctx.buffer({la.shape[0], lb.shape[1]}, DType::float32);
    const auto ma = onednn::desc_of(la), mb = onednn::desc_of(lb), mc = onednn::desc_of(ctx.layout(out));
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ma, mb, mc), onednn::primitive_attr_for(ctx), onednn::engine());
    auto step = std::make_unique<onednn::PrimitiveStep>(
        dnnl::matmul(pd),
        std::vector<onednn::PrimitiveStep::Bound>{{DNNL_ARG_SRC, a, ma}, {DNNL_ARG_WEIGHTS, b, mb}, {DNNL_ARG_DST, out, mc}},
        pd.scratchpad_desc());
    onednn::add_primitive_step(ctx, std::move(step), {a, b}, {out});
    ctx.set_result(out);
  }
};

}  // namespace kiln::kernels
