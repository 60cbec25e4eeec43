#!/usr/bin/env bash
# mimalloc (the default global allocator) against glibc's malloc, in one run
# (not run in CI). Builds the release binary both ways (the second with
# --no-default-features), then, alternating the two for ROUNDS rounds, runs
# one node (RF 1, ONE, periodic sync) under `ringstore stress` write, read
# and noop at concurrency 64, and prints throughput and the server's CPU time
# per operation (user + system, from /proc): on a shared machine the CPU per
# request is steadier than the throughput. Address block 106.
# Usage: benches/allocator.sh [OPERATIONS] [ROUNDS]   (default 50000, 2)
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-50000}
rounds=${2:-2}
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
target=${CARGO_TARGET_DIR:-target}
cargo build --release --bin ringstore --no-default-features >/dev/null
cp "$target/release/ringstore" "$work/glibc"
cargo build --release --bin ringstore >/dev/null
cp "$target/release/ringstore" "$work/mimalloc"
address=127.106.0.1
tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

measure() { # allocator
  local bin="$work/$1" data="$work/data-$1"
  RINGSTORE_STORAGE__DURABILITY=periodic RINGSTORE_RING_DELAY_MS=300 RUST_LOG=warn \
    "$bin" server --cluster-name allocator --data-dir "$data" --listen-address "$address:7100" \
    --internode-address "$address:7101" --gossip-address "$address:7000" \
    --seeds "$address:7000" 2>"$work/$1.log" &
  pid=$!
  for _ in $(seq 1 150); do
    "$bin" --host "$address:7100" status 2>/dev/null | grep -q '^UN ' && break
    sleep 0.2
  done
  for workload in write read noop; do
    local before after
    before=$(cpu_ticks "$pid")
    "$bin" --host "$address:7100" stress "$workload" -n "$ops" --concurrency 64 \
      --key-count 100000 --value-size 100 --consistency ONE --replication SimpleStrategy:1 \
      --json >"$work/result.json"
    after=$(cpu_ticks "$pid")
    python3 - "$1" "$workload" "$before" "$after" "$tick" "$ops" "$work/result.json" <<'PY'
import json, sys
allocator, workload, before, after, tick, ops, path = sys.argv[1:]
r = json.load(open(path))
cpu = (float(after) - float(before)) / float(tick) * 1e6 / int(ops)
print(f"{allocator:8} {workload:5} {r['ops_per_second']:8.0f} ops/s  "
      f"p99 {r['latency_ms']['p99']:6.2f} ms  server CPU {cpu:5.1f} us/op")
PY
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  rm -rf "$data"
}

for round in $(seq 1 "$rounds"); do
  echo "== round $round"
  measure glibc
  measure mimalloc
done
