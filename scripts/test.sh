#!/usr/bin/env bash
# The README's test command: every Rust test of the workspace, then the
# Python package's pytest suite (scripts/test-python.sh). Models are fetched
# into the cache on first use by both; llama.cpp's server (the tests' real
# OpenAI-compatible server) is built from PyPI's sdist once per machine, and
# the agentic tests' text environments (TextWorld, ALFWorld, ScienceWorld)
# are installed into a venv under the cache once per machine.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== llama.cpp's OpenAI-compatible server for the tests (built once per machine)"
./scripts/llama-server.sh install

echo "== TextWorld, ALFWorld and ScienceWorld for the agentic tests (installed once per machine)"
./scripts/agent-envs.sh install

echo "== Chromium and chromedriver for the inspector's browser test"
./scripts/chromium.sh install

echo "== cargo test --workspace"
cargo test --workspace

echo "== Python package (crates/python)"
./scripts/test-python.sh
