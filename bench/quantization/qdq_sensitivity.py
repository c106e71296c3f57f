#!/usr/bin/env python3
"""How far PyTorch's own q/dq graph moves when its float values move a little.

Builds the graph `tools/export_fx.py --level aten --quantize x86 --seed S` writes
(same model, weights, input and recipe), runs it as the reference is run, then
runs it again with every activation quantize but the input's reading its value
moved by up to REL of itself (uniform noise, a fresh draw each trial): what a
different float32 summation order (another kernel, another thread count) does
to the values a quantize rounds. A value near a rounding boundary then lands one
step away, and the step travels through the layers after it.

Prints one JSON line: the largest change of any output over the largest
magnitude of that output, per trial and at most, in the units kiln-run's
--max-rel-err uses. An executor whose float sums differ from PyTorch's can be
expected to sit within this spread of PyTorch's outputs and no closer.

  python3 bench/quantization/qdq_sensitivity.py MODULE:FACTORY --input-shape S [--trials 5] [--rel 1e-6]
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("factory")
    ap.add_argument("--input-shape", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--rel", type=float, default=1e-6)
    args = ap.parse_args()

    import torch
    import export_fx
    import fx_quantize_x86 as quant

    shape = export_fx.parse_shape(args.input_shape)
    export_fx.seed_all(args.seed)
    model = export_fx.load_factory(args.factory)().eval()
    export_fx.seed_all(args.seed)
    x = torch.randn(*shape)
    with torch.no_grad():
        gm = export_fx.trace_aten(quant.fold_batch_norms(model), [x.clone()])
        quant.quantize_x86(gm, [x.clone()])
        reference = [t.clone() for t in export_fx.flatten_leaves(gm(x.clone()), [])]

        noise = torch.Generator().manual_seed(args.seed + 1)

        def moved_quantize(v, scale, zero_point, quant_min, quant_max, dtype):
            v = v * (1 + args.rel * (2 * torch.rand(v.shape, generator=noise) - 1))
            return quant.quantize_per_tensor(v, scale, zero_point, quant_min, quant_max, dtype)

        quantizes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is quant.quantize_per_tensor]
        for n in quantizes[1:]:  # the input's own quantize reads the input as given
            n.target = moved_quantize
        gm.recompile()
        changes = []
        for _ in range(args.trials):
            moved = export_fx.flatten_leaves(gm(x.clone()), [])
            changes.append(max(float((m - r).abs().max() / r.abs().max().clamp_min(1e-30))
                               for m, r in zip(moved, reference)))
    print(json.dumps({"factory": args.factory, "input_shape": args.input_shape, "rel": args.rel,
                      "quantizes_moved": len(quantizes) - 1, "max_rel_change": max(changes),
                      "trials": changes, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
