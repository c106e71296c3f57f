#!/usr/bin/env bash
# Runs one exported model (a folder of tools/export_fx.py) sharded by
# shard_parameters over 1, 2 and 4 MPI ranks, unbucketed and bucketed at each
# cap, and writes one JSON line per run: ranks, passes, rank 0's peak RSS, its
# median time per run and the pass counters (weights sharded, buckets made).
#   bash bench/sharding/shard_run.sh KILN_RUN MODEL_DIR OUT.jsonl [RANKS] [CAPS_MB]
# RANKS defaults to "1 2 4", CAPS_MB to "4 2000" (2000 is bucket_fsdp_all_gather's
# default). Ranks beyond the machine's cores run oversubscribed. PRE_PASSES (e.g.
# "fuse_conv_bn,") runs before shard_parameters: what is folded into the weights
# first stays folded, where a sharded weight is no longer a constant to fold.
set -euo pipefail
kiln_run=$1 model=$2 out=$3
ranks=${4:-1 2 4}
caps=${5:-4 2000}
iterations=${ITERATIONS:-10}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
: >"$out"
run() {  # ranks label passes [pass-options]
  local np=$1 label=$2 passes=$3 options=${4:-}
  local args=("$model" --passes "$passes" --iterations "$iterations" --warmup 2 --json)
  [[ -n $options ]] && args+=(--pass-options "$options")
  local line
  line=$(mpirun -np "$np" --oversubscribe --bind-to none "$kiln_run" "${args[@]}" | grep '^{' | tail -1)
  python3 -c 'import json, sys
r = json.loads(sys.argv[1])
keep = {k: r[k] for k in ("median_ms", "min_ms", "peak_rss_bytes", "constant_bytes", "steps") if k in r}
keep.update(model=sys.argv[2], ranks=int(sys.argv[3]), variant=sys.argv[4], counters=r.get("pass_counters", {}))
print(json.dumps(keep))' "$line" "$(basename "$model")" "$np" "$label" | tee -a "$out"
}
for np in $ranks; do
  run "$np" unbucketed "${PRE_PASSES:-}shard_parameters"
  for cap in $caps; do
    run "$np" "bucketed_${cap}mb" "${PRE_PASSES:-}shard_parameters,bucket_fsdp_all_gather" "{\"bucket_fsdp_all_gather\": {\"bucket_cap_mb\": $cap}}"
  done
done
