#!/usr/bin/env bash
# Side-by-side timing of kiln-run and its peers (PyTorch eager, torch.compile,
# ONNX Runtime) on the device machine, in one run, at the given thread counts.
#   bench/executor/device_run.sh BIN_DIR OUT.jsonl THREADS MODEL...
# BIN_DIR holds kiln-run and the shared libraries it needs there (libdnnl.so.2,
# libOpenCL.so.1, libgomp.so.1); a MODEL is name|MODULE:FACTORY|input shape,
# exported here with this machine's PyTorch. Each runner is pinned with taskset
# to the first THREADS cores. KILN_VARIANTS times kiln-run more than once, each
# with its own arguments and runner label, ';'-separated LABEL=ARGS (default
# "kiln="; e.g. "kiln=;kiln_winograd=--conv-algorithm winograd").
set -uo pipefail  # one failing runner must not stop the others
bin=$1 out=$2 threads_list=$3
shift 3
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py=${PYTHON:-python3}
: > "$out"
for model in "$@"; do
  IFS='|' read -r name factory shape <<<"$model"
  dir=/tmp/kiln_models/$name
  [ -f "$dir/graph.json" ] || $py tools/export_fx.py "$factory" --input-shape "$shape" --level torch --seed 0 --out "$dir" >/dev/null
  for t in ${threads_list//,/ }; do
    cpus="0-$((t - 1))"
    IFS=';' read -ra variants <<<"${KILN_VARIANTS:-kiln=}"
    for variant in "${variants[@]}"; do
      label=${variant%%=*} args=${variant#*=}
      # shellcheck disable=SC2086  # ARGS splits into kiln-run's arguments
      OMP_NUM_THREADS=$t taskset -c "$cpus" "$bin/kiln-run" "$dir" --json --threads "$t" --iterations 20 --warmup 5 \
          --compare "$dir/outputs" --max-rel-err 1e-4 $args |
        $py -c "import json,sys; r=json.loads(sys.stdin.read()); r.update(name='$name', runner='$label'); print(json.dumps(r))" >>"$out"
    done
    OMP_NUM_THREADS=$t taskset -c "$cpus" $py bench/executor/peers.py "$factory" --input-shape "$shape" \
        --threads "$t" --name "$name" --peers "${PEERS:-eager,compile,ort}" >>"$out"
  done
done
cat "$out"
