#!/usr/bin/env bash
# Where a full-ring scan's memory goes (not run in CI): one node, RF 1,
# loaded with KEYS random writes of 4 KiB at ONE, then the node's RSS after
# two `cleanup`s (a plain local read of the whole tree, no scan code) and
# after two full scans. If cleanup raises RSS as much as a scan, the rise
# is the storage engine's, not the scan's. Extra VAR=VALUE arguments are
# node settings, e.g. RINGSTORE_STORAGE__CACHE_CAPACITY_MB=32.
# Usage: benches/full_read_rss.sh [KEYS [VAR=VALUE...]]   (default 450000:
# about 1.1 GiB). STRESS_BIN=path runs another build.
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-450000}
shift || true
. benches/common.sh
block=109
host="127.$block.0.1:7100"
start_server "$block" 1 node1 "$@"
for _ in $(seq 1 300); do "$bin" --host "$host" status 2>/dev/null | grep -q '^UN ' && break; sleep 0.2; done
rss() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/${pids[0]}/status"; }
"$bin" --host "$host" keyspace create ks --replication SimpleStrategy:1 >/dev/null
"$bin" --host "$host" stress write -n "$keys" --concurrency 64 --key-count "$keys" \
  --value-size 4096 --consistency ONE --keyspace ks --json >/dev/null
"$bin" --host "$host" flush >/dev/null
sleep 5
"$bin" --host "$host" status | grep '^UN ' | awk '{print "load:", $3, $4}'
echo "after the load: $(rss) MiB"
for pass in first second; do
  "$bin" --host "$host" cleanup ks >/dev/null
  echo "after the $pass cleanup: $(rss) MiB"
done
for pass in first second; do
  rows=$("$bin" --host "$host" scan ks --consistency ONE --hex | wc -l)
  echo "after the $pass scan ($rows rows): $(rss) MiB"
done
