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
            elif isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 2.0)
    return model.eval()


def __getattr__(name):
    if name.startswith("_") or not hasattr(torchvision.models, name):
        raise AttributeError(name)

    def factory():
        return _reinitialize(getattr(torchvision.models, name)(weights=None, **_KWARGS.get(name, {})))

    factory.__name__ = name
    return factory
