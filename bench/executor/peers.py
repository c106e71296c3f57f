"""Times kiln's peers on one model, side by side with kiln-run, for bench/compare.py.

    python3 bench/executor/peers.py MODULE:FACTORY --input-shape 1,3,224,224 \
        --threads 2 [--peers eager,compile,ort] [--iterations 20] [--warmup 5] [--name resnet50_b1]

prints one JSON object per peer on stdout:
    {"name": ..., "runner": "eager", "threads": 2, "median_ms": ..., "min_ms": ..., "peak_rss_bytes": ...}
Each peer runs in a process of its own (so that peak RSS is its own), with the
same seeded model and input as tools/export_fx.py makes, and
torch.set_num_threads / ORT's intra_op_num_threads set to --threads; pin the
whole command with taskset for a fair comparison.
"""
import argparse
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_model(spec, seed):
    import torch
    mod, fn = spec.split(":")
    sys.path.insert(0, ROOT)
    torch.manual_seed(seed)
    model = getattr(importlib.import_module(mod), fn)()
    return model.eval()


def timed(fn, iterations, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def run_one(args):
    import torch
    torch.set_num_threads(args.threads)
    model = load_model(args.factory, args.seed)
    shape = [int(d) for d in args.input_shape.split(",")]
    x = torch.randn(*shape)
    result = {"name": args.name, "runner": args.runner, "threads": args.threads}
    if args.runner == "eager":
        with torch.inference_mode():
            med, mn = timed(lambda: model(x), args.iterations, args.warmup)
    elif args.runner == "compile":
        compiled = torch.compile(model)
        with torch.inference_mode():
            t0 = time.perf_counter()
            compiled(x)
            result["compile_s"] = time.perf_counter() - t0
            med, mn = timed(lambda: compiled(x), args.iterations, args.warmup)
    elif args.runner == "ort":
        import onnxruntime as ort
        path = os.path.join(tempfile.mkdtemp(), "model.onnx")
        with torch.no_grad():
            torch.onnx.export(model, (x,), path, input_names=["x"], dynamo=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}
        med, mn = timed(lambda: sess.run(None, feed), args.iterations, args.warmup)
    else:
        raise SystemExit("unknown runner " + args.runner)
    result.update(median_ms=med, min_ms=mn,
                  peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    print(json.dumps(result), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("factory")
    p.add_argument("--input-shape", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--peers", default="eager,compile,ort")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default=None)
    p.add_argument("--runner", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.name = args.name or args.factory.split(":")[-1]
    if args.runner:
        run_one(args)
        return
    for runner in args.peers.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), args.factory, "--input-shape", args.input_shape,
               "--threads", str(args.threads), "--iterations", str(args.iterations), "--warmup", str(args.warmup),
               "--seed", str(args.seed), "--name", args.name, "--runner", runner]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(json.dumps({"name": args.name, "runner": runner, "threads": args.threads,
                              "error": r.stderr.strip().splitlines()[-1:] or ["failed"]}), flush=True)
        else:
            sys.stdout.write(r.stdout)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
