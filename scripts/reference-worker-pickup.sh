#!/usr/bin/env bash
# The Python reference worker's pickup at light load: from an enqueue's
# acknowledgement (`POST /v1/items` answered) to its handler's start, one
# `drover.noop` item every 30 ms, through `drover serve`
# (docs/performance.md, "Reference workers over HTTP").
#
#   scripts/reference-worker-pickup.sh                 # PostgreSQL, 3 rounds of 200 items
#   BACKEND=sqlite VARIANTS=";DROVER_PREFETCH=0" scripts/reference-worker-pickup.sh
#
# Each round, for each variant (';'-separated NAME=VALUE settings of the
# worker's environment, empty: its defaults), a fresh worker on lane
# `pickRvV` (capacity CAPACITY) and ITEMS items enqueued one at a time.
# The handler is timed by a wrapper that imports worker.py and replaces
# its `handle`; both times are this machine's wall clock. Needs what
# scripts/reference-worker-speed.sh needs.
set -euo pipefail
cd "$(dirname "$0")/.."

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
BACKEND=${BACKEND:-postgres}
ITEMS=${ITEMS:-200}
ROUNDS=${ROUNDS:-3}
CAPACITY=${CAPACITY:-20}
BIN=${DROVER_BIN:-${CARGO_TARGET_DIR:-target}/release/drover}
PY=$PWD/crates/drover-http/conformance/python/.venv/bin/python
IFS=';' read -ra variants <<<"${VARIANTS:-}"
[ ${#variants[@]} -gt 0 ] || variants=("")
base=${DATABASE_URL%/*}
work=$(mktemp -d)
db="drover_refpickup_$$"
serve_pid=""
cleanup() {
    [ -n "$serve_pid" ] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
    [ "$BACKEND" = sqlite ] || psql "$base/postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release -p drover-cli" >&2; exit 1; }
[ -x "$PY" ] || { echo "no $PY: see docs/http.md, Reference workers" >&2; exit 1; }

(cd examples/worker-python && rm -rf generated && PATH="$PWD/../../crates/drover-http/conformance/python/.venv/bin:$PATH" \
    openapi-python-client generate --path ../../crates/drover-http/openapi.json --output-path generated >/dev/null)

if [ "$BACKEND" = sqlite ]; then
    url="sqlite://$work/pickup.db"
else
    psql "$base/postgres" -qc "CREATE DATABASE $db"
    url="$base/$db"
fi
export DROVER_DATABASE_URL=$url
$BIN migrate >/dev/null
worker_token=$($BIN token create --role worker --work '*:drover.*' 2>/dev/null)
enqueue_token=$($BIN token create --role operator --enqueue 'drover.*' 2>/dev/null)
$BIN serve --addr 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
until grep -q "listening on" "$work/serve.out"; do sleep 0.1; done
addr=$(sed -n 's/^listening on //p' "$work/serve.out" | head -1)

cat >"$work/timed.py" <<'PY'
import asyncio, atexit, json, os, sys, time
import worker
starts = {}
inner = worker.handle
async def timed(kind, payload):
    if isinstance(payload, dict) and "i" in payload:
        starts[payload["i"]] = time.time()
    await inner(kind, payload)
worker.handle = timed
atexit.register(lambda: json.dump(starts, open(os.environ["STARTS"], "w")))
asyncio.run(worker.amain())
PY

cat >"$work/enqueue.py" <<'PY'
import http.client, json, sys, time
from urllib.parse import urlsplit
url, token, lane, n, out = urlsplit(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
conn = http.client.HTTPConnection(url.hostname, url.port)
acked = {}
for i in range(n):
    conn.request("POST", "/v1/items", body=json.dumps({"kind": "drover.noop", "lane": lane, "payload": {"i": i}}),
                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    assert r.status in (200, 201), r.status
    acked[i] = time.time()
    time.sleep(0.03)
json.dump(acked, open(out, "w"))
PY

for r in $(seq 1 "$ROUNDS"); do
    for i in "${!variants[@]}"; do
        lane="pick${r}v$i"
        # shellcheck disable=SC2086 # a variant is a list of NAME=VALUE words
        (cd examples/worker-python && exec env DROVER_URL="$addr" DROVER_TOKEN="$worker_token" DROVER_LANES="$lane" \
            DROVER_CAPACITY="$CAPACITY" STARTS="$work/starts.json" PYTHONPATH="generated:." ${variants[$i]} \
            "$PY" "$work/timed.py" >/dev/null) &
        pid=$!
        sleep 2  # its claims are out, long-polling
        python3 "$work/enqueue.py" "$addr" "$enqueue_token" "$lane" "$ITEMS" "$work/acked.json"
        sleep 1
        kill -TERM "$pid"
        wait "$pid"
        python3 - "$work/acked.json" "$work/starts.json" "$lane" "${variants[$i]:-defaults}" <<'PY'
import json, sys
acked, starts = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
d = sorted((starts[k] - acked[k]) * 1000 for k in acked if k in starts)
assert len(d) == len(acked), f"{len(acked) - len(d)} items never started"
print(f"{sys.argv[3]:<9} enqueue acknowledged → handler start: p50 {d[len(d) // 2]:.2f} ms, "
      f"p90 {d[int(len(d) * 0.9)]:.2f} ms ({len(d)} items; {sys.argv[4]})")
PY
    done
done
