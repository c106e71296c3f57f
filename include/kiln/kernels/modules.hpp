#pragma once
// Kernels of call_module nodes (torch.fx.symbolic_trace's leaf modules): each
// module lowers as its functional form (Conv2d as F.conv2d, BatchNorm2d as
// F.batch_norm in eval mode, ...), through LowerContext::lower_as and the
// functional kernel of the table in use, with the constructor attributes read
// from the graph's modules table (modules[PATH].attrs) and the parameters and
// buffers from the weights named PATH.weight, PATH.bias, PATH.running_mean, ...
// A missing attribute or parameter is an error naming the node and the field.
// Only kernel.hpp is needed here: the functional kernels are found at lowering.
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/module_attrs.hpp"
#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"

namespace kiln::kernels {

namespace module_detail {

using runtime::CallArg;

// The module a call_module node calls: its class, attributes and parameters.
class ModuleCall {
 public:
  // `inputs`: the tensors the module's forward takes (CosineSimilarity's two).
  explicit ModuleCall(runtime::LowerContext& ctx, std::size_t inputs = 1) : ctx_(ctx) {
    const Node& n = ctx.node();
    info_ = n.graph().modules().find(n.target_name());
    if (!info_) ctx.fail("the graph's modules table has no entry for '" + std::string(n.target_name()) + "'");
    try {
      attrs_ = ModuleAttrs(*info_);
    } catch (const Error& e) {
      ctx.fail(where() + e.what());
    }
    if (n.args().size() + n.kwargs().size() != inputs)
      ctx.fail(info_->class_name + " is called with " + std::to_string(n.args().size() + n.kwargs().size()) +
               " arguments; its kernel takes " + (inputs == 1 ? std::string("the input alone") : std::to_string(inputs) + " inputs"));
  }

  // The module's input, as the node gives it.
  CallArg input() const {
    const Node& n = ctx_.node();
    if (!n.args().empty()) return CallArg::of(n.arg(0));
    return CallArg::of(n.kwargs().begin()->second);
  }
  // Input `i` of a module of several, given positionally or as keyword `kw`.
  CallArg input(std::size_t i, std::string_view kw) const {
    const Node& n = ctx_.node();
    if (i < n.args().size()) return CallArg::of(n.arg(i));
    if (const Arg* a = n.kwargs().find(kw)) return CallArg::of(*a);
    ctx_.fail(where() + "input '" + std::string(kw) + "' is not given");
  }
  // Attribute `name`; an error naming it when absent.
  CallArg attr(std::string_view name) const {
    const Arg* a = attrs_.find(name);
    if (!a) ctx_.fail(where() + "attribute '" + std::string(name) + "' is missing");
    return CallArg::of(*a);
  }
  // Attribute `name`, or `dflt` when absent (attributes that do not change the result: inplace).
  CallArg attr_or(std::string_view name, Arg dflt) const {
    const Arg* a = attrs_.find(name);
    return CallArg::of(a ? *a : std::move(dflt));
  }
  bool bool_attr(std::string_view name) const {
    const Arg a = attr(name).arg;
    if (const auto* b = a.get_if<bool>()) return *b;
    ctx_.fail(where() + "attribute '" + std::string(name) + "' is not a bool");
  }
  std::string string_attr(std::string_view name) const {
    const Arg a = attr(name).arg;
    if (const auto* s = a.get_if<std::string>()) return *s;
    ctx_.fail(where() + "attribute '" + std::string(name) + "' is not a string");
  }
  // Parameter or buffer `name` (the weight PATH.name); an error naming it when not given.
  CallArg param(std::string_view name) const {
    const std::string full = info_->path + "." + std::string(name);
    const auto v = ctx_.weight(full);
    if (!v) ctx_.fail(where() + "parameter '" + std::string(name) + "' (weight '" + full + "') was not given");
    return CallArg::of_tensor(*v);
  }
  // Parameter `name`, or None where the module has none (a Conv2d built with bias=False).
  CallArg optional_param(std::string_view name) const {
    const auto v = ctx_.weight(info_->path + "." + std::string(name));
    return v ? CallArg::of_tensor(*v) : CallArg::of(Arg());
  }
  [[noreturn]] void fail(const std::string& what) const { ctx_.fail(where() + what); }
  void lower_as(std::string_view target, const std::vector<CallArg>& args) const { ctx_.lower_as(target, args); }
  runtime::LowerContext& ctx() const { return ctx_; }

 private:
  std::string where() const { return info_->class_name + " '" + info_->path + "': "; }
  runtime::LowerContext& ctx_;
  const ModuleInfo* info_ = nullptr;
  ModuleAttrs attrs_;
};

inline std::string nd_name(const char* stem, std::size_t nd) { return stem + std::to_string(nd) + "d"; }

// ConvNd: F.convNd(input, weight, bias, stride, padding, dilation, groups); padding may be 'same' / 'valid'.
// Another padding_mode pads first, as the module does: F.pad(input, padding reversed, each
// twice, mode), then the convolution unpadded.
template <std::size_t ND>
struct Conv {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    const std::string mode = m.string_attr("padding_mode");
    CallArg input = m.input(), padding = m.attr("padding");
    if (mode != "zeros") {
      const ArgList* l = padding.arg.list();
      if (!l || l->size() != ND) m.fail("padding_mode '" + mode + "' needs attribute 'padding' as " + std::to_string(ND) + " ints");
      ArgList pad, zeros;
      for (std::size_t k = ND; k-- > 0;) pad.push_back((*l)[k]), pad.push_back((*l)[k]), zeros.push_back(Arg(std::int64_t{0}));
      input = CallArg::of_tensor(
          ctx.lower_piece("torch.nn.functional.pad", {input, CallArg::of(Arg(pad)), CallArg::of(Arg(mode))}).id);
      padding = CallArg::of(Arg(zeros));
    }
    m.lower_as(nd_name("torch.nn.functional.conv", ND), {input, m.param("weight"), m.optional_param("bias"), m.attr("stride"),
                                                          padding, m.attr("dilation"), m.attr("groups")});
  }
};
// ConvTransposeNd: F.conv_transposeNd(input, weight, bias, stride, padding, output_padding, groups, dilation).
template <std::size_t ND>
struct ConvTranspose {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    if (const std::string mode = m.string_attr("padding_mode"); mode != "zeros")
      m.fail("attribute 'padding_mode' is '" + mode + "'; only 'zeros' is supported");
    m.lower_as(nd_name("torch.nn.functional.conv_transpose", ND),
               {m.input(), m.param("weight"), m.optional_param("bias"), m.attr("stride"), m.attr("padding"),
                m.attr("output_padding"), m.attr("groups"), m.attr("dilation")});
  }
};
// Linear: F.linear(input, weight, bias).
struct Linear {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.linear", {m.input(), m.param("weight"), m.optional_param("bias")});
  }
};
// BatchNormNd in eval mode: F.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps).
struct BatchNorm {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    if (!m.bool_attr("track_running_stats"))
      m.fail("attribute 'track_running_stats' is false: it normalizes by batch statistics, which inference does not use");
    const bool affine = m.bool_attr("affine");
    m.lower_as("torch.nn.functional.batch_norm",
               {m.input(), m.param("running_mean"), m.param("running_var"), affine ? m.param("weight") : CallArg::of(Arg()),
                affine ? m.param("bias") : CallArg::of(Arg()), CallArg::of(Arg(false)), CallArg::of(Arg(0.1)), m.attr("eps")});
  }
};
// LayerNorm: F.layer_norm(input, normalized_shape, weight, bias, eps).
struct LayerNorm {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    const bool affine = m.bool_attr("elementwise_affine");
    m.lower_as("torch.nn.functional.layer_norm",
               {m.input(), m.attr("normalized_shape"), affine ? m.param("weight") : CallArg::of(Arg()),
                affine ? m.optional_param("bias") : CallArg::of(Arg()), m.attr("eps")});
  }
};
// GroupNorm: F.group_norm(input, num_groups, weight, bias, eps).
struct GroupNorm {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    const bool affine = m.bool_attr("affine");
    m.lower_as("torch.nn.functional.group_norm", {m.input(), m.attr("num_groups"), affine ? m.param("weight") : CallArg::of(Arg()),
                                                  affine ? m.param("bias") : CallArg::of(Arg()), m.attr("eps")});
  }
};
// InstanceNormNd in eval mode: F.instance_norm(input, running_mean, running_var, weight, bias,
// use_input_stats, momentum, eps); the running statistics are used where they are tracked.
template <std::size_t ND>
struct InstanceNorm {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    const CallArg in = m.input();
    const Node* src = in.arg.node();
    if (!src || !ctx.lowered(src).is_tensor()) m.fail("its input is not a tensor");
    if (const std::size_t rank = ctx.layout(ctx.lowered(src).id).rank(); rank != ND + 2)
      m.fail("an input of rank " + std::to_string(rank) + " (unbatched) is not supported, only [N, C, ...] of rank " +
             std::to_string(ND + 2));
    const bool track = m.bool_attr("track_running_stats"), affine = m.bool_attr("affine");
    const CallArg none = CallArg::of(Arg());
    m.lower_as("torch.nn.functional.instance_norm",
               {in, track ? m.param("running_mean") : none, track ? m.param("running_var") : none,
                affine ? m.param("weight") : none, affine ? m.param("bias") : none, CallArg::of(Arg(!track)),
                CallArg::of(Arg(0.1)), m.attr("eps")});
  }
};
// Activations with no attribute that changes the result: F.op(input[, inplace]).
template <FixedString Target, bool Inplace>
struct Activation {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    if constexpr (Inplace) m.lower_as(Target.view(), {m.input(), m.attr_or("inplace", Arg(false))});
    else m.lower_as(Target.view(), {m.input()});
  }
};
// Modules (activations, LocalResponseNorm) whose attributes are the functional
// form's arguments after the input, in that order: F.op(input, attrs...) (inplace left out: it changes no value).
template <FixedString Target, FixedString... Attrs>
struct FunctionalWith {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    std::vector<CallArg> args{m.input()};
    (args.push_back(m.attr(Attrs.view())), ...);
    m.lower_as(Target.view(), args);
  }
};
// The padding layers: F.pad(input, padding, mode[, value]).
template <FixedString Mode>
struct Pad {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    std::vector<CallArg> args{m.input(), m.attr("padding"), CallArg::of(Arg(std::string(Mode.view())))};
    if (Mode.view() == "constant") args.push_back(m.attr("value"));
    m.lower_as("torch.nn.functional.pad", args);
  }
};
struct Prelu {  // F.prelu(input, weight)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.prelu", {m.input(), m.param("weight")});
  }
};
struct Softmax2d {  // F.softmax(input, -3): over the channels of [N, C, H, W] or [C, H, W]
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.softmax", {m.input(), CallArg::of(Arg(std::int64_t{-3}))});
  }
};
struct Gelu {  // F.gelu(input, approximate)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.gelu", {m.input(), m.attr_or("approximate", Arg("none"))});
  }
};
struct Hardtanh {  // Hardtanh and ReLU6: F.hardtanh(input, min_val, max_val, inplace)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.hardtanh",
               {m.input(), m.attr("min_val"), m.attr("max_val"), m.attr_or("inplace", Arg(false))});
  }
};
struct LeakyRelu {  // F.leaky_relu(input, negative_slope, inplace)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.leaky_relu", {m.input(), m.attr("negative_slope"), m.attr_or("inplace", Arg(false))});
  }
};
struct Dropout {  // eval mode: F.dropout(input, p, training=False), the identity
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.dropout", {m.input(), m.attr_or("p", Arg(0.5)), CallArg::of(Arg(false))});
  }
};
// MaxPoolNd: F.max_poolNd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices).
template <std::size_t ND>
struct MaxPool {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as(nd_name("torch.nn.functional.max_pool", ND),
               {m.input(), m.attr("kernel_size"), m.attr("stride"), m.attr("padding"), m.attr("dilation"), m.attr("ceil_mode"),
                m.attr_or("return_indices", Arg(false))});
  }
};
// AvgPoolNd: F.avg_poolNd(input, kernel_size, stride, padding, ceil_mode, count_include_pad[, divisor_override]).
template <std::size_t ND>
struct AvgPool {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    std::vector<CallArg> args{m.input(),          m.attr("kernel_size"), m.attr("stride"), m.attr("padding"),
                              m.attr("ceil_mode"), m.attr("count_include_pad")};
    if (ND > 1) args.push_back(m.attr_or("divisor_override", Arg()));
    m.lower_as(nd_name("torch.nn.functional.avg_pool", ND), args);
  }
};
// AdaptiveAvgPoolNd: F.adaptive_avg_poolNd(input, output_size).
template <std::size_t ND>
struct AdaptiveAvgPool {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as(nd_name("torch.nn.functional.adaptive_avg_pool", ND), {m.input(), m.attr("output_size")});
  }
};
// AdaptiveMaxPoolNd: F.adaptive_max_poolNd(input, output_size, return_indices).
template <std::size_t ND>
struct AdaptiveMaxPool {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as(nd_name("torch.nn.functional.adaptive_max_pool", ND),
               {m.input(), m.attr("output_size"), m.attr_or("return_indices", Arg(false))});
  }
};
struct CosineSimilarity {  // F.cosine_similarity(x1, x2, dim, eps)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx, 2);
    m.lower_as("torch.cosine_similarity", {m.input(0, "x1"), m.input(1, "x2"), m.attr("dim"), m.attr("eps")});
  }
};
struct PairwiseDistance {  // F.pairwise_distance(x1, x2, p, eps, keepdim); the module calls p `norm`
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx, 2);
    m.lower_as("torch.pairwise_distance",
               {m.input(0, "x1"), m.input(1, "x2"), m.attr("norm"), m.attr("eps"), m.attr("keepdim")});
  }
};
struct Unfold {  // F.unfold(input, kernel_size, dilation, padding, stride)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.unfold",
               {m.input(), m.attr("kernel_size"), m.attr("dilation"), m.attr("padding"), m.attr("stride")});
  }
};
struct Fold {  // F.fold(input, output_size, kernel_size, dilation, padding, stride)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.fold", {m.input(), m.attr("output_size"), m.attr("kernel_size"), m.attr("dilation"),
                                            m.attr("padding"), m.attr("stride")});
  }
};
struct Bilinear {  // F.bilinear(input1, input2, weight, bias)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx, 2);
    m.lower_as("torch.bilinear", {m.input(0, "input1"), m.input(1, "input2"), m.param("weight"), m.optional_param("bias")});
  }
};
struct Flatten {  // torch.flatten(input, start_dim, end_dim)
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.flatten", {m.input(), m.attr("start_dim"), m.attr("end_dim")});
  }
};
// Softmax / LogSoftmax: F.softmax(input, dim). dim=None takes PyTorch's legacy
// choice (0 for 0-, 1- and 3-d inputs, else 1), as the module does.
template <bool Log>
struct Softmax {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    CallArg dim = m.attr("dim");
    if (dim.arg.is_none()) {
      const CallArg in = m.input();
      const Node* src = in.arg.node();
      if (!src || !ctx.lowered(src).is_tensor()) m.fail("its input is not a tensor");
      const std::size_t rank = ctx.layout(ctx.lowered(src).id).rank();
      dim = CallArg::of(Arg(static_cast<std::int64_t>(rank == 0 || rank == 1 || rank == 3 ? 0 : 1)));
    }
    m.lower_as(Log ? "torch.nn.functional.log_softmax" : "torch.nn.functional.softmax", {m.input(), dim});
  }
};
// Embedding: F.embedding(input, weight); max_norm renormalizes the weight in
// place on every call, which a compiled graph does not do.
struct Embedding {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    if (!m.attr_or("max_norm", Arg()).arg.is_none()) m.fail("attribute 'max_norm' is set; renormalizing weights is not supported");
    m.lower_as("torch.nn.functional.embedding", {m.input(), m.param("weight")});
  }
};

// Upsample and its subclasses (UpsamplingNearest2d, UpsamplingBilinear2d, which
// set mode and align_corners): F.interpolate(input, size, scale_factor, mode,
// align_corners, recompute_scale_factor).
struct Upsample {
  static void lower(runtime::LowerContext& ctx) {
    const ModuleCall m(ctx);
    m.lower_as("torch.nn.functional.interpolate", {m.input(), m.attr_or("size", Arg()), m.attr_or("scale_factor", Arg()),
                                                    m.attr("mode"), m.attr_or("align_corners", Arg()),
                                                    m.attr_or("recompute_scale_factor", Arg())});
  }
};

}  // namespace module_detail

using module_kernels = KernelGroup<
    KernelEntry<"module:torch.nn.modules.conv.Conv1d", module_detail::Conv<1>>,
    KernelEntry<"module:torch.nn.modules.conv.Conv2d", module_detail::Conv<2>>,
    KernelEntry<"module:torch.nn.modules.conv.Conv3d", module_detail::Conv<3>>,
    KernelEntry<"module:torch.nn.modules.conv.ConvTranspose1d", module_detail::ConvTranspose<1>>,
    KernelEntry<"module:torch.nn.modules.conv.ConvTranspose2d", module_detail::ConvTranspose<2>>,
    KernelEntry<"module:torch.nn.modules.conv.ConvTranspose3d", module_detail::ConvTranspose<3>>,
    KernelEntry<"module:torch.nn.modules.linear.Linear", module_detail::Linear>,
    KernelEntry<"module:torch.nn.modules.batchnorm.BatchNorm1d", module_detail::BatchNorm>,
    KernelEntry<"module:torch.nn.modules.batchnorm.BatchNorm2d", module_detail::BatchNorm>,
    KernelEntry<"module:torch.nn.modules.batchnorm.BatchNorm3d", module_detail::BatchNorm>,
    KernelEntry<"module:torch.nn.modules.normalization.LayerNorm", module_detail::LayerNorm>,
    KernelEntry<"module:torch.nn.modules.normalization.GroupNorm", module_detail::GroupNorm>,
    KernelEntry<"module:torch.nn.modules.normalization.LocalResponseNorm",
                module_detail::FunctionalWith<"torch.nn.functional.local_response_norm", "size", "alpha", "beta", "k">>,
    KernelEntry<"module:torch.nn.modules.instancenorm.InstanceNorm1d", module_detail::InstanceNorm<1>>,
    KernelEntry<"module:torch.nn.modules.instancenorm.InstanceNorm2d", module_detail::InstanceNorm<2>>,
    KernelEntry<"module:torch.nn.modules.instancenorm.InstanceNorm3d", module_detail::InstanceNorm<3>>,
    KernelEntry<"module:torch.nn.modules.activation.ReLU", module_detail::Activation<"torch.nn.functional.relu", true>>,
    KernelEntry<"module:torch.nn.modules.activation.SiLU", module_detail::Activation<"torch.nn.functional.silu", true>>,
    KernelEntry<"module:torch.nn.modules.activation.Hardswish", module_detail::Activation<"torch.nn.functional.hardswish", true>>,
    KernelEntry<"module:torch.nn.modules.activation.Hardsigmoid", module_detail::Activation<"torch.nn.functional.hardsigmoid", true>>,
    KernelEntry<"module:torch.nn.modules.activation.Sigmoid", module_detail::Activation<"torch.sigmoid", false>>,
    KernelEntry<"module:torch.nn.modules.activation.Tanh", module_detail::Activation<"torch.tanh", false>>,
    KernelEntry<"module:torch.nn.modules.activation.GELU", module_detail::Gelu>,
    KernelEntry<"module:torch.nn.modules.activation.Hardtanh", module_detail::Hardtanh>,
    KernelEntry<"module:torch.nn.modules.activation.ReLU6", module_detail::Hardtanh>,
    KernelEntry<"module:torch.nn.modules.activation.LeakyReLU", module_detail::LeakyRelu>,
    KernelEntry<"module:torch.nn.modules.activation.ELU", module_detail::FunctionalWith<"torch.nn.functional.elu", "alpha">>,
    KernelEntry<"module:torch.nn.modules.activation.CELU", module_detail::FunctionalWith<"torch.nn.functional.celu", "alpha">>,
    KernelEntry<"module:torch.nn.modules.activation.SELU", module_detail::FunctionalWith<"torch.nn.functional.selu">>,
    KernelEntry<"module:torch.nn.modules.activation.Softplus",
                module_detail::FunctionalWith<"torch.nn.functional.softplus", "beta", "threshold">>,
    KernelEntry<"module:torch.nn.modules.activation.Softshrink", module_detail::FunctionalWith<"torch.nn.functional.softshrink", "lambd">>,
    KernelEntry<"module:torch.nn.modules.activation.Hardshrink", module_detail::FunctionalWith<"torch.nn.functional.hardshrink", "lambd">>,
    KernelEntry<"module:torch.nn.modules.activation.Threshold",
                module_detail::FunctionalWith<"torch.nn.functional.threshold", "threshold", "value">>,
    KernelEntry<"module:torch.nn.modules.activation.RReLU", module_detail::FunctionalWith<"torch.nn.functional.rrelu", "lower", "upper">>,
    KernelEntry<"module:torch.nn.modules.activation.Mish", module_detail::FunctionalWith<"torch.nn.functional.mish">>,
    KernelEntry<"module:torch.nn.modules.activation.Softsign", module_detail::FunctionalWith<"torch.nn.functional.softsign">>,
    KernelEntry<"module:torch.nn.modules.activation.Tanhshrink", module_detail::FunctionalWith<"torch.nn.functional.tanhshrink">>,
    KernelEntry<"module:torch.nn.modules.activation.LogSigmoid", module_detail::FunctionalWith<"torch.nn.functional.log_sigmoid">>,
    KernelEntry<"module:torch.nn.modules.activation.GLU", module_detail::FunctionalWith<"torch.nn.functional.glu", "dim">>,
    KernelEntry<"module:torch.nn.modules.activation.Softmin", module_detail::FunctionalWith<"torch.nn.functional.softmin", "dim">>,
    KernelEntry<"module:torch.nn.modules.pixelshuffle.PixelShuffle",
                module_detail::FunctionalWith<"torch.nn.functional.pixel_shuffle", "upscale_factor">>,
    KernelEntry<"module:torch.nn.modules.pixelshuffle.PixelUnshuffle",
                module_detail::FunctionalWith<"torch.nn.functional.pixel_unshuffle", "downscale_factor">>,
    KernelEntry<"module:torch.nn.modules.channelshuffle.ChannelShuffle",
                module_detail::FunctionalWith<"torch.nn.functional.channel_shuffle", "groups">>,
    KernelEntry<"module:torch.nn.modules.padding.ReflectionPad1d", module_detail::Pad<"reflect">>,
    KernelEntry<"module:torch.nn.modules.padding.ReplicationPad1d", module_detail::Pad<"replicate">>,
    KernelEntry<"module:torch.nn.modules.padding.ConstantPad1d", module_detail::Pad<"constant">>,
    KernelEntry<"module:torch.nn.modules.padding.ReflectionPad2d", module_detail::Pad<"reflect">>,
    KernelEntry<"module:torch.nn.modules.padding.ReplicationPad2d", module_detail::Pad<"replicate">>,
    KernelEntry<"module:torch.nn.modules.padding.ConstantPad2d", module_detail::Pad<"constant">>,
    KernelEntry<"module:torch.nn.modules.padding.ReflectionPad3d", module_detail::Pad<"reflect">>,
    KernelEntry<"module:torch.nn.modules.padding.ReplicationPad3d", module_detail::Pad<"replicate">>,
    KernelEntry<"module:torch.nn.modules.padding.ConstantPad3d", module_detail::Pad<"constant">>,
    KernelEntry<"module:torch.nn.modules.padding.ZeroPad2d", module_detail::Pad<"constant">>,
    KernelEntry<"module:torch.nn.modules.pooling.LPPool1d",
                module_detail::FunctionalWith<"torch.nn.functional.lp_pool1d", "norm_type", "kernel_size", "stride", "ceil_mode">>,
    KernelEntry<"module:torch.nn.modules.pooling.LPPool2d",
                module_detail::FunctionalWith<"torch.nn.functional.lp_pool2d", "norm_type", "kernel_size", "stride", "ceil_mode">>,
    KernelEntry<"module:torch.nn.modules.activation.PReLU", module_detail::Prelu>,
    KernelEntry<"module:torch.nn.modules.activation.Softmax2d", module_detail::Softmax2d>,
    KernelEntry<"module:torch.nn.modules.activation.Softmax", module_detail::Softmax<false>>,
    KernelEntry<"module:torch.nn.modules.activation.LogSoftmax", module_detail::Softmax<true>>,
    KernelEntry<"module:torch.nn.modules.dropout.Dropout", module_detail::Dropout>,
    KernelEntry<"module:torch.nn.modules.dropout.Dropout1d", module_detail::Dropout>,
    KernelEntry<"module:torch.nn.modules.dropout.Dropout2d", module_detail::Dropout>,
    KernelEntry<"module:torch.nn.modules.dropout.Dropout3d", module_detail::Dropout>,
    KernelEntry<"module:torch.nn.modules.pooling.MaxPool1d", module_detail::MaxPool<1>>,
    KernelEntry<"module:torch.nn.modules.pooling.MaxPool2d", module_detail::MaxPool<2>>,
    KernelEntry<"module:torch.nn.modules.pooling.MaxPool3d", module_detail::MaxPool<3>>,
    KernelEntry<"module:torch.nn.modules.pooling.AvgPool1d", module_detail::AvgPool<1>>,
    KernelEntry<"module:torch.nn.modules.pooling.AvgPool2d", module_detail::AvgPool<2>>,
    KernelEntry<"module:torch.nn.modules.pooling.AvgPool3d", module_detail::AvgPool<3>>,
    KernelEntry<"module:torch.nn.modules.pooling.AdaptiveAvgPool1d", module_detail::AdaptiveAvgPool<1>>,
    KernelEntry<"module:torch.nn.modules.pooling.AdaptiveAvgPool2d", module_detail::AdaptiveAvgPool<2>>,
    KernelEntry<"module:torch.nn.modules.pooling.AdaptiveAvgPool3d", module_detail::AdaptiveAvgPool<3>>,
    KernelEntry<"module:torch.nn.modules.pooling.AdaptiveMaxPool1d", module_detail::AdaptiveMaxPool<1>>,
    KernelEntry<"module:torch.nn.modules.pooling.AdaptiveMaxPool2d", module_detail::AdaptiveMaxPool<2>>,
    KernelEntry<"module:torch.nn.modules.pooling.AdaptiveMaxPool3d", module_detail::AdaptiveMaxPool<3>>,
    KernelEntry<"module:torch.nn.modules.distance.CosineSimilarity", module_detail::CosineSimilarity>,
    KernelEntry<"module:torch.nn.modules.distance.PairwiseDistance", module_detail::PairwiseDistance>,
    KernelEntry<"module:torch.nn.modules.flatten.Flatten", module_detail::Flatten>,
    KernelEntry<"module:torch.nn.modules.fold.Unfold", module_detail::Unfold>,
    KernelEntry<"module:torch.nn.modules.fold.Fold", module_detail::Fold>,
    KernelEntry<"module:torch.nn.modules.linear.Bilinear", module_detail::Bilinear>,
    KernelEntry<"module:torch.nn.modules.sparse.Embedding", module_detail::Embedding>,
    KernelEntry<"module:torch.nn.modules.upsampling.Upsample", module_detail::Upsample>,
    KernelEntry<"module:torch.nn.modules.upsampling.UpsamplingNearest2d", module_detail::Upsample>,
    KernelEntry<"module:torch.nn.modules.upsampling.UpsamplingBilinear2d", module_detail::Upsample>>;

}  // namespace kiln::kernels
