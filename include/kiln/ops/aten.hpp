#pragma once
// ATen overloads the passes and kernels refer to. `kiln::aten::mm` is "aten.mm.default";
// a non-default overload is `op_Overload`, e.g. `kiln::aten::add_Tensor` is "aten.add.Tensor";
// a leading underscore is dropped (`kiln::aten::softmax` is "aten._softmax.default").
#include "kiln/core/op_ref.hpp"

namespace kiln::aten {

KILN_DECLARE_OP(mm, "aten.mm.default");
KILN_DECLARE_OP(weight_int8pack_mm, "aten._weight_int8pack_mm.default");
KILN_DECLARE_OP(addmm, "aten.addmm.default");
KILN_DECLARE_OP(bmm, "aten.bmm.default");
KILN_DECLARE_OP(baddbmm, "aten.baddbmm.default");
KILN_DECLARE_OP(matmul, "aten.matmul.default");
KILN_DECLARE_OP(linear, "aten.linear.default");
KILN_DECLARE_OP(add_Tensor, "aten.add.Tensor");
KILN_DECLARE_OP(add_Scalar, "aten.add.Scalar");
KILN_DECLARE_OP(sub_Tensor, "aten.sub.Tensor");
KILN_DECLARE_OP(sub_Scalar, "aten.sub.Scalar");
KILN_DECLARE_OP(mul_Tensor, "aten.mul.Tensor");
KILN_DECLARE_OP(mul_Scalar, "aten.mul.Scalar");
KILN_DECLARE_OP(div_Tensor, "aten.div.Tensor");
KILN_DECLARE_OP(div_Scalar, "aten.div.Scalar");
KILN_DECLARE_OP(rsub_Scalar, "aten.rsub.Scalar");
KILN_DECLARE_OP(relu, "aten.relu.default");
KILN_DECLARE_OP(relu_, "aten.relu_.default");
KILN_DECLARE_OP(sigmoid, "aten.sigmoid.default");
KILN_DECLARE_OP(tanh, "aten.tanh.default");
KILN_DECLARE_OP(gelu, "aten.gelu.default");
KILN_DECLARE_OP(silu, "aten.silu.default");
KILN_DECLARE_OP(abs, "aten.abs.default");
KILN_DECLARE_OP(exp, "aten.exp.default");
KILN_DECLARE_OP(log, "aten.log.default");
KILN_DECLARE_OP(neg, "aten.neg.default");
KILN_DECLARE_OP(sqrt, "aten.sqrt.default");
KILN_DECLARE_OP(rsqrt, "aten.rsqrt.default");
KILN_DECLARE_OP(reciprocal, "aten.reciprocal.default");
KILN_DECLARE_OP(pow_Tensor_Scalar, "aten.pow.Tensor_Scalar");
KILN_DECLARE_OP(pow_Tensor_Tensor, "aten.pow.Tensor_Tensor");
KILN_DECLARE_OP(clamp, "aten.clamp.default");
KILN_DECLARE_OP(clamp_min, "aten.clamp_min.default");
KILN_DECLARE_OP(clamp_max, "aten.clamp_max.default");
KILN_DECLARE_OP(hardtanh, "aten.hardtanh.default");
KILN_DECLARE_OP(hardswish, "aten.hardswish.default");
KILN_DECLARE_OP(leaky_relu, "aten.leaky_relu.default");
KILN_DECLARE_OP(where_self, "aten.where.self");
KILN_DECLARE_OP(minimum, "aten.minimum.default");
KILN_DECLARE_OP(maximum, "aten.maximum.default");
KILN_DECLARE_OP(convolution, "aten.convolution.default");
KILN_DECLARE_OP(layer_norm, "aten.layer_norm.default");
KILN_DECLARE_OP(native_layer_norm, "aten.native_layer_norm.default");
KILN_DECLARE_OP(group_norm, "aten.group_norm.default");
KILN_DECLARE_OP(native_batch_norm_legit_no_training, "aten._native_batch_norm_legit_no_training.default");
KILN_DECLARE_OP(batch_norm, "aten.batch_norm.default");
KILN_DECLARE_OP(max_pool2d_with_indices, "aten.max_pool2d_with_indices.default");
KILN_DECLARE_OP(avg_pool2d, "aten.avg_pool2d.default");
KILN_DECLARE_OP(adaptive_avg_pool2d, "aten.adaptive_avg_pool2d.default");
KILN_DECLARE_OP(adaptive_avg_pool2d_, "aten._adaptive_avg_pool2d.default");
KILN_DECLARE_OP(mean_dim, "aten.mean.dim");
KILN_DECLARE_OP(sum_dim_IntList, "aten.sum.dim_IntList");
KILN_DECLARE_OP(amax, "aten.amax.default");
KILN_DECLARE_OP(softmax, "aten._softmax.default");
KILN_DECLARE_OP(log_softmax, "aten._log_softmax.default");
KILN_DECLARE_OP(view, "aten.view.default");
KILN_DECLARE_OP(reshape, "aten.reshape.default");
KILN_DECLARE_OP(unsafe_view, "aten._unsafe_view.default");
KILN_DECLARE_OP(reshape_alias, "aten._reshape_alias.default");
KILN_DECLARE_OP(as_strided, "aten.as_strided.default");
KILN_DECLARE_OP(permute, "aten.permute.default");
KILN_DECLARE_OP(transpose_int, "aten.transpose.int");
KILN_DECLARE_OP(t, "aten.t.default");
KILN_DECLARE_OP(unsqueeze, "aten.unsqueeze.default");
KILN_DECLARE_OP(squeeze_dim, "aten.squeeze.dim");
KILN_DECLARE_OP(expand, "aten.expand.default");
KILN_DECLARE_OP(clone, "aten.clone.default");
KILN_DECLARE_OP(cat, "aten.cat.default");
KILN_DECLARE_OP(stack, "aten.stack.default");
KILN_DECLARE_OP(split_Tensor, "aten.split.Tensor");
KILN_DECLARE_OP(split_with_sizes, "aten.split_with_sizes.default");
KILN_DECLARE_OP(unbind_int, "aten.unbind.int");
KILN_DECLARE_OP(slice_Tensor, "aten.slice.Tensor");
KILN_DECLARE_OP(select_int, "aten.select.int");
KILN_DECLARE_OP(index_select, "aten.index_select.default");
KILN_DECLARE_OP(embedding, "aten.embedding.default");
KILN_DECLARE_OP(flatten_using_ints, "aten.flatten.using_ints");
KILN_DECLARE_OP(copy_, "aten.copy_.default");
KILN_DECLARE_OP(add__Tensor, "aten.add_.Tensor");
KILN_DECLARE_OP(mul__Tensor, "aten.mul_.Tensor");
KILN_DECLARE_OP(to_copy, "aten._to_copy.default");
KILN_DECLARE_OP(full, "aten.full.default");
KILN_DECLARE_OP(zeros, "aten.zeros.default");
KILN_DECLARE_OP(ones, "aten.ones.default");
KILN_DECLARE_OP(empty_memory_format, "aten.empty.memory_format");
KILN_DECLARE_OP(detach, "aten.detach.default");
KILN_DECLARE_OP(alias, "aten.alias.default");
KILN_DECLARE_OP(broadcast_to, "aten.broadcast_to.default");

// Packets as call targets: Inductor's passes call some ops by packet
// (aten.cat rather than aten.cat.default), and their nodes keep that target.
namespace packets {
KILN_DECLARE_OP(unsqueeze, "aten.unsqueeze");
KILN_DECLARE_OP(cat, "aten.cat");
KILN_DECLARE_OP(select, "aten.select");
KILN_DECLARE_OP(bmm, "aten.bmm");
KILN_DECLARE_OP(add, "aten.add");
}  // namespace packets

}  // namespace kiln::aten
