#!/usr/bin/env bash
# drover's scaling study: builds release binaries, runs the bench
# configurations of docs/performance.md against PostgreSQL (and the headline
# workload on SQLite), writes one JSON report per run under docs/perf/, runs
# the pgbench baseline, and draws the PNG charts.
#
#   scripts/scaling-study.sh                 # everything, 3 runs each
#   RUNS=1 BACKLOGS="10000 100000" scripts/scaling-study.sh
#
# Environment (defaults in brackets):
#   DATABASE_URL    PostgreSQL server and database the bench schemas go in
#                   [postgres://postgres@127.0.0.1:5432/test]
#   OUT             where results go [docs/perf]
#   RUNS            repetitions of the headline workload [3]
#   SWEEP_RUNS      repetitions of each capacity / process count [RUNS]
#   BACKLOGS        claim-latency backlogs [10000 100000 1000000 10000000]
#   CHURN_BACKLOG   backlog of the open-transaction study [1000000]
#   CHURN           how long workers churn in that study [30s]
#   SUSTAINED_RATE  offered items/s of the sustained run [3000]
#   SUSTAINED_FOR   its duration [60s]
#   TIMEOUT         the longest one bench phase may wait [240s]
#   SKIP            space-separated steps to skip: headline capacity
#                   processes claim churn sustained pgbench plot
#
# Each bench creates and drops its own schema (drover_bench_*); pgbench
# uses a database of its own, pgbench_drover, created and dropped here.
# Large backlogs are loaded with INSERT ... SELECT generate_series, not the
# bulk API (10 M items through the API would take many minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
OUT=${OUT:-docs/perf}
RUNS=${RUNS:-3}
SWEEP_RUNS=${SWEEP_RUNS:-$RUNS}
BACKLOGS=${BACKLOGS:-"10000 100000 1000000 10000000"}
CHURN_BACKLOG=${CHURN_BACKLOG:-1000000}
CHURN=${CHURN:-30s}
SUSTAINED_RATE=${SUSTAINED_RATE:-3000}
SUSTAINED_FOR=${SUSTAINED_FOR:-60s}
SKIP=${SKIP:-}
TIMEOUT=${TIMEOUT:-240s}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}

skip() { [[ " $SKIP " == *" $1 "* ]]; }
log() { echo "== $*" >&2; }

log "building release binaries"
cargo build --release -p drover-cli --features bench
cargo build --release -p drover-bench --example plot
DROVER="$CARGO_TARGET_DIR/release/drover"
PLOT="$CARGO_TARGET_DIR/release/examples/plot"
mkdir -p "$OUT"

# bench NAME ARGS...: one run, its JSON report in $OUT/NAME.json.
bench() {
    local name=$1
    shift
    log "$name: drover bench $* (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    # A run that fails (missing or duplicated executions, a phase that did
    # not finish) still writes its report; the study goes on.
    "$DROVER" bench --quiet --json --timeout "$TIMEOUT" "$@" >"$OUT/$name.json" ||
        log "$name: FAILED (exit $?), see $OUT/$name.json"
}

if ! skip headline; then
    for i in $(seq 1 "$RUNS"); do
        bench "pg_standard_$i" --database-url "$URL"
        bench "sqlite_standard_$i" --database-url sqlite://bench-unused.db
    done
fi

if ! skip capacity; then
    for c in 1 5 20 100; do
        for i in $(seq 1 "$SWEEP_RUNS"); do
            # Drain only: the latency phase is the headline's business.
            bench "pg_capacity_${c}_$i" --database-url "$URL" --capacity "$c" --latency-jobs 0
        done
    done
fi

if ! skip processes; then
    for p in 1 2 4; do
        for i in $(seq 1 "$SWEEP_RUNS"); do
            bench "pg_processes_${p}_$i" --database-url "$URL" --processes "$p" --capacity 20
        done
    done
    # Worker memory: one child process, its RSS measured from the parent.
    bench pg_rss_20 --database-url "$URL" --processes 1 --capacity 20 --latency-jobs 0
    bench pg_rss_100 --database-url "$URL" --processes 1 --capacity 100 --latency-jobs 0
fi

if ! skip churn; then
    bench pg_claim_churn_plain --database-url "$URL" --claim-latency \
        --backlog "$CHURN_BACKLOG" --churn "$CHURN"
    bench pg_claim_churn_xact --database-url "$URL" --claim-latency \
        --backlog "$CHURN_BACKLOG" --churn "$CHURN" --hold-xact
fi

if ! skip sustained; then
    bench pg_sustained --database-url "$URL" --sustained "$SUSTAINED_RATE" --duration "$SUSTAINED_FOR"
fi

if ! skip pgbench; then
    log "pgbench baseline in database pgbench_drover"
    PGURL_BASE=${URL%/*}
    psql "$URL" -qc 'DROP DATABASE IF EXISTS pgbench_drover' -c 'CREATE DATABASE pgbench_drover'
    pgbench -q -i -s 10 "$PGURL_BASE/pgbench_drover" >/dev/null 2>&1
    pgbench -c 20 -j 2 -T 20 -N "$PGURL_BASE/pgbench_drover" >"$OUT/pgbench.txt" 2>&1
    grep -E '^tps' "$OUT/pgbench.txt" >&2 || true
    psql "$URL" -qc 'DROP DATABASE IF EXISTS pgbench_drover'
fi

if ! skip claim; then
    for b in $BACKLOGS; do
        bench "pg_claim_backlog_$b" --database-url "$URL" --claim-latency --backlog "$b"
    done
fi

if ! skip plot; then
    if [[ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf && -z "${DROVER_PLOT_FONT:-}" ]]; then
        log "installing fonts-dejavu-core for chart text"
        sudo apt-get install -y fonts-dejavu-core >/dev/null || apt-get install -y fonts-dejavu-core >/dev/null
    fi
    "$PLOT" "$OUT"
fi
log "done: results in $OUT"
