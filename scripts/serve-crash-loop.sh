#!/usr/bin/env bash
# Kills `submem serve` with SIGKILL at random points during acknowledged batch
# writes, ROUNDS times (default 100), restarting it after each kill and
# checking that every acknowledged event is readable, that a batch in flight at
# the kill is there whole or not at all, and that each namespace's event count
# matches. It runs the crash test of crates/cli/tests/serve.rs with more rounds
# (the test suite runs 5) and prints the tally.
#
#   scripts/serve-crash-loop.sh          # 100 kills
#   scripts/serve-crash-loop.sh 20       # 20 kills
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-100}"
SUBMEM_CRASH_ROUNDS="$ROUNDS" cargo test -p submem-cli --test serve \
    sigkill_during_acknowledged_writes_loses_nothing -- --nocapture 2>&1 |
    grep -E "^round |^crash loop|test result|panicked|FAILED|lost|half there"
