#!/usr/bin/env bash
# Repair of a 3-node RF 3 cluster of real processes on loopback (not run in
# CI): KEYS keys of 1 KiB loaded at ALL (random keys, about 86 % of them
# written), then node 3 stopped while about 1 % of the keys get new versions
# at ONE (hints off, so it stays stale), then:
#   - client p99 of reads at ONE (which do not read-repair) without repair,
#     and while `ringstore repair` runs (stream and validation throttles at
#     their defaults);
#   - the repair's time, keys differing, rows sent and bytes exchanged;
#   - a second repair of the now identical replicas.
# Usage: benches/repair.sh [KEYS]   (default 1048576: about 1 GiB per node)
# STRESS_BIN=path runs another build instead of building this tree's.
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-1048576}
. benches/common.sh
block=65
host="127.$block.0.1:7100"

start_node() { # i
  local i=$1
  RINGSTORE_HINTS__ENABLED=false RINGSTORE_RING_DELAY_MS=300 RUST_LOG=warn \
    "$bin" server --cluster-name bench --data-dir "$work/$i" \
    --listen-address "127.$block.0.$i:7100" --internode-address "127.$block.0.$i:7101" \
    --gossip-address "127.$block.0.$i:7000" --seeds "127.$block.0.1:7000" --rack "rack$i" \
    2>>"$work/$i.log" &
  pids[$i]=$!
}

wait_up() { # count
  for _ in $(seq 1 600); do
    up=$("$bin" --host "$host" status 2>/dev/null | grep -c '^UN ' || true)
    [ "$up" = "$1" ] && return 0
    sleep 0.2
  done
  echo "the cluster did not come up" >&2; exit 1
}

stress() { # workload ops consistency [host]
  "$bin" --host "${4:-$host}" stress "$1" -n "$2" --concurrency 64 --key-count "$keys" \
    --value-size 1024 --consistency "$3" --keyspace ks --replication SimpleStrategy:3 --json
}

p99() { python3 -c "import json,sys; r=json.load(sys.stdin); print(f\"{r['ops_per_second']:.0f} ops/s, p50 {r['latency_ms']['p50']:.2f} ms, p99 {r['latency_ms']['p99']:.2f} ms, errors {sum(r['errors'].values())}\")"; }

for i in 1 2 3; do start_node "$i"; done
wait_up 3
"$bin" --host "$host" keyspace create ks --replication SimpleStrategy:3 >/dev/null
echo "loading $((keys * 2)) writes of 1 KiB over $keys keys at ALL..."
start=$(date +%s)
stress write $((keys * 2)) ALL | p99
echo "loaded in $(( $(date +%s) - start )) s; load per node:"
"$bin" --host "$host" status | grep '^UN ' | awk '{print "  " $2, $3, $4}'

# Reads at ONE: they do not repair what they read, so the divergence stays
# for the repair to find.
reads=$((keys / 5))
echo "reads at ONE without repair: $(stress read $reads ONE "127.$block.0.2:7100" | p99)"

kill "${pids[3]}"; wait "${pids[3]}" 2>/dev/null || true
for _ in $(seq 1 300); do "$bin" --host "$host" status | grep -q '^DN ' && break; sleep 0.2; done
echo "node 3 down: $((keys / 100)) writes at ONE it misses"
stress write $((keys / 100)) ONE | p99
start_node 3
wait_up 3

start=$(date +%s.%N)
"$bin" --host "$host" repair ks > "$work/repair.out" 2>&1 &
repair=$!
echo "reads at ONE during repair:  $(stress read $reads ONE "127.$block.0.2:7100" | p99)"
wait $repair
end=$(date +%s.%N)
echo "repair: $(python3 -c "print(f'{$end - $start:.1f} s')"): $(cat "$work/repair.out")"
start=$(date +%s.%N)
"$bin" --host "$host" repair ks > "$work/repair2.out" 2>&1
end=$(date +%s.%N)
echo "repair of identical replicas: $(python3 -c "print(f'{$end - $start:.1f} s')"): $(cat "$work/repair2.out")"
