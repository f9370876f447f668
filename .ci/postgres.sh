#!/usr/bin/env bash
# A private, throwaway PostgreSQL for the store's integration tests (pytest -m postgres).
#
#   export SLURM_ADVISOR_TEST_PG_URL="$(.ci/postgres.sh start)"   # prints the URL, writes the PID file
#   .ci/postgres.sh stop                                           # stops the server by its PID
#
# Both are idempotent: `start` on a running server only prints the URL again; `stop` on a stopped one
# does nothing. The cluster lives in $SLURM_ADVISOR_PG_DIR (default /tmp/slurm_advisor_pg), listens on
# 127.0.0.1:$SLURM_ADVISOR_PG_PORT (default 55432) and a Unix socket in that directory, and trusts local
# connections: it is for tests only. As root the server runs as user `postgres` (initdb refuses root).
set -euo pipefail

PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
ROOT=${SLURM_ADVISOR_PG_DIR:-${TMPDIR:-/tmp}/slurm_advisor_pg}
PORT=${SLURM_ADVISOR_PG_PORT:-55432}
DBUSER=slurm_advisor
DBNAME=slurm_advisor_test
DATA=$ROOT/data
PIDFILE=$ROOT/postgres.pid
URL="postgresql+psycopg://$DBUSER@127.0.0.1:$PORT/$DBNAME"

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

running_pid() {
    # The PID from our PID file, if that process is alive; nothing otherwise.
    [ -f "$PIDFILE" ] || return 0
    local pid
    pid=$(head -n 1 "$PIDFILE")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

start() {
    [ -x "$PGBIN/initdb" ] || { echo "postgres.sh: no initdb under '$PGBIN'; install postgresql" >&2; exit 1; }
    if [ -z "$(running_pid)" ]; then
        mkdir -p "$ROOT"
        if [ "$(id -u)" = 0 ]; then chown postgres: "$ROOT"; fi
        if [ ! -f "$DATA/PG_VERSION" ]; then
            as_owner "$PGBIN/initdb" -D "$DATA" -U "$DBUSER" --auth=trust -E UTF8 >&2
        fi
        as_owner "$PGBIN/pg_ctl" -D "$DATA" -l "$ROOT/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -c port=$PORT -k $ROOT" start >&2
        head -n 1 "$DATA/postmaster.pid" > "$PIDFILE"
    fi
    if ! as_owner "$PGBIN/psql" -h "$ROOT" -p "$PORT" -U "$DBUSER" -d postgres -tAc \
            "SELECT 1 FROM pg_database WHERE datname = '$DBNAME'" | grep -q 1; then
        as_owner "$PGBIN/createdb" -h "$ROOT" -p "$PORT" -U "$DBUSER" "$DBNAME" >&2
    fi
    echo "$URL"
}

stop() {
    local pid
    pid=$(running_pid)
    if [ -n "$pid" ]; then
        kill -INT "$pid"  # PostgreSQL's "fast" shutdown: end sessions, checkpoint, exit
        for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then echo "postgres.sh: PID $pid did not stop" >&2; exit 1; fi
    fi
    rm -f "$PIDFILE"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) echo "$URL" ;;
    *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
