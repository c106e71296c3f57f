"""A small model for exercising tools/export_fx.py.

    /usr/bin/python3 tools/export_fx.py tests.python.small_model:SmallNet \\
        --input-shape 2,3,8,8 --out /tmp/smallnet

conv2d 3->8 (k3, pad 1) -> batch_norm -> relu -> mean over H, W -> split into
two halves -> cat back (reversed) -> linear 8->16 -> layer_norm -> relu.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class _SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 16)
        self.ln = nn.LayerNorm(16)
        # non-trivial running statistics, so that eval-mode batch norm does something
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = torch.mean(x, dim=(2, 3))           # [N, 8]
        a, b = torch.split(x, 4, dim=1)         # two [N, 4] halves
        x = torch.cat([b, a], dim=1)            # [N, 8]
        x = self.ln(self.fc(x))                 # [N, 16]
        return torch.relu(x)


def SmallNet():
    """Factory: build the model (call torch.manual_seed first for fixed weights)."""
    return _SmallNet()
