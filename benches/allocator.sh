#!/usr/bin/env bash
# mimalloc (the default global allocator) against glibc's malloc, in one run
# (not run in CI): builds the release binary both ways (the second with
# --no-default-features), then runs benches/stress.sh with each, twice,
# alternated, so machine noise shows as the spread between rounds.
# Usage: benches/allocator.sh [OPERATIONS]   (default 50000 per workload)
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-50000}
binaries=$(mktemp -d)
trap 'rm -rf "$binaries"' EXIT
target=${CARGO_TARGET_DIR:-target}
cargo build --release --bin ringstore >/dev/null
cp "$target/release/ringstore" "$binaries/mimalloc"
cargo build --release --bin ringstore --no-default-features >/dev/null
cp "$target/release/ringstore" "$binaries/glibc"
# Leave the default build in place for whatever runs next.
cargo build --release --bin ringstore >/dev/null
for round in 1 2; do
  for allocator in glibc mimalloc; do
    echo "== round $round: $allocator"
    STRESS_BIN="$binaries/$allocator" benches/stress.sh "$ops"
  done
done
