#!/usr/bin/env bash
# kiln int8 and Inductor int8 at batch 16, 16 threads, side by side in one run:
# kiln-run three times, Inductor once, kiln-run again (the device's timings
# spread between calls, so one pair of numbers says little).
#   bash bench/quantization/repeat_b16.sh KILN_RUN
# Needs PyTorch 2.x (Inductor); run from the repository root.
set -uo pipefail
kiln_run=$1
median() { "$kiln_run" "$1" --passes quantization --threads 16 --iterations 50 --warmup 5 --json 2>/dev/null | grep '^{' |
  python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["median_ms"])'; }
for m in ResNet18 MobileNetV2; do
  d=/tmp/qspeed_${m}_b16
  [ -d "$d" ] || python3 tools/export_fx.py tests.python.vision_models:$m --input-shape 16,3,224,224 --level aten --quantize x86 \
    --seed 0 --out "$d" >/dev/null 2>&1
  for rep in 1 2 3; do echo "$m kiln_int8 $(median "$d")"; done
  python3 bench/quantization/inductor_int8.py tests.python.vision_models:$m --input-shape 16,3,224,224 --rounds 50 --threads 16 \
    2>/dev/null | python3 -c 'import json, sys; print(sys.argv[1], "inductor_int8", json.loads(sys.stdin.read())["ms"]["16"]["inductor_int8"])' "$m"
  echo "$m kiln_int8 $(median "$d")"
done
