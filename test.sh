#!/usr/bin/env bash
# The test suite, on a machine with only the Rust toolchain: installs what the
# tests need when it is missing, then runs every test of the workspace.
#
#   ./test.sh                               # everything (about 10 minutes on 2 cores)
#   ./test.sh -p ringstore --test processes # arguments go to `cargo nextest run`
#
# What it installs, once:
# - cargo-nextest (`cargo install --locked cargo-nextest`): the runner. Each
#   test in its own process, which the multi-node tests need (a node's
#   globals, its log filter) and which runs them in parallel.
# - strace (apt-get; through sudo when not root): crates/storage/tests/fsync.rs
#   watches the system calls of a durable flush with it, and fails without it.
# - chromium (apt-get, the same way): tests/console_browser.rs loads the web
#   console in headless Chromium, and fails without it.
# It stops with a message naming the step when it cannot install one; no test
# is skipped for want of a tool. `.ci/run` runs exactly this script.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$HOME/.cargo/bin:$PATH"

command -v cargo >/dev/null || {
  echo "test.sh: cargo is not installed: install the Rust toolchain (rustup) first" >&2
  exit 1
}

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "== test.sh: installing cargo-nextest (cargo install --locked cargo-nextest)"
  cargo install --locked cargo-nextest
fi

# apt_install TOOL PACKAGE: installs PACKAGE with apt-get (through sudo when
# not root) unless TOOL is on the PATH; stops with a message when it cannot.
apt_install() {
  local tool=$1 package=$2 as_root
  command -v "$tool" >/dev/null && return 0
  echo "== test.sh: installing $tool (apt-get install $package)"
  if [ "$(id -u)" = 0 ]; then
    as_root=""
  elif command -v sudo >/dev/null; then
    as_root="sudo"
  else
    echo "test.sh: $tool is missing and this user can neither apt-get nor sudo:" \
      "install it (Debian/Ubuntu: apt-get install $package) and run again" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null; then
    echo "test.sh: $tool is missing and there is no apt-get here:" \
      "install $package with this system's package manager and run again" >&2
    exit 1
  fi
  if [ -z "${apt_updated:-}" ]; then
    $as_root apt-get update -qq
    apt_updated=1
  fi
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package"
}

apt_install strace strace
# Debian's package is `chromium`; the browser test also takes a
# `chromium-browser` or `google-chrome` already on the PATH.
command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null ||
  apt_install chromium chromium

echo "== cargo nextest run --workspace $*"
exec cargo nextest run --workspace "$@"
