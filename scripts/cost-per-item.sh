#!/usr/bin/env bash
# drover's cost per item: client CPU µs and database CPU µs per item drained,
# at 1, 2 and 4 worker processes sharing one PostgreSQL (docs/scaling.md),
# for the `drover worker` command and for the library worker on the same
# items in the same run (docs/performance.md, "The CLI worker and the
# library worker").
#
#   scripts/cost-per-item.sh                     # 50,000 noop items per run
#   ITEMS=200000 PROCS="1 2 4 8" scripts/cost-per-item.sh
#   ROUNDS=3 PROCS=1 scripts/cost-per-item.sh    # medians of 3 alternating rounds
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
#   ROUNDS        rounds; each round runs every count with both workers [1]
#   WORKERS       which workers ["cli library"]
#
# Per run: a fresh database, migrate, bulk enqueue, then N worker processes
# drain it: `drover worker` (items of `drover.noop`), or the library worker
# `drover bench --child-schema` runs (a `Worker` built from the library
# with the bench's settings, items of `drover_bench.noop`; both handlers
# return at once). Two rates: from the workers' start to the last item
# done ("wall": what a user waits, start-up included), and from the first
# item done to the last ("span": the drain itself), both from the rows'
# `updated_at` and the start time taken here. Client CPU is the workers'
# utime+stime (from /proc/PID/stat, read just before SIGTERM); database CPU
# is the growth of utime+stime summed over every process of the server's
# postmaster from just before the workers start to the moment the last item
# is done (backends that exit in between are counted through the
# postmaster's cutime/cstime). Both are divided by ITEMS. Output: one line
# per run and a Markdown table (medians over the rounds).
set -euo pipefail
cd "$(dirname "$0")/.."

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
ITEMS=${ITEMS:-50000}
PROCS=${PROCS:-1 2 4}
CAPACITY=${CAPACITY:-20}
ROUNDS=${ROUNDS:-1}
WORKERS=${WORKERS:-cli library}
TICK=$(getconf CLK_TCK)

cargo build --release -q -p drover-cli --features bench
BIN=target/release/drover
base=${DATABASE_URL%/*}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for kind in drover.noop drover_bench.noop; do
    python3 - "$ITEMS" "$kind" > "$work/$kind.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"kind": sys.argv[2], "idempotency_key": f"c{i}"}))
PY
done

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

# One run: prints "wall_rate span_rate client_us db_us".
run() {
    local worker=$1 n=$2 db="drover_cost_$$_$1_$2" url kind before start end after client pids i
    psql "$base/postgres" -qc "CREATE DATABASE $db"
    url="$base/$db"
    DROVER_DATABASE_URL=$url $BIN migrate >/dev/null
    kind=drover.noop
    [ "$worker" = library ] && kind=drover_bench.noop
    DROVER_DATABASE_URL=$url $BIN enqueue --from-file "$work/$kind.jsonl" >/dev/null
    before=$(server_ticks "$pm")
    start=$(date +%s.%N)
    pids=()
    for i in $(seq 1 "$n"); do
        if [ "$worker" = cli ]; then
            DROVER_DATABASE_URL=$url DROVER_METRICS_ADDR=off $BIN worker --capacity "$CAPACITY" >/dev/null 2>&1 &
        else
            # The child worker runs until its stdin closes: a FIFO held open here.
            mkfifo "$work/in_$i"
            $BIN --database-url "$url" bench --child-schema drover --capacity "$CAPACITY" \
                <"$work/in_$i" >/dev/null 2>&1 &
            exec {hold}>"$work/in_$i"
            holds+=("$hold")
        fi
        pids+=($!)
    done
    # Nothing pending or claimed, through the two small partial indexes:
    # the wait is counted in the database's CPU, so it must cost next to
    # nothing (a count of the done items reads every one of them).
    until [ "$(psql "$url" -Atc "SELECT NOT (EXISTS (SELECT 1 FROM drover.items WHERE status = 'pending')
                                        OR EXISTS (SELECT 1 FROM drover.items WHERE status = 'claimed'))")" = t ]; do
        sleep 0.2
    done
    after=$(server_ticks "$pm")
    client=0
    for p in "${pids[@]}"; do client=$((client + $(ticks "$p"))); done
    local rates
    rates=$(psql "$url" -Atc "SELECT round(count(*) / (extract(epoch FROM max(updated_at)) - $start))
                                || ' ' || round(count(*) / extract(epoch FROM max(updated_at) - min(updated_at)))
                              FROM drover.items WHERE status = 'done'")
    if [ "$worker" = cli ]; then
        kill -TERM "${pids[@]}"
    else
        for h in "${holds[@]}"; do exec {h}>&-; done
        holds=()
        rm -f "$work"/in_*
    fi
    wait "${pids[@]}" || true
    psql "$base/postgres" -qc "DROP DATABASE $db WITH (FORCE)"
    python3 -c "
t=$TICK; items=$ITEMS
print('$rates', round($client/t*1e6/items), round(($after-$before)/t*1e6/items))"
}

holds=()
pm=$(postmaster)
results="$work/results"
: > "$results"
for r in $(seq 1 "$ROUNDS"); do
    for n in $PROCS; do
        for worker in $WORKERS; do
            line=$(run "$worker" "$n")
            echo "round $r, $worker, $n processes: wall items/s, span items/s, client µs, database µs: $line"
            echo "$worker $n $line" >> "$results"
        done
    done
done
echo
python3 - "$results" $WORKERS <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
workers = sys.argv[2:]
med = lambda xs: statistics.median(float(x) for x in xs)
print("| worker processes | worker | drain items/s (wall) | drain items/s (span) | client CPU µs/item | database CPU µs/item | total µs/item |")
print("|---|---|---|---|---|---|---|")
ns = sorted({int(r[1]) for r in rows})
for n in ns:
    for w in workers:
        rs = [r for r in rows if r[0] == w and int(r[1]) == n]
        if not rs:
            continue
        wall, span, cl, db = (med(r[i] for r in rs) for i in (2, 3, 4, 5))
        print(f"| {n} | {w} | {wall:,.0f} | {span:,.0f} | {cl:,.0f} | {db:,.0f} | {cl + db:,.0f} |")
    if "cli" in workers and "library" in workers:
        c = med(r[2] for r in rows if r[0] == "cli" and int(r[1]) == n)
        l = med(r[2] for r in rows if r[0] == "library" and int(r[1]) == n)
        print(f"| {n} | cli / library (wall) | {c / l:.2f} | | | | |")
PY
