"""Fits an alpha-beta cost model to kiln-bench-collectives' timings and
judges shard_parameters' all-gathers with it past one machine.

Model, for P ranks and N bytes (the gathered output, the scattered input or
the reduced buffer), in the form of the ring algorithms:
    all_gather, reduce_scatter:  T = alpha * (P - 1)     + beta * N * (P - 1) / P
    all_reduce:                  T = 2 * alpha * (P - 1) + 2 * beta * N * (P - 1) / P
alpha (seconds per message step) and beta (seconds per byte) are fitted per
collective by least squares on relative error over every (P, N) measured.

A model sharded over P ranks launches k all-gathers per run whose outputs sum
to its weight bytes W, so its communication per run is
    k * alpha * (P - 1) + beta * W * (P - 1) / P
with k the collectives left after bucketing at a cap. The script checks that
against the measured runs of bench/sharding/shard_run.sh (time per run over
the one-rank run's) and predicts 64, 256 and 1,024 ranks for each model and cap.

    python3 bench/sharding/fit_alpha_beta.py --sweep SWEEP.jsonl [--runs RUNS.jsonl ...]
        [--caps CAPS.jsonl] [--network-alpha-us 5 --network-gbps 100]

CAPS.jsonl lines: {"model": M, "cap_mb": C, "collectives": k, "bytes": W}
(kiln-opt's counters for shard_parameters + bucket_fsdp_all_gather at cap C).
Prints markdown tables.
"""

import argparse
import collections
import json
import math

STEPS = {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 2}


def read_jsonl(paths):
    rows = []
    for p in paths or []:
        with open(p) as f:
            rows += [json.loads(line) for line in f if line.startswith("{")]
    return rows


def features(collective, ranks, nbytes):
    s = STEPS[collective]
    return s * (ranks - 1), s * nbytes * (ranks - 1) / ranks


def fit(points):
    """Least squares of t = alpha*a + beta*b on relative error; returns alpha, beta (s, s/B)."""
    saa = sab = sbb = sat = sbt = 0.0
    for a, b, t in points:
        w = 1.0 / (t * t)
        saa += w * a * a
        sab += w * a * b
        sbb += w * b * b
        sat += w * a * t
        sbt += w * b * t
    det = saa * sbb - sab * sab
    alpha = (sat * sbb - sbt * sab) / det
    beta = (saa * sbt - sab * sat) / det
    if alpha < 0:  # bandwidth alone
        alpha, beta = 0.0, sbt / sbb
    if beta < 0:
        alpha, beta = sat / saa, 0.0
    return alpha, beta


def comm_ms(alpha, beta, ranks, k, nbytes):
    return (k * alpha * (ranks - 1) + beta * nbytes * (ranks - 1) / ranks) * 1e3


def collectives_of(run):
    c = run.get("counters", {})
    k = c.get("shard_parameters_sharded", 0)
    return k - c.get("bucket_fsdp_all_gather_collectives", 0) + c.get("bucket_fsdp_all_gather_buckets", 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", nargs="+", required=True)
    ap.add_argument("--runs", nargs="*")
    ap.add_argument("--caps", nargs="*")
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--network-alpha-us", type=float, default=None,
                    help="also predict with this latency per step (an assumed network)")
    ap.add_argument("--network-gbps", type=float, default=None, help="and this link bandwidth")
    args = ap.parse_args()

    by_coll = collections.defaultdict(list)
    for r in read_jsonl(args.sweep):
        a, b = features(r["collective"], r["ranks"], r["bytes"])
        by_coll[r["collective"]].append((a, b, r["median_us"] * 1e-6, r))
    params = {}
    print("| collective | alpha (us per step) | beta (GB/s) | points | ranks | worst relative residual |")
    print("|---|---|---|---|---|---|")
    for coll, pts in sorted(by_coll.items()):
        alpha, beta = fit([(a, b, t) for a, b, t, _ in pts])
        params[coll] = (alpha, beta)
        worst = max(abs(alpha * a + beta * b - t) / t for a, b, t, _ in pts)
        ranks = sorted({p[3]["ranks"] for p in pts})
        print("| %s | %.2f | %.2f | %d | %s | %.2f |" % (coll, alpha * 1e6, 1e-9 / beta if beta else math.inf,
                                                       len(pts), ",".join(map(str, ranks)), worst))
    alpha, beta = params["all_gather"]
    models = [("fitted", alpha, beta)]
    if args.network_alpha_us is not None and args.network_gbps:
        models.append(("network (assumed)", args.network_alpha_us * 1e-6, 8e-9 / args.network_gbps))

    runs = read_jsonl(args.runs)
    alone = {r["model"]: r["median_ms"] for r in runs if r["ranks"] == 1 and r["variant"] == "unbucketed"}
    if runs:
        print("\n| model | ranks | variant | all-gathers per run | weight MiB | measured ms over 1 rank | predicted ms |")
        print("|---|---|---|---|---|---|---|")
        for r in runs:
            if r["ranks"] == 1 or r["model"] not in alone:
                continue
            k, w = collectives_of(r), r["counters"].get("shard_parameters_bytes_sharded", 0)
            print("| %s | %d | %s | %d | %.1f | %.1f | %.1f |" % (
                r["model"], r["ranks"], r["variant"], k, w / 2**20, r["median_ms"] - alone[r["model"]],
                comm_ms(alpha, beta, r["ranks"], k, w)))

    caps = read_jsonl(args.caps)
    if caps:
        ranks = [int(x) for x in args.ranks.split(",")]
        print("\n| model | cap MB | all-gathers per run | " +
              " | ".join("%s ms at %d" % (name, p) for name, _, _ in models for p in ranks) + " |")
        print("|---|---|---|" + "---|" * (len(ranks) * len(models)))
        for c in sorted(caps, key=lambda c: (c["model"], c["cap_mb"])):
            cells = [comm_ms(a, b, p, c["collectives"], c["bytes"]) for _, a, b in models for p in ranks]
            print("| %s | %s | %d | %s |" % (c["model"], c["cap_mb"], c["collectives"],
                                            " | ".join("%.1f" % x for x in cells)))


if __name__ == "__main__":
    main()
