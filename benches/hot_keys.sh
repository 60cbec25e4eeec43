#!/usr/bin/env bash
# Hot keys (issue #13: "zipf:1.2 reads reach >= 0.9x the throughput of
# uniform reads, and toppartitions names the hottest keys in order"). Not
# run in CI. Three nodes on loopback (block 111), RF 3, batch durability:
#   1. loads the keys: 2 x KEYS QUORUM puts of 100-byte values, uniform;
#   2. ROUNDS rounds of QUORUM reads for SECONDS each at concurrency 64,
#      spread over the three coordinators: uniform, then zipf:1.2 (about a
#      fifth of the reads on key0);
#   3. during the last zipf round, `toppartitions stress` on node 1;
# printing ops/s and p99 of every run, the zipf/uniform ratio of the
# throughput summed over the rounds, and what toppartitions listed.
# Usage: benches/hot_keys.sh [SECONDS] [ROUNDS] [KEYS]  (defaults 15, 2, 100000)
# STRESS_BIN=path runs another build instead of this tree's release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
rounds=${2:-2}
keys=${3:-100000}
. benches/common.sh

block=111
for i in 1 2 3; do
  start_server "$block" "$i" "node$i"
done
wait_until_up "127.$block.0.1:7100" 3
hosts="127.$block.0.1:7100,127.$block.0.2:7100,127.$block.0.3:7100"

run() { # WORKLOAD ARGS...: one stress run; prints "OPS P99 ERRORS"
  local workload=$1
  shift
  "$bin" --host "127.$block.0.1:7100" stress "$workload" --consistency QUORUM \
    --replication SimpleStrategy:3 --key-count "$keys" --value-size 100 \
    --hosts "$hosts" --concurrency 64 --json "$@" |
    python3 -c "import json,sys; r=json.load(sys.stdin); print(f\"{r['ops_per_second']:.0f} {r['latency_ms']['p99']:.2f} {sum(r['errors'].values())}\")"
}

read -r ops p99 errors < <(run write -n $((keys * 2)))
echo "load: $((keys * 2)) puts at $ops ops/s (errors $errors)"

uniform_total=0
zipf_total=0
for round in $(seq 1 "$rounds"); do
  read -r ops p99 errors < <(run read --duration "${seconds}s" --distribution uniform)
  printf 'round %s  uniform   %7s ops/s  p99 %6s ms  errors %s\n' "$round" "$ops" "$p99" "$errors"
  uniform_total=$((uniform_total + ops))
  if [ "$round" = "$rounds" ]; then
    "$bin" --host "127.$block.0.1:7100" toppartitions stress --duration "$((seconds / 2))s" \
      -k 5 -a reads >"$work/top.txt" &
    top=$!
  fi
  read -r ops p99 errors < <(run read --duration "${seconds}s" --distribution zipf:1.2)
  printf 'round %s  zipf:1.2  %7s ops/s  p99 %6s ms  errors %s\n' "$round" "$ops" "$p99" "$errors"
  zipf_total=$((zipf_total + ops))
done
wait "$top"
python3 -c "print(f'zipf:1.2 / uniform throughput: {$zipf_total / $uniform_total:.2f}')"
echo "toppartitions on node 1 during the last zipf:1.2 round:"
cat "$work/top.txt"
