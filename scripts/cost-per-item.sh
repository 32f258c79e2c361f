#!/usr/bin/env bash
# drover's cost per item: client CPU µs and database CPU µs per item drained,
# at 1, 2 and 4 worker processes sharing one PostgreSQL (docs/scaling.md).
#
#   scripts/cost-per-item.sh                     # 50,000 noop items per run
#   ITEMS=200000 PROCS="1 2 4 8" scripts/cost-per-item.sh
#
# Run it on a quiet machine with PostgreSQL on the same host (database CPU
# is read from /proc for the server's processes, so the server must be
# local and readable: run as root or as the server's OS user).
#
# Environment (defaults in brackets):
#   DATABASE_URL  the server [postgres://postgres@127.0.0.1:5432/test]
#   ITEMS         items per run [50000]
#   PROCS         worker process counts [1 2 4]
#   CAPACITY      capacity of each worker [20]
#
# Per run: a fresh database, migrate, bulk enqueue, then N `drover worker`
# processes drain it. Client CPU is the workers' utime+stime (from
# /proc/PID/stat, read just before SIGTERM); database CPU is the growth of
# utime+stime summed over every process of the server's postmaster from
# just before the workers start to the moment the last item is done
# (backends that exit in between are counted through the postmaster's
# cutime/cstime). Both are divided by ITEMS. Output: one line per run and
# a Markdown table for docs/scaling.md.
set -euo pipefail
cd "$(dirname "$0")/.."

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
ITEMS=${ITEMS:-50000}
PROCS=${PROCS:-1 2 4}
CAPACITY=${CAPACITY:-20}
TICK=$(getconf CLK_TCK)

cargo build --release -q -p drover-cli
BIN=target/release/drover
base=${DATABASE_URL%/*}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$ITEMS" > "$work/items.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"kind": "drover.noop", "idempotency_key": f"c{i}"}))
PY

# utime+stime (+ children's, for the postmaster) of a pid, in ticks.
ticks() { awk '{ print $14 + $15 + ($16 + $17) * '"${2:-0}"' }' "/proc/$1/stat" 2>/dev/null || echo 0; }

postmaster() {
    psql "$DATABASE_URL" -Atc "SELECT pid FROM pg_stat_activity LIMIT 0" >/dev/null
    local data; data=$(psql "$DATABASE_URL" -Atc "SHOW data_directory")
    head -1 "$data/postmaster.pid"
}

server_ticks() {
    local pm=$1 total
    total=$(ticks "$pm" 1)
    for p in $(pgrep -P "$pm"); do total=$((total + $(ticks "$p"))); done
    echo "$total"
}

rows=()
pm=$(postmaster)
for n in $PROCS; do
    db="drover_cost_$$_$n"
    psql "$base/postgres" -qc "CREATE DATABASE $db"
    url="$base/$db"
    DROVER_DATABASE_URL=$url $BIN migrate >/dev/null
    DROVER_DATABASE_URL=$url $BIN enqueue --from-file "$work/items.jsonl" >/dev/null
    before=$(server_ticks "$pm")
    start=$(date +%s.%N)
    pids=()
    for i in $(seq 1 "$n"); do
        DROVER_DATABASE_URL=$url DROVER_METRICS_ADDR=off $BIN worker --capacity "$CAPACITY" 2>/dev/null &
        pids+=($!)
    done
    # Nothing pending or claimed, through the two small partial indexes:
    # the wait is counted in the database's CPU, so it must cost next to
    # nothing (a count of the done items reads every one of them).
    until [ "$(psql "$url" -Atc "SELECT NOT (EXISTS (SELECT 1 FROM drover.items WHERE status = 'pending')
                                        OR EXISTS (SELECT 1 FROM drover.items WHERE status = 'claimed'))")" = t ]; do
        sleep 0.2
    done
    end=$(date +%s.%N)
    after=$(server_ticks "$pm")
    client=0
    for p in "${pids[@]}"; do client=$((client + $(ticks "$p"))); done
    kill -TERM "${pids[@]}"; wait "${pids[@]}" || true
    psql "$base/postgres" -qc "DROP DATABASE $db WITH (FORCE)"
    row=$(python3 -c "
t=$TICK; items=$ITEMS
client=$client/t*1e6/items; db=($after-$before)/t*1e6/items
print(f'| $n | {items/($end-$start):,.0f} | {client:,.0f} | {db:,.0f} | {client+db:,.0f} |')")
    echo "$n processes: $row"
    rows+=("$row")
done
echo
echo "| worker processes | drain items/s | client CPU µs/item | database CPU µs/item | total µs/item |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
