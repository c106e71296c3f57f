#!/usr/bin/env python3
"""Run two fx-graph-json graphs in PyTorch on the same inputs and compare them.

The numeric check of a rewrite, with PyTorch as the reference (until kiln's
executor runs every op): each node's target is looked up by its canonical name
(``torch.stack``, ``torch.nn.functional.linear``, ``operator.getitem``,
``aten.add.Tensor``, packets such as ``aten.cat``; ``kiln.grouped_mm`` is
computed here), weights come from the graph's ``weights`` table, and each
placeholder without a weight gets a seeded ``torch.randn`` of its meta shape.

    run_fx_json.py BEFORE.json AFTER.json [--rtol 1e-5] [--atol 1e-5] [--seed 0]

Prints one JSON line (outputs, max_abs_err, max_rel_err); exit status 1 when an
output differs beyond the tolerance, 2 on bad input.
"""

import argparse
import gzip
import importlib
import json
import math
import operator
import os
import sys

import numpy as np
import torch


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc, os.path.dirname(os.path.abspath(path))


def grouped_mm(inputs, weights, biases=None):
    out = [a @ b for a, b in zip(inputs, weights)]
    if biases is not None:
        out = [o + c for o, c in zip(out, biases)]
    return out


def resolve(target):
    if target == "kiln.grouped_mm":
        return grouped_mm
    head, _, rest = target.partition(".")
    if head == "operator":
        return getattr(operator, rest)
    if head in ("aten", "prims", "quantized_decomposed"):
        obj = getattr(torch.ops, head)
        for part in rest.split("."):
            obj = getattr(obj, part)
        return obj
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name)


def decode(arg, env):
    if isinstance(arg, list):
        return [decode(a, env) for a in arg]
    if isinstance(arg, dict):
        if "node" in arg:
            return env[arg["node"]]
        if "dtype" in arg:
            return getattr(torch, arg["dtype"])
        if "float" in arg:
            return float(arg["float"])
        if "dict" in arg:
            return {k: decode(v, env) for k, v in arg["dict"].items()}
        if "device" in arg:
            return torch.device(arg["device"])
        raise ValueError("cannot decode %r" % (arg,))
    return arg


def run(doc, base, seed):
    weights = {k: torch.from_numpy(np.load(os.path.join(base, v["file"]))) for k, v in doc.get("weights", {}).items()}
    gen = torch.Generator().manual_seed(seed)
    env = {}
    for node in doc["nodes"]:
        op, target, name = node["op"], node["target"], node["name"]
        if op == "placeholder":
            if target in weights or name in weights:
                env[name] = weights.get(target, weights.get(name))
            else:
                meta = node["meta"]["val"]
                env[name] = torch.randn(meta["shape"], generator=gen, dtype=getattr(torch, meta["dtype"]))
        elif op == "get_attr":
            env[name] = weights[target]
        elif op == "call_function":
            args = decode(node["args"], env)
            kwargs = {k: decode(v, env) for k, v in node["kwargs"].items()}
            env[name] = resolve(target)(*args, **kwargs)
        elif op == "call_method":
            args = decode(node["args"], env)
            kwargs = {k: decode(v, env) for k, v in node["kwargs"].items()}
            env[name] = getattr(args[0], target)(*args[1:], **kwargs)
        elif op == "output":
            out = decode(node["args"][0], env)
            return out if isinstance(out, list) else [out]
    raise ValueError("graph has no output node")


def flatten(values, out):
    for v in values:
        if isinstance(v, (list, tuple)):
            flatten(v, out)
        else:
            out.append(v)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        before_doc, before_base = load(a.before)
        after_doc, after_base = load(a.after)
    except (OSError, ValueError) as e:
        print("run_fx_json.py: %s" % e, file=sys.stderr)
        return 2
    with torch.no_grad():
        before = flatten(run(before_doc, before_base, a.seed), [])
        after = flatten(run(after_doc, after_base, a.seed), [])
    if len(before) != len(after):
        print(json.dumps({"error": "%d outputs before, %d after" % (len(before), len(after))}))
        return 1
    worst_abs = worst_rel = 0.0
    ok = True
    for x, y in zip(before, after):
        if x.shape != y.shape:
            print(json.dumps({"error": "shape %s before, %s after" % (list(x.shape), list(y.shape))}))
            return 1
        diff = (x.double() - y.double()).abs()
        worst_abs = max(worst_abs, float(diff.max()) if diff.numel() else 0.0)
        rel = diff / x.double().abs().clamp_min(1e-30)
        worst_rel = max(worst_rel, float(rel.max()) if rel.numel() else 0.0)
        ok &= bool(torch.allclose(x, y, rtol=a.rtol, atol=a.atol))
    print(json.dumps({"outputs": len(before), "max_abs_err": worst_abs, "max_rel_err": worst_rel,
                      "within_tolerance": ok}))
    return 0 if ok and math.isfinite(worst_abs) else 1


if __name__ == "__main__":
    sys.exit(main())
