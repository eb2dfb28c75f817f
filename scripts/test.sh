#!/usr/bin/env bash
# The README's test command: every Rust test of the workspace, then the
# Python package's pytest suite (scripts/test-python.sh). Models are fetched
# into the cache on first use by both; llama.cpp's server (the tests' real
# OpenAI-compatible server) is built from PyPI's sdist once per machine, and
# the agentic tests' text environments (TextWorld, ALFWorld, ScienceWorld)
# are installed into a venv under the cache once per machine.
#
# The per-machine installs run beside the test build, each into its own log
# under target/test-setup/ (printed when it fails): on a fresh machine they
# and the build share the cores and the network instead of taking turns.
# Every install is a no-op once done.
set -euo pipefail
cd "$(dirname "$0")/.."

logs="target/test-setup"
mkdir -p "$logs"
pids=()
names=()

# Runs "$@" in the background, its output in $logs/NAME.log.
beside() {
    local name="$1"
    shift
    "$@" >"$logs/$name.log" 2>&1 &
    pids+=("$!")
    names+=("$name")
}

# Both use apt-get when something is missing, which takes one lock: in turn.
system_installs() {
    echo "== Chromium and chromedriver for the inspector's browser test"
    ./scripts/chromium.sh install
    echo "== TextWorld, ALFWorld and ScienceWorld for the agentic tests (installed once per machine)"
    ./scripts/agent-envs.sh install
}

echo "== installing beside the build (logs in $logs/): llama.cpp's server, Chromium, the text environments"
beside llama-server ./scripts/llama-server.sh install
beside system system_installs

echo "== cargo test --workspace --no-run"
build_status=0
cargo test --workspace --no-run || build_status=$?

failed=0
for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
        echo "== ${names[$i]}: ready"
    else
        echo "== ${names[$i]}: FAILED; the end of $logs/${names[$i]}.log:" >&2
        tail -n 40 "$logs/${names[$i]}.log" >&2
        failed=1
    fi
done
if [ "$build_status" != 0 ]; then
    exit "$build_status"
fi
if [ "$failed" != 0 ]; then
    exit 1
fi

echo "== cargo test --workspace"
cargo test --workspace

echo "== Python package (crates/python)"
./scripts/test-python.sh
