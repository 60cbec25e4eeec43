#!/usr/bin/env bash
# Memory of a full-ring scan (not run in CI): a 3-node RF 3 cluster of real
# processes on loopback is loaded with KEYS writes of VALUE_SIZE bytes
# (default 1024) at ONE (random
# keys out of KEYS, so about 63 % of them distinct), then `ringstore scan`
# reads the whole ring at QUORUM in pages of 1,000 through node 1, while the
# RSS of node 1 (the coordinator, also a replica) and node 2 (a replica) is
# sampled every 0.5 s. Prints the data per node, RSS before, at most during
# and after the scan, and the scan's rows, time and rate. Flat means the
# RSS during the scan stays near its level before it, whatever the data.
# Usage: benches/scan_rss.sh [KEYS [VALUE_SIZE]]   (default 1048576 1024:
# about 0.65 GiB per node; 450000 4096 gives about 1.1 GiB, twice as many
# keys twice that: flat means the same RSS during the scan at both sizes)
# STRESS_BIN=path runs another build instead of building this tree's.
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-1048576}
value_size=${2:-1024}
. benches/common.sh
block=66
host="127.$block.0.1:7100"

start_node() { # i
  local i=$1
  RINGSTORE_RING_DELAY_MS=300 RUST_LOG=warn \
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

rss_mib() { # pid
  awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"
}

for i in 1 2 3; do start_node "$i"; done
wait_up 3
"$bin" --host "$host" keyspace create ks --replication SimpleStrategy:3 >/dev/null
echo "loading $keys writes of $value_size bytes at ONE..."
start=$(date +%s)
"$bin" --host "$host" stress write -n "$keys" --concurrency 64 --key-count "$keys" \
  --value-size "$value_size" --consistency ONE --keyspace ks --json >/dev/null
"$bin" --host "$host" flush
# Let hints and writes in flight settle, and the sled caches warm.
sleep 5
echo "loaded in $(( $(date +%s) - start )) s; load per node:"
"$bin" --host "$host" status | grep '^UN ' | awk '{print "  " $2, $3, $4}'

before1=$(rss_mib "${pids[1]}"); before2=$(rss_mib "${pids[2]}")
max1=$before1; max2=$before2
"$bin" --host "$host" scan ks --consistency QUORUM --page-size 1000 --hex | wc -l >"$work/rows" &
scan=$!
start=$(date +%s.%N)
while kill -0 "$scan" 2>/dev/null; do
  r1=$(rss_mib "${pids[1]}"); r2=$(rss_mib "${pids[2]}")
  [ "$r1" -gt "$max1" ] && max1=$r1
  [ "$r2" -gt "$max2" ] && max2=$r2
  sleep 0.5
done
wait "$scan"
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
rows=$(cat "$work/rows")
echo "scan at QUORUM: $rows rows in ${elapsed} s ($(echo "$rows / $elapsed" | bc) rows/s, about $(echo "$rows * $value_size / $elapsed / 1048576" | bc) MiB/s of values)"
echo "node 1 (coordinator) RSS: before ${before1} MiB, max during ${max1} MiB, after $(rss_mib "${pids[1]}") MiB"
echo "node 2 (replica)     RSS: before ${before2} MiB, max during ${max2} MiB, after $(rss_mib "${pids[2]}") MiB"
