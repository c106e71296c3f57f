#!/usr/bin/env python3
"""The speed table of a speed_run.sh output: per model, batch and thread count, the
median over rounds of each implementation's median_ms, kiln int8 over kiln fp32 and
over Inductor int8, the spread of kiln's int8/fp32 ratio round by round, and the
median over rounds of the paired ratio (int8 and fp32 run alternately in one
kiln-run --against process) with its spread.

    python3 bench/quantization/speed_table.py OUT.jsonl
"""
import collections
import json
import statistics
import sys


def main(path):
    times = collections.defaultdict(list)  # (model, batch, threads, impl) -> [ms]
    ratios = collections.defaultdict(dict)  # (model, batch, threads) -> round -> {impl: ms}
    paired = collections.defaultdict(list)  # (model, batch, threads) -> [median ratio of the pairs]
    for line in open(path):
        r = json.loads(line)
        if r.get("impl") == "kiln_int8_over_fp32_paired" and "ratio_median" in r:
            paired[(r["model"], r["batch"], r["threads"])].append(r["ratio_median"])
            continue
        if "median_ms" not in r or "threads" not in r:
            continue
        key = (r["model"], r["batch"], r["threads"])
        times[key + (r["impl"],)].append(r["median_ms"])
        if "round" in r:
            ratios[key].setdefault(r["round"], {})[r["impl"]] = r["median_ms"]
    impls = ["kiln_int8", "kiln_fp32", "inductor_int8", "ort_int8", "eager_fp32"]
    print("| model | batch | threads | rounds | " + " | ".join(impls) + " | int8 / fp32 | kiln / Inductor | int8 / fp32 per round | paired int8 / fp32 | paired per round |")
    print("|" + "---|" * (len(impls) + 9))
    for key in sorted({k[:3] for k in times}):
        med = {i: statistics.median(times[key + (i,)]) for i in impls if times.get(key + (i,))}
        per_round = sorted(v["kiln_int8"] / v["kiln_fp32"] for v in ratios[key].values() if "kiln_int8" in v and "kiln_fp32" in v)
        cells = [f"{med[i]:.2f}" if i in med else "-" for i in impls]
        ratio = f"{med['kiln_int8'] / med['kiln_fp32']:.2f}" if "kiln_int8" in med and "kiln_fp32" in med else "-"
        vs = f"{med['kiln_int8'] / med['inductor_int8']:.2f}" if "kiln_int8" in med and "inductor_int8" in med else "-"
        spread = f"{per_round[0]:.2f}-{per_round[-1]:.2f}" if per_round else "-"
        pr = sorted(paired.get(key, []))
        pair = f"{statistics.median(pr):.2f}" if pr else "-"
        pair_spread = f"{pr[0]:.2f}-{pr[-1]:.2f}" if pr else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {len(times.get(key + ('kiln_int8',), []))} | " + " | ".join(cells) +
              f" | {ratio} | {vs} | {spread} | {pair} | {pair_spread} |")


if __name__ == "__main__":
    main(sys.argv[1])
