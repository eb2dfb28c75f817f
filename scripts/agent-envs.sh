#!/usr/bin/env bash
# The text environments of the agentic benchmark (submem bench --dataset
# textworld|alfworld|scienceworld): PyPI's textworld, alfworld and
# scienceworld in a virtual environment under the submem cache, once per
# machine. The harness finds it there (or at $SUBMEM_AGENT_PYTHON).
#
#   scripts/agent-envs.sh install    create the venv and install, and a Java runtime (no-op when done)
#   scripts/agent-envs.sh python     print the venv's python (installing first)
#   scripts/agent-envs.sh check      say what is missing, exit 1 if anything is
#
# pip builds two of their dependencies from source (jericho and
# fast-downward-textworld; the whole install took 94 s on a fresh 2-core
# machine, once; pip's wheel cache keeps them). ScienceWorld runs a Java
# simulator: it needs a Java runtime (Debian's openjdk-17-jre-headless); the
# other two do not.
set -euo pipefail

cache="${SUBMEM_CACHE_DIR:-$HOME/.cache/submem}"
venv="$cache/agent-envs/venv"
python="${PYTHON:-python3}"
packages=(textworld==1.7.0 alfworld==0.4.2 scienceworld==1.2.3)

log() { echo "agent-envs.sh: $*" >&2; }

ready() {
    [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import textworld, alfworld, scienceworld" 2>/dev/null \
        && [ -f "$venv/.submem-installed" ] && [ "$(cat "$venv/.submem-installed")" = "${packages[*]}" ]
}

install() {
    if ready; then
        return 0
    fi
    if ! command -v "$python" >/dev/null; then
        log "no $python on the PATH: install Python 3 (3.9 to 3.12) with pip and venv"
        exit 1
    fi
    local start=$SECONDS
    log "installing ${packages[*]} into $venv (once per machine; about 1.5 min on 2 cores alone)"
    # The marker is written last: a venv cut short (a killed install) has
    # none, and the next install starts it again from scratch.
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}" >&2
    echo "${packages[*]}" > "$venv/.submem-installed"
    log "installed in $((SECONDS - start)) s"
}

check() {
    local missing=0
    if ! ready; then
        log "the environments are not installed: run scripts/agent-envs.sh install"
        missing=1
    fi
    if ! command -v java >/dev/null; then
        log "no java on the PATH: ScienceWorld needs a Java runtime (Debian: apt-get install openjdk-17-jre-headless)"
        missing=1
    fi
    return $missing
}

java_runtime() {
    # ScienceWorld's simulator is a jar: install Debian's Java runtime when
    # missing (root or sudo), as scripts/chromium.sh installs Chromium.
    if command -v java >/dev/null; then
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    log "installing a Java runtime for ScienceWorld (openjdk-17-jre-headless)"
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq openjdk-17-jre-headless >&2
}

case "${1:-}" in
    install) install; java_runtime ;;
    python) install; echo "$venv/bin/python" ;;
    check) check ;;
    *) echo "usage: $0 install|python|check" >&2; exit 2 ;;
esac
