#!/usr/bin/env bash
# The all-gathers per run that shard_parameters + bucket_fsdp_all_gather leave
# at each cap, for one exported model, read from kiln-opt's counters (nothing
# runs): one JSON line per cap, the input of fit_alpha_beta.py --caps.
#   bash bench/sharding/cap_counts.sh KILN_OPT MODEL_DIR OUT.jsonl [CAPS_MB] [PRE_PASSES]
# CAPS_MB defaults to "0 1 4 25 100 2000" (0: unbucketed). The world size does
# not change the counts (a bucket's size is that of the gathered weights).
set -euo pipefail
kiln_opt=$1 model=$2 out=$3
caps=${4:-0 1 4 25 100 2000}
pre=${5:-}
: >"$out"
for cap in $caps; do
  passes="${pre}shard_parameters" options='{"shard_parameters": {"world_size": 2, "rank": 0}'
  if [[ $cap != 0 ]]; then
    passes+=",bucket_fsdp_all_gather"
    options+=", \"bucket_fsdp_all_gather\": {\"bucket_cap_mb\": $cap}"
  fi
  options+="}"
  "$kiln_opt" "$model/graph.json" --passes "$passes" --pass-options "$options" --quiet --counters |
    python3 -c 'import json, sys
total = json.loads(sys.stdin.read())["total"]
k = total.get("shard_parameters_sharded", 0) - total.get("bucket_fsdp_all_gather_collectives", 0) \
    + total.get("bucket_fsdp_all_gather_buckets", 0)
print(json.dumps({"model": sys.argv[1], "cap_mb": int(sys.argv[2]), "collectives": k,
                  "bytes": total.get("shard_parameters_bytes_sharded", 0)}))' "$(basename "$model")" "$cap" | tee -a "$out"
done
