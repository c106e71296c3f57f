"""Turns the JSON lines of a side-by-side run (kiln-run --json tagged with
"name" and "runner", bench/executor/peers.py) into a Markdown table and a bar
chart (Debian's matplotlib).

    python3 bench/compare.py RESULTS.jsonl [--markdown OUT.md] [--png OUT.png]

Rows are (model, threads); columns are the runners' median times in ms; the
ratio column is kiln's time over the best peer's (below 1: kiln is faster); runners
named kiln* are kiln's variants (kiln-run with other options), and the best of them counts.
A variant with "bf16" in its name computes in reduced precision: it stays out of that
ratio and gets its own column (bf16 / best peer), as the fp32 comparison must not lean on it.

Lines with "round" (device_run.sh with ROUNDS=R) are alternated rounds: a cell is the
median of the rounds' medians, with the spread (min..max over rounds) under it, and the
table ends with the geometric mean of the ratio per thread count. Lines without a time
(device_run.sh's "check" of kiln's outputs, a peer's compile_s) stay out of the table;
failures (lines with "error") are listed under it.
"""
import math
import statistics
import argparse
import collections
import json
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def table(rows):
    runners = []
    cells = collections.OrderedDict()
    rounds = collections.defaultdict(list)
    for r in rows:
        runner = r.get("runner", "kiln")
        if runner == "check" or "threads" not in r or ("median_ms" not in r and "error" not in r):
            continue
        if runner not in runners:
            runners.append(runner)
        key = (r.get("name", "?"), r.get("threads", "?"))
        if "round" in r and "median_ms" in r:
            rounds[key + (runner,)].append(r["median_ms"])
        if "round" not in r or "median_ms" in r or runner not in cells.get(key, {}):
            cells.setdefault(key, {})[runner] = dict(r)
    for (name, threads, runner), times in rounds.items():
        cells[(name, threads)][runner].update(median_ms=statistics.median(times), spread=(min(times), max(times)))
    return runners, cells


def failures(rows):
    seen, out = set(), []
    for r in rows:
        if "error" in r:
            line = "- %s, %s%s: %s" % (r.get("name", "?"), r.get("runner", "?"),
                                       ", %s threads" % r["threads"] if "threads" in r else "", " ".join(r["error"]))
            if line not in seen:
                seen.add(line)
                out.append(line)
        elif r.get("runner") == "check" and r.get("match") is False:
            out.append("- %s: kiln's outputs differ from PyTorch's (max rel err %.3g)" % (r["name"], r["max_rel_err"]))
    return out


def is_bf16(runner):
    return runner.startswith("kiln") and "bf16" in runner


def markdown(runners, cells):
    with_bf16 = any(is_bf16(r) for r in runners)
    extra = " best kiln / best peer |" + (" bf16 / best peer |" if with_bf16 else "")
    out = ["| model | threads | " + " | ".join(runners) + " |" + extra,
           "|---|---|" + "---|" * (len(runners) + 1 + with_bf16)]
    geo = {}
    for (name, threads), by in cells.items():
        vals = []
        for runner in runners:
            r = by.get(runner)
            if r is None:
                vals.append("")
            elif "error" in r:
                vals.append("failed")
            elif "spread" in r:
                vals.append("%.2f (%.2f..%.2f)" % ((r["median_ms"],) + r["spread"]))
            else:
                vals.append("%.2f" % r["median_ms"])
        peers = [r["median_ms"] for k, r in by.items() if not k.startswith("kiln") and "median_ms" in r]
        kiln = [r["median_ms"] for k, r in by.items() if k.startswith("kiln") and not is_bf16(k) and "median_ms" in r]
        bf16 = [r["median_ms"] for k, r in by.items() if is_bf16(k) and "median_ms" in r]
        ratios = ["%.2f" % (min(kiln) / min(peers)) if kiln and peers else ""]
        if kiln and peers:
            geo.setdefault(threads, []).append(min(kiln) / min(peers))
        if with_bf16:
            ratios.append("%.2f" % (min(bf16) / min(peers)) if bf16 and peers else "")
        out.append("| %s | %s | %s | %s |" % (name, threads, " | ".join(vals), " | ".join(ratios)))
    if any(len(v) > 1 for v in geo.values()):
        out.append("")
        for threads, ratios in sorted(geo.items()):
            out.append("%s threads: geometric mean of kiln / best peer %.2f over %d models (max %.2f)" % (
                threads, math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios), max(ratios)))
    return "\n".join(out) + "\n"


def chart(runners, cells, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = list(cells)
    width = 0.8 / max(1, len(runners))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(keys)), 4))
    for i, runner in enumerate(runners):
        xs, ys = [], []
        for k, key in enumerate(keys):
            r = cells[key].get(runner)
            if r and "median_ms" in r:
                xs.append(k + i * width)
                ys.append(r["median_ms"])
        ax.bar(xs, ys, width, label=runner)
    ax.set_xticks([k + width * (len(runners) - 1) / 2 for k in range(len(keys))])
    ax.set_xticklabels(["%s\n%s thr" % key for key in keys], fontsize=8)
    ax.set_ylabel("median ms per run (lower is better)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("--markdown")
    p.add_argument("--png")
    a = p.parse_args()
    runners, cells = table(load(a.results))
    rows = load(a.results)
    md = markdown(runners, cells)
    fails = failures(rows)
    if fails:
        md += "\nFailures:\n" + "\n".join(fails) + "\n"
    if a.markdown:
        open(a.markdown, "w").write(md)
    else:
        sys.stdout.write(md)
    if a.png:
        chart(runners, cells, a.png)


if __name__ == "__main__":
    main()
