#pragma once
// Kernels on oneDNN 2.6 primitives, created once when lowering: matrix products, convolution, normalization, pooling, softmax,
// int8 linear, and attention composed of them.
#include "kiln/kernels/instance_norm.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/local_response_norm.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/onednn/attention.hpp"
#include "kiln/kernels/onednn/batch_norm.hpp"
#include "kiln/kernels/onednn/convolution.hpp"
#include "kiln/kernels/onednn/layer_norm.hpp"
#include "kiln/kernels/onednn/matmul.hpp"
#include "kiln/kernels/onednn/pooling.hpp"
#include "kiln/kernels/onednn/qconv.hpp"
#include "kiln/kernels/onednn/qlinear.hpp"
#include "kiln/kernels/onednn/qpooling.hpp"
#include "kiln/kernels/onednn/softmax.hpp"
#include "kiln/kernels/onednn/weight_int8pack_mm.hpp"

namespace kiln::kernels {

using onednn_kernels = KernelGroup<
    // matrix products (onednn/matmul.hpp)
    KernelEntry<"aten.mm.default", onednn_detail::Mm>,
    KernelEntry<"torch.mm", onednn_detail::Mm>,
    KernelEntry<"aten.bmm.default", onednn_detail::Bmm>,
    KernelEntry<"aten.bmm", onednn_detail::Bmm>,
    KernelEntry<"torch.bmm", onednn_detail::Bmm>,
    KernelEntry<"aten.addmm.default", onednn_detail::AddMm<2>>,
    KernelEntry<"torch.addmm", onednn_detail::AddMm<2>>,
    KernelEntry<"aten.baddbmm.default", onednn_detail::AddMm<3>>,
    KernelEntry<"torch.baddbmm", onednn_detail::AddMm<3>>,
    KernelEntry<"aten.matmul.default", onednn_detail::Matmul>,
    KernelEntry<"torch.matmul", onednn_detail::Matmul>,
    KernelEntry<"Tensor.matmul", onednn_detail::Matmul>,
    KernelEntry<"operator.matmul", onednn_detail::Matmul>,
    KernelEntry<"aten.linear.default", onednn_detail::Linear>,
    KernelEntry<"torch.nn.functional.linear", onednn_detail::Linear>,
    KernelEntry<"kiln.grouped_mm", onednn_detail::GroupedMm>,
    // softmax (onednn/softmax.hpp)
    KernelEntry<"aten._softmax.default", onednn_detail::AtenSoftmax<false>>,
    KernelEntry<"aten._log_softmax.default", onednn_detail::AtenSoftmax<true>>,
    KernelEntry<"torch.nn.functional.softmax", onednn_detail::TorchSoftmax<false>>,
    KernelEntry<"torch.softmax", onednn_detail::TorchSoftmax<false>>,
    KernelEntry<"Tensor.softmax", onednn_detail::TorchSoftmax<false>>,
    KernelEntry<"torch.nn.functional.log_softmax", onednn_detail::TorchSoftmax<true>>,
    KernelEntry<"torch.log_softmax", onednn_detail::TorchSoftmax<true>>,
    KernelEntry<"Tensor.log_softmax", onednn_detail::TorchSoftmax<true>>,
    // attention (onednn/attention.hpp)
    KernelEntry<"torch.nn.functional.multi_head_attention_forward", onednn_detail::FunctionalMultiHeadAttention>,
    KernelEntry<"aten._native_multi_head_attention.default", onednn_detail::NativeMultiHeadAttention>,
    KernelEntry<"aten._transformer_encoder_layer_fwd.default", onednn_detail::TransformerEncoderLayer>,
    // layer norm (onednn/layer_norm.hpp)
    KernelEntry<"torch.nn.functional.layer_norm", onednn_detail::LayerNorm>,
    KernelEntry<"aten.layer_norm.default", onednn_detail::LayerNorm>,
    KernelEntry<"aten.native_layer_norm.default", onednn_detail::NativeLayerNorm>,
    // convolution (onednn/convolution.hpp)
    KernelEntry<"aten.convolution.default", onednn_detail::AtenConvolution>,
    KernelEntry<"torch.conv2d", onednn_detail::TorchConv<2>>,
    KernelEntry<"torch.nn.functional.conv2d", onednn_detail::TorchConv<2>>,
    KernelEntry<"torch.conv1d", onednn_detail::TorchConv<1>>,
    KernelEntry<"torch.conv3d", onednn_detail::TorchConv<3>>,
    KernelEntry<"torch.nn.functional.conv1d", onednn_detail::TorchConv<1>>,
    KernelEntry<"torch.nn.functional.conv3d", onednn_detail::TorchConv<3>>,
    KernelEntry<"aten.conv1d.default", onednn_detail::TorchConv<1>>,
    KernelEntry<"aten.conv2d.default", onednn_detail::TorchConv<2>>,
    KernelEntry<"aten.conv3d.default", onednn_detail::TorchConv<3>>,
    KernelEntry<"aten.conv1d.padding", onednn_detail::TorchConv<1>>,
    KernelEntry<"aten.conv2d.padding", onednn_detail::TorchConv<2>>,
    KernelEntry<"aten.conv3d.padding", onednn_detail::TorchConv<3>>,
    KernelEntry<"torch.conv_transpose1d", onednn_detail::TorchConvTranspose<1>>,
    KernelEntry<"torch.conv_transpose2d", onednn_detail::TorchConvTranspose<2>>,
    KernelEntry<"torch.conv_transpose3d", onednn_detail::TorchConvTranspose<3>>,
    KernelEntry<"torch.nn.functional.conv_transpose1d", onednn_detail::TorchConvTranspose<1>>,
    KernelEntry<"torch.nn.functional.conv_transpose2d", onednn_detail::TorchConvTranspose<2>>,
    KernelEntry<"torch.nn.functional.conv_transpose3d", onednn_detail::TorchConvTranspose<3>>,
    // batch norm (onednn/batch_norm.hpp)
    KernelEntry<"torch.nn.functional.batch_norm", onednn_detail::FBatchNorm>,
    KernelEntry<"aten.batch_norm.default", onednn_detail::AtenBatchNorm<false>>,
    KernelEntry<"torch.batch_norm", onednn_detail::AtenBatchNorm<false>>,
    KernelEntry<"aten.native_batch_norm.default", onednn_detail::AtenBatchNorm<true>>,
    KernelEntry<"aten._native_batch_norm_legit_no_training.default", onednn_detail::LegitNoTraining>,
    KernelEntry<"aten._native_batch_norm_legit.default", onednn_detail::Legit>,
    KernelEntry<"aten._native_batch_norm_legit.no_stats", onednn_detail::LegitNoStats>,
    // norms by the input's own statistics (group_norm.hpp, instance_norm.hpp)
    KernelEntry<"torch.nn.functional.group_norm", norm_detail::GroupNorm>,
    KernelEntry<"torch.group_norm", norm_detail::GroupNorm>,
    KernelEntry<"aten.group_norm.default", norm_detail::GroupNorm>,
    KernelEntry<"aten.native_group_norm.default", norm_detail::NativeGroupNorm>,
    KernelEntry<"torch.nn.functional.instance_norm", norm_detail::FInstanceNorm>,
    KernelEntry<"torch.instance_norm", norm_detail::AtenInstanceNorm>,
    KernelEntry<"aten.instance_norm.default", norm_detail::AtenInstanceNorm>,
    KernelEntry<"torch.nn.functional.local_response_norm", norm_detail::LocalResponseNorm>,
    // pooling (onednn/pooling.hpp)
    KernelEntry<"torch.nn.functional.max_pool2d", onednn_detail::MaxPool<2, false>>,
    KernelEntry<"torch.max_pool2d", onednn_detail::MaxPool<2, false>>,
    KernelEntry<"aten.max_pool2d.default", onednn_detail::MaxPool<2, false>>,
    KernelEntry<"aten.max_pool2d_with_indices.default", onednn_detail::MaxPool<2, true>>,
    KernelEntry<"torch.nn.functional.avg_pool2d", onednn_detail::AvgPool<2>>,
    KernelEntry<"aten.avg_pool2d.default", onednn_detail::AvgPool<2>>,
    KernelEntry<"torch.nn.functional.adaptive_avg_pool2d", onednn_detail::AdaptiveAvgPool<2>>,
    KernelEntry<"aten.adaptive_avg_pool2d.default", onednn_detail::AdaptiveAvgPool<2>>,
    KernelEntry<"aten._adaptive_avg_pool2d.default", onednn_detail::AdaptiveAvgPool<2>>,
    KernelEntry<"torch.nn.functional.max_pool2d_with_indices", onednn_detail::MaxPool<2, true>>,
    KernelEntry<"torch.nn.functional.adaptive_max_pool2d", onednn_detail::AdaptiveMaxPool<2, false>>,
    KernelEntry<"torch.nn.functional.adaptive_max_pool2d_with_indices", onednn_detail::AdaptiveMaxPool<2, true>>,
    KernelEntry<"aten.adaptive_max_pool2d.default", onednn_detail::AdaptiveMaxPool<2, true>>,
    KernelEntry<"torch.nn.functional.adaptive_max_pool1d", onednn_detail::AdaptiveMaxPool<1, false>>,
    KernelEntry<"torch.nn.functional.adaptive_max_pool1d_with_indices", onednn_detail::AdaptiveMaxPool<1, true>>,
    KernelEntry<"torch.adaptive_max_pool1d", onednn_detail::AdaptiveMaxPool<1, true>>,  // torch's form returns both
    KernelEntry<"aten.adaptive_max_pool1d.default", onednn_detail::AdaptiveMaxPool<1, true>>,
    KernelEntry<"torch.nn.functional.adaptive_max_pool3d", onednn_detail::AdaptiveMaxPool<3, false>>,
    KernelEntry<"torch.nn.functional.adaptive_max_pool3d_with_indices", onednn_detail::AdaptiveMaxPool<3, true>>,
    KernelEntry<"aten.adaptive_max_pool3d.default", onednn_detail::AdaptiveMaxPool<3, true>>,
    KernelEntry<"torch.nn.functional.max_pool1d", onednn_detail::MaxPool<1, false>>,
    KernelEntry<"torch.max_pool1d", onednn_detail::MaxPool<1, false>>,
    KernelEntry<"aten.max_pool1d.default", onednn_detail::MaxPool<1, false>>,
    KernelEntry<"torch.nn.functional.max_pool1d_with_indices", onednn_detail::MaxPool<1, true>>,
    KernelEntry<"torch.nn.functional.max_pool3d", onednn_detail::MaxPool<3, false>>,
    KernelEntry<"torch.max_pool3d", onednn_detail::MaxPool<3, false>>,
    KernelEntry<"aten.max_pool3d.default", onednn_detail::MaxPool<3, false>>,
    KernelEntry<"aten.max_pool3d_with_indices.default", onednn_detail::MaxPool<3, true>>,
    KernelEntry<"torch.nn.functional.max_pool3d_with_indices", onednn_detail::MaxPool<3, true>>,
    KernelEntry<"torch.nn.functional.avg_pool1d", onednn_detail::AvgPool<1>>,
    KernelEntry<"torch.avg_pool1d", onednn_detail::AvgPool<1>>,
    KernelEntry<"aten.avg_pool1d.default", onednn_detail::AvgPool<1>>,
    KernelEntry<"torch.nn.functional.avg_pool3d", onednn_detail::AvgPool<3>>,
    KernelEntry<"aten.avg_pool3d.default", onednn_detail::AvgPool<3>>,
    KernelEntry<"torch.nn.functional.adaptive_avg_pool1d", onednn_detail::AdaptiveAvgPool<1>>,
    KernelEntry<"torch.adaptive_avg_pool1d", onednn_detail::AdaptiveAvgPool<1>>,
    KernelEntry<"aten.adaptive_avg_pool1d.default", onednn_detail::AdaptiveAvgPool<1>>,
    KernelEntry<"torch.nn.functional.adaptive_avg_pool3d", onednn_detail::AdaptiveAvgPool<3>>,
    KernelEntry<"aten.adaptive_avg_pool3d.default", onednn_detail::AdaptiveAvgPool<3>>,
    KernelEntry<"aten._adaptive_avg_pool3d.default", onednn_detail::AdaptiveAvgPool<3>>,
    // int8 max pooling (onednn/qpooling.hpp)
    KernelEntry<"quantized.max_pool2d.default", onednn_detail::QMaxPool2d>,
    // int8 convolution (onednn/qconv.hpp)
    KernelEntry<"onednn.qconv_prepack.default", onednn_detail::QConvPrepack>,
    KernelEntry<"onednn.qconv_pointwise.default", onednn_detail::QConvPointwise<false>>,
    KernelEntry<"onednn.qconv_pointwise.tensor", onednn_detail::QConvPointwise<true>>,
    KernelEntry<"onednn.qconv2d_pointwise.default", onednn_detail::QConvPointwise<false>>,
    KernelEntry<"onednn.qconv2d_pointwise.binary", onednn_detail::QConvPointwiseBinary<false>>,
    KernelEntry<"onednn.qconv2d_pointwise.binary_tensor", onednn_detail::QConvPointwiseBinary<true>>,
    // int8 linear (onednn/qlinear.hpp)
    KernelEntry<"onednn.qlinear_prepack.default", onednn_detail::QLinearPrepack>,
    KernelEntry<"onednn.qlinear_pointwise.default", onednn_detail::QLinearPointwise<false>>,
    KernelEntry<"onednn.qlinear_pointwise.tensor", onednn_detail::QLinearPointwise<true>>,
    KernelEntry<"onednn.qlinear_pointwise.binary", onednn_detail::QLinearPointwiseBinary<false>>,
    KernelEntry<"onednn.qlinear_pointwise.binary_tensor", onednn_detail::QLinearPointwiseBinary<true>>,
    // weight-only int8 (onednn/weight_int8pack_mm.hpp)
    KernelEntry<"aten._weight_int8pack_mm.default", onednn_detail::WeightInt8PackMm>>;

}  // namespace kiln::kernels
