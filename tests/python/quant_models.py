"""Small models for tools/export_fx.py --quantize x86.

    /usr/bin/python3 tools/export_fx.py tests.python.quant_models:QuantMLP \\
        --input-shape 4,32 --level aten --quantize x86 --out /tmp/qmlp

QuantMLP: linear 32->64 -> relu, linear 64->64 -> gelu, linear 64->64 plus the
relu's output -> relu, linear 64->16 (the shape of the qmlp fixture: linears
with unary post-ops, a residual add, a plain last linear).
QuantConvNet: conv-relu twice, max-pool, cat of two conv branches, a residual
add, mean over H and W, linear (the conv net of issue 28's counters, small).
QuantConv1dNet: the same over a sequence (Conv1d): conv-relu, conv-relu with a
residual add, mean over the length, linear (Inductor 2.11 prepacks and fuses
1-d convolutions as 2-d ones, 3-d ones not at all).
WoqMLP: weight-only int8 (export with --dtype bfloat16): two linears whose
weights are int8 buffers converted to the input's dtype and scaled per output
channel, `F.linear(x, w.to(x.dtype)) * scales`, with a gelu between; the second
written as `mm(x, w.t().to(x.dtype))`, the form Inductor's fourth woq pattern
matches.
WoqLinear, WoqLinearT, WoqLinearStrided, WoqConcatLinear: one woq product each,
as F.linear, as w.t().to() into mm, over an input transposed first (torch 2.x
runs it as bmm), and three products of one input (concat-linear's form), for
bench/quantization/inductor_woq.py's side-by-side counters.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class _QuantMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(32, 64)
        self.l2 = nn.Linear(64, 64)
        self.l3 = nn.Linear(64, 64)
        self.l4 = nn.Linear(64, 16)

    def forward(self, x):
        a = F.relu(self.l1(x))
        b = F.gelu(self.l2(a))
        c = F.relu(self.l3(a) + b)
        return self.l4(c)


class _QuantConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.c4 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        y = torch.cat([x, F.relu(self.c3(x))], dim=1)
        y = F.relu(self.c4(y) + y)
        return self.fc(torch.mean(y, dim=(2, 3)))


class _QuantConv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 3, padding=1)
        self.c2 = nn.Conv1d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.relu(self.c2(x) + x)
        return self.fc(torch.mean(x, dim=2))


class _WoqMLP(nn.Module):
    def __init__(self, k=64, hidden=96, n=32):
        super().__init__()
        # int8 buffers stay int8 under module.to(bfloat16); the scales follow the dtype.
        self.register_buffer("w1", torch.randint(-128, 128, (hidden, k), dtype=torch.int8))
        self.register_buffer("s1", torch.rand(hidden) * 0.02 + 0.005)
        self.register_buffer("w2", torch.randint(-128, 128, (n, hidden), dtype=torch.int8))
        self.register_buffer("s2", torch.rand(n) * 0.02 + 0.005)

    def forward(self, x):
        h = F.gelu(F.linear(x, self.w1.to(dtype=x.dtype)) * self.s1)
        flat = h.reshape(-1, h.shape[-1])
        y = torch.mm(flat, self.w2.t().to(x.dtype)) * self.s2
        return y.reshape(*h.shape[:-1], y.shape[-1])


def QuantMLP():
    """Factory: build the MLP (call torch.manual_seed first for fixed weights)."""
    return _QuantMLP()


def QuantConvNet():
    """Factory: build the conv net (call torch.manual_seed first for fixed weights)."""
    return _QuantConvNet()


def QuantConv1dNet():
    """Factory: build the 1-d conv net (call torch.manual_seed first for fixed weights)."""
    return _QuantConv1dNet()


def WoqMLP():
    """Factory: the weight-only int8 MLP (call torch.manual_seed first for fixed weights)."""
    return _WoqMLP()


class _WoqLinear(nn.Module):
    def __init__(self, form, k=64, n=32):
        super().__init__()
        self.form = form
        self.register_buffer("w", torch.randint(-128, 128, (n, k), dtype=torch.int8))
        self.register_buffer("s", torch.rand(n) * 0.02 + 0.005)

    def forward(self, x):
        if self.form == "strided":
            x = x.transpose(0, 1)
        if self.form == "t_then_to":
            m = torch.mm(x.reshape(-1, x.shape[-1]), self.w.t().to(x.dtype)) * self.s
            return m.reshape(*x.shape[:-1], m.shape[-1])
        return F.linear(x, self.w.to(dtype=x.dtype)) * self.s


class _WoqConcatLinear(nn.Module):
    def __init__(self, k=64, ns=(16, 24, 8)):
        super().__init__()
        for i, n in enumerate(ns):
            self.register_buffer("w%d" % i, torch.randint(-128, 128, (n, k), dtype=torch.int8))
        self.register_buffer("s", torch.rand(sum(ns)) * 0.02 + 0.005)
        self.ns = list(ns)

    def forward(self, x):
        ss = torch.split(self.s, self.ns)
        return tuple(F.linear(x, getattr(self, "w%d" % i).to(x.dtype)) * ss[i] for i in range(len(self.ns)))


def WoqLinear():
    """Factory: F.linear(x, w.to(x.dtype)) * s."""
    return _WoqLinear("linear")


def WoqLinearT():
    """Factory: mm(x.reshape(-1, K), w.t().to(x.dtype)) * s, reshaped back."""
    return _WoqLinear("t_then_to")


def WoqLinearStrided():
    """Factory: the woq linear over x.transpose(0, 1)."""
    return _WoqLinear("strided")


def WoqConcatLinear():
    """Factory: three woq linears of one input."""
    return _WoqConcatLinear()
