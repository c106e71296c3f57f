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
# libraries it needs); LEVELS defaults to "torch aten export". PYTHON picks the
# interpreter (default python3), JOBS the exports run side by side (default 4);
# kiln-run runs alone, one model at a time. ZOO_FILTER (an extended regular
# expression) keeps the entries whose line matches it; ZOO_SETS names the
# lists of zoo_models.py to run (default ZOO; ZOO,ZOO_LARGE adds the large ones).
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
        print(name, factory, shape, level)" | grep -E -- "${ZOO_FILTER:-.}" >"$jobs_file" || exit 1

# Exports side by side; each leaves its log beside its folder.
sed "s|\$| $out|" "$jobs_file" | xargs -P "${JOBS:-4}" -L 1 sh -c \
  '"$0" tools/export_fx.py "$2" --input-shape "$3" --level "$4" --seed 0 --out "$5/$1_$4" >"$5/$1_$4.log" 2>&1' "$py"

: >"$out/zoo.jsonl"
version=$($py -c "import torch; print(torch.__version__)")
while read -r name factory shape level; do
  dir=$out/${name}_$level
  if [ -f "$dir/graph.json" ]; then
    "$bin/kiln-run" "$dir" --compare "$dir/outputs" --max-rel-err 1e-4 --threads "$threads" \
        --iterations 5 --warmup 1 --json >"$dir.run" 2>&1
    log=$dir.run
  else
    log=$dir.log
  fi
  $py -c 'import json, sys
name, level, version, log = sys.argv[1:]
lines = open(log).read().strip().splitlines()
js = [l for l in lines if l.startswith("{")]
r = json.loads(js[-1]) if js else {"error": (lines or ["no output"])[-1]}
r.update(model=name, level=level, torch=version)
print(json.dumps(r))' "$name" "$level" "$version" "$log" >>"$out/zoo.jsonl"
done <"$jobs_file"

echo "| model | level | max rel err | steps | compile ms | median ms ($threads threads) |"
echo "|---|---|---|---|---|---|"
$py -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "error" in r:
        print("| %s | %s | failed: %s | | | |" % (r["model"], r["level"], r["error"].replace("|", "/")[:160]))
    else:
        print("| %s | %s | %.2g%s | %d | %.0f | %.2f |" % (r["model"], r["level"], r["max_rel_err"],
              "" if r["match"] else " (MISMATCH)", r["steps"], r["compile_ms"], r["median_ms"]))' "$out/zoo.jsonl"
