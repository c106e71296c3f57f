#pragma once
// torch.nn.functional callables (`kiln::F::linear` is "torch.nn.functional.linear").
#include "kiln/core/op_ref.hpp"

namespace kiln::F {

KILN_DECLARE_OP(linear, "torch.nn.functional.linear");
KILN_DECLARE_OP(layer_norm, "torch.nn.functional.layer_norm");
KILN_DECLARE_OP(batch_norm, "torch.nn.functional.batch_norm");
KILN_DECLARE_OP(group_norm, "torch.nn.functional.group_norm");
KILN_DECLARE_OP(relu, "torch.nn.functional.relu");
KILN_DECLARE_OP(gelu, "torch.nn.functional.gelu");
KILN_DECLARE_OP(silu, "torch.nn.functional.silu");
KILN_DECLARE_OP(tanh, "torch.nn.functional.tanh");
KILN_DECLARE_OP(sigmoid, "torch.nn.functional.sigmoid");
KILN_DECLARE_OP(hardtanh, "torch.nn.functional.hardtanh");
KILN_DECLARE_OP(leaky_relu, "torch.nn.functional.leaky_relu");
KILN_DECLARE_OP(hardswish, "torch.nn.functional.hardswish");
KILN_DECLARE_OP(max_pool2d, "torch.nn.functional.max_pool2d");
KILN_DECLARE_OP(avg_pool2d, "torch.nn.functional.avg_pool2d");
KILN_DECLARE_OP(adaptive_avg_pool2d, "torch.nn.functional.adaptive_avg_pool2d");
KILN_DECLARE_OP(softmax, "torch.nn.functional.softmax");
KILN_DECLARE_OP(log_softmax, "torch.nn.functional.log_softmax");
KILN_DECLARE_OP(dropout, "torch.nn.functional.dropout");
KILN_DECLARE_OP(embedding, "torch.nn.functional.embedding");

}  // namespace kiln::F
