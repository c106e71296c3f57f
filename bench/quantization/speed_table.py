#!/usr/bin/env python3
"""The speed table of a speed_run.sh output: per model, batch and thread count, the
median over rounds of each implementation's median_ms, kiln int8 over kiln fp32 and
over Inductor int8, the spread of kiln's int8/fp32 ratio round by round, and the
median over rounds of the paired ratio (int8 and fp32 run alternately in one
kiln-run --against process) with its spread. Where the run had SPLIT_BATCH, a
second table gives the same for kiln with the batch as slices (impls *_split),
and kiln int8 split over the faster of kiln fp32's two forms.

    python3 bench/quantization/speed_table.py OUT.jsonl
"""
import collections
import json
import statistics
import sys


def main(path):
    rows = [json.loads(line) for line in open(path)]
    table(rows, "")
    if any(r.get("impl", "").endswith("_split") for r in rows):
        print()
        table(rows, "_split")


def table(rows, sfx):
    times = collections.defaultdict(list)  # (model, batch, threads, impl) -> [ms]
    ratios = collections.defaultdict(dict)  # (model, batch, threads) -> round -> {impl: ms}
    paired = collections.defaultdict(list)  # (model, batch, threads) -> [median ratio of the pairs]
    for r in rows:
        if r.get("impl") == "kiln_int8_over_fp32" + sfx + "_paired" and "ratio_median" in r:
            paired[(r["model"], r["batch"], r["threads"])].append(r["ratio_median"])
            continue
        if "median_ms" not in r or "threads" not in r:
            continue
        key = (r["model"], r["batch"], r["threads"])
        times[key + (r["impl"],)].append(r["median_ms"])
        if "round" in r:
            ratios[key].setdefault(r["round"], {})[r["impl"]] = r["median_ms"]
    i8, f32 = "kiln_int8" + sfx, "kiln_fp32" + sfx
    impls = [i8, f32, "inductor_int8", "ort_int8", "eager_fp32"] + (["kiln_fp32"] if sfx else [])
    print("| model | batch | threads | rounds | " + " | ".join(impls) + " | int8 / fp32 | kiln / Inductor | int8 / fp32 per round | paired int8 / fp32 | paired per round |" +
          (" int8 / faster fp32 |" if sfx else ""))
    print("|" + "---|" * (len(impls) + 9 + (1 if sfx else 0)))
    for key in sorted({k[:3] for k in times}):
        med = {i: statistics.median(times[key + (i,)]) for i in impls if times.get(key + (i,))}
        per_round = sorted(v[i8] / v[f32] for v in ratios[key].values() if i8 in v and f32 in v)
        cells = [f"{med[i]:.2f}" if i in med else "-" for i in impls]
        ratio = f"{med[i8] / med[f32]:.2f}" if i8 in med and f32 in med else "-"
        vs = f"{med[i8] / med['inductor_int8']:.2f}" if i8 in med and "inductor_int8" in med else "-"
        spread = f"{per_round[0]:.2f}-{per_round[-1]:.2f}" if per_round else "-"
        pr = sorted(paired.get(key, []))
        pair = f"{statistics.median(pr):.2f}" if pr else "-"
        pair_spread = f"{pr[0]:.2f}-{pr[-1]:.2f}" if pr else "-"
        best = f" {med[i8] / min(med[f32], med['kiln_fp32']):.2f} |" if sfx and i8 in med and f32 in med and "kiln_fp32" in med else (" - |" if sfx else "")
        print(f"| {key[0]} | {key[1]} | {key[2]} | {len(times.get(key + (i8,), []))} | " + " | ".join(cells) +
              f" | {ratio} | {vs} | {spread} | {pair} | {pair_spread} |" + best)


if __name__ == "__main__":
    main(sys.argv[1])
