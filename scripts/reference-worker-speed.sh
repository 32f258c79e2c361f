#!/usr/bin/env bash
# The Python reference worker (examples/worker-python/worker.py) draining
# drover.noop items through `drover serve` on PostgreSQL, beside a native
# `drover worker` draining the same number of items in the same run
# (docs/performance.md, "Reference workers over HTTP").
#
#   scripts/reference-worker-speed.sh                 # 3 rounds of 20,000 items each
#   ITEMS=50000 ROUNDS=5 CAPACITY=20 scripts/reference-worker-speed.sh
#   VARIANTS="DROVER_KEEPALIVE=0;" scripts/reference-worker-speed.sh  # two Python drains a round
#
# BACKEND=sqlite runs the same drains on a SQLite file of its own (the
# database then runs inside the measured processes; sqlite3 answers the
# script's waits).
#
# Needs the release build (cargo build --release -p drover-cli) and the
# Python tools (the conformance suite's venv: run
# crates/drover-cli/tests/integration/reference_workers.rs once, or see docs/http.md).
# PostgreSQL must be local and readable through /proc (its CPU is read
# there), as for scripts/cost-per-item.sh.
#
# Each round, in one fresh database served by one `drover serve`: ITEMS
# noop items on lane `nativeR`, drained by `drover worker --capacity
# CAPACITY`; then, for each variant V (VARIANTS, below), ITEMS on lane
# `httpRvV`, drained by the Python worker with DROVER_CAPACITY=CAPACITY
# and the variant's settings. Each drain runs alone. Its rate is the items
# over the span from the first completion to the last (the rows'
# updated_at, the database's clock), so process start-up is not counted;
# the wall time from the worker's start to the last row done is shown too.
# CPU: utime+stime of the worker, of `drover serve` and of the PostgreSQL
# server's processes, over that wall time, in µs per item. With STATS=1,
# per drain also the database's work per item from its statistics views
# (transactions committed, rows read by sequential and index scans, rows
# written, per table), read after a second and a half so every backend
# has reported.
set -euo pipefail
cd "$(dirname "$0")/.."

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
BACKEND=${BACKEND:-postgres}  # or sqlite: a file of its own, the same drains
[ "$BACKEND" = sqlite ] && STATS=0  # the statistics views are PostgreSQL's
ITEMS=${ITEMS:-20000}
ROUNDS=${ROUNDS:-3}
CAPACITY=${CAPACITY:-20}
# VARIANTS: one Python drain a round per ';'-separated list of NAME=VALUE
# settings of the worker's environment (empty: its defaults).
IFS=';' read -ra variants <<<"${VARIANTS:-}"
[ ${#variants[@]} -gt 0 ] || variants=("")
BIN=${DROVER_BIN:-${CARGO_TARGET_DIR:-target}/release/drover}
PY=crates/drover-http/conformance/python/.venv/bin/python
TICK=$(getconf CLK_TCK)
base=${DATABASE_URL%/*}
work=$(mktemp -d)
db="drover_refspeed_$$"
serve_pid=""
cleanup() {
    [ -n "${maint_pid:-}" ] && kill -TERM "$maint_pid" 2>/dev/null && wait "$maint_pid" 2>/dev/null
    [ -n "$serve_pid" ] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
    [ "$BACKEND" = sqlite ] || psql "$base/postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release -p drover-cli" >&2; exit 1; }
[ -x "$PY" ] || { echo "no $PY: see docs/http.md, Reference workers" >&2; exit 1; }

(cd examples/worker-python && rm -rf generated && PATH="$PWD/../../crates/drover-http/conformance/python/.venv/bin:$PATH" \
    openapi-python-client generate --path ../../crates/drover-http/openapi.json --output-path generated >/dev/null)

snapshot() {
    psql "$url" -Atc "SELECT 'xact_commit', xact_commit FROM pg_stat_database WHERE datname = current_database()
        UNION ALL SELECT relname || '.' || m, v FROM pg_stat_user_tables,
        LATERAL (VALUES ('seq_tup_read', seq_tup_read), ('idx_tup_fetch', coalesce(idx_tup_fetch, 0)),
                        ('idx_scan', coalesce(idx_scan, 0)), ('seq_scan', seq_scan),
                        ('ins', n_tup_ins), ('upd', n_tup_upd), ('del', n_tup_del)) AS x(m, v)"
}
ticks() { awk '{ print $14 + $15 + ($16 + $17) * '"${2:-0}"' }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# sql QUERY: one answer from the database under test ('t'/'f' for truths).
sql() {
    if [ "$BACKEND" = sqlite ]; then
        sqlite3 -cmd ".timeout 10000" "$work/speed.db" "$1" | sed 's/^1$/t/; s/^0$/f/'
    else
        psql "$url" -Atc "$1"
    fi
}
if [ "$BACKEND" = sqlite ]; then
    pm="" items=items
    pg_ticks() { echo 0; }  # the database runs inside the processes measured
else
    pm=$(head -1 "$(psql "$DATABASE_URL" -Atc "SHOW data_directory")/postmaster.pid") items=drover.items
fi
[ -n "$pm" ] && pg_ticks() {
    local total; total=$(ticks "$pm" 1)
    for p in $(pgrep -P "$pm"); do total=$((total + $(ticks "$p"))); done
    echo "$total"
}

if [ "$BACKEND" = sqlite ]; then
    url="sqlite://$work/speed.db"
else
    psql "$base/postgres" -qc "CREATE DATABASE $db"
    url="$base/$db"
fi
export DROVER_DATABASE_URL=$url
$BIN migrate >/dev/null
token=$($BIN token create --role worker --work '*:drover.*' 2>/dev/null)
$BIN serve --addr 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
until grep -q "listening on" "$work/serve.out"; do sleep 0.1; done
# MAINT=1: a native worker on an empty lane for the whole run, for its
# sweep and paced vacuum (drover serve runs neither): without one, the
# done items' dead index entries pile up under the HTTP drain's claims.
maint_pid=""
if [ "${MAINT:-0}" = 1 ]; then
    DROVER_METRICS_ADDR=off DROVER_HEARTBEAT_CRON=off $BIN worker --lanes maintenance 2>/dev/null &
    maint_pid=$!
fi
addr=$(sed -n 's/^listening on //p' "$work/serve.out" | head -1)

enqueue() {
    python3 -c "
import json
for i in range($ITEMS): print(json.dumps({'kind': 'drover.noop', 'lane': '$1', 'payload': {'n': i}}))" >"$work/items.jsonl"
    $BIN enqueue --from-file "$work/items.jsonl" >/dev/null
}

# drain LANE PID: waits until the lane is done, prints the figures, stops PID.
drain() {
    local lane=$1 pid=$2 start=$3 s0=$4 p0=$5 end done
    # Waits for the lane to have nothing pending or claimed, through the two
    # small partial indexes, five times a second. The wait itself must cost
    # the database next to nothing: a count of the lane's done items twenty
    # times a second read every done row of every earlier round each time
    # (and forked a backend per call), which on two cores took a large share
    # of PostgreSQL's CPU from the drain it was timing. The rate does not
    # depend on when the wait notices the end (it is read from the rows).
    until [ "$(sql "SELECT NOT (EXISTS (SELECT 1 FROM $items WHERE lane = '$lane' AND status = 'pending')
                                OR EXISTS (SELECT 1 FROM $items WHERE status = 'claimed' AND lane = '$lane'))")" = t ]; do
        kill -0 "$pid" 2>/dev/null || { echo "the worker draining $lane exited early" >&2; exit 1; }
        sleep 0.2
    done
    [ "$(sql "SELECT count(*) FROM $items WHERE lane = '$lane' AND status = 'done'")" = "$ITEMS" ] \
        || { echo "lane $lane ended with items not done" >&2; exit 1; }
    end=$(date +%s.%N)
    local w1 s1 p1 span
    w1=$(ticks "$pid"); s1=$(ticks "$serve_pid"); p1=$(pg_ticks)
    if [ "$BACKEND" = sqlite ]; then  # microseconds since the epoch
        span=$(sql "SELECT (max(updated_at) - min(updated_at)) / 1e6 FROM items WHERE lane = '$lane'")
    else
        span=$(sql "SELECT extract(epoch FROM max(updated_at) - min(updated_at)) FROM drover.items WHERE lane = '$lane'")
    fi
    kill -TERM "$pid"; wait "$pid" >/dev/null || true
    if [ "${STATS:-0}" = 1 ]; then
        sleep 1.5
        snapshot >"$work/after"
        python3 - "$work/before" "$work/after" "$ITEMS" <<'PY'
import sys
read = lambda f: {k: int(v) for k, v in (l.rstrip("\n").split("|") for l in open(f) if "|" in l)}
b, a, n = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
d = sorted(((a[k] - b.get(k, 0)) / n, k) for k in a if a[k] - b.get(k, 0) > 0)
print("    per item: " + ", ".join(f"{k} {v:.2f}" for v, k in reversed(d) if v >= 0.05))
PY
    fi
    python3 -c "
t=$TICK; n=$ITEMS; us=lambda a: a/t*1e6/n
print(f'{\"$lane\":<8} {n/$span:>8,.0f} items/s (first to last completion, {$span:.2f} s; wall {$end-$start:.2f} s)  CPU µs/item: worker {us($w1):,.0f}, serve {us($s1-$s0):,.0f}' + ('' if '$BACKEND' == 'sqlite' else f', PostgreSQL {us($p1-$p0):,.0f}'))"
}

for r in $(seq 1 "$ROUNDS"); do
    enqueue "native$r"
    [ "${STATS:-0}" = 1 ] && { sleep 1.5; snapshot >"$work/before"; }
    s0=$(ticks "$serve_pid"); p0=$(pg_ticks); start=$(date +%s.%N)
    DROVER_METRICS_ADDR=off DROVER_HEARTBEAT_CRON=off $BIN worker --lanes "native$r" --capacity "$CAPACITY" \
        --pool-size $((CAPACITY / 4 + 8)) 2>/dev/null &
    drain "native$r" $! "$start" "$s0" "$p0"

    for i in "${!variants[@]}"; do
        lane="http${r}v$i"
        enqueue "$lane"
        [ "${STATS:-0}" = 1 ] && { sleep 1.5; snapshot >"$work/before"; }
        s0=$(ticks "$serve_pid"); p0=$(pg_ticks); start=$(date +%s.%N)
        # shellcheck disable=SC2086 # a variant is a list of NAME=VALUE words
        (cd examples/worker-python && exec env DROVER_URL="$addr" DROVER_TOKEN="$token" DROVER_LANES="$lane" \
            DROVER_CAPACITY="$CAPACITY" PYTHONPATH=generated ${variants[$i]} "../../$PY" worker.py >/dev/null) &
        echo "$lane: ${variants[$i]:-defaults}"
        drain "$lane" $! "$start" "$s0" "$p0"
    done
done
