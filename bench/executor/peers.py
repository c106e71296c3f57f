"""Times kiln's peers on one model, side by side with kiln-run, for bench/compare.py.

    python3 bench/executor/peers.py MODULE:FACTORY --input-shape 1,3,224,224 \
        --threads 2 [--peers eager,compile,ort] [--iterations 20] [--warmup 5] [--name resnet50_b1]
        [--rounds 3 --cpus 0-1 [--kiln "BIN/kiln-run DIR"] [--target-s 1.0] [--turns DIR --turn-count N]]

prints one JSON object per peer on stdout:
    {"name": ..., "runner": "eager", "threads": 2, "median_ms": ..., "min_ms": ..., "peak_rss_bytes": ...}
Each peer runs in a process of its own (so that peak RSS is its own), with the
same seeded model and input as tools/export_fx.py makes, and
torch.set_num_threads / ORT's intra_op_num_threads set to --threads; pin the
whole command with taskset for a fair comparison.

With --rounds R, every peer (and kiln-run, given --kiln) is set up once in this
one process, torch.compile on all cores, and then its threads are pinned to
--cpus and the runners take turns, R rounds, the first runner moving one place
each round, so that the machine's drift falls on all of them alike; each round
prints one line per runner with "round". --iterations then is the most: fewer
are timed where one run is slow, so that a runner's round lasts about
--target-s seconds (at least 3 runs, after a third as many warm-ups, at most
--warmup). Peak RSS is then the whole process's. With --turns DIR, several such
processes (one per model) set up side by side and then time one at a time.
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


def export_onnx(model, x, path):
    """ONNX export with grad on: under no_grad or inference_mode nn.MultiheadAttention
    takes its fused path (aten::_native_multi_head_attention), which ONNX cannot take."""
    import contextlib
    import torch
    # a failing export prints the whole graph: keep it off the JSON lines on stdout
    with torch.inference_mode(False), torch.enable_grad(), contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x,), path, input_names=["x"], dynamo=False)


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
        export_onnx(model, x, path)
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


def pin_process(cpus):
    """Pins every thread of this process (OpenMP's and ONNX Runtime's pools too) to cpus."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # a thread that ended meanwhile


def parse_cpus(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def make_runners(args, model, x):
    """name -> callable running the model once, for each of --peers."""
    import torch
    runners = {}
    for runner in args.peers.split(","):
        try:
            if runner == "eager":
                runners["eager"] = lambda: model(x)
            elif runner == "compile":
                compiled = torch.compile(model)
                t0 = time.perf_counter()
                compiled(x)
                print(json.dumps({"name": args.name, "runner": "compile", "threads": args.threads,
                                  "compile_s": time.perf_counter() - t0}), flush=True)
                runners["compile"] = lambda: compiled(x)
            elif runner == "ort":
                import onnxruntime as ort
                path = os.path.join(tempfile.mkdtemp(), "model.onnx")
                export_onnx(model, x, path)
                so = ort.SessionOptions()
                so.intra_op_num_threads = args.threads
                so.inter_op_num_threads = 1
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                feed = {"x": x.numpy()}
                runners["ort"] = lambda: sess.run(None, feed)
            else:
                raise SystemExit("unknown runner " + runner)
        except Exception as e:  # one peer that cannot take the model must not stop the others
            msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            print(json.dumps({"name": args.name, "runner": runner, "threads": args.threads,
                              "error": [type(e).__name__ + ": " + msg]}), flush=True)
    return runners


def kiln_round(args, iterations, warmup, profile=None):
    """One kiln-run process: its --json line, with this round's median."""
    cmd = ["taskset", "-c", args.cpus] + args.kiln.split() + [
        "--json", "--threads", str(args.threads), "--iterations", str(iterations), "--warmup", str(warmup)]
    r = subprocess.run(cmd + (["--profile"] if profile else []), capture_output=True, text=True)
    if profile:
        with open(profile, "w") as f:
            f.write(r.stderr)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"error": (r.stderr.strip().splitlines() or ["kiln-run failed"])[-1:]}
    return json.loads(lines[-1])


class Turns:
    """--turns DIR: wait until --turn-count processes are set up, then time one at a time."""

    def __init__(self, args):
        self.args, self.lock = args, None

    def ready(self):
        if self.args.turns:
            open(os.path.join(self.args.turns, "ready." + self.args.name), "w").close()

    def __enter__(self):
        a = self.args
        if a.turns:
            while (len([f for f in os.listdir(a.turns) if f.startswith("ready.")]) < a.turn_count
                   and not (a.deadline and time.time() > a.deadline)):
                time.sleep(0.5)
            import fcntl
            self.lock = open(os.path.join(a.turns, "lock"), "w")
            fcntl.flock(self.lock, fcntl.LOCK_EX)
        return not (a.deadline and time.time() > a.deadline)

    def __exit__(self, *exc):
        if self.lock:
            self.lock.close()


def alternate(args):
    """--rounds: every runner set up once, then R rounds side by side."""
    import torch
    turns = Turns(args)
    try:
        torch.set_num_threads(args.threads)
        model = load_model(args.factory, args.seed)
        shape = [int(d) for d in args.input_shape.split(",")]
        x = torch.randn(*shape)
        with torch.inference_mode():
            runners = make_runners(args, model, x)
        pin_process(parse_cpus(args.cpus))
    finally:
        turns.ready()
    with turns as in_time:
        if not in_time:
            print(json.dumps({"name": args.name, "runner": "all", "threads": args.threads,
                              "error": ["not timed: its turn came after the deadline"]}), flush=True)
            return
        time_rounds(args, runners)


def time_rounds(args, runners):
    import torch
    with torch.inference_mode():
        probe = next(iter(runners.values()), None)
        one = 0.1
        if probe:
            for _ in range(2):
                probe()
            t0 = time.perf_counter()
            probe()
            one = time.perf_counter() - t0
    iterations = max(3, min(args.iterations, int(args.target_s / max(one, 1e-4))))
    warmup = min(args.warmup, max(1, iterations // 3))
    names = list(runners) + (["kiln"] if args.kiln else [])
    for rnd in range(args.rounds):
        k = rnd % len(names)
        for runner in names[k:] + names[:k]:
            result = {"name": args.name, "runner": runner, "threads": args.threads, "round": rnd + 1}
            if runner == "kiln":
                r = kiln_round(args, iterations, warmup, args.profile if rnd == 0 else None)
                result.update({key: v for key, v in r.items() if key in (
                    "median_ms", "min_ms", "error", "compile_ms", "steps", "iterations", "peak_rss_bytes")})
            else:
                with torch.inference_mode():
                    med, mn = timed(runners[runner], iterations, warmup)
                result.update(median_ms=med, min_ms=mn, iterations=iterations)
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
    p.add_argument("--rounds", type=int, default=0, help="alternated rounds in one process (see above)")
    p.add_argument("--cpus", default="0-1", help="with --rounds: the cores to pin to, as taskset -c takes them")
    p.add_argument("--kiln", help="with --rounds: kiln-run's command up to its options, e.g. 'BIN/kiln-run DIR'")
    p.add_argument("--target-s", type=float, default=1.0, help="with --rounds: about how long one runner's round lasts")
    p.add_argument("--turns", help="with --rounds: a folder shared by processes that take turns (see Turns)")
    p.add_argument("--turn-count", type=int, default=1, help="with --turns: how many processes take turns")
    p.add_argument("--deadline", type=float, default=0, help="with --rounds: no timing starts after this (epoch s)")
    p.add_argument("--profile", help="with --kiln: where round 1's kiln-run --profile goes")
    p.add_argument("--runner", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.name = args.name or args.factory.split(":")[-1]
    if args.rounds:
        alternate(args)
        return
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
