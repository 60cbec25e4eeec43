#!/usr/bin/env bash
# End-to-end throughput of real server processes on loopback, measured with
# `ringstore stress` at concurrency 64 (not run in CI):
#   - 1 node,  RF 1, consistency ONE
#   - 3 nodes, RF 3, consistency QUORUM
# each with batch and periodic durability: put and get ops/s with p50/p99, and
# the noop RPC (the transport's ceiling) in the same run.
# Usage: benches/stress.sh [OPERATIONS]   (default 100000 per workload)
# STRESS_BIN=path runs another build (e.g. an older one, for a before/after
# comparison) instead of building this tree's. (Not RINGSTORE_*: the servers
# would read that as a setting.)
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-100000}
. benches/common.sh

start_cluster() { # nodes durability block
  local nodes=$1 durability=$2 block=$3
  pids=()
  for i in $(seq 1 "$nodes"); do
    start_server "$block" "$i" "$block-$durability-$i" RINGSTORE_STORAGE__DURABILITY="$durability"
  done
  for _ in $(seq 1 300); do
    up=$("$bin" --host "127.$block.0.1:7100" status 2>/dev/null | grep -c '^UN ' || true)
    [ "$up" = "$nodes" ] && return 0
    sleep 0.2
  done
  echo "cluster did not come up" >&2; exit 1
}

stop_cluster() { for pid in "${pids[@]}"; do kill "$pid"; done; wait "${pids[@]}" 2>/dev/null || true; pids=(); }

run() { # label host rf consistency
  local label=$1 host=$2 rf=$3 cl=$4
  for workload in write read noop; do
    "$bin" --host "$host" stress "$workload" -n "$ops" --concurrency 64 --key-count 100000 \
      --value-size 100 --consistency "$cl" --replication "SimpleStrategy:$rf" --json |
      python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency_ms']; print(f\"$label {r['workload']:5} {r['ops_per_second']:9.0f} ops/s  p50 {l['p50']:.2f} ms  p99 {l['p99']:.2f} ms  errors {sum(r['errors'].values())}\")"
  done
}

# Blocks 98 to 101 (the tests use other blocks: see tests/processes.rs).
block=97
for durability in batch periodic; do
  block=$((block + 1)); start_cluster 1 "$durability" $block
  run "1 node RF1 ONE    $durability" "127.$block.0.1:7100" 1 ONE
  stop_cluster
  block=$((block + 1)); start_cluster 3 "$durability" $block
  run "3 nodes RF3 QUORUM $durability" "127.$block.0.1:7100" 3 QUORUM
  stop_cluster
done
