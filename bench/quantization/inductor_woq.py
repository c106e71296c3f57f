"""Inductor 2.x's weight-only int8 lowerings on kiln's woq models.

Compiles each model with ``torch.compile`` (bfloat16 input, int8 weights as
buffers; ``freezing=True`` and ``config.cpp.enable_concat_linear`` where the
model is the concat-linear one) and prints one JSON line per model: Inductor's
``woq_*`` and ``pattern_matcher_*`` counters, the largest difference of the
compiled output from eager's, and with ``--rounds`` the median ms of both.

    python3 bench/quantization/inductor_woq.py tests.python.quant_models:WoqMLP --input-shape 2,5,64
    python3 bench/quantization/inductor_woq.py --all          # every case below
    python3 bench/quantization/inductor_woq.py --list         # "name factory shape" per case

Needs PyTorch 2.x; run from the repository root.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


CASES = {  # name: (factory, input shape, freezing with concat-linear)
    "woq_mlp": ("tests.python.quant_models:WoqMLP", (2, 5, 64), False),
    "linear_3d": ("tests.python.quant_models:WoqLinear", (2, 5, 64), False),
    "linear_2d": ("tests.python.quant_models:WoqLinear", (10, 64), False),
    "linear_strided": ("tests.python.quant_models:WoqLinearStrided", (5, 2, 64), False),
    "t_then_to": ("tests.python.quant_models:WoqLinearT", (2, 5, 64), False),
    "concat_linear": ("tests.python.quant_models:WoqConcatLinear", (10, 64), True),
}


def build(factory):
    mod, fn = factory.split(":")
    __import__(mod)
    return getattr(sys.modules[mod], fn)()


def median_ms(f, x, rounds):
    for _ in range(3):
        f(x)
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f(x)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def run_case(name, factory, shape, concat, rounds):
    from torch._dynamo.utils import counters
    import torch._inductor.config as cfg
    torch.manual_seed(0)
    model = build(factory).eval().to(torch.bfloat16)
    x = torch.randn(*shape).to(torch.bfloat16)
    counters.clear()
    torch._dynamo.reset()
    with torch.no_grad(), cfg.patch({"freezing": concat, "cpp.enable_concat_linear": concat}):
        compiled = torch.compile(model)
        got = compiled(x)
        want = model(x)
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(got, want))
    row = {"case": name, "input_shape": list(shape), "freezing": concat,
           "counters": {k: v for k, v in sorted(counters["inductor"].items())
                        if k.startswith("woq") or k.startswith("pattern_matcher")},
           "max_abs_diff_vs_eager": diff}
    if rounds:
        with torch.no_grad():
            row["inductor_ms"] = median_ms(compiled, x, rounds)
            row["eager_ms"] = median_ms(model, x, rounds)
    print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("factory", nargs="?", help="MODULE:FACTORY (default: --all)")
    ap.add_argument("--input-shape", default=None)
    ap.add_argument("--all", action="store_true", help="every case of this script")
    ap.add_argument("--list", action="store_true", help="print each case's name, factory and input shape")
    ap.add_argument("--rounds", type=int, default=0)
    a = ap.parse_args()
    if a.list:
        for name, (factory, shape, _) in CASES.items():
            print(name, factory, ",".join(str(d) for d in shape))
        return
    if a.factory:
        run_case(a.factory, a.factory, tuple(int(d) for d in a.input_shape.split(",")), False, a.rounds)
        return
    for name, (factory, shape, concat) in CASES.items():
        try:
            run_case(name, factory, shape, concat, a.rounds)
        except Exception as e:  # one case's failure does not hide the others'
            print(json.dumps({"case": name, "error": "%s: %s" % (type(e).__name__, str(e)[:300])}), flush=True)


if __name__ == "__main__":
    main()
