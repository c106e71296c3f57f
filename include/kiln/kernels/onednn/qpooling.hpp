#pragma once
// quantized.max_pool2d: max pooling of a uint8/int8 tensor on oneDNN's pooling
// primitive. The max of quantized values is the quantized max (the map is
// monotonic), so the result keeps the input's scale and zero point and no
// dequantize is needed; oneDNN pads max pooling with the dtype's lowest value.
#include "kiln/kernels/onednn/pooling.hpp"

namespace kiln::kernels::onednn_detail {

// (qx, kernel_size, stride, padding, dilation, ceil_mode=False), as quantized::max_pool2d.
struct QMaxPool2d {
  static void lower(runtime::LowerContext& ctx) {
    PoolArgs a = window_args(ctx, 2);
    a.dilation = per_dim(ctx, ctx.ints_arg(4, "dilation", std::vector<std::int64_t>{1}), "dilation", 2);
    a.ceil_mode = ctx.bool_arg(5, "ceil_mode", false);
    a.int8 = true;
    ctx.set_result(lower_pool(ctx, a));
  }
};

}  // namespace kiln::kernels::onednn_detail
