#!/usr/bin/env bash
# QUORUM read latency with one replica slowed, by speculative_retry (not run
# in CI; issue #13's tail-latency acceptance): 3 nodes on loopback (block
# 108), RF 3, `ringstore stress read` closed loop at concurrency 16 through
# node 1 while node 3 is stopped (SIGSTOP) for 200 ms of every second.
# One keyspace per setting, each loaded first; rows:
#   none   no slow replica, speculative_retry none (the baseline)
#   none   slow replica, none (a slow replica costs its stall)
#   p99    slow replica, p99 (the default)
#   10ms   slow replica, a fixed 10 ms
# and the speculative retries node 1 counted during each run. The goal:
# the slow p999 under 3× the baseline's.
# Usage: benches/slow_replica.sh [SECONDS]   (default 20 per run)
# STRESS_BIN=path runs another build instead of building this tree's release
# binary.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
keys=20000
. benches/common.sh

block=108
slower=
resume() { # stop the slowing loop, let node 3 run again, then clean up
  [ -n "$slower" ] && kill "$slower" 2>/dev/null || true
  [ -n "${pids[2]:-}" ] && kill -CONT "${pids[2]}" 2>/dev/null || true
  cleanup
}
trap resume EXIT

for i in 1 2 3; do
  start_server "$block" "$i" "$i"
done
host="127.$block.0.1:7100"
wait_until_up "$host" 3

for setting in none p99 10ms; do
  ks="spec_${setting}"
  "$bin" --host "$host" keyspace create "$ks" --replication SimpleStrategy:3 \
    --speculative-retry "$setting"
  "$bin" --host "$host" stress write -n "$keys" --key-count "$keys" --concurrency 16 \
    --keyspace "$ks" --consistency ALL --json >/dev/null
done

retries() {
  "$bin" --host "$host" metrics | awk '/^ringstore_speculative_retries_total / {print $2}'
}

run() { # label keyspace
  local before after report
  before=$(retries)
  report=$("$bin" --host "$host" stress read --duration "${seconds}s" --concurrency 16 \
    --key-count "$keys" --keyspace "$2" --consistency QUORUM --json)
  after=$(retries)
  echo "$report" | python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency_ms']; print(f\"$1  {r['ops_per_second']:7.0f} ops/s  p50 {l['p50']:7.2f} ms  p99 {l['p99']:7.2f} ms  p999 {l['p999']:7.2f} ms  max {l['max']:7.2f} ms  errors {sum(r['errors'].values())}  speculative retries $((${after%.*} - ${before%.*}))\")"
}

echo "3 nodes RF 3, QUORUM reads, concurrency 16, ${seconds} s each"
run "no slow replica, speculative_retry none " spec_none

# Node 3 stopped for 200 ms of every second from here on.
( while true; do
    kill -STOP "${pids[2]}"; sleep 0.2
    kill -CONT "${pids[2]}"; sleep 0.8
  done ) &
slower=$!

run "slow replica,    speculative_retry none " spec_none
run "slow replica,    speculative_retry p99  " spec_p99
run "slow replica,    speculative_retry 10ms " spec_10ms
