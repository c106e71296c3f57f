#pragma once
// PyTorch runs a bfloat16 op in float32 and rounds its result to bfloat16
// once. Kernels that compute floats in float32 only (the element-wise ones,
// reductions) make a float32 result for such a node; lowering rounds it here,
// where the node's meta says bfloat16, so each gives PyTorch's bfloat16 answer
// without a bfloat16 copy of every kernel.
#include <cstdint>
#include <memory>

#include "kiln/core/bfloat16.hpp"
#include "kiln/runtime/lower_context.hpp"

namespace kiln::runtime {

class RoundToBfloat16Step final : public Step {
 public:
  RoundToBfloat16Step(ValueId src, ValueId dst) : src_(src), dst_(dst) {}
  void run(Frame& f) const override {
    const Layout& l = f.layout(src_);
    const float* in = f.data_as<float>(src_);
    std::uint16_t* out = f.data_as<std::uint16_t>(dst_);
    const std::int64_t n = l.numel();
    if (l.is_contiguous()) {
      for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
      return;
    }
    // A strided result (a view a kernel gave back): walk it in row-major order.
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t rest = i, offset = 0;
      for (std::size_t k = l.rank(); k-- > 0;) {
        offset += (rest % l.shape[k]) * l.strides[k];
        rest /= l.shape[k];
      }
      out[i] = float_to_bf16(in[offset]);
    }
  }

 private:
  ValueId src_, dst_;
};

// `src` (float32) rounded to a new contiguous bfloat16 buffer, as the node's step.
inline ValueId round_to_bfloat16(LowerContext& ctx, ValueId src) {
  const ValueId dst = ctx.buffer(ctx.layout(src).shape, DType::bfloat16);
  ctx.add_step(std::make_unique<RoundToBfloat16Step>(src, dst), {src}, {dst});
  return dst;
}

// A float32 tensor rounded to bfloat16: the exporter writes bfloat16 weights
// and inputs as float32 .npy files (numpy has no bfloat16), which are bound
// here to the nodes whose meta says bfloat16.
inline Tensor as_bfloat16(const Tensor& t) {
  const Tensor c = t.contiguous();
  Tensor out = Tensor::empty(c.shape(), DType::bfloat16);
  for (std::int64_t i = 0; i < c.numel(); ++i) out.data<std::uint16_t>()[i] = float_to_bf16(c.data<float>()[i]);
  return out;
}

}  // namespace kiln::runtime
