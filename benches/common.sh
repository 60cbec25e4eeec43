# Sourced by the benchmark scripts, from the repository's root: the binary
# to run ($bin: $STRESS_BIN, or this tree's release build), a scratch
# directory ($work) and the servers' pids ($pids), all killed and removed on
# exit. (STRESS_BIN, not RINGSTORE_*: the servers would read that as a
# setting.)
if [ -n "${STRESS_BIN:-}" ]; then
  bin=$STRESS_BIN
else
  cargo build --release --bin ringstore >/dev/null
  bin=target/release/ringstore
fi
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# keep_logs: copies the servers' logs ($work/*.log) to $BENCH_LOGS, if set.
keep_logs() { if [ -n "${BENCH_LOGS:-}" ]; then mkdir -p "$BENCH_LOGS" && cp "$work"/*.log "$BENCH_LOGS"/; fi; }

# start_server BLOCK I NAME [VAR=VALUE...]: node I of a bench cluster on
# 127.BLOCK.0.I (cluster "bench", seed 127.BLOCK.0.1, rack rackI, ring_delay
# 300 ms, RUST_LOG=warn) with the settings given, in the background; its
# data in $work/NAME, its log in $work/NAME.log, its pid appended to $pids.
start_server() {
  local block=$1 i=$2 name=$3
  shift 3
  local ip="127.$block.0.$i"
  env "$@" RINGSTORE_RING_DELAY_MS=300 RUST_LOG=warn \
    "$bin" server --cluster-name bench --data-dir "$work/$name" \
    --listen-address "$ip:7100" --internode-address "$ip:7101" \
    --gossip-address "$ip:7000" --seeds "127.$block.0.1:7000" --rack "rack$i" \
    2>"$work/$name.log" &
  pids+=($!)
}

# wait_until_up HOST COUNT: waits (at most 60 s) until `status` asked of
# HOST shows COUNT nodes up and normal; fails the script otherwise.
wait_until_up() {
  local host=$1 count=$2 up=0
  for _ in $(seq 1 300); do
    up=$("$bin" --host "$host" status 2>/dev/null | grep -c '^UN ' || true)
    [ "$up" = "$count" ] && return 0
    sleep 0.2
  done
  echo "only $up of $count nodes came up (asked $host)" >&2
  exit 1
}
