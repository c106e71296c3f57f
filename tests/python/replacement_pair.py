"""A search/replace pair written in Python, as a user of register_replacement
writes one, and a model it applies to. The CTest exports each with
tools/export_fx.py and runs kiln-opt --replacements over the model."""
import torch


class Search(torch.nn.Module):
    def forward(self, a, b, c):
        return torch.mm(a, b) + c


class Replace(torch.nn.Module):
    def forward(self, a, b, c):
        return torch.addmm(c, a, b)


class TwoLayers(torch.nn.Module):
    """mm + bias twice, with a relu between: two matches."""

    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(8, 8))
        self.b1 = torch.nn.Parameter(torch.randn(8))
        self.w2 = torch.nn.Parameter(torch.randn(8, 4))
        self.b2 = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        return torch.mm(torch.relu(torch.mm(x, self.w1) + self.b1), self.w2) + self.b2
