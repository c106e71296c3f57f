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
# A MODEL given as a bare torchvision name (mobilenet_v2) or NAME@BATCH
# (resnet50@16) is torchvision.models:NAME at BATCH,3,224,224 (batch 1).
#
# ROUNDS=R: alternated rounds instead (peers.py --rounds R, kiln-run one of the
# runners, each round's lines tagged "round"; KILN_VARIANTS unused). Then the
# models are exported side by side, falling back to --level aten where the
# torch level fails to export or kiln-run cannot take it, and kiln-run's
# outputs are checked against PyTorch's (a "check" line); for each thread
# count every model's peers are set up side by side (torch.compile costs close
# to a minute a model) and, once all are ready, the models take turns, one at a
# time, timed alone. Round 1's kiln-run writes its --profile next to OUT.jsonl
# (profile_NAME_THREADS.txt). DEADLINE (seconds since the epoch) skips turns
# that would start after it.
set -uo pipefail  # one failing runner must not stop the others
bin=$1 out=$2 threads_list=$3
shift 3
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py=${PYTHON:-python3}
: > "$out"
mkdir -p /tmp/kiln_models
models=()
for model in "$@"; do
  if [[ $model != *"|"* ]]; then  # torchvision name, NAME@BATCH
    batch=${model#*@}; [ "$batch" = "$model" ] && batch=1
    model="${model%@*}_b$batch|torchvision.models:${model%@*}|$batch,3,224,224"
  fi
  models+=("$model")
done

# One model's export (torch level, else aten) and the check of kiln-run's outputs.
export_and_check() {
  local name=$1 factory=$2 shape=$3 dir=/tmp/kiln_models/$1 level log
  [ -f "$dir/level" ] && return
  for level in torch aten; do
    rm -rf "$dir"
    log=/tmp/kiln_models/$name.$level.log
    if ! $py tools/export_fx.py "$factory" --input-shape "$shape" --level $level --seed 0 --out "$dir" >"$log" 2>&1; then
      $py -c "import json,sys; print(json.dumps({'name': '$name', 'runner': 'export_$level', 'error': sys.stdin.read().strip().splitlines()[-1:]}))" <"$log" >>"$out"
      continue
    fi
    "$bin/kiln-run" "$dir" --json --threads 2 --iterations 1 --warmup 0 --compare "$dir/outputs" --max-rel-err 1e-4 >"$log" 2>&1
    $py -c "
import json, sys
lines = open('$log').read().strip().splitlines()
js = [l for l in lines if l.startswith('{')]
r = json.loads(js[-1]) if js else {'error': lines[-1:] or ['kiln-run failed']}
r.update(name='$name', runner='check' if js else 'kiln_$level', level='$level')
print(json.dumps(r))
sys.exit(0 if js else 1)" >>"$out" && { echo $level >"$dir/level"; return; }
  done
}

if [ -n "${ROUNDS:-}" ]; then
  for model in "${models[@]}"; do
    IFS='|' read -r name factory shape <<<"$model"
    export_and_check "$name" "$factory" "$shape" &
  done
  wait
  # Compiles side by side: a few workers each; a cache of each thread
  # count's own, as Inductor writes the thread count into its kernels.
  export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-4}
  for t in ${threads_list//,/ }; do
    sync_dir=$(mktemp -d)
    export TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor_t$t
    for model in "${models[@]}"; do
      IFS='|' read -r name factory shape <<<"$model"
      dir=/tmp/kiln_models/$name
      [ -f "$dir/level" ] || dir=""
      OMP_NUM_THREADS=$t $py bench/executor/peers.py "$factory" --input-shape "$shape" --threads "$t" --name "$name" \
          --peers "${PEERS:-eager,compile,ort}" --rounds "$ROUNDS" --cpus "0-$((t - 1))" \
          --turns "$sync_dir" --turn-count ${#models[@]} --deadline "${DEADLINE:-0}" \
          --profile "$(dirname "$out")/profile_${name}_$t.txt" ${dir:+--kiln "$bin/kiln-run $dir"} >>"$out" &
    done
    wait
  done
  cat "$out"
  exit 0
fi

for model in "${models[@]}"; do
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
