#!/usr/bin/env bash
# int8 against fp32, side by side in one run: for each model and batch, the
# x86-recipe q/dq graph and the float graph are exported (aten level), then
# per thread count kiln-run times the q/dq graph after the `quantization`
# passes (checked against PyTorch's q/dq reference) and the float graph, and
# inductor_int8.py times Inductor's int8 compile, PyTorch eager fp32 and ONNX
# Runtime's QDQ int8. One JSON line per measurement in OUT.jsonl.
#   bash bench/quantization/speed_run.sh KILN_RUN OUT.jsonl "2 16" "1 16" MODULE:FACTORY...
# ROUNDS=R (default 1) times kiln int8 and kiln fp32 alternately R times, each
# line with its "round": a host whose speed drifts between calls then moves
# both alike, and speed_table.py takes the median over the rounds. Each round
# also runs the two in one process, run by run (kiln-run --against), and keeps
# the median ratio of those pairs (impl "kiln_int8_over_fp32_paired"); AGAINST_WARM=N
# (default 1) untimed runs of each graph come before its timed one, so that each
# timed run finds its own graph's data in the caches, as the separate runs do.
# SPLIT_BATCH=N also runs every kiln measurement with --split-batch N (the batch
# as slices of N samples, one thread each), as impls kiln_int8_split,
# kiln_fp32_split and kiln_int8_over_fp32_split_paired.
# WARMUP_MS=T (default 1000): every timing (kiln's, Inductor's, eager's, ONNX
# Runtime's) follows untimed runs for at least T ms: on the device a process's
# first half second or so can run at half speed, which a count of 3 untimed runs
# left inside some of kiln's timings and outside Inductor's (compiled first).
# Needs PyTorch 2.x (Inductor) and onnxruntime; run from the repository root.
set -uo pipefail
kiln_run=$1 out=$2 threads=$3 batches=$4
shift 4
iterations=${ITERATIONS:-20}
warmup=(--warmup 3 --warmup-ms "${WARMUP_MS:-1000}")
size=${SIZE:-224}
rounds=${ROUNDS:-1}
for factory in "$@"; do
  name=${factory##*:}
  for b in $batches; do
    shape=$b,3,$size,$size q=/tmp/qspeed_${name}_b$b f=/tmp/fspeed_${name}_b$b
    python3 tools/export_fx.py "$factory" --input-shape "$shape" --level aten --quantize x86 --seed 0 --out "$q" >/dev/null 2>&1 ||
      { echo "{\"model\":\"$name\",\"batch\":$b,\"error\":\"quantized export failed\"}" >>"$out"; continue; }
    python3 tools/export_fx.py "$factory" --input-shape "$shape" --level aten --seed 0 --out "$f" >/dev/null 2>&1
    for t in $threads; do
      for round in $(seq "$rounds"); do
      for mode in whole ${SPLIT_BATCH:+split}; do
      split=() suffix=
      if [[ $mode == split ]]; then split=(--split-batch "$SPLIT_BATCH") suffix=_split; fi
      for variant in int8 fp32; do
        if [[ $variant == int8 ]]; then dir=$q args=(--passes quantization --compare "$q/outputs" --max-rel-err 5e-2)
        else dir=$f args=(--compare "$f/outputs"); fi
        line=$("$kiln_run" "$dir" "${args[@]}" "${split[@]}" --threads "$t" --iterations "$iterations" "${warmup[@]}" --json 2>/dev/null | grep '^{' | tail -1)
        python3 -c 'import json, sys
r = json.loads(sys.argv[1]) if sys.argv[1] else {"error": "kiln-run failed"}
keep = {k: r[k] for k in ("median_ms", "min_ms", "match", "max_rel_err", "pass_counters", "batch_split", "batch_split_refused", "error") if k in r}
keep.update(model=sys.argv[2], batch=int(sys.argv[3]), threads=int(sys.argv[4]), impl="kiln_" + sys.argv[5], round=int(sys.argv[6]))
print(json.dumps(keep))' "$line" "$name" "$b" "$t" "$variant$suffix" "$round" >>"$out"
      done
      line=$("$kiln_run" "$q" --passes quantization --against "$f" --against-warm "${AGAINST_WARM:-1}" "${split[@]}" --threads "$t" \
        --iterations "$iterations" "${warmup[@]}" --json 2>/dev/null | grep '^{' | tail -1)
      python3 -c 'import json, sys
r = json.loads(sys.argv[1]) if sys.argv[1] else {}
a = r.get("against", {})
keep = {k: a[k] for k in ("ratio_median", "ratio_min", "ratio_max", "warm") if k in a} if a else {"error": "kiln-run --against failed"}
if a: keep.update(int8_median_ms=r["median_ms"], fp32_median_ms=a["median_ms"])
keep.update(model=sys.argv[2], batch=int(sys.argv[3]), threads=int(sys.argv[4]), impl="kiln_int8_over_fp32" + sys.argv[6] + "_paired", round=int(sys.argv[5]))
print(json.dumps(keep))' "$line" "$name" "$b" "$t" "$round" "$suffix" >>"$out"
      done
      done
    done
    python3 bench/quantization/inductor_int8.py "$factory" --input-shape "$shape" --ort --rounds "$iterations" --warmup-ms "${WARMUP_MS:-1000}" \
      --threads "$(echo $threads | tr ' ' ,)" 2>/dev/null | python3 -c 'import json, sys
r = json.loads(sys.stdin.read())
for t, ms in r.get("ms", {}).items():
    for impl, v in ms.items():
        row = {"model": sys.argv[1], "batch": int(sys.argv[2]), "threads": int(t), "impl": impl}
        row["error" if impl.endswith("error") else "median_ms"] = v
        print(json.dumps(row))
print(json.dumps({"model": sys.argv[1], "batch": int(sys.argv[2]), "impl": "inductor_counters",
                  "counters": r["counters"], "max_abs_diff_vs_qdq": r.get("max_abs_diff_vs_qdq"),
                  "run_error": r.get("run_error")}))' "$name" "$b" >>"$out" ||
      echo "{\"model\":\"$name\",\"batch\":$b,\"error\":\"inductor_int8.py failed\"}" >>"$out"
  done
done
