#pragma once
// torch-level callables as Dynamo and symbolic_trace graphs name them (`kiln::torch::cat` is "torch.cat").
#include "kiln/core/op_ref.hpp"

namespace kiln::torch {

KILN_DECLARE_OP(tanh, "torch.tanh");
KILN_DECLARE_OP(sigmoid, "torch.sigmoid");
KILN_DECLARE_OP(relu, "torch.relu");
KILN_DECLARE_OP(split, "torch.split");
KILN_DECLARE_OP(cat, "torch.cat");
KILN_DECLARE_OP(stack, "torch.stack");
KILN_DECLARE_OP(unbind, "torch.unbind");
KILN_DECLARE_OP(bmm, "torch.bmm");
KILN_DECLARE_OP(baddbmm, "torch.baddbmm");
KILN_DECLARE_OP(mm, "torch.mm");
KILN_DECLARE_OP(addmm, "torch.addmm");
KILN_DECLARE_OP(matmul, "torch.matmul");
KILN_DECLARE_OP(add, "torch.add");
KILN_DECLARE_OP(sub, "torch.sub");
KILN_DECLARE_OP(mul, "torch.mul");
KILN_DECLARE_OP(div, "torch.div");
KILN_DECLARE_OP(transpose, "torch.transpose");
KILN_DECLARE_OP(unsqueeze, "torch.unsqueeze");
KILN_DECLARE_OP(squeeze, "torch.squeeze");
KILN_DECLARE_OP(flatten, "torch.flatten");
KILN_DECLARE_OP(reshape, "torch.reshape");
KILN_DECLARE_OP(permute, "torch.permute");
KILN_DECLARE_OP(detach, "torch.detach");
KILN_DECLARE_OP(clamp, "torch.clamp");
KILN_DECLARE_OP(where, "torch.where");
KILN_DECLARE_OP(conv2d, "torch.conv2d");
KILN_DECLARE_OP(batch_norm, "torch.batch_norm");
KILN_DECLARE_OP(layer_norm, "torch.layer_norm");
KILN_DECLARE_OP(exp, "torch.exp");
KILN_DECLARE_OP(log, "torch.log");
KILN_DECLARE_OP(abs, "torch.abs");
KILN_DECLARE_OP(neg, "torch.neg");
KILN_DECLARE_OP(sum, "torch.sum");
KILN_DECLARE_OP(mean, "torch.mean");
KILN_DECLARE_OP(chunk, "torch.chunk");
KILN_DECLARE_OP(narrow, "torch.narrow");
KILN_DECLARE_OP(nan_to_num, "torch.nan_to_num");

}  // namespace kiln::torch
