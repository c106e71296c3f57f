"""Models whose torch.nn layers stay call_module nodes when exported with
--leaf-modules (as torch.fx.symbolic_trace keeps every torch.nn module), so
that kiln-run runs them through its call_module kernels (kernels/modules.hpp)
and compares with PyTorch eager (tests/extra_tests.cmake):

    /usr/bin/python3 tools/export_fx.py tests.python.module_models:VisionNet \\
        --input-shape 2,3,33,31 --level torch --leaf-modules <LEAF_MODULES> --out /tmp/vision

VisionNet: a small ResNet-like network (stem conv + batch-norm + relu + max
pooling, a residual block, a 'same'-padded grouped conv, average pooling,
dropout, adaptive average pooling, flatten, linear, layer norm, gelu, softmax).
SeqVolNet: 1-d and 3-d layers (conv, batch-norm, pooling, adaptive pooling),
a transposed convolution, an embedding and the other activations.
UpsampleNet: nn.Upsample (nearest, bilinear, bicubic, by size or by scale
factor, recomputed), UpsamplingNearest2d and UpsamplingBilinear2d after a
convolution, and a 1-d and a 3-d Upsample.
"""

import torch
import torch.nn as nn

# The classes kept as call_module nodes, for --leaf-modules.
LEAF_MODULES = ",".join("torch.nn." + c for c in (
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "Linear", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "LayerNorm", "ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "Hardtanh", "LeakyReLU", "Hardswish",
    "Dropout", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "Flatten", "Softmax", "LogSoftmax", "Embedding",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"))


def _randomize_norms(model):
    # non-trivial statistics, so that eval-mode batch norm does something
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-1, 1)


class _VisionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.block_conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.block_bn1 = nn.BatchNorm2d(8)
        self.block_relu = nn.ReLU()
        self.block_conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.block_bn2 = nn.BatchNorm2d(8)
        self.same = nn.Conv2d(8, 12, (3, 2), padding="same", dilation=(1, 2), groups=4)
        self.act = nn.LeakyReLU(0.1)
        self.avgpool = nn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False)
        self.drop = nn.Dropout(0.3)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(12, 10)
        self.norm = nn.LayerNorm(10)
        self.gelu = nn.GELU()
        self.softmax = nn.Softmax(dim=1)
        _randomize_norms(self)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        y = self.block_relu(self.block_bn1(self.block_conv1(x)))
        y = self.block_bn2(self.block_conv2(y))
        x = self.relu(x + y)
        x = self.avgpool(self.act(self.same(x)))
        x = self.flatten(self.pool(self.drop(x)))
        return self.softmax(self.gelu(self.norm(self.fc(x))))


class _SeqVolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.c1 = nn.Conv1d(6, 8, 3, stride=2, padding=1, groups=2)
        self.b1 = nn.BatchNorm1d(8)
        self.a1 = nn.SiLU()
        self.p1 = nn.MaxPool1d(3, stride=2, padding=1)
        self.q1 = nn.AvgPool1d(2)
        self.g1 = nn.AdaptiveAvgPool1d(3)
        self.c3 = nn.Conv3d(2, 4, (3, 1, 2), padding=(1, 0, 1), dilation=(1, 1, 2))
        self.b3 = nn.BatchNorm3d(4)
        self.a3 = nn.Hardtanh(-0.5, 0.8)
        self.p3 = nn.MaxPool3d((2, 2, 1), stride=(1, 2, 1))
        self.q3 = nn.AvgPool3d(2, stride=1, padding=1)
        self.g3 = nn.AdaptiveAvgPool3d((2, None, 1))
        self.t2 = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.acts = nn.ModuleList([nn.Sigmoid(), nn.Tanh(), nn.ReLU6(), nn.Hardswish()])
        self.logsm = nn.LogSoftmax(dim=-1)
        _randomize_norms(self)

    def forward(self, x, vol):
        tokens = torch.clamp((x.abs() * 4).to(torch.int64), max=10)  # the exporter's inputs are float
        s = self.emb(tokens).transpose(1, 2)  # [N, 6, L]
        s = self.g1(self.q1(self.p1(self.a1(self.b1(self.c1(s))))))
        v = self.a3(self.b3(self.c3(vol)))
        v = self.g3(self.q3(self.p3(v)))  # [N, 4, 2, H', 1]
        t = self.t2(v.squeeze(-1))
        for a in self.acts:
            t = a(t)
        return self.logsm(s), t


class _UpsampleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.ups = nn.ModuleList([
            nn.Upsample(scale_factor=2), nn.Upsample(size=(11, 13), mode="bilinear"),
            nn.Upsample(scale_factor=(1.7, 0.6), mode="bilinear", align_corners=True),
            nn.Upsample(scale_factor=1.3, mode="bicubic", recompute_scale_factor=True),
            nn.Upsample(size=(4, 5), mode="nearest-exact"),
            nn.UpsamplingNearest2d(scale_factor=1.5), nn.UpsamplingBilinear2d(size=(6, 17))])
        self.up1 = nn.Upsample(scale_factor=2.5, mode="linear")
        self.up3 = nn.Upsample(size=(4, 6, 3), mode="trilinear")

    def forward(self, x, seq, vol):
        c = self.conv(x)
        return tuple(u(c) for u in self.ups) + (self.up1(seq), self.up3(vol))


def VisionNet():
    return _VisionNet()


def SeqVolNet():
    return _SeqVolNet()


def UpsampleNet():
    return _UpsampleNet()
