#!/usr/bin/env bash
# The docker compose cluster, tried end to end as an operator would (CI runs
# it): builds the FROM-scratch image (nothing is pulled), starts the three
# nodes, waits until all are UN, writes and reads at QUORUM through two
# different nodes, stops one container and checks that the others see it DN
# and QUORUM still works, scrapes node1's /metrics (published on
# 127.0.0.1:7200) for the requests it coordinated, then tears everything down.
# Then the two-data-center file (deploy/docker-compose-2dc.yml): four nodes,
# a keyspace replicated in both, writes at EACH_QUORUM through dc1 read at
# LOCAL_QUORUM through dc2, and with a dc2 node stopped, LOCAL_QUORUM in dc1
# still works while EACH_QUORUM is UNAVAILABLE. Then the secured file
# (deploy/docker-compose-tls.yml): certificates made by `ringstore certs
# create` on the host and a random cluster secret, mounted read-only; status
# over mutual TLS shows three nodes UN, QUORUM writes and reads work over
# TLS, no node warns of an open internode port, and a plaintext client and
# one without a client certificate are refused. Bounded: every wait has a
# deadline.
#
# Usage: deploy/compose-test.sh   (needs docker and docker-compose)
set -euo pipefail
cd "$(dirname "$0")/.."

# The compose project the functions below act on (the 2-DC part switches it).
compose=(docker-compose -p ringstore-ci -f deploy/docker-compose.yml)
cleanup() { "${compose[@]}" --profile grow down -v --remove-orphans >/dev/null 2>&1 || true; }
trap cleanup EXIT

# The CLI inside a node's container (static binary; addresses, not names:
# a static glibc binary cannot use the system's name resolution in a scratch
# image).
# `cli_flags` go before ARGS (the TLS part sets them).
cli_flags=()
cli() { # SERVICE ARGS...
  local service=$1
  shift
  "${compose[@]}" exec -T "$service" /ringstore ${cli_flags[@]+"${cli_flags[@]}"} "$@"
}

# Polls `check` every second until it succeeds, failing after SECONDS.
wait_for() { # SECONDS WHAT CHECK...
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq 1 "$seconds"); do
    if "$@" >/dev/null 2>&1; then
      echo "ok: $what"
      return 0
    fi
    sleep 1
  done
  echo "FAILED: timed out after ${seconds}s waiting until $what" >&2
  "${compose[@]}" logs --tail 30 >&2 || true
  exit 1
}

# Writes keyN = valueN for N in FROM..TO of keyspace `ci` through SERVICE at
# IP, at CONSISTENCY (default QUORUM).
write_keys() { # SERVICE IP FROM TO [CONSISTENCY]
  for i in $(seq "$3" "$4"); do
    cli "$1" --host "$2:7100" put ci "key$i" "value$i" --consistency "${5:-QUORUM}" >/dev/null
  done
}

# Reads keyN through SERVICE at IP at CONSISTENCY (default QUORUM) and checks
# it is valueN.
check_keys() { # SERVICE IP FROM TO [CONSISTENCY]
  for i in $(seq "$3" "$4"); do
    got=$(cli "$1" --host "$2:7100" get ci "key$i" --consistency "${5:-QUORUM}")
    [ "$got" = "value$i" ] || { echo "FAILED: key$i read '$got' through $1" >&2; exit 1; }
  done
}

# GET /metrics from node1's published port (bash's /dev/tcp: no curl needed).
scrape() {
  exec 3<>/dev/tcp/127.0.0.1/7200
  printf 'GET /metrics HTTP/1.1\r\nHost: node1\r\nConnection: close\r\n\r\n' >&3
  timeout 10 cat <&3
  exec 3<&-
}

# The value of one series (exactly as the page spells it) on node1's page.
metric() { # SERIES
  scrape | tr -d '\r' | awk -v s="$1" '$1 == s { print $2 }'
}

# The first node of the cluster under test, as SERVICE and IP.
first=(node1 172.28.0.11)

count_state() { # STATE COUNT: the first node sees exactly COUNT nodes in STATE
  [ "$(cli "${first[0]}" --host "${first[1]}:7100" status | grep -c "^$1 ")" = "$2" ]
}

echo "== building the image"
deploy/build-image.sh >/dev/null

echo "== starting three nodes"
cleanup
"${compose[@]}" up -d node1 node2 node3
wait_for 120 "three nodes are UN" count_state UN 3
# Without a secret on a docker network, a node starts only when told to
# (--insecure), and says so.
# (Into a variable first: under pipefail, `logs | grep -q` fails when grep
# stops reading early and docker-compose dies of SIGPIPE.)
logs=$("${compose[@]}" logs)
if ! grep -q "INSECURE (started with --insecure)" <<<"$logs"; then
  echo "FAILED: the open nodes do not say they are open" >&2
  exit 1
fi
echo "ok: the nodes without a secret run --insecure and say so"

echo "== QUORUM through two nodes"
cli node1 --host 172.28.0.11:7100 keyspace create ci --replication NetworkTopologyStrategy:dc1=3
write_keys node1 172.28.0.11 1 20
check_keys node2 172.28.0.12 1 20
echo "ok: 20 QUORUM writes through node1 read back at QUORUM through node2"

echo "== one node stopped"
"${compose[@]}" stop node3
wait_for 60 "node3 is DN" count_state DN 1
write_keys node2 172.28.0.12 21 30
check_keys node1 172.28.0.11 1 30
echo "ok: QUORUM writes and reads with one of three nodes down"

echo "== node1's /metrics"
puts=$(metric 'ringstore_client_requests_total{consistency="QUORUM",operation="put"}')
gets=$(metric 'ringstore_client_requests_total{consistency="QUORUM",operation="get"}')
down=$(metric 'ringstore_gossip_members{liveness="down"}')
[ "$puts" = 20 ] && [ "$gets" = 30 ] && [ "$down" = 1 ] || {
  echo "FAILED: node1's /metrics shows $puts QUORUM puts (20 sent), $gets QUORUM gets (30), $down members down (1)" >&2
  exit 1
}
echo "ok: node1's /metrics counts the 20 puts and 30 gets it coordinated and one member down"

echo "== two data centers: starting four nodes"
cleanup
compose=(docker-compose -p ringstore-ci-2dc -f deploy/docker-compose-2dc.yml)
first=(dc1-n1 172.29.0.11)
cleanup
"${compose[@]}" up -d
wait_for 180 "four nodes are UN" count_state UN 4
status=$(cli dc1-n1 --host 172.29.0.11:7100 status)
grep -q "^Datacenter: dc1" <<<"$status" && grep -q "^Datacenter: dc2" <<<"$status" || {
  echo "FAILED: status does not show both data centers:" >&2
  echo "$status" >&2
  exit 1
}
echo "ok: status shows dc1 and dc2"

echo "== two data centers: EACH_QUORUM through dc1, LOCAL_QUORUM through dc2"
cli dc1-n1 --host 172.29.0.11:7100 keyspace create ci --replication NetworkTopologyStrategy:dc1=2,dc2=2
write_keys dc1-n1 172.29.0.11 1 20 EACH_QUORUM
check_keys dc2-n1 172.29.0.21 1 20 LOCAL_QUORUM
echo "ok: 20 EACH_QUORUM writes through dc1 read back at LOCAL_QUORUM (dc2's replicas alone) through dc2"

echo "== two data centers: a dc2 node stopped"
"${compose[@]}" stop dc2-n2
wait_for 60 "dc2-n2 is DN" count_state DN 1
write_keys dc1-n2 172.29.0.12 21 30 LOCAL_QUORUM
check_keys dc1-n1 172.29.0.11 21 30 LOCAL_QUORUM
refused=$(cli dc1-n1 --host 172.29.0.11:7100 put ci each k --consistency EACH_QUORUM 2>&1) && {
  echo "FAILED: an EACH_QUORUM write succeeded with one of dc2's two replicas down" >&2
  exit 1
}
grep -q "^UNAVAILABLE" <<<"$refused" || {
  echo "FAILED: EACH_QUORUM with a dc2 replica down said: $refused" >&2
  exit 1
}
echo "ok: LOCAL_QUORUM in dc1 works with a dc2 node down; EACH_QUORUM is UNAVAILABLE"

echo "== TLS: certificates and a cluster secret made on the host"
cleanup
compose=(docker-compose -p ringstore-ci-tls -f deploy/docker-compose-tls.yml)
first=(node1 172.30.0.11)
tls_dir=$(mktemp -d)
trap 'cleanup; rm -rf "$tls_dir"' EXIT
export RINGSTORE_TLS_DIR=$tls_dir
# The static binary deploy/build-image.sh built runs on the host too.
"${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/ringstore" certs create \
  --out "$tls_dir" --ip 172.30.0.11,172.30.0.12,172.30.0.13 >/dev/null
(umask 077; printf 'cluster_secret = "%s"\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$tls_dir/secret.toml")
cleanup
"${compose[@]}" up -d
cli_flags=(--ca-cert /tls/ca.crt --client-cert /tls/client.crt --client-key /tls/client.key)
wait_for 120 "three TLS nodes are UN (status over mutual TLS)" count_state UN 3
logs=$("${compose[@]}" logs)
if grep -q "INSECURE\|no cluster secret" <<<"$logs"; then
  echo "FAILED: a node runs without the cluster secret" >&2
  exit 1
fi
echo "ok: every node has the cluster secret"

echo "== TLS: QUORUM through two nodes"
cli node1 --host 172.30.0.11:7100 keyspace create ci --replication NetworkTopologyStrategy:dc1=3
write_keys node1 172.30.0.11 1 10
check_keys node2 172.30.0.12 1 10
echo "ok: 10 QUORUM writes through node1 read back at QUORUM through node2, over TLS"

echo "== TLS: clients without the certificates are refused"
# Refused: exits 2, and its message must contain HINT.
refused() { # HINT ARGS...
  local hint=$1 said
  shift
  if said=$("${compose[@]}" exec -T node1 /ringstore --host 172.30.0.11:7100 "$@" status 2>&1); then
    echo "FAILED: ringstore $* status succeeded" >&2
    exit 1
  fi
  grep -q -- "$hint" <<<"$said" || {
    echo "FAILED: ringstore $* status said: $said" >&2
    exit 1
  }
}
refused --ca-cert
refused --client-cert --ca-cert /tls/ca.crt
echo "ok: a plaintext client and a TLS client without a client certificate are refused, with hints"
echo "compose test passed"
