#!/usr/bin/env bash
# The Python package's tests: builds the extension (dev profile, sharing the
# workspace's target/) into a virtual environment under target/, then runs
# pytest on crates/python/tests. Needs python3 (3.9+) with venv and pip;
# maturin and pytest come from PyPI into that environment.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${SUBMEM_PYTHON_VENV:-$PWD/target/python-venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv"
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.8,<2" "pytest>=7"

# workspace-test-build asks for the features `cargo test --workspace` turns on,
# so the extension reuses that build's artifacts instead of compiling most of
# the workspace again (see crates/python/Cargo.toml).
echo "== maturin develop (crates/python)"
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
    maturin develop --manifest-path crates/python/Cargo.toml --features workspace-test-build

echo "== pytest crates/python/tests"
"$venv/bin/python" -m pytest crates/python/tests -q "$@"
