#!/usr/bin/env bash
# The machine's floor under a binding per-group limit's handover, with no
# drover running: what one round trip costs when the machine idled between
# calls, as it does between a group's runs (20 ms handlers). pgbench runs,
# against a table of its own, each client on its own row:
#
#   warm     SELECT 1, back to back (nothing idles)
#   select   SELECT 1, then 20 ms asleep
#   update   a one-row UPDATE committed durably, then 20 ms asleep
#   no-flush the same UPDATE with synchronous_commit off, then 20 ms asleep
#
# each with 1 and with CLIENTS clients (the bench's --busy-groups). The
# difference between update and no-flush is the commit's WAL flush after
# an idle spell; compare with `pg_test_fsync`, which flushes back to back.
# docs/flow-control.md ("The slot") quotes it against the handover's gap.
#
# Usage: scripts/idle-floor.sh          (needs pgbench and psql)
# Environment: DATABASE_URL (postgres://postgres@127.0.0.1:5432/test),
#              CLIENTS (10), SECS (5), SLEEP_MS (20)
set -euo pipefail
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
groups=${CLIENTS:-10}
secs=${SECS:-5}
sleep_ms=${SLEEP_MS:-20}
dir=$(mktemp -d /tmp/idle-floor.XXXXXX)
table="idle_floor_$$"
trap 'psql -q "$url" -c "DROP TABLE IF EXISTS $table" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
psql -q "$url" -c "CREATE TABLE $table (id int PRIMARY KEY, v int NOT NULL)" \
    -c "INSERT INTO $table SELECT g, 0 FROM generate_series(1, $groups) AS g" >/dev/null
printf 'SELECT 1;\n' >"$dir/warm.sql"
printf 'SELECT 1;\n\\sleep %s ms\n' "$sleep_ms" >"$dir/select.sql"
printf 'UPDATE %s SET v = v + 1 WHERE id = :client_id %% %s + 1;\n\\sleep %s ms\n' \
    "$table" "$groups" "$sleep_ms" >"$dir/update.sql"
printf 'SET synchronous_commit = off;\nUPDATE %s SET v = v + 1 WHERE id = :client_id %% %s + 1;\n\\sleep %s ms\n' \
    "$table" "$groups" "$sleep_ms" >"$dir/no-flush.sql"
# The mean latency pgbench reports for the script's SELECT or UPDATE line.
latency() {
    pgbench -n -M prepared -r -T "$secs" -c "$1" -j "$(($1 < 2 ? 1 : 2))" -f "$dir/$2.sql" "$url" \
        2>/dev/null | awk '$3 ~ /^(SELECT|UPDATE)$/ { print $1 }'
}
printf '%-9s %10s %10s\n' case "1 client" "$groups clients"
for case in warm select update no-flush; do
    printf '%-9s %8s ms %8s ms\n' "$case" "$(latency 1 "$case")" "$(latency "$groups" "$case")"
done
