#!/usr/bin/env bash
# A big cluster of real nodes on this one machine (not run in CI; #44):
# NODES `ringstore server` processes on loopback (127.223.0.1 to .NODES,
# racks rack1 to rack3 in turn, seeds the first three, periodic durability,
# an 8 MiB storage cache each), all launched together on empty data
# directories, each started as docs/src/operations/running-nodes.md says for
# small nodes (MIMALLOC_ARENA_EAGER_COMMIT=0). It measures, in turn:
#
#  1. fresh start: the time from the launch until node 1's `status` shows
#     NODES nodes, all `UN`, and until every node counts NODES members up
#     (`ringstore_gossip_members`);
#  2. idle, over IDLE_SECONDS once SETTLE_SECONDS have passed (by default
#     long enough for the internode channels the start opened to be closed
#     as idle, crates/node/src/peers.rs): per node CPU, RSS, threads, gossip
#     packets and bytes sent and received per second (`ringstore_gossip_*_total`),
#     established TCP connections, and false `member down` lines logged
#     (median and max over the nodes);
#  3. a node killed with SIGKILL: when each other node logged it `member
#     down` (from the nodes' JSON logs, so no polling skews it), median and
#     max; then the node restarted, until node 1 shows all `UN` again;
#  4. a light `QUORUM` load (`stress mixed` at LOAD_RATE operations per
#     second over NetworkTopologyStrategy dc1=3) while a new node joins and
#     then node 2 decommissions: the load's failed operations, which must
#     be 0.
#
# Every server is killed on exit, failure included (benches/common.sh).
# Usage: benches/big_cluster.sh [NODES]   (default 100, at most 240)
# NUM_TOKENS (default 16), SETTLE_SECONDS (150), IDLE_SECONDS (30),
# LOAD_RATE (200 ops/s), LOAD_SECONDS (120: must outlast the join and the
# decommission) and RING_DELAY_MS (3000, the default) change the run;
# STRESS_BIN=path runs another build;
# BENCH_LOGS=dir keeps the servers' logs there; NODE_LOG sets the servers'
# RUST_LOG (default warn,ringstore_membership=info); ONLY_START=1 stops after
# the fresh start (to profile it, or read its logs).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-100}
num_tokens=${NUM_TOKENS:-16}
idle_seconds=${IDLE_SECONDS:-30}
settle_seconds=${SETTLE_SECONDS:-150}
node_log=${NODE_LOG:-warn,ringstore_membership=info}
load_rate=${LOAD_RATE:-200}
ring_delay_ms=${RING_DELAY_MS:-3000}
load_seconds=${LOAD_SECONDS:-120}
# mimalloc commits its memory lazily (docs/src/operations/running-nodes.md,
# "Small nodes"); MIMALLOC_ARENA_EAGER_COMMIT=2 measures its default.
eager_commit=${MIMALLOC_ARENA_EAGER_COMMIT:-0}
[ "$nodes" -ge 4 ] && [ "$nodes" -le 240 ] || { echo "NODES must be 4 to 240" >&2; exit 2; }
. benches/common.sh
block=223
ip() { echo "127.$block.0.$1"; }
host="$(ip 1):7100"
seeds="$(ip 1):7000,$(ip 2):7000,$(ip 3):7000"
trap 'keep_logs; cleanup' EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

start_node() { # i
  local i=$1
  MIMALLOC_ARENA_EAGER_COMMIT=$eager_commit \
  RINGSTORE_RING_DELAY_MS=$ring_delay_ms RINGSTORE_NUM_TOKENS=$num_tokens \
    RINGSTORE_STORAGE__DURABILITY=periodic RINGSTORE_STORAGE__CACHE_CAPACITY_MB=8 \
    RUST_LOG=$node_log \
    "$bin" --log-format json server --cluster-name big --data-dir "$work/$i" \
    --listen-address "$(ip "$i"):7100" --internode-address "$(ip "$i"):7101" \
    --gossip-address "$(ip "$i"):7000" --seeds "$seeds" --rack "rack$(( (i - 1) % 3 + 1 ))" \
    2>>"$work/$i.log" &
  pids[$i]=$!
}

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
# A metric's value on node i (0 when absent): metric NAME_AND_LABELS.
metric() { # i name
  curl -s --max-time 2 "http://$(ip "$1"):7200/metrics" \
    | awk -v m="$2" 'index($0, m " ") == 1 { print $2; found = 1 } END { if (!found) print 0 }'
}
# Rows of node 1's status.
rows() { "$bin" --host "$host" status 2>/dev/null | grep -E '^[UD][NJL]  ' || true; }
# Waits until node 1's status shows COUNT rows, all UN (deadline SECONDS).
wait_all_un() { # count seconds
  local deadline=$(( $(date +%s) + $2 )) r total un
  while :; do
    r=$(rows)
    total=$(printf '%s' "$r" | grep -c . || true)
    un=$(printf '%s' "$r" | grep -c '^UN ' || true)
    [ "$total" = "$1" ] && [ "$un" = "$1" ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "not all UN after $2 s ($un of $total UN, $1 expected):" >&2
      printf '%s\n' "$r" | grep -v '^UN ' >&2 || true
      exit 1
    fi
    sleep 0.2
  done
}
# "median max" of the numbers on stdin.
spread() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "- -"; exit }
  printf "%s %s\n", v[int((NR + 1) / 2)], v[NR] }'; }
# The ids of the running nodes.
running() { for i in "${!pids[@]}"; do kill -0 "${pids[$i]}" 2>/dev/null && echo "$i"; done; }
# Seconds since the epoch of a JSON log line's timestamp.
stamp_of() { date -d "$(sed -E 's/.*"timestamp":"([^"]+)".*/\1/')" +%s.%N; }

echo "== $nodes nodes on loopback, num_tokens $num_tokens, ring_delay ${ring_delay_ms} ms ($bin)"
launch=$(now)
for i in $(seq 1 "$nodes"); do start_node "$i"; done
wait_all_un "$nodes" 300
printf 'fresh start: node 1 shows all %d UN after %.1f s\n' "$nodes" "$(since "$launch")"
deadline=$(( $(date +%s) + 120 ))
for i in $(seq 1 "$nodes"); do
  until [ "$(metric "$i" 'ringstore_gossip_members{liveness="up"}')" = "$nodes" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "node $i does not count $nodes members up" >&2; exit 1; }
    sleep 0.2
  done
done
printf 'fresh start: every node counts %d members up after %.1f s\n' "$nodes" "$(since "$launch")"
[ "${ONLY_START:-0}" = 1 ] && exit 0

echo "== idle for $idle_seconds s, after $settle_seconds s to settle"
sleep "$settle_seconds"
sample() { # file: "node cpu_ticks sent_packets sent_bytes received_packets received_bytes downs"
  for i in $(running); do
    local stat ticks
    stat=$(cat "/proc/${pids[$i]}/stat")
    ticks=$(echo "$stat" | awk '{ print $14 + $15 }')
    echo "$i $ticks $(metric "$i" 'ringstore_gossip_packets_total{direction="sent"}') \
$(metric "$i" 'ringstore_gossip_bytes_total{direction="sent"}') \
$(metric "$i" 'ringstore_gossip_packets_total{direction="received"}') \
$(metric "$i" 'ringstore_gossip_bytes_total{direction="received"}') \
$(grep -c '"member down"' "$work/$i.log" || true)"
  done >"$1"
}
sample "$work/idle-before"
idle_from=$(now)
sleep "$idle_seconds"
sample "$work/idle-after"
window=$(since "$idle_from")
hz=$(getconf CLK_TCK)
# One row a node: its id, then the six "before" values, then the six "after".
join <(sort -k1,1 "$work/idle-before") <(sort -k1,1 "$work/idle-after") >"$work/idle"
per_second() { awk -v c="$1" -v w="$window" -v s="${2:-1}" '{ printf "%.1f\n", ($(c + 6) - $c) / w / s }' "$work/idle"; }
printf '  %-34s %10s %10s\n' "per node" median max
printf '  %-34s %10s %10s\n' "CPU %" $(awk -v w="$window" -v hz="$hz" '{ printf "%.1f\n", ($8 - $2) / hz / w * 100 }' "$work/idle" | spread)
printf '  %-34s %10s %10s\n' "gossip packets sent /s" $(per_second 3 | spread)
printf '  %-34s %10s %10s\n' "gossip KiB sent /s" $(per_second 4 1024 | spread)
printf '  %-34s %10s %10s\n' "gossip packets received /s" $(per_second 5 | spread)
printf '  %-34s %10s %10s\n' "gossip KiB received /s" $(per_second 6 1024 | spread)
printf '  %-34s %10s %10s\n' "member down lines (false DN)" $(awk '{ print $13 - $7 }' "$work/idle" | spread)
rss_mb() { for i in $(running); do awk '/^VmRSS/ { printf "%.1f\n", $2 / 1024 }' "/proc/${pids[$i]}/status"; done; }
printf '  %-34s %10s %10s\n' "RSS MB" $(rss_mb | spread)
# RSS counts the binary's code in every process; PSS shares it out.
pss_mb() { for i in $(running); do awk '/^Pss:/ { printf "%.1f\n", $2 / 1024 }' "/proc/${pids[$i]}/smaps_rollup"; done; }
printf '  %-34s %10s %10s\n' "PSS MB" $(pss_mb | spread)
printf '  %-34s %10s %10s\n' "threads" $(for i in $(running); do awk '/^Threads/ { print $2 }' "/proc/${pids[$i]}/status"; done | spread)
ss -tnpH state established >"$work/ss" 2>/dev/null || true
printf '  %-34s %10s %10s\n' "established TCP connections" \
  $(for i in $(running); do grep -c "pid=${pids[$i]}," "$work/ss" || true; done | spread)
printf '  total RSS of %d nodes: %.1f GB (PSS: %.1f GB)\n' "$nodes" \
  "$(rss_mb | awk '{ s += $1 } END { print s / 1024 }')" "$(pss_mb | awk '{ s += $1 } END { print s / 1024 }')"

echo "== node $nodes killed with SIGKILL"
victim=$nodes
victim_addr="$(ip "$victim"):7000"
lines_before=()
for i in $(seq 1 $(( nodes - 1 ))); do lines_before[$i]=$(wc -l <"$work/$i.log"); done
killed=$(now)
kill -9 "${pids[$victim]}"
wait "${pids[$victim]}" 2>/dev/null || true
deadline=$(( $(date +%s) + 60 ))
for i in $(seq 1 $(( nodes - 1 ))); do
  until tail -n +"$(( lines_before[i] + 1 ))" "$work/$i.log" | grep '"member down"' | grep -q "\"$victim_addr\""; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "node $i never logged node $victim down" >&2; exit 1; }
    sleep 0.2
  done
done
for i in $(seq 1 $(( nodes - 1 ))); do
  at=$(tail -n +"$(( lines_before[i] + 1 ))" "$work/$i.log" | grep '"member down"' | grep "\"$victim_addr\"" | head -1 | stamp_of)
  echo "$at - $killed" | bc
done >"$work/detect"
printf '  marked down by all %d others: median %.1f s, max %.1f s after the kill\n' \
  $(( nodes - 1 )) $(spread <"$work/detect")
restarted=$(now)
start_node "$victim"
wait_all_un "$nodes" 120
printf '  restarted: all %d UN again after %.1f s\n' "$nodes" "$(since "$restarted")"

echo "== a join and a decommission under a light QUORUM load ($load_rate ops/s)"
"$bin" --host "$host" keyspace create big --replication NetworkTopologyStrategy:dc1=3 >/dev/null
hosts=$(for i in 1 3 4 5; do printf '%s:7100,' "$(ip "$i")"; done)
"$bin" --host "$host" stress write -n 2000 --keyspace big --consistency QUORUM --key-count 2000 \
  --hosts "${hosts%,}" >"$work/preload" 2>&1 || { cat "$work/preload" >&2; exit 1; }
load_from=$(now)
"$bin" --host "$host" stress mixed --duration "${load_seconds}s" --rate "$load_rate" --keyspace big \
  --consistency QUORUM --key-count 2000 --hosts "${hosts%,}" >"$work/load" 2>&1 &
load=$!
sleep 5
joined=$(now)
new=$(( nodes + 1 ))
start_node "$new"
wait_all_un "$new" 300
printf '  node %d joined: UN after %.1f s\n' "$new" "$(since "$joined")"
sleep 5
left=$(now)
"$bin" --host "$(ip 2):7100" decommission >"$work/decommission" 2>&1 || { cat "$work/decommission" >&2; exit 1; }
wait "${pids[2]}" || true
unset 'pids[2]'
printf '  node 2 decommissioned in %.1f s\n' "$(since "$left")"
moved=$(since "$load_from")
wait "$load" || true
if [ "$(echo "$moved > $load_seconds" | bc)" = 1 ]; then
  echo "  the load ($load_seconds s) ended before the decommission did ($moved s): set LOAD_SECONDS higher" >&2
fi
grep -E '^(operations|errors|throughput|latency p99 )' "$work/load" | sed 's/^/  load: /'
