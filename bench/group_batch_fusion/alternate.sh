#!/usr/bin/env bash
# Pass time of builds compared side by side in one run: each round runs
# every given kiln-bench-group-batch-fusion binary in turn on one CPU, so
# that the machine's drift falls on all of them alike.
#   bench/group_batch_fusion/alternate.sh ROUNDS CPU BIN [BIN...]
# One line per binary and round: its name, then the bench's JSON lines.
# Arguments in BENCH_ARGS go to each run as well (e.g. "--evict-mb 1024").
set -uo pipefail
rounds=$1 cpu=$2
shift 2
for ((i = 1; i <= rounds; ++i)); do
  for bin in "$@"; do
    echo "== $(basename "$bin") (round $i)"
    # shellcheck disable=SC2086  # (BENCH_ARGS is a list of words)
    taskset -c "$cpu" "$bin" --towers 512,4096,32768 --reps 5 ${BENCH_ARGS:-} | tr '\n' ' '
    echo
  done
done
