#!/usr/bin/env bash
# Where batch fusion pays in kiln's executor, and whether the cost model knows:
# for each towers model (tests/python/towers_model.py, batch 32) of N towers of
# width W, the graph unfused, fused as Inductor fuses (the five pre-grad
# fusions), and fused with the cost model on, each timed by kiln-run.
#   bench/group_batch_fusion/cost_line.sh BIN_DIR OUT.jsonl THREADS "N,..." "W,..." [MODEL_OPTIONS_JSON]
# BIN_DIR holds kiln-opt and kiln-run (and, on the device machine, the shared
# libraries they need). One JSON line per (N, W) in OUT.jsonl.
set -uo pipefail
bin=$1 out=$2 threads=$3 towers=$4 widths=$5
model_options=${6:-'{"cost_model": true}'}
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py=${PYTHON:-python3}
fusions=batch_linear,batch_layernorm,batch_tanh,batch_relu,batch_sigmoid
opts=$($py -c "import json,sys; o=json.loads(sys.argv[1]); print(json.dumps({f: o for f in sys.argv[2].split(',')}))" "$model_options" "$fusions")
cpus="0-$((threads - 1))"
: > "$out"
for n in ${towers//,/ }; do
  for w in ${widths//,/ }; do
    dir=/tmp/kiln_towers/${n}x${w}
    [ -f "$dir/graph.json" ] || KILN_TOWERS=${n}x${w} $py tools/export_fx.py tests.python.towers_model:TowersFromEnv \
        --input-shape "32,$((n * w))" --seed 0 --out "$dir" >/dev/null || continue
    "$bin/kiln-opt" "$dir/graph.json" --passes "$fusions" -o "$dir/fused.json" --quiet
    "$bin/kiln-opt" "$dir/graph.json" --passes "$fusions" --pass-options "$opts" -o "$dir/model.json" --quiet \
        --counters > "$dir/model_counters.json"
    line="{\"towers\": $n, \"width\": $w, \"threads\": $threads"
    for g in graph fused model; do
      r=$(OMP_NUM_THREADS=$threads taskset -c "$cpus" "$bin/kiln-run" "$dir/$g.json" --inputs "$dir/inputs/x.npy" \
             --threads "$threads" --iterations 30 --warmup 5 --compare "$dir/outputs" --max-rel-err 1e-4 --json |
           $py -c "import json,sys; r=json.load(sys.stdin); print(r['median_ms'], r['steps'])")
      read -r ms steps <<<"$r"
      line="$line, \"${g/graph/unfused}_ms\": ${ms:-null}, \"${g/graph/unfused}_steps\": ${steps:-null}"
    done
    skipped=$($py -c "import json,sys; t=json.load(open(sys.argv[1]))['total']; print(sum(v for k, v in t.items() if k.endswith('_skipped_by_cost_model')))" "$dir/model_counters.json")
    echo "$line, \"model_sets_skipped\": $skipped}" >> "$out"
  done
done
cat "$out"
# The stacks' copy bandwidth, for the model's cost_model_copy_gb_per_s: the
# profile of the largest fused graph (torch.stack's time per run against the
# bytes it copies: towers x 32 x width x 4 per stacked input).
last=$(ls -d /tmp/kiln_towers/*/ | tail -1)
OMP_NUM_THREADS=$threads taskset -c "$cpus" "$bin/kiln-run" "$last/fused.json" --inputs "$last/inputs/x.npy" \
    --threads "$threads" --iterations 30 --warmup 5 --profile > "$out.profile.txt" 2>&1
echo "profile of $last: $out.profile.txt"
