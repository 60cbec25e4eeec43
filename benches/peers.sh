#!/usr/bin/env bash
# ringstore side by side with Redis and a 3-node etcd, in one run on this
# machine (clients and servers share it), with the same load shape: 64
# requests in flight, 100-byte values, keys drawn from 100,000. Prints each
# figure and the ratios of issue #13's table. Not run in CI.
#
#   1 node,  RF 1 ONE put, periodic sync   vs  Redis SET, no fsync
#   1 node,  RF 1 ONE put, batch sync      vs  Redis SET, appendfsync always
#   1 node,  stress noop                   vs  Redis PING
#   3 nodes, RF 3 QUORUM put (batch)       vs  etcd 3 nodes put
#   3 nodes, RF 3 QUORUM get               vs  etcd 3 nodes get (linearizable)
#   3 nodes, put / noop on the same cluster
#   3 nodes, RF 3 compare-and-set (issue #42), uncontended and on one key
#     with 1, 8 and 64 clients, vs etcd 3 nodes Txn compare-and-swap, and
#     the QUORUM put on the same cluster; round trips per compare-and-set
#     counted from the nodes' internode metrics
#
# Every ringstore row runs twice: with one unary call per request, and with
# `--pipeline` (the same 64 requests in flight on one Client/Pipeline
# stream). Redis also runs pipelined (`-c 4 -P 16`: 64 in flight on four
# connections) for context; the goal column is measured against Redis's
# and etcd's plain figures, as in the issue.
#
# Usage: benches/peers.sh [OPERATIONS]   (default 100000 per workload)
# Installs redis-server, redis-tools, etcd-server, etcd-client (etcdctl, to
# see the cluster up) and protobuf-compiler with
# apt-get when missing, and builds benches/etcd-load (the etcd load tool).
# STRESS_BIN=path runs another ringstore build. PEERS_SECTIONS=cas runs only
# the compare-and-set section (PEERS_SECTIONS=main only the others).
# Address blocks 102 to 104, 113 and 114.
set -euo pipefail
# `stress … | record NAME` must set `result` in this shell, not in a subshell.
shopt -s lastpipe
cd "$(dirname "$0")/.."
ops=${1:-100000}
. benches/common.sh

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
command -v protoc >/dev/null || need+=(protobuf-compiler)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
(cd benches/etcd-load && cargo build --release -q)
etcd_load=benches/etcd-load/target/release/etcd-load

declare -A result # name -> ops/s
sections=${PEERS_SECTIONS:-main,cas}
want() { [[ ",$sections," == *",$1,"* ]]; }

# Records `name` from a JSON report of `ringstore stress` or `etcd-load` on
# stdin, and prints it.
record() { # NAME
  local line
  line=$(python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency_ms']; print(f\"{r['ops_per_second']:.0f} p50 {l['p50']:.2f} ms p99 {l['p99']:.2f} ms errors {sum(r['errors'].values())}\")")
  result[$1]=${line%% *}
  printf '%-40s %s ops/s\n' "$1" "$line"
}

# Records `name` from redis-benchmark's CSV (the row of TEST) on stdin.
record_redis() { # NAME TEST
  local rps
  rps=$(python3 -c "import csv,sys; rows=[r for r in csv.reader(sys.stdin) if r and r[0]=='$2']; print(f'{float(rows[0][1]):.0f}')")
  result[$1]=$rps
  printf '%-40s %s ops/s\n' "$1" "$rps"
}

stop_all() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }

start_ringstore() { # NODES DURABILITY BLOCK
  local nodes=$1 durability=$2 block=$3
  for i in $(seq 1 "$nodes"); do
    start_server "$block" "$i" "rs-$block-$durability-$i" RINGSTORE_STORAGE__DURABILITY="$durability"
  done
  wait_until_up "127.$block.0.1:7100" "$nodes"
}

stress() { # HOST WORKLOAD RF CONSISTENCY [THREADS] [--pipeline]
  "$bin" --host "$1" stress "$2" -n "$ops" --concurrency 64 --key-count 100000 \
    --value-size 100 --consistency "$4" --replication "SimpleStrategy:$3" --json \
    ${5:+--threads "$5"} ${6:-}
}

redis() { # PORT ARGS...: starts redis-server with ARGS, waits until it answers
  local port=$1
  shift
  mkdir -p "$work/redis-$port"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$work/redis-$port" --save '' "$@" \
    >"$work/redis-$port.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis did not come up" >&2
  exit 1
}

redis_bench() { # PORT TESTS [CONNECTIONS PIPELINE]
  redis-benchmark -h 127.0.0.1 -p "$1" -t "$2" -n "$ops" -c "${3:-64}" -P "${4:-1}" -d 100 \
    -r 100000 --csv 2>/dev/null
}

start_etcd() { # BLOCK
  local block=$1 cluster=""
  for i in 1 2 3; do cluster+="${cluster:+,}e$i=http://127.$block.0.$i:2380"; done
  for i in 1 2 3; do
    etcd --name "e$i" --data-dir "$work/etcd-$i" \
      --listen-client-urls "http://127.$block.0.$i:2379" --advertise-client-urls "http://127.$block.0.$i:2379" \
      --listen-peer-urls "http://127.$block.0.$i:2380" --initial-advertise-peer-urls "http://127.$block.0.$i:2380" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token peers \
      --log-level error >"$work/etcd-$i.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 300); do
    ETCDCTL_API=3 etcdctl --endpoints "http://127.$block.0.1:2379" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "etcd did not come up" >&2
  exit 1
}

if want main; then
echo "== Redis (one server)"
redis 6390 --appendonly no
redis_bench 6390 set,ping | tee "$work/redis-nofsync.csv" >/dev/null
record_redis "redis SET, no fsync" SET <"$work/redis-nofsync.csv"
record_redis "redis PING" PING_MBULK <"$work/redis-nofsync.csv"
redis_bench 6390 set,ping 4 16 | tee "$work/redis-nofsync-p16.csv" >/dev/null
record_redis "redis SET, no fsync, -P 16" SET <"$work/redis-nofsync-p16.csv"
record_redis "redis PING, -P 16" PING_MBULK <"$work/redis-nofsync-p16.csv"
stop_all
redis 6391 --appendonly yes --appendfsync always
redis_bench 6391 set | record_redis "redis SET, appendfsync always" SET
redis_bench 6391 set 4 16 | record_redis "redis SET, appendfsync always, -P 16" SET
stop_all

# One client thread against one server, as redis-benchmark runs (its
# default --threads is 1): the client leaves the other core to the server.
echo "== ringstore, 1 node RF 1 ONE"
start_ringstore 1 periodic 102
for mode in "" --pipeline; do
  stress 127.102.0.1:7100 write 1 ONE 1 $mode | record "ringstore put, periodic$mode"
  stress 127.102.0.1:7100 noop 1 ONE 1 $mode | record "ringstore noop$mode"
done
stop_all
start_ringstore 1 batch 102
for mode in "" --pipeline; do
  stress 127.102.0.1:7100 write 1 ONE 1 $mode | record "ringstore put, batch$mode"
done
stop_all

echo "== ringstore, 3 nodes RF 3 QUORUM (batch)"
start_ringstore 3 batch 103
for mode in "" --pipeline; do
  stress 127.103.0.1:7100 write 3 QUORUM "" $mode | record "ringstore 3 nodes QUORUM put$mode"
  stress 127.103.0.1:7100 read 3 QUORUM "" $mode | record "ringstore 3 nodes QUORUM get$mode"
  stress 127.103.0.1:7100 noop 3 QUORUM "" $mode | record "ringstore 3 nodes noop$mode"
done
stop_all

echo "== etcd, 3 nodes"
start_etcd 104
endpoints=http://127.104.0.1:2379,http://127.104.0.2:2379,http://127.104.0.3:2379
"$etcd_load" write --endpoints "$endpoints" -n "$ops" --concurrency 64 --key-count 100000 --value-size 100 |
  record "etcd 3 nodes put"
"$etcd_load" read --endpoints "$endpoints" -n "$ops" --concurrency 64 --key-count 100000 --value-size 100 |
  record "etcd 3 nodes get"
stop_all

fi

# Sums, over the nodes of block BLOCK, the internode calls of kind RPC their
# metrics count (`paxos_prepare`, `paxos_accept`, `paxos_commit`).
paxos_calls() { # BLOCK RPC
  local total=0 n
  for i in 1 2 3; do
    n=$("$bin" --host "127.$1.0.$i:7100" metrics 2>/dev/null |
      awk -v rpc="rpc=\"$2\"" '/^ringstore_internode_request_duration_seconds_count/ && index($0, rpc) { s += $NF } END { print s + 0 }')
    total=$((total + n))
  done
  echo "$total"
}

cas_stress() { # HOST OPS CONCURRENCY KEYS [--contended]
  "$bin" --host "$1" stress cas -n "$2" --concurrency "$3" --key-count "$4" --value-size 100 \
    --replication "SimpleStrategy:3" --token-aware --json ${5:-}
}

if want cas; then
  echo "== compare-and-set: ringstore, 3 nodes RF 3 (batch)"
  start_ringstore 3 batch 113
  host=127.113.0.1:7100
  stress "$host" write 3 QUORUM | record "cas: ringstore QUORUM put"
  before_prepare=$(paxos_calls 113 paxos_prepare)
  before_accept=$(paxos_calls 113 paxos_accept)
  cas_ops=$((ops / 2))
  cas_stress "$host" "$cas_ops" 64 100000 | record "cas: ringstore uncontended"
  prepares=$(($(paxos_calls 113 paxos_prepare) - before_prepare))
  accepts=$(($(paxos_calls 113 paxos_accept) - before_accept))
  # Each round goes to the two other replicas: calls / 2 per compare-and-set.
  rounds=$(python3 -c "print(f'{($prepares + $accepts) / 2 / $cas_ops:.2f}')")
  echo "round trips per uncontended compare-and-set: $rounds (prepare calls $prepares, accept calls $accepts, for $cas_ops)"
  for clients in 1 8 64; do
    cas_stress "$host" $((ops / 20)) "$clients" 1 --contended | record "cas: ringstore one key, $clients clients"
  done
  stop_all

  echo "== compare-and-set: etcd, 3 nodes"
  start_etcd 114
  endpoints=http://127.114.0.1:2379,http://127.114.0.2:2379,http://127.114.0.3:2379
  "$etcd_load" write --endpoints "$endpoints" -n "$ops" --concurrency 64 --key-count 100000 --value-size 100 |
    record "cas: etcd put"
  "$etcd_load" cas --endpoints "$endpoints" -n "$cas_ops" --concurrency 64 --key-count 100000 --value-size 100 |
    record "cas: etcd uncontended"
  for clients in 1 8 64; do
    "$etcd_load" cas --endpoints "$endpoints" -n $((ops / 20)) --concurrency "$clients" --key-count 1 --value-size 100 --contended |
      record "cas: etcd one key, $clients clients"
  done
  stop_all
fi
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
echo
table() { # MODE (empty: unary calls; --pipeline)
  local m=$1
  echo
  echo "ringstore ${m:-unary calls (one per request)}:"
  echo "| workload | ringstore | peer | ratio | goal | Redis pipelined (-c 4 -P 16) |"
  echo "|---|---|---|---|---|---|"
  row "1 node put (RF 1, ONE, periodic)" "ringstore put, periodic$m" "redis SET, no fsync" "Redis SET, no fsync" "≥ 0.5×" "redis SET, no fsync, -P 16"
  row "1 node put (batch: fsync before ack)" "ringstore put, batch$m" "redis SET, appendfsync always" "Redis SET, appendfsync always" "≥ 0.8×" "redis SET, appendfsync always, -P 16"
  row "1 node transport ceiling (noop)" "ringstore noop$m" "redis PING" "Redis PING" "≥ 0.8×" "redis PING, -P 16"
  row "3 nodes RF 3 QUORUM put (batch)" "ringstore 3 nodes QUORUM put$m" "etcd 3 nodes put" "etcd put" "≥ 3×"
  row "3 nodes RF 3 QUORUM get" "ringstore 3 nodes QUORUM get$m" "etcd 3 nodes get" "etcd get" "≥ 4×"
  echo "| 3 nodes put / noop | $(ratio "${result["ringstore 3 nodes QUORUM put$m"]}" "${result["ringstore 3 nodes noop$m"]}") | | | ≥ 0.35 | |"
}
row() { # LABEL OURS PEER PEER_LABEL GOAL [PIPELINED_PEER]
  local piped=""
  if [ -n "${6:-}" ]; then
    piped="${result[$6]}/s ($(ratio "${result[$2]}" "${result[$6]}")×)"
  fi
  echo "| $1 | ${result[$2]}/s | $4: ${result[$3]}/s | $(ratio "${result[$2]}" "${result[$3]}")× | $5 | $piped |"
}
if want main; then
  table ""
  table --pipeline
fi

if want cas; then
  echo
  echo "compare-and-set, 3 nodes (ringstore RF 3, batch; etcd 3 nodes), 100-byte values:"
  echo "| workload | ringstore | etcd Txn | ratio |"
  echo "|---|---|---|---|"
  echo "| uncontended, 64 in flight | ${result["cas: ringstore uncontended"]}/s | ${result["cas: etcd uncontended"]}/s | $(ratio "${result["cas: ringstore uncontended"]}" "${result["cas: etcd uncontended"]}")× |"
  for clients in 1 8 64; do
    echo "| one key, $clients clients | ${result["cas: ringstore one key, $clients clients"]}/s | ${result["cas: etcd one key, $clients clients"]}/s | $(ratio "${result["cas: ringstore one key, $clients clients"]}" "${result["cas: etcd one key, $clients clients"]}")× |"
  done
  echo "| uncontended CAS / QUORUM put | $(ratio "${result["cas: ringstore uncontended"]}" "${result["cas: ringstore QUORUM put"]}") | $(ratio "${result["cas: etcd uncontended"]}" "${result["cas: etcd put"]}") (Txn / put) | |"
  echo "round trips per uncontended compare-and-set: $rounds"
fi
