#!/usr/bin/env bash
# Checks the book (docs/) and README.md against what they describe, and fails
# on the first kind of rot docs suffer:
# - a relative link to a page that does not exist, or to an #anchor that is
#   no heading of its page (mdBook's ids);
# - a `ringstore …` command in a code block that the CLI no longer accepts:
#   each one's subcommand path must answer `ringstore <path> --help`, and each
#   option it uses must be in that help.
# The checks are the Rust tests of tests/book.rs (they run the binary that
# cargo builds for them); CI runs this after `mdbook build docs`, which fails
# on a missing page of SUMMARY.md or a broken {{#include}}.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test -p ringstore --test book
