"""The towers model of the group/batch fusion issue, in the shape of the
fixture's Dynamo graph: split the input into n slices, each through its own
linear, layer-norm, tanh, relu and sigmoid, then cat."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Towers(nn.Module):
    def __init__(self, n, width=64):
        super().__init__()
        self.n, self.width = n, width
        self.lin = nn.ModuleList(nn.Linear(width, width) for _ in range(n))
        self.ln = nn.ModuleList(nn.LayerNorm(width) for _ in range(n))

    def forward(self, x):
        parts = torch.split(x, self.width, dim=1)
        outs = []
        for i in range(self.n):
            h = self.lin[i](parts[i])
            h = self.ln[i](h)
            h = torch.tanh(h)
            h = F.relu(h)
            h = torch.sigmoid(h)
            outs.append(h)
        return torch.cat(outs, dim=1)


def Towers64():
    """Factory: 64 towers of width 256 (input [32, 64 * 256]), the issue's execution benchmark."""
    return Towers(64, 256).eval()


def TowersFromEnv():
    """Factory: KILN_TOWERS=NxW (towers x width), for the cost-model grid of bench/group_batch_fusion/cost_line.sh."""
    n, width = (int(v) for v in os.environ["KILN_TOWERS"].split("x"))
    return Towers(n, width).eval()
