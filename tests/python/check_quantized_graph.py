#!/usr/bin/env python3
"""Checks the form of a graph written by ``export_fx.py --quantize x86``.

    check_quantized_graph.py DIR [--expect conv=N,linear=N,cat=N,max_pool=N]

Every convolution and linear reads its activation through a uint8
quantize -> dequantize pair (quant range 0..255) and its weight through
dequantize_per_channel of an int8 constant (axis 0, -128..127, zero points 0,
float32 scales, and in every channel a value of magnitude 127 or 128, as a
symmetric scale of max|w| / 127.5 gives); a max-pool's output pair and a cat's input and
output pairs share one scale and zero point. Prints "ok" and exits 0, or
prints each violation and exits 1. Needs numpy only.
"""

import json
import os
import sys

import numpy as np

Q = "quantized_decomposed.quantize_per_tensor.default"
DQ = "quantized_decomposed.dequantize_per_tensor.default"
DQC = "quantized_decomposed.dequantize_per_channel.default"


def load(folder):
    with open(os.path.join(folder, "graph.json")) as f:
        doc = json.load(f)
    nodes = {n["name"]: n for n in doc["nodes"]}
    weights = {k: np.load(os.path.join(folder, v["file"])) for k, v in doc.get("weights", {}).items()}
    return doc["nodes"], nodes, weights


def ref(arg):
    return arg["node"] if isinstance(arg, dict) and "node" in arg else None


def qparams(nodes, name, errors, where):
    """(scale, zero point) of the dequantize `name` of a uint8 quantize."""
    dq = nodes.get(name)
    if not dq or dq["target"] != DQ or nodes[ref(dq["args"][0])]["target"] != Q:
        errors.append("%s: %s is no dequantize of a quantize" % (where, name))
        return None
    q = nodes[ref(dq["args"][0])]
    for n in (q, dq):
        if n["args"][3:] != [0, 255, {"dtype": "uint8"}]:
            errors.append("%s: %s is not uint8 0..255: %s" % (where, n["name"], n["args"][3:]))
    if q["args"][1:3] != dq["args"][1:3]:
        errors.append("%s: %s and its quantize differ: %s %s" % (where, name, q["args"][1:3], dq["args"][1:3]))
    return tuple(dq["args"][1:3])


def check_weight(nodes, weights, name, errors, where):
    dqc = nodes.get(name)
    if not dqc or dqc["target"] != DQC:
        errors.append("%s: weight %s is no dequantize_per_channel" % (where, name))
        return
    if dqc["args"][3:] != [0, -128, 127, {"dtype": "int8"}]:
        errors.append("%s: %s is not int8 -128..127 on axis 0: %s" % (where, name, dqc["args"][3:]))
    w, s, z = (weights[nodes[ref(a)]["target"]] for a in dqc["args"][:3])
    if w.dtype != np.int8 or s.dtype != np.float32 or z.dtype != np.int64:
        errors.append("%s: %s constants are %s, %s, %s" % (where, name, w.dtype, s.dtype, z.dtype))
    if (z != 0).any():
        errors.append("%s: %s has non-zero zero points" % (where, name))
    flat = w.reshape(w.shape[0], -1)
    full = np.abs(flat.astype(np.int64)).max(axis=1) >= 127
    if not full.all():
        errors.append("%s: %s: %d channels use less than the full int8 range" % (where, name, (~full).sum()))


def main(argv):
    folder = argv[1]
    expect = {}
    if len(argv) > 3 and argv[2] == "--expect":
        expect = {k: int(v) for k, v in (p.split("=") for p in argv[3].split(","))}
    order, nodes, weights = load(folder)
    errors, seen = [], {"conv": 0, "linear": 0, "cat": 0, "max_pool": 0}
    for n in order:
        t, where = n["target"], n["name"]
        if t in ("aten.convolution.default", "aten.linear.default"):
            seen["conv" if "conv" in t else "linear"] += 1
            qparams(nodes, ref(n["args"][0]), errors, where)
            check_weight(nodes, weights, ref(n["args"][1]), errors, where)
        elif t == "aten.max_pool2d_with_indices.default":
            seen["max_pool"] += 1
            p_in = qparams(nodes, ref(n["args"][0]), errors, where)
            out = [u for u in order if u["target"] == "operator.getitem" and ref(u["args"][0]) == where and u["args"][1] == 0]
            readers = [u for u in order if u["target"] == Q and out and ref(u["args"][0]) == out[0]["name"]]
            if len(readers) != 1 or tuple(readers[0]["args"][1:3]) != p_in:
                errors.append("%s: output not quantized once with the input's %s" % (where, p_in))
        elif t == "aten.cat.default":
            seen["cat"] += 1
            params = {qparams(nodes, ref(a), errors, where) for a in n["args"][0]}
            readers = [u for u in order if u["target"] == Q and ref(u["args"][0]) == where]
            params |= {tuple(u["args"][1:3]) for u in readers}
            if len(params) != 1 or len(readers) != 1:
                errors.append("%s: inputs and output do not share one scale: %s" % (where, sorted(params, key=str)))
    for k, v in expect.items():
        if seen.get(k) != v:
            errors.append("expected %d %s, found %s" % (v, k, seen.get(k)))
    for e in errors:
        print(e)
    print("ok" if not errors else "%d violations" % len(errors), seen)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
