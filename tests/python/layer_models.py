"""Stock torch.nn layers not covered by module_models.py, grouped into a few
small models, exported at torch level, aten level and with --leaf-modules
(LEAF_MODULES) and compared with PyTorch eager (tests/extra_tests.cmake):

    /usr/bin/python3 tools/export_fx.py tests.python.layer_models:NormNet \\
        --input-shape 2,6,5,7/2,6,9/1,4,3,4,5 --level aten --out /tmp/norms

NormNet: GroupNorm (groups 1, 3 and C, with and without affine), InstanceNorm
1d/2d/3d (affine or not, running statistics tracked and used in eval),
LocalResponseNorm and LayerNorm over two dims.
ActivationNet: ELU, SELU, CELU, tanh GELU, Mish, Softplus (beta, threshold),
Softsign, the shrinks, Threshold, LogSigmoid, PReLU (1 and C slopes),
Hardsigmoid, RReLU in eval, Softmin, Softmax2d, LogSoftmax and GLU.
PadShuffleNet: Conv1d/Conv2d with padding_mode reflect and replicate, the
zero, constant, reflection and replication padding layers, PixelShuffle,
PixelUnshuffle, ChannelShuffle, Identity, LPPool1d/2d and flip.
PoolDistanceNet: max pooling with ceil_mode and with dilation, divisor_override,
transposed 1-d and 3-d convolution, adaptive max pooling in 1, 2 and 3 dims
(sizes that divide and that do not), CosineSimilarity and PairwiseDistance
(modules and functions, eps that clamps, other p, keepdim), zeros_like,
ones_like, full_like and empty_like, and einsums that are batched matrix products.
FoldBilinearNet: Unfold with kernel, dilation, padding and stride per dim,
Fold summing overlapping windows (modules and functions), an unfold/fold
round trip, Bilinear with and without bias over batched rows, and F.bilinear.
PoolConvNet (input shapes 2,4,6,8/2,4,8/1,4,4,4,5): LP and adaptive max
pooling, max pooling with ceil_mode and dilation, divisor_override, padding
modes, transposed 1-d and 3-d convolution, pixel and channel shuffles, the
padding layers, Fold/Unfold, Bilinear, CosineSimilarity, PairwiseDistance,
Flatten/Unflatten. At aten level torch 1.13 writes Conv2d's circular
padding_mode as new_empty, slices and in-place aten.copy_ into them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# The classes kept as call_module nodes, for --leaf-modules.
LEAF_MODULES = ",".join("torch.nn." + c for c in (
    "Conv1d", "Conv2d", "Conv3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LayerNorm", "LocalResponseNorm", "ReLU", "ELU", "SELU", "CELU", "GELU", "Mish", "Softplus", "Softsign", "Softshrink", "Hardshrink",
    "Tanhshrink", "Threshold", "LogSigmoid", "PReLU", "Hardsigmoid", "RReLU", "Softmin", "Softmax2d", "LogSoftmax",
    "GLU", "ZeroPad2d", "ConstantPad1d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle",
    "LPPool1d", "LPPool2d", "MaxPool2d", "AvgPool2d", "ConvTranspose1d", "ConvTranspose3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "CosineSimilarity", "PairwiseDistance", "Unfold", "Fold", "Bilinear"))


def _randomize(model):
    # weights and running statistics away from their identity defaults
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.GroupNorm, nn.modules.instancenorm._InstanceNorm, nn.LayerNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-1, 1)
                if getattr(m, "running_mean", None) is not None:
                    m.running_mean.uniform_(-1, 1)
                    m.running_var.uniform_(0.5, 2)


class _NormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(6, 6, 3, padding=1)
        self.gn = nn.ModuleList([nn.GroupNorm(3, 6), nn.GroupNorm(1, 6), nn.GroupNorm(6, 6, affine=False)])
        self.in2 = nn.InstanceNorm2d(6)
        self.in2a = nn.InstanceNorm2d(6, affine=True)
        self.in2t = nn.InstanceNorm2d(6, affine=True, track_running_stats=True)
        self.lrn = nn.LocalResponseNorm(3, alpha=0.1, beta=0.75, k=1.5)
        self.ln = nn.LayerNorm([5, 7])
        self.relu = nn.ReLU()
        self.in1 = nn.InstanceNorm1d(6, affine=True)
        self.gn1 = nn.GroupNorm(2, 6)
        self.in3 = nn.InstanceNorm3d(4)
        self.in3t = nn.InstanceNorm3d(4, track_running_stats=True)
        self.gn3 = nn.GroupNorm(2, 4)
        _randomize(self)

    def forward(self, x, seq, vol):
        x = self.conv(x)
        outs = [g(x) for g in self.gn]
        y = self.relu(self.in2a(self.in2(x)))
        outs += [y, self.in2t(x), self.lrn(x), self.ln(x)]
        outs += [self.gn1(self.in1(seq)), self.in3(vol), self.gn3(self.in3t(vol))]
        return tuple(outs)


def NormNet():
    return _NormNet()


class _ActivationNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.acts = nn.ModuleList([
            nn.ELU(0.7), nn.SELU(), nn.CELU(1.3), nn.GELU(approximate="tanh"), nn.Mish(), nn.Softplus(beta=2, threshold=3),
            nn.Softsign(), nn.Softshrink(0.3), nn.Hardshrink(0.4), nn.Tanhshrink(), nn.Threshold(0.2, -1.0),
            nn.LogSigmoid(), nn.PReLU(), nn.PReLU(6), nn.Hardsigmoid(), nn.RReLU(0.1, 0.3), nn.Softmin(dim=1),
            nn.Softmax2d(), nn.LogSoftmax(dim=-1)])
        self.glu = nn.GLU(dim=1)

    def forward(self, x):
        return tuple(a(x) for a in self.acts) + (self.glu(x),)


class _PadShuffleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"), nn.Conv2d(4, 4, 3, padding=(2, 1), padding_mode="replicate"),
            nn.ZeroPad2d((1, 2, 0, 1)), nn.ReflectionPad2d(2), nn.ReplicationPad2d((1, 0, 2, 1)),
            nn.PixelShuffle(2), nn.PixelUnshuffle(2), nn.ChannelShuffle(2), nn.Identity(),
            nn.LPPool2d(2, 3, stride=2)])
        self.seq = nn.ModuleList([nn.ReflectionPad1d((2, 1)), nn.ReplicationPad1d(1), nn.ConstantPad1d(2, 0.5),
                                  nn.LPPool1d(3, 2),
                                  nn.Conv1d(4, 3, 3, padding=1, padding_mode="reflect")])
        self.vol = nn.ModuleList([nn.ReplicationPad3d(1), nn.ConstantPad3d((1, 0, 0, 1, 1, 0), -1.0)])

    def forward(self, x, seq, vol):
        outs = [m(x) for m in self.layers] + [m(seq.abs()) for m in self.seq] + [m(vol) for m in self.vol]
        return tuple(outs + [x.flip(1, -1)])


class _PoolDistanceNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.MaxPool2d(3, stride=2, ceil_mode=True), nn.MaxPool2d(2, dilation=2), nn.AvgPool2d(3, stride=2, divisor_override=5),
            nn.AdaptiveMaxPool2d((3, 2)), nn.AdaptiveMaxPool2d((4, 5))])
        self.seq = nn.ModuleList([nn.AdaptiveMaxPool1d(3), nn.AdaptiveMaxPool1d(7), nn.ConvTranspose1d(4, 3, 3, stride=2)])
        self.vol = nn.ModuleList([nn.AdaptiveMaxPool3d(2), nn.AdaptiveMaxPool3d((3, None, 2)), nn.ConvTranspose3d(4, 2, 2, stride=2)])
        self.cos = nn.CosineSimilarity(dim=1)
        self.cos_eps = nn.CosineSimilarity(dim=-1, eps=2.0)
        self.dist = nn.PairwiseDistance()
        self.dist_p = nn.PairwiseDistance(p=1.5, eps=0.1, keepdim=True)

    def forward(self, x, seq, vol):
        outs = [m(x) for m in self.layers] + [m(seq) for m in self.seq] + [m(vol) for m in self.vol]
        outs += [self.cos(x, x.flip(1)), self.cos_eps(seq, seq * 0.5 + 0.1), self.dist(seq[:, 0], seq[:, 1]),
                 self.dist_p(seq, seq.flip(-1)), torch.cosine_similarity(x, x.mean(1, keepdim=True), dim=1),
                 torch.pairwise_distance(seq[:, 0], seq[:, 2], p=3.0)]
        outs += [torch.zeros_like(x) + x, torch.ones_like(seq, dtype=torch.float64), torch.full_like(vol, 0.5) * vol,
                 torch.empty_like(seq).fill_(2.0) - seq]
        q, k = x[:, :2], x[:, 2:]  # [2, 2, 6, 8] each
        outs += [torch.einsum("bhid,bhjd->bhij", q, k), torch.einsum("bhij,bhjd->bhid", torch.einsum("bhid,bhjd->bhij", q, k), k),
                 torch.einsum("bci,bcj->bij", seq, seq), torch.einsum("...ij,...jk->...ik", q, k.transpose(-1, -2)),
                 torch.einsum("bcl,bcl->bl", seq, seq)]
        return tuple(outs)


class _PoolConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.LPPool2d(2, 3, stride=2), nn.AdaptiveMaxPool2d((3, 2)), nn.MaxPool2d(3, stride=2, ceil_mode=True),
            nn.MaxPool2d(2, dilation=2), nn.AvgPool2d(3, stride=2, divisor_override=5),
            nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"), nn.Conv2d(4, 4, 3, padding=1, padding_mode="replicate"),
            nn.Conv2d(4, 4, 3, padding=2, padding_mode="circular"), nn.PixelShuffle(2), nn.PixelUnshuffle(2),
            nn.ChannelShuffle(2), nn.ZeroPad2d((1, 2, 0, 1)), nn.ReflectionPad2d(2), nn.ReplicationPad2d((1, 0, 2, 1)),
            nn.Identity(), nn.Flatten(2), nn.Unflatten(1, (2, 2))])
        self.seq = nn.ModuleList([nn.LPPool1d(2, 2), nn.AdaptiveMaxPool1d(3), nn.ConvTranspose1d(4, 3, 3, stride=2),
                                  nn.ReflectionPad1d(2), nn.ReplicationPad1d(1)])
        self.vol = nn.ModuleList([nn.AdaptiveMaxPool3d(2), nn.ConvTranspose3d(4, 2, 2, stride=2), nn.ReplicationPad3d(1)])
        self.unfold = nn.Unfold(2, stride=2)
        self.fold = nn.Fold((6, 8), 2, stride=2)
        self.bilinear = nn.Bilinear(8, 8, 3)
        self.cos = nn.CosineSimilarity(dim=1)
        self.dist = nn.PairwiseDistance()

    def forward(self, x, seq, vol):
        outs = [m(x) for m in self.layers] + [m(seq) for m in self.seq] + [m(vol) for m in self.vol]
        outs.append(self.fold(self.unfold(x)))
        outs += [self.bilinear(seq[:, 0], seq[:, 1]), self.cos(x, x.flip(1)), self.dist(seq[:, 0], seq[:, 1])]
        return tuple(outs)


class _FoldBilinearNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.unfold = nn.Unfold((3, 2), dilation=(2, 1), padding=(1, 2), stride=(2, 3))
        self.fold = nn.Fold((7, 6), (3, 2), dilation=(2, 1), padding=(1, 2), stride=(2, 3))
        self.unfold3 = nn.Unfold(3, padding=1)
        self.fold3 = nn.Fold((7, 6), 3, padding=1)
        self.bilinear = nn.Bilinear(5, 6, 3)
        self.bilinear_nobias = nn.Bilinear(6, 6, 2, bias=False)

    def forward(self, x, rows):
        u = self.unfold(x)
        outs = [u, self.fold(u), self.fold3(self.unfold3(x)), F.fold(F.unfold(x, 2, stride=2), (6, 6), 2, stride=2)]
        outs += [self.bilinear(rows[..., :5], rows), self.bilinear_nobias(rows, rows.flip(1)),
                 F.bilinear(rows[0, :, 1:], rows[1], self.bilinear.weight)]
        return tuple(outs)


def FoldBilinearNet():
    return _FoldBilinearNet()


def ActivationNet():
    return _ActivationNet()


def PadShuffleNet():
    return _PadShuffleNet()


def PoolDistanceNet():
    return _PoolDistanceNet()


def PoolConvNet():
    return _PoolConvNet()
