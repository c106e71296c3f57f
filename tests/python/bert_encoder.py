"""A BERT encoder written out in plain torch.nn, for tools/export_fx.py.

Debian has no ``transformers``; this is the same computation as its
``BertEncoder`` in eval mode (post-norm layers: self-attention, residual,
LayerNorm, then a GELU feed-forward, residual, LayerNorm), so graphs of a
transformer can be exported and run like any other model:

    /usr/bin/python3 tools/export_fx.py tests.python.bert_encoder:BertBase \\
        --input-shape 1,128,768 --out /tmp/bert_base

The input is the embedded sequence ``[batch, sequence, hidden]``. Factories:
``BertBase`` (12 layers, hidden 768, 12 heads, feed-forward 3072) and
``BertTiny`` (2 layers, hidden 64, 4 heads, feed-forward 128), for tests.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def split_heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)  # [b, heads, s, d]

    def forward(self, x):
        b, s, h = x.shape
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = F.softmax(scores, dim=-1)
        context = torch.matmul(probs, v)  # [b, heads, s, d]
        context = context.permute(0, 2, 1, 3).contiguous().view(b, s, h)
        return self.out(context)


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ff):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ff)
        self.output = nn.Linear(ff, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class Encoder(nn.Module):
    def __init__(self, layers, hidden, heads, ff):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ff) for _ in range(layers))
        # Non-trivial norm parameters, so that a kernel that ignores them is caught.
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def BertBase():
    """Factory: BERT-base's encoder (call torch.manual_seed first for fixed weights)."""
    return Encoder(layers=12, hidden=768, heads=12, ff=3072)


def BertTiny():
    """Factory: a two-layer encoder of the same shape of graph, small enough for tests."""
    return Encoder(layers=2, hidden=64, heads=4, ff=128)
