#!/usr/bin/env bash
# Put throughput and latency with and without token-aware routing (not run in
# CI): a cluster of 3, then of 5 nodes on loopback, RF 3, QUORUM,
# `ringstore stress write` at concurrency 64 through node 1 (`--host`
# coordinates everything) and with `--token-aware` (each put goes to a
# replica of its key, through the ringstore-client library), alternated, each
# twice, on the same cluster. After each run, the puts coordinated by a node
# that was no replica of the key (ringstore_coordinator_requests_total
# {replica_local="false"}, summed over the nodes): those are forwarded to
# all three replicas.
# Usage: benches/stress_token_aware.sh [OPERATIONS]   (default 50000 per run)
# STRESS_BIN=path runs another build instead of building this tree's release
# binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-50000}
. benches/common.sh

start_cluster() { # nodes block
  local nodes=$1 block=$2
  pids=()
  for i in $(seq 1 "$nodes"); do
    start_server "$block" "$i" "$block-$i"
  done
  for _ in $(seq 1 300); do
    up=$("$bin" --host "127.$block.0.1:7100" status 2>/dev/null | grep -c '^UN ' || true)
    [ "$up" = "$nodes" ] && break
    sleep 0.2
  done
  [ "$up" = "$nodes" ] || { echo "cluster did not come up" >&2; exit 1; }
}

stop_cluster() { for pid in "${pids[@]}"; do kill "$pid"; done; wait "${pids[@]}" 2>/dev/null || true; pids=(); }

forwarded() { # nodes block: non-replica coordinated writes, summed
  local nodes=$1 block=$2 total=0
  for i in $(seq 1 "$nodes"); do
    n=$("$bin" --host "127.$block.0.$i:7100" metrics |
      awk '/^ringstore_coordinator_requests_total\{operation="write",replica_local="false"\}/ {print $2}')
    total=$((total + ${n:-0}))
  done
  echo "$total"
}

for nodes in 3 5; do
  block=$((190 + nodes)) # 193 and 194
  start_cluster "$nodes" "$block"
  for mode in host token-aware host token-aware; do
    flag=()
    [ "$mode" = token-aware ] && flag=(--token-aware)
    before=$(forwarded "$nodes" "$block")
    report=$("$bin" --host "127.$block.0.1:7100" stress write -n "$ops" --concurrency 64 \
      --key-count 100000 --value-size 100 --consistency QUORUM --replication SimpleStrategy:3 \
      "${flag[@]}" --json)
    after=$(forwarded "$nodes" "$block")
    echo "$report" | python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency_ms']; print(f\"$nodes nodes  ${mode}  put {r['ops_per_second']:7.0f} ops/s  p50 {l['p50']:6.2f} ms  p99 {l['p99']:6.2f} ms  errors {sum(r['errors'].values())}  forwarded $((after - before))\")"
  done
  stop_cluster
done
