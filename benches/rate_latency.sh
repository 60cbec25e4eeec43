#!/usr/bin/env bash
# Latency under a steady load below the maximum (issue #13: "3 nodes,
# QUORUM put with --rate at half the measured maximum: p99 < 5 ms"). Not run
# in CI. Three nodes on loopback (block 110), RF 3, batch durability (or
# $DURABILITY):
#   1. the maximum: closed-loop QUORUM puts at concurrency 64;
#   2. open loop (`--rate`, latencies from the due time, so coordinated
#      omission is corrected) at FRACTIONS of that maximum, each for SECONDS;
# printing ops/s, p50/p99/p99.9, node 1's storage syncs (count, mean
# duration), the whole machine's CPU (busy share of /proc/stat over the
# run, warm-up included, and that CPU time per operation) and what the disk
# under the nodes' data did (writes, MB written and flushes per second, the
# three nodes together) for each, and writing one HTML report per run
# (stress --html) to OUT_DIR.
# Usage: benches/rate_latency.sh [SECONDS] [OUT_DIR] [FRACTIONS]
#        (defaults: 20, ./rate-latency, "0.25 0.5")
# Every run first sends its load for WARMUP seconds (default 3) unreported
# (stress --warmup): the first second after a heavier run or an idle spell
# pays for cold connections and caches, which is not steady state.
# DURABILITY=periodic runs the nodes with periodic sync instead of batch.
# NODE_SETTINGS="RINGSTORE_X=V ..." gives the nodes more settings, e.g.
# RINGSTORE_STORAGE__COMMIT_LOG_SYNC_WINDOW_US=2000.
# STRESS_THREADS=N runs the load generator on N threads (stress --threads).
# STRESS_PIPELINE=1 sends on Client/Pipeline streams (stress --pipeline).
# STRESS_BIN=path runs another build instead of this tree's release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
out=${2:-rate-latency}
fractions=${3:-0.25 0.5}
. benches/common.sh
. benches/disk_stats.sh
mkdir -p "$out"

block=110
for i in 1 2 3; do
  # shellcheck disable=SC2086 # NODE_SETTINGS is a list of words
  start_server "$block" "$i" "node$i" RINGSTORE_STORAGE__DURABILITY="${DURABILITY:-batch}" ${NODE_SETTINGS:-}
done
dev=$(disk_device "$work")
wait_until_up "127.$block.0.1:7100" 3

hosts="127.$block.0.1:7100,127.$block.0.2:7100,127.$block.0.3:7100"
stress() { # NAME ARGS...: a QUORUM put run, its JSON report summarised
  local name=$1
  shift
  "$bin" --host "127.$block.0.1:7100" stress write --consistency QUORUM \
    --replication SimpleStrategy:3 --key-count 100000 --value-size 100 \
    --hosts "$hosts" --json --html "$out/$name.html" --warmup "${WARMUP:-3}s" ${STRESS_THREADS:+--threads "$STRESS_THREADS"} \
    ${STRESS_PIPELINE:+--pipeline} "$@" |
    python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency_ms']; print(f\"{r['ops_per_second']:.0f} {l['p50']:.2f} {l['p99']:.2f} {l['p999']:.2f} {sum(r['errors'].values())}\")"
}

# Node 1's storage syncs so far: "COUNT SUM_SECONDS" (batch durability syncs
# before acking; a sync that grows slower shows here).
syncs() {
  "$bin" --host "127.$block.0.1:7100" metrics |
    python3 -c "import sys; m=dict(l.rsplit(' ',1) for l in sys.stdin if l.startswith('ringstore_storage_sync_duration_seconds_')); print(m.get('ringstore_storage_sync_duration_seconds_count','0').strip(), m.get('ringstore_storage_sync_duration_seconds_sum','0').strip())"
}
# The machine's CPU ticks so far: "BUSY ALL" (busy: all but idle and iowait).
ticks() { awk '$1 == "cpu" { print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9; exit }' /proc/stat; }
# Prints a run's line, with node 1's syncs during it (count, mean) and the
# machine's CPU over it (warm-up included, as is its share of operations).
report() { # LABEL OPS P50 P99 P999 ERRORS SYNCS_BEFORE(2 words) TICKS_BEFORE(2 words)
  local count sum busy all
  read -r count sum < <(syncs)
  read -r busy all < <(ticks)
  printf '%-28s %8s ops/s  p50 %6s ms  p99 %6s ms  p99.9 %6s ms  errors %s  node 1 syncs %s' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$((count - $7))"
  python3 -c "n=$count-$7; print(f' (mean {($sum-$8)/n*1000:.2f} ms)' if n else '', end='')"
  python3 -c "b=$busy-$9; a=$all-${10}; ops=$2*(${WARMUP:-3}+$seconds); print(f'  machine {b/max(a,1)*100:.0f}% busy' + (f', {b/$(getconf CLK_TCK)/ops*1e6:.0f} us CPU per op' if ops else ''))"
}

read -r c0 s0 < <(syncs)
read -r b0 a0 < <(ticks)
d0=$(disk_stat "$dev") t0=$(date +%s.%N)
read -r max p50 p99 p999 errors < <(stress closed-loop --concurrency 64 --duration "${seconds}s")
report "closed loop, c=64 (maximum)" "$max" "$p50" "$p99" "$p999" "$errors" "$c0" "$s0" "$b0" "$a0"
disk_rates "$dev" "$d0" "$(disk_stat "$dev")" "$(echo "$(date +%s.%N) - $t0" | bc)"
for fraction in $fractions; do
  rate=$(python3 -c "print(int($max * $fraction))")
  read -r c0 s0 < <(syncs)
  read -r b0 a0 < <(ticks)
  d0=$(disk_stat "$dev") t0=$(date +%s.%N)
  read -r got p50 p99 p999 errors < <(stress "rate-$fraction" --concurrency 256 --rate "$rate" --duration "${seconds}s")
  report "--rate $rate ($fraction of max)" "$got" "$p50" "$p99" "$p999" "$errors" "$c0" "$s0" "$b0" "$a0"
  disk_rates "$dev" "$d0" "$(disk_stat "$dev")" "$(echo "$(date +%s.%N) - $t0" | bc)"
done
echo "HTML reports in $out/"
