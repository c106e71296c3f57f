"""Vision models for the executor's tests, with batch-norm parameters and
running statistics drawn at random: torchvision's defaults (weight 1, bias 0,
mean 0, variance 1) make batch-norm nearly the identity, which would hide a
kernel or a conv-bn fold that ignores them."""
import torch
import torchvision


def _randomize_batch_norms(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
    return model.eval()


def ResNet50():
    """Factory: torchvision's ResNet-50 (random weights), batch-norms randomized."""
    return _randomize_batch_norms(torchvision.models.resnet50())


# Segmentation models (no pretrained weights): each returns {'out': ...}, which
# the exporter writes as its list of values; every head up-samples its logits
# to the input's size with F.interpolate (bilinear).
def FcnResNet50():
    """Factory: torchvision's FCN with a ResNet-50 backbone, batch-norms randomized."""
    return _randomize_batch_norms(torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None))


def DeepLabV3MobileNetV3():
    """Factory: torchvision's DeepLabV3 with a MobileNetV3-Large backbone, batch-norms randomized."""
    return _randomize_batch_norms(
        torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None))


def LRASPPMobileNetV3():
    """Factory: torchvision's LR-ASPP with a MobileNetV3-Large backbone, batch-norms randomized."""
    return _randomize_batch_norms(
        torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None))


def ResNet18():
    """Factory: torchvision's ResNet-18 (random weights), batch-norms randomized."""
    return _randomize_batch_norms(torchvision.models.resnet18())


def MobileNetV2():
    """Factory: torchvision's MobileNetV2 (random weights), batch-norms randomized."""
    return _randomize_batch_norms(torchvision.models.mobilenet_v2())
