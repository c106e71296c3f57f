#!/usr/bin/env python3
"""Small quantize/dequantize graphs with PyTorch's own outputs, to check kiln's
kernels against them bit for bit.

Needs a PyTorch that registers quantized_decomposed (2.0 or later; Debian's
1.13 does not). Each case is a folder kiln-run reads (graph.json, manifest.json,
inputs/, outputs/):

    qdq_reference.py OUTDIR
    kiln-run OUTDIR/per_tensor --compare OUTDIR/per_tensor/outputs --rtol 0 --atol 0

Cases: per_tensor (ties, both ends clamped, int8/uint8, bfloat16 in and out),
tensor_overloads (float32/float64 scales, int64/int32 zero points),
per_channel (axes 1, 0 of a permuted view, -1, no zero points, bfloat16),
casts (float32, bfloat16, uint8, int8), and qmlp (the graph of
shared/fixtures/inductor/qmlp_exported.json.gz with seeded weights, placeholders
in the fixture's order, so its inputs serve the fixture too). bfloat16 has no
.npy form: it enters and leaves a graph through convert_element_type.
"""

import json
import os
import sys

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

OPS = {"aten": torch.ops.aten, "prims": torch.ops.prims, "quantized_decomposed": torch.ops.quantized_decomposed}
DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16", torch.int8: "int8",
          torch.uint8: "uint8", torch.int32: "int32", torch.int64: "int64"}
Q = "quantized_decomposed.quantize_per_tensor."
DQ = "quantized_decomposed.dequantize_per_tensor."
QC = "quantized_decomposed.quantize_per_channel.default"
DC = "quantized_decomposed.dequantize_per_channel.default"
CONVERT = "prims.convert_element_type.default"
u8, s8, bf16, f32 = torch.uint8, torch.int8, torch.bfloat16, torch.float32


def op(target):
    head, name, overload = target.split(".")
    return getattr(getattr(OPS[head], name), overload)


class Ref:
    def __init__(self, name):
        self.name = name


class Builder:
    """A graph written node by node, each node run in PyTorch as it is added."""

    def __init__(self, root, name):
        self.root, self.name, self.nodes, self.values, self.inputs = root, name, [], {}, []

    def placeholder(self, name, value):
        meta = {"shape": list(value.shape), "dtype": DTYPES[value.dtype]}
        self.nodes.append({"name": name, "op": "placeholder", "target": name, "args": [], "kwargs": {},
                           "meta": {"val": meta}})
        self.values[name] = value
        self.inputs.append(name)
        return Ref(name)

    def encode(self, a):
        if isinstance(a, Ref):
            return {"node": a.name}
        if isinstance(a, torch.dtype):
            return {"dtype": DTYPES[a]}
        if isinstance(a, list):
            return [self.encode(x) for x in a]
        return a

    def value(self, a):
        return self.values[a.name] if isinstance(a, Ref) else a

    def __call__(self, target, *args, **kwargs):
        name = "n%d" % len(self.nodes)
        self.values[name] = op(target)(*[self.value(a) for a in args], **{k: self.value(v) for k, v in kwargs.items()})
        self.nodes.append({"name": name, "op": "call_function", "target": target,
                           "args": [self.encode(a) for a in args],
                           "kwargs": {k: self.encode(v) for k, v in kwargs.items()}})
        return Ref(name)

    def write(self, outputs):
        d = os.path.join(self.root, self.name)
        os.makedirs(os.path.join(d, "inputs"))
        os.makedirs(os.path.join(d, "outputs"))
        output = {"name": "output", "op": "output", "target": "output",
                  "args": [[self.encode(o) for o in outputs]], "kwargs": {}}
        with open(os.path.join(d, "graph.json"), "w") as f:
            json.dump({"format": "fx-graph-json", "version": 1, "name": self.name, "nodes": self.nodes + [output]}, f)
        files = ["inputs/input_%d.npy" % i for i in range(len(self.inputs))]
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump({"inputs": files}, f)
        for file, name in zip(files, self.inputs):
            np.save(os.path.join(d, file), self.values[name].numpy())
        for i, o in enumerate(outputs):
            np.save(os.path.join(d, "outputs", "output_%d.npy" % i), self.value(o).contiguous().numpy())


def per_tensor(root, randn):
    b = Builder(root, "per_tensor")
    x = randn(64, 33) * 2
    flat = x.view(-1)
    # Values next to the half-way points of x * float32(1 / 0.0123), exact ties
    # of x * 4 (odd multiples of 1/8), and two that clamp.
    base = (torch.arange(100.0) - 49.5) * torch.tensor(0.0123)
    ties = torch.cat([base, torch.nextafter(base, torch.tensor(9e9)), torch.nextafter(base, torch.tensor(-9e9)),
                      torch.arange(-15, 16, 2.0) / 8, torch.tensor([1e3, -1e3])])
    flat[: ties.numel()] = ties
    x = b.placeholder("x", x)
    q1 = b(Q + "default", x, 0.0123, 128, 0, 255, u8)
    q2 = b(Q + "default", x, 0.25, -3, -128, 127, s8)
    xb = b(CONVERT, x, bf16)
    b.write([q1, b(DQ + "default", q1, 0.0123, 128, 0, 255, u8), q2,
             b(CONVERT, b(DQ + "default", q2, 0.25, -3, -128, 127, s8, out_dtype=bf16), f32),
             b(Q + "default", x, 0.031, 2, -10, 10, s8),
             b(CONVERT, b(DQ + "default", q1, 0.0173, 131, 0, 255, u8, out_dtype=bf16), f32),
             b(Q + "default", xb, 0.0117, 5, 0, 255, u8), b(CONVERT, xb, f32)])


def tensor_overloads(root, randn):
    b = Builder(root, "tensor_overloads")
    x = b.placeholder("x", randn(9, 17))
    s = b.placeholder("s", torch.tensor(0.0131))
    z = b.placeholder("z", torch.tensor([129]))
    s64 = b.placeholder("s6", torch.tensor([0.0217], dtype=torch.float64))
    z32 = b.placeholder("z3", torch.tensor(-4, dtype=torch.int32))
    q = b(Q + "tensor", x, s, z, 0, 255, u8)
    q8 = b(Q + "tensor", x, s64, z32, -128, 127, s8)
    b.write([q, b(DQ + "tensor", q, s, z, 0, 255, u8), q8,
             b(CONVERT, b(DQ + "tensor", q8, s64, z32, -128, 127, s8, out_dtype=bf16), f32)])


def per_channel(root, randn, gen):
    b = Builder(root, "per_channel")
    w = b.placeholder("w", randn(8, 16, 5))
    s = b.placeholder("s", torch.rand(16, generator=gen) * 0.02 + 0.005)
    z = b.placeholder("z", torch.randint(-5, 6, (16,), generator=gen))
    s5 = b.placeholder("s5", torch.rand(5, generator=gen) * 0.03 + 0.005)
    z5 = b.placeholder("z5", torch.randint(0, 9, (5,), generator=gen))
    q = b(QC, w, s, z, 1, -128, 127, s8)
    wt = b("aten.permute.default", w, [2, 0, 1])  # a strided input, the channels first
    qt = b(QC, wt, s5, z5, 0, 0, 255, u8)
    b.write([q, b(DC, q, s, z, 1, -128, 127, s8), b(CONVERT, b(DC, q, s, None, 1, -128, 127, s8, out_dtype=bf16), f32),
             qt, b(DC, qt, s5, z5, 0, 0, 255, u8), b(QC, b(CONVERT, w, bf16), s5, z5, -1, 0, 255, u8)])


def casts(root, randn):
    b = Builder(root, "casts")
    x = b.placeholder("x", randn(7, 13) * 30)
    u = b(CONVERT, b("aten.abs.default", x), u8)
    i = b(CONVERT, x, s8)
    b.write([b(CONVERT, b(CONVERT, x, bf16), f32), u, i, b(CONVERT, u, f32), b(CONVERT, b(CONVERT, i, bf16), f32)])


def qmlp(root, randn, gen):
    b = Builder(root, "qmlp")
    weights = {}
    for layer, (n_out, n_in) in zip("1234", [(64, 32), (64, 64), (64, 64), (16, 64)]):
        weights[layer] = (
            b.placeholder("b_l%s_wq" % layer, torch.randint(-128, 128, (n_out, n_in), generator=gen, dtype=s8)),
            b.placeholder("b_l%s_ws" % layer, torch.rand(n_out, generator=gen) * 0.01 + 0.001),
            b.placeholder("b_l%s_wz" % layer, torch.zeros(n_out, dtype=torch.int64)),
            b.placeholder("b_l%s_b" % layer, randn(n_out)))
    x = b.placeholder("x", randn(4, 8, 32))

    def qdq(v, scale, zp):
        return b(DQ + "default", b(Q + "default", v, scale, zp, 0, 255, u8), scale, zp, 0, 255, u8)

    def linear(v, layer):
        wq, ws, wz, bias = weights[layer]
        return b("aten.linear.default", v, b(DC, wq, ws, wz, 0, -128, 127, s8), bias)

    a = qdq(b("aten.relu.default", linear(qdq(x, 0.05, 128), "1")), 0.02, 0)
    c = qdq(b("aten.gelu.default", linear(a, "2")), 0.02, 0)
    b.write([linear(qdq(b("aten.relu.default", b("aten.add.Tensor", linear(a, "3"), c)), 0.02, 0), "4")])


def main():
    root = sys.argv[1]
    gen = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    per_tensor(root, randn)
    tensor_overloads(root, randn)
    per_channel(root, randn, gen)
    casts(root, randn)
    qmlp(root, randn, gen)
    print("torch", torch.__version__, "wrote", sorted(os.listdir(root)))


if __name__ == "__main__":
    main()
