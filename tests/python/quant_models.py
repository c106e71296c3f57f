"""Small models for tools/export_fx.py --quantize x86.

    /usr/bin/python3 tools/export_fx.py tests.python.quant_models:QuantMLP \\
        --input-shape 4,32 --level aten --quantize x86 --out /tmp/qmlp

QuantMLP: linear 32->64 -> relu, linear 64->64 -> gelu, linear 64->64 plus the
relu's output -> relu, linear 64->16 (the shape of the qmlp fixture: linears
with unary post-ops, a residual add, a plain last linear).
QuantConvNet: conv-relu twice, max-pool, cat of two conv branches, a residual
add, mean over H and W, linear (the conv net of issue 28's counters, small).
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


def QuantMLP():
    """Factory: build the MLP (call torch.manual_seed first for fixed weights)."""
    return _QuantMLP()


def QuantConvNet():
    """Factory: build the conv net (call torch.manual_seed first for fixed weights)."""
    return _QuantConvNet()
