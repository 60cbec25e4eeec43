#!/usr/bin/env bash
# Two ringstore builds side by side on 3 nodes (not run in CI): RF 3,
# QUORUM, batch durability, c=64 spread over the three coordinators,
# 100-byte values over 100,000 keys. Alternating the builds for ROUNDS
# rounds, each round starts a fresh cluster of one build and runs stress
# write, read and noop; prints throughput, p99 and the three servers' CPU
# time per operation (user + system, from /proc): on a shared machine the
# CPU per request is steadier than the throughput. Address block 112.
# Usage: benches/compare_builds.sh BIN_A BIN_B [OPERATIONS] [ROUNDS]
#        (default 50000 operations, 2 rounds)
# Build the "before" binary from another checkout, e.g.
#   git worktree add /tmp/before HEAD~1 && (cd /tmp/before && cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BIN_A BIN_B [OPERATIONS] [ROUNDS]" >&2; exit 2; }
builds=("$1" "$2")
ops=${3:-50000}
rounds=${4:-2}
STRESS_BIN=$1 . benches/common.sh
block=112
hosts="127.$block.0.1:7100,127.$block.0.2:7100,127.$block.0.3:7100"
tick=$(getconf CLK_TCK)
cpu_ticks() { local sum=0; for p in "${pids[@]}"; do sum=$(( sum + $(awk '{print $14 + $15}' "/proc/$p/stat") )); done; echo "$sum"; }

measure() { # LABEL BINARY
  local label=$1
  bin=$2
  for i in 1 2 3; do start_server "$block" "$i" "$label-$i" RINGSTORE_STORAGE__DURABILITY=batch; done
  wait_until_up "127.$block.0.1:7100" 3
  for workload in write read noop; do
    local before after
    before=$(cpu_ticks)
    "$bin" --host "127.$block.0.1:7100" stress "$workload" -n "$ops" --concurrency 64 \
      --hosts "$hosts" --key-count 100000 --value-size 100 --consistency QUORUM \
      --replication SimpleStrategy:3 --json >"$work/result.json"
    after=$(cpu_ticks)
    python3 - "$label" "$workload" "$before" "$after" "$tick" "$ops" "$work/result.json" <<'PY'
import json, sys
label, workload, before, after, tick, ops, path = sys.argv[1:]
r = json.load(open(path))
cpu = (float(after) - float(before)) / float(tick) * 1e6 / int(ops)
errors = sum(r['errors'].values())
print(f"{label:2} {workload:5} {r['ops_per_second']:8.0f} ops/s  p50 {r['latency_ms']['p50']:6.2f} ms  "
      f"p99 {r['latency_ms']['p99']:6.2f} ms  servers' CPU {cpu:6.1f} us/op  errors {errors}")
PY
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  rm -rf "$work/$label"-*
}

echo "A = ${builds[0]}"
echo "B = ${builds[1]}"
for round in $(seq 1 "$rounds"); do
  echo "== round $round"
  measure A "${builds[0]}"
  measure B "${builds[1]}"
done
