#!/usr/bin/env bash
# Put throughput with and without security, in one run (not run in CI): a
# three-node cluster on loopback, RF 3, QUORUM, `ringstore stress write` at
# concurrency 64, first plaintext without a cluster secret, then with the
# secret (every internode call signed and verified) and TLS on the client
# port and internode (mutual TLS), then with client password authentication
# on top (a superuser logging in on every request; the node's credential
# cache spares the Argon2 check), each three times, alternated, to see the
# noise.
# Usage: benches/stress_security.sh [OPERATIONS]   (default 50000 per run)
# STRESS_BIN=path runs another build instead of building this tree's release
# binary. (Not RINGSTORE_*: the servers would read that as a setting.)
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-50000}
. benches/common.sh

block=89
"$bin" certs create --out "$work/certs" --ip "127.$block.0.1,127.$block.0.2,127.$block.0.3" >/dev/null
secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

start_cluster() { # label secure(0: none, 1: secret+TLS, 2: secret+TLS+auth)
  local label=$1 secure=$2
  pids=()
  for i in 1 2 3; do
    local ip="127.$block.0.$i" tls=()
    if [ "$secure" != 0 ]; then
      tls=(RINGSTORE_CLUSTER_SECRET="$secret"
        RINGSTORE_CLIENT_ENCRYPTION__ENABLED=true
        RINGSTORE_CLIENT_ENCRYPTION__CERTIFICATE="$work/certs/node-$ip.crt"
        RINGSTORE_CLIENT_ENCRYPTION__PRIVATE_KEY="$work/certs/node-$ip.key"
        RINGSTORE_SERVER_ENCRYPTION__INTERNODE_ENCRYPTION=all
        RINGSTORE_SERVER_ENCRYPTION__CERTIFICATE="$work/certs/node-$ip.crt"
        RINGSTORE_SERVER_ENCRYPTION__PRIVATE_KEY="$work/certs/node-$ip.key"
        RINGSTORE_SERVER_ENCRYPTION__CA="$work/certs/ca.crt")
    fi
    if [ "$secure" = 2 ]; then
      tls+=(RINGSTORE_AUTH__AUTHENTICATOR=password)
    fi
    start_server "$block" "$i" "$label-$i" "${tls[@]}"
  done
  if [ "$secure" = 2 ]; then
    # The default superuser appears once system_auth has a quorum; then its
    # password is changed, as an operator must before anything else (until
    # then it may do nothing else, `status` included).
    changed=no
    for _ in $(seq 1 120); do
      if env "${creds[@]}" RINGSTORE_NEW_PASSWORD="$password" "$bin" --host "127.$block.0.1:7100" "${cli[@]}" \
        user password cassandra >/dev/null 2>&1; then
        changed=yes
        break
      fi
      sleep 0.5
    done
    [ "$changed" = yes ] || { echo "the default superuser never logged in" >&2; exit 1; }
    creds=(RINGSTORE_USER=cassandra RINGSTORE_PASSWORD="$password")
  fi
  for _ in $(seq 1 300); do
    up=$(env "${creds[@]}" "$bin" --host "127.$block.0.1:7100" "${cli[@]}" status 2>/dev/null | grep -c '^UN ' || true)
    [ "$up" = 3 ] && break
    sleep 0.2
  done
  [ "$up" = 3 ] || { echo "cluster did not come up" >&2; exit 1; }
}
password=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')

stop_cluster() { for pid in "${pids[@]}"; do kill "$pid"; done; wait "${pids[@]}" 2>/dev/null || true; pids=(); }

run=0
for secure in 0 1 2 0 1 2 0 1 2; do
  run=$((run + 1))
  creds=(RINGSTORE_UNUSED=1)
  case $secure in
    0) label="plaintext          "; cli=() ;;
    1) label="secret+TLS         "; cli=(--ca-cert "$work/certs/ca.crt") ;;
    2) label="secret+TLS+password"; cli=(--ca-cert "$work/certs/ca.crt")
       creds=(RINGSTORE_USER=cassandra RINGSTORE_PASSWORD=cassandra) ;;
  esac
  start_cluster "run$run" "$secure"
  env "${creds[@]}" "$bin" --host "127.$block.0.1:7100" "${cli[@]}" stress write -n "$ops" --concurrency 64 \
    --key-count 100000 --value-size 100 --consistency QUORUM --replication SimpleStrategy:3 --json |
    python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency_ms']; print(f\"$label put {r['ops_per_second']:9.0f} ops/s  p50 {l['p50']:.2f} ms  p99 {l['p99']:.2f} ms  errors {sum(r['errors'].values())}\")"
  stop_cluster
done
