"""Ops the executor gained beyond ResNet's and BERT's, in one model each level
exports (tests/extra_tests.cmake runs kiln-run --compare on them):

    /usr/bin/python3 tools/export_fx.py tests.python.op_coverage:ConvPoolNet \\
        --input-shape 2,4,33 --input-shape 1,3,5,7,6 --input-shape 2,3,7,33 --out /tmp/ops

ConvPoolNet: conv1d + batch-norm + relu, conv3d + batch-norm + relu,
transposed convolution 1-, 2- and 3-d (output_padding, groups, dilation),
adaptive average and max pooling to sizes that do not divide (max with its
indices), max pooling with its indices, average pooling with divisor_override.
LayerNormStats (aten level): native_layer_norm with its mean and rstd read.
ResizeNet: F.interpolate in every mode kiln runs (nearest, nearest-exact,
linear, bilinear, bicubic, trilinear, area) on 1-, 2- and 3-d inputs, by size
and by scale factor (scalar, per dim, recomputed), corners aligned or not, up
and down, and after a convolution (a channels-last input).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class _ConvPoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)
        self.b1 = nn.BatchNorm1d(6)
        self.c3 = nn.Conv3d(3, 4, (3, 1, 2), padding=(1, 0, 1), dilation=(1, 1, 2))
        self.b3 = nn.BatchNorm3d(4)
        self.t1 = nn.ConvTranspose1d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.t2 = nn.ConvTranspose2d(3, 5, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2))
        self.t2d = nn.ConvTranspose2d(3, 6, 3, padding=2, dilation=2, groups=3)
        self.t3 = nn.ConvTranspose3d(3, 2, 2, stride=2, output_padding=1)
        # non-trivial running statistics, so that eval-mode batch norm does something
        with torch.no_grad():
            for bn in (self.b1, self.b3):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-1, 1)

    def forward(self, x1, x3, x2):
        a = torch.relu(self.b1(self.c1(x1)))
        b = torch.relu(self.b3(self.c3(x3)))
        h, hi = F.adaptive_max_pool2d(x2, (3, 5), return_indices=True)
        m, mi = F.max_pool2d(x2, 3, 2, 1, 2, True, return_indices=True)
        return (a, b, self.t1(a), self.t2(x2), self.t2d(x2), self.t3(x3), F.adaptive_avg_pool2d(x2, (3, 5)), h, hi, m, mi,
                F.avg_pool2d(x2, 3, 2, 1, True, False, divisor_override=5))


class _LayerNormStats(nn.Module):
    def forward(self, x):
        return torch.native_layer_norm(x, [33], None, None, 1e-5)


class _ResizeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x2, x1, x3):
        c = self.conv(x2)
        i = F.interpolate
        return (i(x2, size=(11, 13)), i(c, scale_factor=1.7), i(x2, scale_factor=(2.0, 0.5)),
                i(c, scale_factor=2.3, mode="nearest-exact"), i(x2, size=(4, 3), mode="nearest-exact"),
                i(c, size=(17, 15), mode="bilinear"), i(x2, size=(5, 4), mode="bilinear", align_corners=True),
                i(c, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
                i(x2, scale_factor=(1.3, 0.6), mode="bilinear"), i(c, size=c.shape[-2:], mode="bilinear"),
                i(x2, size=(13, 11), mode="bicubic"), i(c, scale_factor=0.6, mode="bicubic", align_corners=True),
                i(x2, size=(4, 3), mode="area"),
                i(x1, scale_factor=1.5), i(x1, size=10, mode="linear", align_corners=True), i(x1, size=4, mode="linear"),
                i(x3, scale_factor=(1.5, 2.0, 0.6)), i(x3, size=(5, 3, 8), mode="trilinear"),
                i(x3, scale_factor=1.7, mode="trilinear", align_corners=True))


def ConvPoolNet():
    return _ConvPoolNet()


def LayerNormStats():
    return _LayerNormStats()


def ResizeNet():
    return _ResizeNet()
