#!/usr/bin/env bash
# A fresh cluster started at once (not run in CI): NODES `ringstore server`
# processes on loopback (127.105.0.1 to .NODES, racks rack1 to rack3 in
# turn, seeds the first three), all launched together on empty data
# directories. Polls `ringstore status` on node 1 every 0.1 s until it shows
# NODES nodes, all `UN` (deadline 120 s), and prints the time from the launch
# to that. Then creates a keyspace of NetworkTopologyStrategy dc1=3 (RF 3
# over the 3 racks, the allocator's own target) and one of SimpleStrategy:3,
# and prints each one's effective ownership as `status KEYSPACE` shows it:
# the smallest, the largest and max/min. Every server is killed on exit,
# failure included (benches/common.sh).
# Usage: benches/fresh_cluster.sh [NODES] [RING_DELAY_MS]   (default 20, 300)
# STRESS_BIN=path runs another build instead of building this tree's;
# BENCH_LOGS=dir keeps the servers' logs there, BENCH_RUST_LOG sets their
# RUST_LOG (default warn).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-20}
ring_delay_ms=${2:-300}
. benches/common.sh
block=105
host="127.$block.0.1:7100"
seeds="127.$block.0.1:7000,127.$block.0.2:7000,127.$block.0.3:7000"
[ "$nodes" -ge 3 ] && [ "$nodes" -le 250 ] || { echo "NODES must be 3 to 250" >&2; exit 2; }

start_node() { # i
  local i=$1
  RINGSTORE_RING_DELAY_MS=$ring_delay_ms RUST_LOG=${BENCH_RUST_LOG:-warn} \
    "$bin" server --cluster-name fresh --data-dir "$work/$i" \
    --listen-address "127.$block.0.$i:7100" --internode-address "127.$block.0.$i:7101" \
    --gossip-address "127.$block.0.$i:7000" --seeds "$seeds" --rack "rack$(( (i - 1) % 3 + 1 ))" \
    2>>"$work/$i.log" &
  pids[$i]=$!
}

# Effective ownership of KEYSPACE as node 1's status shows it: "min max ratio".
ownership() { # keyspace
  "$bin" --host "$host" status "$1" >"$work/status-$1"
  awk '/^[UD][NJL]  / {
      v = $0; sub(/%.*/, "", v); n = split(v, f, " "); o = f[n] + 0
      if (c == 0 || o < lo) lo = o; if (c == 0 || o > hi) hi = o; c++ }
    END { if (c == 0 || lo == 0) { print "no ownership"; exit 1 }
          printf "%.1f%% %.1f%% %.3f (%d nodes)\n", lo, hi, hi / lo, c }' "$work/status-$1" \
    || cat "$work/status-$1"
}

echo "starting $nodes fresh nodes at once (ring_delay ${ring_delay_ms} ms, binary $bin)"
start=$(date +%s.%N)
for i in $(seq 1 "$nodes"); do start_node "$i"; done
deadline=$(( $(date +%s) + 120 ))
while :; do
  rows=$("$bin" --host "$host" status 2>/dev/null | grep -E '^[UD][NJL]  ' || true)
  total=$(printf '%s' "$rows" | grep -c . || true)
  un=$(printf '%s' "$rows" | grep -c '^UN ' || true)
  [ "$total" = "$nodes" ] && [ "$un" = "$nodes" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "not all UN after 120 s ($un of $total UN, $nodes started):" >&2
    printf '%s\n' "$rows" >&2
    tail -n 5 "$work"/*.log >&2
    keep_logs
    exit 1
  fi
  sleep 0.1
done
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
printf 'all %d nodes UN after %.1f s\n' "$nodes" "$elapsed"

"$bin" --host "$host" keyspace create nts --replication NetworkTopologyStrategy:dc1=3 >/dev/null
"$bin" --host "$host" keyspace create simple --replication SimpleStrategy:3 >/dev/null
echo "effective ownership, min max max/min:"
echo "  NetworkTopologyStrategy dc1=3: $(ownership nts)"
echo "  SimpleStrategy:3:              $(ownership simple)"
warnings=$(cat "$work"/*.log | grep -c -E 'choosing again|choosing now' || true)
echo "token re-choices and impatient turns logged: $warnings"
keep_logs
