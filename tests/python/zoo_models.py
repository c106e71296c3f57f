"""Stock torchvision classification models for the zoo test, by name:
``tests.python.zoo_models:googlenet`` is torchvision's ``googlenet(weights=None)``.

torchvision's initial weights make poor test cases: batch-norms are nearly the
identity, and in deep nets whose convolutions start small (GoogLeNet,
Inception) the features fade to zero, so the output is the classifier's bias
and any kernel would "match". Here every convolution and linear weight is drawn
with variance 1 / fan-in, biases and batch-norm statistics at random, all from
the seed the exporter sets. (He's 2 / fan-in makes residual nets chaotic:
EfficientNetV2-S's float32 and float64 outputs then differ by 30 %, so no
float32 executor could match; at 1 / fan-in every model here agrees with its
float64 self to 1e-6.)"""
import math

import torch
import torchvision

# The zoo: every entry is exported at both levels and compared with PyTorch
# (tests/extra_tests.cmake, label zoo; bench/zoo_run.sh on other machines), as
# (test name, factory, input shape). Inputs are the smallest each model takes
# (Inception-v3 needs 75x75); AlexNet at 96x96 so that its average pool
# up-samples 2x2 to 6x6; Swin-T and Swin-V2-T at 64x64 (16x16 patches, then 8,
# 4, 2); the segmentation heads up-sample their logits to the input's size.
_ZOO_SIZES = {
    "resnet18": 32, "resnext50_32x4d": 32, "wide_resnet50_2": 32, "squeezenet1_0": 32, "squeezenet1_1": 32,
    "densenet121": 32, "googlenet": 32, "inception_v3": 80, "mobilenet_v2": 32, "mobilenet_v3_small": 32,
    "mobilenet_v3_large": 32, "efficientnet_b0": 32, "efficientnet_v2_s": 32, "convnext_tiny": 32,
    "regnet_x_400mf": 32, "regnet_y_400mf": 32, "shufflenet_v2_x1_0": 32, "mnasnet0_5": 32, "mnasnet1_0": 32,
    "resnet34": 32,
}
ZOO = [("zoo_%s" % name, "tests.python.zoo_models:%s" % name, "1,3,%d,%d" % (size, size))
       for name, size in _ZOO_SIZES.items()] + [
    ("alexnet", "torchvision.models:alexnet", "1,3,96,96"),
    ("swin_t", "torchvision.models:swin_t", "1,3,64,64"),
    ("swin_v2_t", "torchvision.models:swin_v2_t", "1,3,64,64"),
    ("deeplabv3_mobilenet", "tests.python.vision_models:DeepLabV3MobileNetV3", "1,3,64,64"),
    ("lraspp_mobilenet", "tests.python.vision_models:LRASPPMobileNetV3", "1,3,64,64"),
]

# Beyond CI's two cores (a 224x224 input, ResNet-50 backbones, video clips):
# bench/zoo_run.sh runs these with ZOO_SETS=ZOO,ZOO_LARGE.
ZOO_LARGE = [("zoo_%s" % name, "tests.python.zoo_models:%s" % name, shape) for name, shape in (
    ("vgg11_bn", "1,3,32,32"), ("efficientnet_b1", "1,3,32,32"), ("regnet_y_800mf", "1,3,32,32"),
    ("shufflenet_v2_x0_5", "1,3,32,32"), ("maxvit_t", "1,3,224,224"), ("fcn_resnet50", "1,3,64,64"),
    ("deeplabv3_resnet50", "1,3,64,64"), ("r3d_18", "1,3,4,32,32"), ("mc3_18", "1,3,4,32,32"),
    ("r2plus1d_18", "1,3,4,32,32"),
    # S3D's last average pool takes 2x7x7: 16 frames of 224x224 is the smallest clip.
    ("s3d", "1,3,16,224,224"))]

# Factories that need an argument beyond weights=None.
_KWARGS = {
    "googlenet": {"aux_logits": False, "init_weights": False},
    "inception_v3": {"aux_logits": False, "init_weights": False},
}


def _reinitialize(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, math.sqrt(1.0 / fan_in))
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1)
            elif isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torch.nn.LayerNorm, torch.nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)
                if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 2.0)
    return model.eval()


def __getattr__(name):
    # Classification models live in torchvision.models, the others in its
    # segmentation and video modules (segmentation without backbone weights).
    for where, extra in ((torchvision.models, {}),
                         (torchvision.models.segmentation, {"weights_backbone": None, "aux_loss": False}),
                         (torchvision.models.video, {})):
        if not name.startswith("_") and hasattr(where, name):
            break
    else:
        raise AttributeError(name)

    def factory():
        return _reinitialize(getattr(where, name)(weights=None, **extra, **_KWARGS.get(name, {})))

    factory.__name__ = name
    return factory
