#!/usr/bin/env bash
# The dashboard and the HTTP API at ten million items (issue 13, point 10).
#
# Loads ROWS items into a fresh PostgreSQL database in a few statements
# (INSERT ... SELECT generate_series), with a realistic mix: mostly done,
# some failed and cancelled, a pending backlog (the newest 2 %), a few
# claimed (the 1,000 before it); four lanes,
# eight kinds, three tenants; ids time-ordered like UUIDv7 over the last
# seven days. Then VACUUM ANALYZE, one settlement of the count rollup (the
# sweep's step, run here with the repository's own SQL), `drover serve`, and
# N requests to each page and route, one at a time and CONC at once, timed
# by curl. Prints a Markdown table of p50 and p95 in milliseconds.
#
# Usage: scripts/http-10m.sh [OUTDIR]
# Environment:
#   BIN        the drover binary (default target/release/drover)
#   ADMIN_URL  a superuser URL to create the database (default
#              postgres://postgres@127.0.0.1:5432/postgres)
#   DB         the database to (re)create (default drover_10m)
#   ROWS       items to load (default 10000000)
#   N          requests per route and mode (default 200)
#   CONC       concurrent requests in the concurrent mode (default 8)
#   ADDR       where the server listens (default 127.0.0.1:18080)
#   KEEP       1: keep the database afterwards (default: dropped)
#   LOADED     1: skip the load and reuse DB as it is
set -euo pipefail

out=${1:-target/http-10m}
bin=${BIN:-target/release/drover}
admin=${ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db=${DB:-drover_10m}
rows=${ROWS:-10000000}
n=${N:-200}
conc=${CONC:-8}
addr=${ADDR:-127.0.0.1:18080}
url="${admin%/*}/$db"
here=$(cd "$(dirname "$0")/.." && pwd)
sql="$here/crates/drover-store/sql/postgres"
[ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 2; }
command -v psql >/dev/null || { echo "psql is needed" >&2; exit 2; }
mkdir -p "$out"

q() { psql -X -q -v ON_ERROR_STOP=1 "$url" "$@"; }

if [ "${LOADED:-0}" != 1 ]; then
    psql -X -q -v ON_ERROR_STOP=1 "$admin" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
    "$bin" --database-url "$url" migrate >/dev/null
    start=$(date +%s)
    # In chunks of a million, so progress shows and no one statement holds
    # the whole load.
    chunk=1000000
    for ((lo = 1; lo <= rows; lo += chunk)); do
        hi=$((lo + chunk - 1))
        ((hi > rows)) && hi=$rows
        q -c "SET search_path = drover" -c "
INSERT INTO items (id, tenant_id, kind, lane, payload, priority, status, available_at, attempts,
                   max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at, last_error,
                   created_by, created_at, updated_at, updated_by)
SELECT (lpad(to_hex(ms), 12, '0') || '7' || substr(h, 1, 3) || '8' || substr(h, 4, 15))::uuid,
       ('00000000-0000-0000-0000-00000000000' || (g % 3 + 1))::uuid,
       (ARRAY['mail.send','mail.digest','report.build','report.export','image.resize',
              'webhook.deliver','sync.pull','billing.charge'])[g % 8 + 1],
       (ARRAY['default','mail','reports','bulk'])[(g / 7) % 4 + 1],
       jsonb_build_object('n', g, 'to', 'user' || (g % 1000) || '@example.com'),
       0, st, t, CASE WHEN st IN ('failed') THEN 5 WHEN st = 'done' THEN 1 ELSE 0 END, 5,
       CASE WHEN st = 'claimed' THEN 'worker-' || (g % 4) END,
       CASE WHEN st = 'claimed' THEN gen_random_uuid() END,
       CASE WHEN st IN ('pending') THEN 0 ELSE 1 END,
       CASE WHEN st = 'claimed' THEN now() + interval '10 minutes' END,
       CASE WHEN st = 'failed' THEN 'connection refused by upstream ' || (g % 97) END,
       '00000000-0000-0000-0000-000000000000', t,
       CASE WHEN st IN ('pending', 'claimed') THEN t ELSE t + interval '2 seconds' END,
       '00000000-0000-0000-0000-000000000000'
FROM (SELECT g, md5(g::text) AS h,
             -- seven days, oldest first, ending a minute ago
             (extract(epoch FROM now() - interval '7 days') * 1000)::bigint
                 + g * ((7 * 86400000 - 60000) / $rows) AS ms,
             now() - interval '7 days' + g * ((interval '7 days' - interval '1 minute') / $rows) AS t,
             -- The backlog is the newest 2 %, the claims the 1,000 just
             -- before it (a queue drains oldest first); failures and
             -- cancellations are spread over the whole week.
             CASE WHEN g > $rows - $rows / 50 THEN 'pending'
                  WHEN g > $rows - $rows / 50 - 1000 THEN 'claimed'
                  WHEN g % 100 = 7 THEN 'failed'
                  WHEN g % 200 = 11 THEN 'cancelled'
                  ELSE 'done' END AS st
      FROM generate_series($lo, $hi) AS g) AS s"
        echo "loaded $hi of $rows ($(($(date +%s) - start)) s)" >&2
    done
    q -c "VACUUM ANALYZE drover.items"
    echo "vacuumed and analyzed ($(($(date +%s) - start)) s)" >&2
    # One settlement of the count rollup, as the sweep runs it (the
    # dashboard's per-minute rollup too: its last 48 hours, THROUGHPUT_KEEP).
    t0=$(date +%s)
    q <<EOF
SET search_path = drover;
BEGIN;
$(cat "$sql/counts_settle_begin.sql")
\gset
$(sed -e "s/\\\$1::timestamptz/:'settled_to'::timestamptz/g" -e "s/\\\$2::timestamptz/:'upto'::timestamptz/g" \
      -e "s/\\\$3::timestamptz/(:'upto'::timestamptz - interval '48 hours')/g" "$sql/counts_settle.sql");
COMMIT;
EOF
    echo "count rollup settled ($(($(date +%s) - t0)) s)" >&2
    q -c "ANALYZE drover.item_counts"
fi

q -At -c "SELECT status, count(*) FROM drover.items GROUP BY 1 ORDER BY 1" > "$out/mix.txt"
token=$("$bin" --database-url "$url" token create --role admin --label http-10m 2>/dev/null)
"$bin" --database-url "$url" serve --addr "$addr" > "$out/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break
    sleep 0.2
done
base="http://$addr"
jar="$out/cookies"
curl -fs -o /dev/null -c "$jar" --data-urlencode "token=$token" "$base/ui/login"

# A cursor half-way down the listing: the item at depth ROWS/2, newest first.
deep=$(q -At -c "SELECT (extract(epoch FROM created_at) * 1000000)::bigint || '_' || replace(id::text, '-', '')
                 FROM drover.items ORDER BY id DESC OFFSET $((rows / 2)) LIMIT 1")

# A dead letter's page and a tenant of the load, for the item routes.
one_failed=$(q -At -c "SELECT tenant_id || '/' || id FROM drover.items WHERE status = 'failed' ORDER BY id DESC LIMIT 1")
failed_id=${one_failed#*/}
failed_tenant=${one_failed%/*}

# A tenant-scoped operator's session: its overview is the tenant's own.
token_t=$("$bin" --database-url "$url" token create --role operator --tenant "$failed_tenant" --label http-10m-tenant 2>/dev/null)
jar_t="$out/cookies-tenant"
curl -fs -o /dev/null -c "$jar_t" --data-urlencode "token=$token_t" "$base/ui/login"

routes=(
    "overview|/ui/"
    "overview of one tenant (a tenant's token)|tenant:/ui/"
    "item page (a dead letter)|/ui/items/$one_failed"
    "workers page|/ui/workers"
    "schedules page|/ui/schedules"
    "orchestrations page|/ui/orchestrations"
    "batches page|/ui/batches"
    "lanes page|/ui/lanes"
    "items, first page|/ui/items"
    "items, deep keyset page|/ui/items?cursor=$deep"
    "items of a lane and kind|/ui/items?lane=mail&kind=mail.send"
    "dead letter (failed)|/ui/dead"
    "GET /v1/lanes|/v1/lanes"
    "GET /v1/stats|/v1/stats"
    "GET /v1/items|/v1/items?limit=50"
    "GET /v1/items, deep cursor|/v1/items?limit=50&cursor=$deep"
    "GET /v1/items?status=failed|/v1/items?status=failed&limit=50"
    "GET /v1/items?status=pending|/v1/items?status=pending&limit=50"
    "GET /v1/items/{id} (a dead letter)|/v1/items/$failed_id?tenant=$failed_tenant"
    "GET /v1/workers|/v1/workers"
    "GET /v1/batches|/v1/batches"
    "GET /v1/limits|/v1/limits"
    "GET /v1/rates|/v1/rates"
    "GET /v1/closures|/v1/closures"
    "GET /v1/fairness|/v1/fairness"
    "GET /v1/orchestrations|/v1/orchestrations"
    "GET /v1/schedules|/v1/schedules"
)

one() {
    case $1 in
    tenant:*) curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -b "$jar_t" "$base${1#tenant:}" ;;
    /ui/*) curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -b "$jar" "$base$1" ;;
    *) curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $token" "$base$1" ;;
    esac
}
export -f one
export base jar jar_t token

pct() { # file, percentile -> milliseconds
    sort -n "$1" | awk -v p="$2" '{ a[NR] = $1 } END { i = int((NR * p + 99) / 100); if (i < 1) i = 1; printf "%.1f", a[i] * 1000 }'
}

{
    echo "| route | sequential p50 | sequential p95 | $conc at once p50 | $conc at once p95 |"
    echo "|---|---|---|---|---|"
} > "$out/table.md"
for r in "${routes[@]}"; do
    name=${r%%|*}
    path=${r#*|}
    one "$path" > /dev/null # warm
    for _ in $(seq "$n"); do one "$path"; done > "$out/seq.raw"
    seq "$n" | xargs -P "$conc" -I{} bash -c 'one "$0"' "$path" > "$out/conc.raw"
    bad=$(cat "$out/seq.raw" "$out/conc.raw" | awk '$1 != 200' | wc -l)
    if [ "$bad" -ne 0 ]; then
        echo "$name: $bad answers were not 200" >&2
        awk '$1 != 200' "$out/seq.raw" | head -3 >&2
        exit 1
    fi
    awk '{ print $2 }' "$out/seq.raw" > "$out/seq.t"
    awk '{ print $2 }' "$out/conc.raw" > "$out/conc.t"
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$(pct "$out/seq.t" 50)" "$(pct "$out/seq.t" 95)" \
        "$(pct "$out/conc.t" 50)" "$(pct "$out/conc.t" 95)" >> "$out/table.md"
    tail -1 "$out/table.md" >&2
done
echo "status mix:" >&2
cat "$out/mix.txt" >&2
cat "$out/table.md"
if [ "${KEEP:-0}" != 1 ]; then
    kill $server 2>/dev/null || true
    wait $server 2>/dev/null || true
    trap - EXIT
    psql -X -q "$admin" -c "DROP DATABASE IF EXISTS $db"
fi
