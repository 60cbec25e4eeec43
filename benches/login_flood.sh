#!/usr/bin/env bash
# A flood of bad logins against one node, and a good user's logins meanwhile
# (issue #40, finding 6; not run in CI). One node on loopback with the
# password authenticator (system_auth RF 1, the default 2 s cache validity),
# the default superuser's password changed, a user `good` created and logged
# in once (a known client). Then, for SECONDS (default 30):
#   - the flood: `ringstore stress noop --rate FLOOD_RATE --expect-errors` as
#     FLOOD_USER (default `good`: the worst case, the user under attack) with
#     a wrong password, from one process, so one source address;
#   - the good user: `ringstore stress noop --rate GOOD_RATE` (default 10)
#     with its password.
# Every request carries its credentials, so every request is a login: the
# good user's latencies are its logins' (a cached credential's, and every
# 2 s one whose record is read again: a twentieth of them at 10/s, so p99
# shows them). Prints both runs' figures: the flood's answers by gRPC
# code, the good logins' latency distribution, the node's refusal counts.
# Both clients connect from 127.0.0.1 (the kernel's source for every
# loopback address), so the flood and the good user share a source: the
# harder case for a per-source limit.
# Usage: benches/login_flood.sh [SECONDS] [FLOOD_RATE]   (default 30 1000)
# STRESS_BIN=path runs another build instead of this tree's release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
flood_rate=${2:-1000}
flood_user=${FLOOD_USER:-good}
good_rate=${GOOD_RATE:-10}
. benches/common.sh

block=113
host="127.$block.0.1:7100"
root_pw=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
good_pw=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_server "$block" 1 node RINGSTORE_AUTH__AUTHENTICATOR=password RINGSTORE_AUTH__REPLICATION_FACTOR=1

# The default superuser appears once system_auth is set up; its password is
# changed first, as an operator must before anything else.
changed=no
for _ in $(seq 1 120); do
  if RINGSTORE_USER=cassandra RINGSTORE_PASSWORD=cassandra RINGSTORE_NEW_PASSWORD="$root_pw" \
    "$bin" --host "$host" user password cassandra >/dev/null 2>&1; then
    changed=yes
    break
  fi
  sleep 0.5
done
[ "$changed" = yes ] || { echo "the default superuser never logged in" >&2; cat "$work/node.log" >&2; exit 1; }
RINGSTORE_USER=cassandra RINGSTORE_PASSWORD="$root_pw" RINGSTORE_NEW_PASSWORD="$good_pw" \
  "$bin" --host "$host" user create good >/dev/null
RINGSTORE_USER=good RINGSTORE_PASSWORD="$good_pw" "$bin" --host "$host" status >/dev/null

summary() { # label json-file
  python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))
l = r["latency_ms"]
errors = ", ".join(f"{code} {n}" for code, n in sorted(r["errors"].items())) or "none"
ok = r["operations"] - sum(r["errors"].values())
print(f"{label}: {r['operations']} requests at {r['ops_per_second']:.0f}/s, {ok} admitted, errors: {errors}")
if ok:
    print(f"{'':{len(label)}}  admitted latency p50 {l['p50']:.2f} ms  p95 {l['p95']:.2f} ms  "
          f"p99 {l['p99']:.2f} ms  p99.9 {l['p999']:.2f} ms  max {l['max']:.2f} ms")
PY
}

# The flood runs 3 s longer on each side of the good user's run.
RINGSTORE_USER="$flood_user" RINGSTORE_PASSWORD="wrong-$good_pw" "$bin" --host "$host" \
  stress noop --rate "$flood_rate" --duration "$((seconds + 6))s" --concurrency 512 --connections 4 \
  --expect-errors --threads 1 --json >"$work/flood.json" 2>"$work/flood.err" &
flood=$!
sleep 3
RINGSTORE_USER=good RINGSTORE_PASSWORD="$good_pw" "$bin" --host "$host" \
  stress noop --rate "$good_rate" --duration "${seconds}s" --concurrency 16 --threads 1 --json \
  >"$work/good.json" 2>"$work/good.err" || { cat "$work/good.err" >&2; exit 1; }
wait "$flood" || { cat "$work/flood.err" >&2; exit 1; }

echo "login flood: ${flood_rate}/s bad logins as $flood_user for $((seconds + 6)) s, good logins ${good_rate}/s for $seconds s"
summary "flood (wrong password)" "$work/flood.json"
summary "good user            " "$work/good.json"
curl -s "http://127.$block.0.1:7200/metrics" 2>/dev/null | grep '^ringstore_client_auth_refusals_total' || true
