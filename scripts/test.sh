#!/usr/bin/env bash
# The README's test command: every Rust test of the workspace, then the
# Python package's pytest suite (scripts/test-python.sh). Models are fetched
# into the cache on first use by both.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace"
cargo test --workspace

echo "== Python package (crates/python)"
./scripts/test-python.sh
