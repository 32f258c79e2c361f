#!/usr/bin/env bash
# A chain of dependent items end to end (docs/dependencies.md): CHAIN
# `drover.noop` items, each enqueued to wait for the one before it (ids
# chosen by the caller, one JSON Lines file), drained by one `drover
# worker` on PostgreSQL. Each start waits for its dependency's commit and
# a wake-up, so the rate is the cost of that hand-over. The rate is the
# items over the span from the first completion to the last (the rows'
# updated_at, the database's clock), so process start-up is not counted.
#
#   scripts/chain-speed.sh                  # 3 rounds of a chain of 1,000
#   CHAIN=5000 ROUNDS=1 scripts/chain-speed.sh
#
# Needs the release build (cargo build --release -p drover-cli).
set -euo pipefail
cd "$(dirname "$0")/.."

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
CHAIN=${CHAIN:-1000}
ROUNDS=${ROUNDS:-3}
BIN=${DROVER_BIN:-${CARGO_TARGET_DIR:-target}/release/drover}
base=${DATABASE_URL%/*}
work=$(mktemp -d)
db="drover_chain_$$"
worker=""
cleanup() {
    [ -n "$worker" ] && kill -TERM "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
    psql "$base/postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release -p drover-cli" >&2; exit 1; }

psql "$base/postgres" -qc "CREATE DATABASE $db"
url="$base/$db"
export DROVER_DATABASE_URL=$url
$BIN migrate >/dev/null
for r in $(seq 1 "$ROUNDS"); do
    python3 - "$CHAIN" "chain$r" >"$work/chain.jsonl" <<'PY'
import json, sys, uuid
n, lane = int(sys.argv[1]), sys.argv[2]
prev = None
for i in range(n):
    me = str(uuid.uuid4())
    line = {"id": me, "kind": "drover.noop", "lane": lane, "payload": {"n": i}}
    if prev:
        line["after"] = [prev]
    print(json.dumps(line))
    prev = me
PY
    # The whole chain is written before a worker serves its lane, so the
    # rate is the hand-over's, not the enqueue's.
    $BIN enqueue --from-file "$work/chain.jsonl" >/dev/null
    DROVER_METRICS_ADDR=off DROVER_HEARTBEAT_CRON=off $BIN worker --lanes "chain$r" --capacity 20 2>/dev/null &
    worker=$!
    # Nothing pending (waiting dependants are pending at the waiting mark)
    # or claimed on the lane, through the two small partial indexes.
    until [ "$(psql "$url" -Atc "SELECT NOT (EXISTS (SELECT 1 FROM drover.items WHERE lane = 'chain$r' AND status = 'pending')
                                        OR EXISTS (SELECT 1 FROM drover.items WHERE status = 'claimed' AND lane = 'chain$r'))")" = t ]; do
        kill -0 "$worker" 2>/dev/null || { echo "the worker exited early" >&2; exit 1; }
        sleep 0.2
    done
    psql "$url" -Atc "SELECT count(*) FILTER (WHERE status = 'done'), extract(epoch FROM max(updated_at) - min(updated_at))
                      FROM drover.items WHERE lane = 'chain$r'" | python3 -c "
import sys
done, span = sys.stdin.read().strip().split('|')
done, span = int(done), float(span)
print(f'chain{$r}: {done} of $CHAIN done, {done / span:,.0f} items/s (first to last completion, {span:.2f} s)')"
    kill -TERM "$worker"; wait "$worker" 2>/dev/null || true
    worker=""
done
