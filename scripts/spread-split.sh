#!/usr/bin/env bash
# Fair spread at light load, across processes: two `drover worker`
# processes on one lane, a trickle of N `drover.noop` items enqueued by a
# third process (`drover enqueue`), each after the previous one finished;
# prints how many items each worker completed (its drover_completed_total).
# docs/design.md, "How do idle workers share a trickle?", quotes the split.
#
# Usage: scripts/spread-split.sh BIN FALLBACK [N]
#   BIN       a drover binary (target/release/drover)
#   FALLBACK  DROVER_SPREAD_FALLBACK for both workers (3ms; 0 turns the rule off)
#   N         items (default 200)
# Environment:
#   ADMIN_URL  a PostgreSQL login that may create databases
#              (default postgres://postgres@127.0.0.1:5432/postgres)
# Uses a throwaway database, dropped at the end, and ports 19461-19462.
set -euo pipefail
BIN=$1 FALLBACK=$2 N=${3:-200}
ADMIN_URL=${ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
DB=drover_spread_$$
psql "$ADMIN_URL" -qc "CREATE DATABASE $DB"
URL=${ADMIN_URL%/*}/$DB
cleanup() {
  kill -INT "${P1:-}" "${P2:-}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
}
trap cleanup EXIT
export DROVER_DATABASE_URL=$URL
"$BIN" migrate >/dev/null
export DROVER_SPREAD_FALLBACK=$FALLBACK DROVER_HEARTBEAT_INTERVAL=200ms \
  DROVER_HEARTBEAT_CRON=off DROVER_CAPACITY=8
DROVER_METRICS_ADDR=127.0.0.1:19461 "$BIN" worker 2>/dev/null & P1=$!
DROVER_METRICS_ADDR=127.0.0.1:19462 "$BIN" worker 2>/dev/null & P2=$!
q() { psql "$URL" -Atc "$1"; }
until [ "$(q "SELECT count(*) FROM drover.workers WHERE state = 'running'")" = 2 ]; do
  sleep 0.1
done
# Each worker reads its peers on every beat: five beats for both to see both.
sleep 1
for _ in $(seq 1 "$N"); do
  "$BIN" enqueue drover.noop >/dev/null
  until [ "$(q "SELECT count(*) FROM drover.items WHERE status <> 'done'")" = 0 ]; do
    sleep 0.005
  done
done
for port in 19461 19462; do
  curl -s "127.0.0.1:$port/metrics" | awk '/^drover_completed_total/ {s += $NF} END {printf "%d ", s}'
done
echo "(spread_fallback $FALLBACK, $N items)"
