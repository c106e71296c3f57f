#!/usr/bin/env bash
# The zoo's table for bench/README.md, on any machine with PyTorch: every entry
# of tests/python/zoo_models.py's ZOO (and ZOO_LARGE with ZOO_SETS) exported at
# each level with this machine's PyTorch, then run by kiln-run against
# PyTorch's outputs. Writes OUT_DIR/zoo.jsonl (one line per model and level:
# kiln-run's --json, or the export's or kiln-run's last error line) and prints a
# markdown row each: model, level, max relative error, steps, compile time and
# median run time.
#   bash bench/zoo_run.sh BIN_DIR OUT_DIR [THREADS] [LEVELS]
# BIN_DIR holds kiln-run (and, away from the build machine, the shared
# libraries it needs); LEVELS defaults to "torch aten export"; level x86 is the
# aten graph quantized by the x86 recipe (--quantize x86), run twice: unfused
# (level x86) and after the quantization passes on the int8 kernels (x86_int8),
# against PyTorch's q/dq reference within QTOL (default 5e-2, see bench/README:
# PyTorch's own q/dq graph moves that far when its sums do); SENSITIVITY=1 adds
# that spread per model (quantization/qdq_sensitivity.py). PYTHON picks the
# interpreter (default python3), JOBS the exports run side by side (default 4);
# kiln-run runs alone, one model at a time. ZOO_FILTER (an extended regular
# expression) keeps the entries whose line matches it; ZOO_SETS names the
# lists of zoo_models.py to run (default ZOO; ZOO,ZOO_LARGE adds the large ones).
# BATCH=N exports every model with a batch of N (dim 0 of its input shape);
# KILN_ARGS adds options to every kiln-run (BATCH=4 KILN_ARGS="--split-batch 1":
# the batch as slices, and the "batch split" column says whether it ran so).
set -uo pipefail
bin=${1:?usage: zoo_run.sh BIN_DIR OUT_DIR [THREADS] [LEVELS]}
out=${2:?usage: zoo_run.sh BIN_DIR OUT_DIR [THREADS] [LEVELS]}
threads=${3:-2}
levels=${4:-torch aten export}
py=${PYTHON:-python3}
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
jobs_file=$out/jobs.txt
$py -c "from tests.python import zoo_models
for name, factory, shape in sum((getattr(zoo_models, s) for s in '${ZOO_SETS:-ZOO}'.split(',')), []):
    for level in '$levels'.split():
        print(name, factory, ('${BATCH:-}' + shape[shape.index(','):]) if '${BATCH:-}' else shape, level)" | grep -E -- "${ZOO_FILTER:-.}" >"$jobs_file" || exit 1

# Exports side by side; each leaves its log beside its folder.
sed "s|\$| $out|" "$jobs_file" | xargs -P "${JOBS:-4}" -L 1 bash -c \
  'level=(--level "$4"); [ "$4" = x86 ] && level=(--level aten --quantize x86)
   "$0" tools/export_fx.py "$2" --input-shape "$3" "${level[@]}" --seed 0 --out "$5/$1_$4" >"$5/$1_$4.log" 2>&1' "$py"

: >"$out/zoo.jsonl"
version=$($py -c "import torch; print(torch.__version__)")
while read -r name factory shape level; do
  dir=$out/${name}_$level
  runs=("$level|")
  [ "$level" = x86 ] && runs=("x86|" "x86_int8|--passes quantization")
  for run in "${runs[@]}"; do
    as=${run%%|*} passes=${run#*|}
    if [ -f "$dir/graph.json" ]; then
      tol=1e-4
      [ "$level" = x86 ] && tol=${QTOL:-5e-2}
      # shellcheck disable=SC2086  # passes: none or two words; KILN_ARGS: words
      "$bin/kiln-run" "$dir" $passes ${KILN_ARGS:-} --compare "$dir/outputs" --max-rel-err "$tol" --threads "$threads" \
          --iterations 5 --warmup 1 --json >"$out/${name}_$as.run" 2>&1
      log=$out/${name}_$as.run
    else
      log=$dir.log
    fi
    sensitivity=
    if [ "$as" = x86 ] && [ -n "${SENSITIVITY:-}" ]; then
      sensitivity=$($py bench/quantization/qdq_sensitivity.py "$factory" --input-shape "$shape" 2>/dev/null | tail -1)
    fi
    $py -c 'import json, sys
name, level, version, log, sensitivity = sys.argv[1:]
lines = open(log).read().strip().splitlines()
js = [l for l in lines if l.startswith("{")]
r = json.loads(js[-1]) if js else {"error": (lines or ["no output"])[-1]}
r.update(model=name, level=level, torch=version)
if sensitivity:
    r["qdq_sensitivity"] = json.loads(sensitivity)["max_rel_change"]
print(json.dumps(r))' "$name" "$as" "$version" "$log" "$sensitivity" >>"$out/zoo.jsonl"
  done
done <"$jobs_file"

echo "| model | level | max rel err | steps | compile ms | median ms ($threads threads) | PyTorch q/dq spread | batch split |"
echo "|---|---|---|---|---|---|---|---|"
$py -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "error" in r:
        print("| %s | %s | failed: %s | | | | | |" % (r["model"], r["level"], r["error"].replace("|", "/")[:160]))
    else:
        spread = "%.2g" % r["qdq_sensitivity"] if "qdq_sensitivity" in r else ""
        split = ("%d slices" % (r["batch_split"]["batch"] // r["batch_split"]["slice"]) if "batch_split" in r else
                 "refused: " + r["batch_split_refused"].replace("|", "/")[:120] if "batch_split_refused" in r else "")
        print("| %s | %s | %.2g%s | %d | %.0f | %.2f | %s | %s |" % (r["model"], r["level"], r["max_rel_err"],
              "" if r["match"] else " (MISMATCH)", r["steps"], r["compile_ms"], r["median_ms"], spread, split))' "$out/zoo.jsonl"
