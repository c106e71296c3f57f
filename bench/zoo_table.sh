#!/usr/bin/env bash
# The zoo's table for bench/README.md: every model folder the zoo's CTest
# entries exported (BUILD_DIR/tests/model_*_{torch,aten}), run by kiln-run
# against PyTorch's outputs, one markdown row each: model, level, max relative
# error, steps, compile time and median run time.
#   bash bench/zoo_table.sh BUILD_DIR [THREADS]
set -euo pipefail
build=${1:?usage: zoo_table.sh BUILD_DIR [THREADS]}
threads=${2:-2}
echo "| model | level | max rel err | steps | compile ms | median ms ($threads threads) |"
echo "|---|---|---|---|---|---|"
for dir in "$build"/tests/model_*_torch "$build"/tests/model_*_aten; do
  [ -f "$dir/graph.json" ] || continue
  name=$(basename "$dir")
  name=${name#model_}
  level=${name##*_}
  model=${name%_*}
  "$build/tools/kiln-run" "$dir" --compare "$dir/outputs" --max-rel-err 1e-4 --threads "$threads" \
      --iterations 5 --warmup 1 --json 2>/dev/null |
    python3 -c 'import json, sys
r = json.load(sys.stdin)
m, l = sys.argv[1], sys.argv[2]
print("| %s | %s | %.2g%s | %d | %.0f | %.2f |" % (m, l, r["max_rel_err"], "" if r["match"] else " (MISMATCH)",
      r["steps"], r["compile_ms"], r["median_ms"]))' "$model" "$level" || echo "| $model | $level | failed | | | |"
done
