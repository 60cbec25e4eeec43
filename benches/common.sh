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
