#!/usr/bin/env bash
# Builds a statically linked ringstore and the `ringstore:local` image from
# scratch (no base image is pulled).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target "$target" --bin ringstore
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "${CARGO_TARGET_DIR:-target}/$target/release/ringstore" deploy/Dockerfile "$context/"
docker build -t ringstore:local "$context"
echo "built ringstore:local; run: docker-compose -f deploy/docker-compose.yml up -d"
