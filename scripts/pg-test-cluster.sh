#!/usr/bin/env bash
# A private PostgreSQL cluster for tests: initdb into DIR, a server on a free
# loopback port, stopped and removed by `stop`. Uses the PostgreSQL server
# binaries of Debian's postgresql-NN packages (not on PATH: /usr/lib/postgresql/NN/bin),
# or those in $PG_BIN. The server refuses to run as root, so as root it runs
# as the `postgres` user.
#
#   scripts/pg-test-cluster.sh start DIR   # prints the connection URL on stdout
#   scripts/pg-test-cluster.sh stop DIR    # stops the server, removes DIR
#
# The tests of crates/server start and stop their own cluster through this
# script, so `cargo test` needs nothing else running.
set -euo pipefail

find_bin() {
    if [[ -n "${PG_BIN:-}" && -x "$PG_BIN/initdb" ]]; then
        echo "$PG_BIN"
        return
    fi
    local newest
    newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [[ -n "$newest" && -x "$newest/initdb" ]]; then
        echo "$newest"
        return
    fi
    if command -v pg_config >/dev/null && [[ -x "$(pg_config --bindir)/initdb" ]]; then
        pg_config --bindir
        return
    fi
    echo "pg-test-cluster: no PostgreSQL server binaries (initdb, pg_ctl) found." >&2
    echo "pg-test-cluster: install Debian's postgresql-15 package (apt-get install postgresql-15)," >&2
    echo "pg-test-cluster: or set PG_BIN to the directory that holds initdb and pg_ctl." >&2
    exit 3
}

# Runs a command as the postgres user when we are root.
as_pg() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A free port below the kernel's ephemeral range: a port from bind(0) lies in
# that range, and an outgoing connection can take it before PostgreSQL binds.
free_port() {
    python3 - <<'PY'
import os, random, socket
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
ports = list(range(20000, low)) if low > 21000 else []
random.shuffle(ports)
for port in ports:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])
PY
}

cmd="${1:-}"
dir="${2:-}"
if [[ -z "$cmd" || -z "$dir" ]]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi

case "$cmd" in
start)
    bin=$(find_bin)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ "$(id -u)" == 0 ]]; then
        chown postgres "$dir"
        # Every directory above DIR must be searchable by postgres.
        chmod o+x "$dir"
    fi
    as_pg "$bin/initdb" -D "$dir/data" -U submem --auth=trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    # Clusters started at once can pick the same free port; the loser sees
    # "Address already in use" and tries another.
    for try in 1 2 3; do
        port=$(free_port)
        if as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $dir/data -c fsync=on -c synchronous_commit=on -c max_connections=200 -c shared_buffers=32MB" \
            start >/dev/null; then
            break
        fi
        if [[ "$try" == 3 ]] || ! grep -q "Address already in use" "$dir/data/server.log"; then
            cat "$dir/data/server.log" >&2
            exit 1
        fi
    done
    echo "$port" >"$dir/port"
    echo "postgres://submem@127.0.0.1:$port/postgres"
    ;;
stop)
    [[ -d "$dir" ]] || exit 0
    bin=$(find_bin)
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
