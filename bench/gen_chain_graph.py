#!/usr/bin/env python3
"""Writes the benchmark's chain graph in fx-graph-json (see bench/README.md).

    gen_chain_graph.py [--blocks N] OUT.json[.gz]

Placeholders x [16,64], w [64,64] and b [64], then N blocks of

    mm = aten.mm.default(h, w)          # h: x, then the previous block's last add
    add = aten.add.Tensor(mm, b)
    relu = aten.relu.default(add)
    mul = aten.mul.Tensor(relu, relu)
    sigmoid = aten.sigmoid.default(mul)
    add_1 = aten.add.Tensor(sigmoid, relu)

(6 call_function nodes per block), and the output node. Node names follow
torch.fx (mm, add, relu, mul, sigmoid, add_1, mm_1, add_2, ...). The document is
written as Python's json.dumps(separators=(",", ":")) writes it, like the
fixtures; gzip-compressed when OUT ends in .gz. Only the standard library is used.
"""
import argparse
import gzip
import json
import sys


def tensor_meta(shape):
    stride, acc = [], 1
    for d in reversed(shape):
        stride.insert(0, acc)
        acc *= d
    return {"val": {"shape": list(shape), "dtype": "float32", "stride": stride}}


def build(blocks):
    counts = {}
    nodes = []

    def fresh(base):
        # torch.fx: the first use of a base name is bare, later ones get _1, _2, ...
        n = counts.get(base, 0)
        counts[base] = n + 1
        return base if n == 0 else "%s_%d" % (base, n)

    def node(op, target, args, shape, name):
        nodes.append({"name": name, "op": op, "target": target, "args": args, "kwargs": {},
                      "meta": tensor_meta(shape)})
        return {"node": name}

    x = node("placeholder", "x", [], [16, 64], fresh("x"))
    w = node("placeholder", "w", [], [64, 64], fresh("w"))
    b = node("placeholder", "b", [], [64], fresh("b"))
    h = x
    for _ in range(blocks):
        mm = node("call_function", "aten.mm.default", [h, w], [16, 64], fresh("mm"))
        add = node("call_function", "aten.add.Tensor", [mm, b], [16, 64], fresh("add"))
        relu = node("call_function", "aten.relu.default", [add], [16, 64], fresh("relu"))
        mul = node("call_function", "aten.mul.Tensor", [relu, relu], [16, 64], fresh("mul"))
        sig = node("call_function", "aten.sigmoid.default", [mul], [16, 64], fresh("sigmoid"))
        h = node("call_function", "aten.add.Tensor", [sig, relu], [16, 64], fresh("add"))
    nodes.append({"name": "output", "op": "output", "target": "output", "args": [[h]], "kwargs": {},
                  "meta": {}})
    return {"format": "fx-graph-json", "version": 1, "name": "chain_%d" % blocks, "nodes": nodes}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=30000, help="number of 6-node blocks (default 30000)")
    ap.add_argument("out", help="output path; .gz suffix writes gzip")
    args = ap.parse_args(argv)
    if args.blocks < 0:
        ap.error("--blocks must be >= 0")
    text = json.dumps(build(args.blocks), separators=(",", ":")).encode("ascii")
    if args.out.endswith(".gz"):
        with gzip.open(args.out, "wb") as f:
            f.write(text)
    else:
        with open(args.out, "wb") as f:
            f.write(text)
    sys.stderr.write("wrote %s: %d call_function nodes, %d bytes of JSON\n"
                     % (args.out, 6 * args.blocks, len(text)))


if __name__ == "__main__":
    main(sys.argv[1:])
