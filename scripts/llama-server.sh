#!/usr/bin/env bash
# llama.cpp's OpenAI-compatible server (PyPI's llama-cpp-python[server]) on
# loopback, serving the SmolLM2-135M GGUF the project already fetches. The
# tests run the reader, the memory LLM and the judge through it.
#
#   scripts/llama-server.sh install            build (once) and install into a venv
#   scripts/llama-server.sh start PORT [DIR]   start on 127.0.0.1:PORT; pid and log in DIR
#   scripts/llama-server.sh stop [DIR]         stop the server started in DIR
#   scripts/llama-server.sh python             print the venv's python (installing first)
#
# pip builds llama.cpp from source (no binary wheel on PyPI); the built wheel
# is cached in $SUBMEM_CACHE_DIR/wheels/avx2 (default ~/.cache/submem), so the
# build (2 min 8 s alone on 2 cores) is paid once per machine.
# The venv lives beside it. Set SUBMEM_LLAMA_VENV to put the venv elsewhere.
#
# The build targets AVX2, not the build machine's every instruction: a VM can
# advertise Intel AMX without letting a process use it, and a "native" build
# then dies on its first matrix product (`ldtilecfg`, a general protection
# fault in libggml-cpu) while serving health checks happily.
#
# LLAVA_BUILD=OFF leaves out the multimodal library (mtmd/clip, about a sixth
# of the C++ compiled): the package imports it only for image chat formats,
# and the tests serve a text model. Nor is llama.cpp's "common" library built
# (see scripts/llama-cpp-no-common.cmake): 83 compile steps instead of 140,
# 3.6 CPU-minutes instead of 7.1 (2 min 8 s instead of 3 min 56 s alone on 2
# cores, measured one after the other), a 14 MB wheel instead of 20.
set -euo pipefail

version="0.3.36"
cache="${SUBMEM_CACHE_DIR:-$HOME/.cache/submem}"
wheels="$cache/wheels/avx2"
venv="${SUBMEM_LLAMA_VENV:-$cache/llama-venv-$version-avx2}"
python="${PYTHON:-python3}"
gguf_rel="models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

log() { echo "llama-server.sh: $*" >&2; }

install() {
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
        return 0
    fi
    mkdir -p "$wheels"
    local wheel
    wheel=$(ls "$wheels"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n1 || true)
    if [ -z "$wheel" ]; then
        log "building llama-cpp-python $version from source (once per machine; about 2 min on 2 cores alone)"
        local start=$SECONDS staging no_common
        staging=$(mktemp -d "$wheels/.build.XXXXXX")
        no_common="$(cd "$(dirname "$0")" && pwd)/llama-cpp-no-common.cmake"
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$no_common" \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
            "$python" -m pip wheel --no-deps --disable-pip-version-check --no-cache-dir \
            --no-binary llama-cpp-python \
            "llama-cpp-python==$version" -w "$staging" >&2
        mv "$staging"/llama_cpp_python-*.whl "$wheels"/
        rmdir "$staging" 2>/dev/null || true
        log "built in $((SECONDS - start)) s"
        wheel=$(ls "$wheels"/llama_cpp_python-"$version"-*.whl | head -n1)
    fi
    log "installing $wheel[server] into $venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel[server]" >&2
}

model() {
    local gguf="${SUBMEM_LLM_GGUF:-$cache/$gguf_rel}"
    if [ ! -f "$gguf" ]; then
        # The same fetch every submem command does on first use.
        log "fetching the SmolLM2 GGUF into $cache"
        cargo run --quiet -p submem-cli -- models fetch >&2
    fi
    echo "$gguf"
}

start() {
    local port="$1" dir="${2:-target/llama-server}"
    install
    local gguf
    gguf=$(model)
    mkdir -p "$dir"
    if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        log "already running (pid $(cat "$dir/pid")) in $dir"
        return 0
    fi
    # n_ctx 8192 holds the reader's prompt at the largest budgets the tests use;
    # two threads, as the machines have two cores.
    setsid "$venv/bin/python" -m llama_cpp.server --model "$gguf" --model_alias smollm2-135m \
        --host 127.0.0.1 --port "$port" --n_ctx 8192 --n_threads 2 --n_batch 512 \
        --verbose false >"$dir/log" 2>&1 &
    echo $! >"$dir/pid"
    for _ in $(seq 1 240); do
        if curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
            log "serving on http://127.0.0.1:$port/v1 (pid $(cat "$dir/pid"), log $dir/log)"
            return 0
        fi
        if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
            log "the server exited; its log:"
            tail -n 20 "$dir/log" >&2
            return 1
        fi
        sleep 0.5
    done
    log "the server did not answer within 120 s; its log: $dir/log"
    return 1
}

stop() {
    local dir="${1:-target/llama-server}"
    if [ -f "$dir/pid" ]; then
        kill "$(cat "$dir/pid")" 2>/dev/null || true
        rm -f "$dir/pid"
    fi
}

case "${1:-}" in
    install) install ;;
    python) install && echo "$venv/bin/python" ;;
    start) [ $# -ge 2 ] || { log "usage: $0 start PORT [DIR]"; exit 2; }; start "$2" "${3:-}" ;;
    stop) stop "${2:-}" ;;
    *) log "usage: $0 install | python | start PORT [DIR] | stop [DIR]"; exit 2 ;;
esac
