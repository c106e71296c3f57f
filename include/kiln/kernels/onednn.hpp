#pragma once
// Kernels on oneDNN 2.6 primitives, created once when lowering: matrix products, convolution, normalization, pooling, softmax.
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/onednn/batch_norm.hpp"
#include "kiln/kernels/onednn/convolution.hpp"
#include "kiln/kernels/onednn/layer_norm.hpp"
#include "kiln/kernels/onednn/matmul.hpp"
#include "kiln/kernels/onednn/pooling.hpp"
#include "kiln/kernels/onednn/softmax.hpp"

namespace kiln::kernels {

inline constexpr auto onednn_kernels = boost::hana::tuple_t<
    // matrix products (onednn/matmul.hpp)
    Kernel<"aten.mm.default">, Kernel<"torch.mm">, Kernel<"aten.bmm.default">, Kernel<"aten.bmm">, Kernel<"torch.bmm">,
    Kernel<"aten.addmm.default">, Kernel<"torch.addmm">, Kernel<"aten.baddbmm.default">, Kernel<"torch.baddbmm">,
    Kernel<"aten.matmul.default">, Kernel<"torch.matmul">, Kernel<"Tensor.matmul">, Kernel<"operator.matmul">,
    Kernel<"aten.linear.default">, Kernel<"torch.nn.functional.linear">, Kernel<"kiln.grouped_mm">,
    // softmax (onednn/softmax.hpp)
    Kernel<"aten._softmax.default">, Kernel<"aten._log_softmax.default">, Kernel<"torch.nn.functional.softmax">,
    Kernel<"torch.softmax">, Kernel<"Tensor.softmax">, Kernel<"torch.nn.functional.log_softmax">, Kernel<"torch.log_softmax">,
    Kernel<"Tensor.log_softmax">,
    // layer norm (onednn/layer_norm.hpp)
    Kernel<"torch.nn.functional.layer_norm">, Kernel<"aten.layer_norm.default">, Kernel<"aten.native_layer_norm.default">,
    // convolution (onednn/convolution.hpp)
    Kernel<"aten.convolution.default">, Kernel<"torch.conv2d">, Kernel<"torch.nn.functional.conv2d">,
    Kernel<"torch.conv1d">, Kernel<"torch.conv3d">, Kernel<"torch.nn.functional.conv1d">, Kernel<"torch.nn.functional.conv3d">,
    Kernel<"aten.conv1d.default">, Kernel<"aten.conv2d.default">, Kernel<"aten.conv3d.default">, Kernel<"aten.conv1d.padding">,
    Kernel<"aten.conv2d.padding">, Kernel<"aten.conv3d.padding">,
    Kernel<"torch.conv_transpose1d">, Kernel<"torch.conv_transpose2d">, Kernel<"torch.conv_transpose3d">,
    Kernel<"torch.nn.functional.conv_transpose1d">, Kernel<"torch.nn.functional.conv_transpose2d">,
    Kernel<"torch.nn.functional.conv_transpose3d">,
    // batch norm (onednn/batch_norm.hpp)
    Kernel<"torch.nn.functional.batch_norm">, Kernel<"aten.batch_norm.default">, Kernel<"torch.batch_norm">,
    Kernel<"aten.native_batch_norm.default">, Kernel<"aten._native_batch_norm_legit_no_training.default">,
    // pooling (onednn/pooling.hpp)
    Kernel<"torch.nn.functional.max_pool2d">, Kernel<"torch.max_pool2d">, Kernel<"aten.max_pool2d.default">,
    Kernel<"aten.max_pool2d_with_indices.default">, Kernel<"torch.nn.functional.avg_pool2d">, Kernel<"aten.avg_pool2d.default">,
    Kernel<"torch.nn.functional.adaptive_avg_pool2d">, Kernel<"aten.adaptive_avg_pool2d.default">,
    Kernel<"aten._adaptive_avg_pool2d.default">, Kernel<"torch.nn.functional.max_pool2d_with_indices">,
    Kernel<"torch.nn.functional.adaptive_max_pool2d">, Kernel<"torch.nn.functional.adaptive_max_pool2d_with_indices">,
    Kernel<"aten.adaptive_max_pool2d.default">, Kernel<"torch.nn.functional.max_pool1d">, Kernel<"torch.max_pool1d">,
    Kernel<"aten.max_pool1d.default">, Kernel<"torch.nn.functional.max_pool1d_with_indices">,
    Kernel<"torch.nn.functional.max_pool3d">, Kernel<"torch.max_pool3d">, Kernel<"aten.max_pool3d.default">,
    Kernel<"aten.max_pool3d_with_indices.default">, Kernel<"torch.nn.functional.max_pool3d_with_indices">,
    Kernel<"torch.nn.functional.avg_pool1d">, Kernel<"torch.avg_pool1d">, Kernel<"aten.avg_pool1d.default">,
    Kernel<"torch.nn.functional.avg_pool3d">, Kernel<"aten.avg_pool3d.default">,
    Kernel<"torch.nn.functional.adaptive_avg_pool1d">, Kernel<"torch.adaptive_avg_pool1d">,
    Kernel<"aten.adaptive_avg_pool1d.default">, Kernel<"torch.nn.functional.adaptive_avg_pool3d">,
    Kernel<"aten.adaptive_avg_pool3d.default">, Kernel<"aten._adaptive_avg_pool3d.default">>;

}  // namespace kiln::kernels
