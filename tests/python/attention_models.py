"""torch.nn's attention and transformer layers, stock, for tools/export_fx.py
(tests/extra_tests.cmake runs kiln-run --compare on some of them):

    /usr/bin/python3 tools/export_fx.py tests.python.attention_models:EncoderLayer \\
        --input-shape 2,10,32 --level torch --out /tmp/enc

The input is one sequence batch: [batch, sequence, embed] for the batch_first
layers, [sequence, batch, embed] for the others. Factories:

SelfAttention / SelfAttentionSeqFirst: nn.MultiheadAttention (batch_first True
and False) called as self-attention, returning the output and the weights
averaged over heads; SelfAttentionNoWeights: need_weights=False.
EncoderLayer / EncoderLayerNormFirstGelu: nn.TransformerEncoderLayer (post-norm
relu, pre-norm gelu); Encoder: nn.TransformerEncoder of two layers;
DecoderLayer: nn.TransformerDecoderLayer with the input as its own memory.
SmallViT: torchvision's VisionTransformer at 32x32, two layers, two heads;
VitB16: torchvision's vit_b_16 (224x224). torchvision starts the classifier
head at zero, which would make every output its zero bias: both draw it at
random.
"""

import torch
import torch.nn as nn

EMBED, HEADS, FFN = 32, 4, 64


class _SelfAttention(nn.Module):
    def __init__(self, batch_first, need_weights):
        super().__init__()
        self.attn = nn.MultiheadAttention(EMBED, HEADS, batch_first=batch_first)
        self.need_weights = need_weights

    def forward(self, x):
        out, weights = self.attn(x, x, x, need_weights=self.need_weights)
        return (out, weights) if self.need_weights else out


class _DecoderSelfMemory(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(EMBED, HEADS, FFN, batch_first=True)

    def forward(self, x):
        return self.layer(x, x)


def SelfAttention():
    return _SelfAttention(batch_first=True, need_weights=True)


def SelfAttentionSeqFirst():
    return _SelfAttention(batch_first=False, need_weights=True)


def SelfAttentionNoWeights():
    return _SelfAttention(batch_first=True, need_weights=False)


def EncoderLayer():
    return nn.TransformerEncoderLayer(EMBED, HEADS, FFN, batch_first=True)


def EncoderLayerNormFirstGelu():
    return nn.TransformerEncoderLayer(EMBED, HEADS, FFN, activation="gelu", norm_first=True, batch_first=True)


def EncoderLayerSeqFirst():
    return nn.TransformerEncoderLayer(EMBED, HEADS, FFN)


def Encoder():
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(EMBED, HEADS, FFN, batch_first=True), num_layers=2)


def DecoderLayer():
    return _DecoderSelfMemory()


def _random_head(vit):
    with torch.no_grad():
        vit.heads.head.weight.normal_(0, 0.05)
        vit.heads.head.bias.uniform_(-0.1, 0.1)
    return vit


def SmallViT():
    from torchvision.models.vision_transformer import VisionTransformer
    return _random_head(VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128))


def VitB16():
    import torchvision
    return _random_head(torchvision.models.vit_b_16(weights=None))
