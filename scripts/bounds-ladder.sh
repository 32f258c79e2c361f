#!/usr/bin/env bash
# The raw bounds taken apart: what stands between drover's burst enqueue
# and drain and the plain SQL of `drover bench --bounds`
# (docs/performance.md, "The raw bounds").
#
# The raw rows go through a ladder of tables, each rung adding one of the
# things drover's `items` carries, and the same two statements of the raw
# bound run on each: a bulk INSERT of 1,000 rows per statement (one
# session), then a drain of 2 sessions claiming CLAIM rows with `FOR
# UPDATE SKIP LOCKED` and marking them done (two transactions per round).
# Rungs, each with everything above it:
#
#   raw       the columns of items, a primary key and the claim index
#             (what `drover bench --bounds` measures)
#   indexes   every index items has (13; most partial and empty here)
#   checks    items' CHECK constraints (5 since migration 0054, 9 before)
#   triggers  items' own triggers: the wake-up's statement trigger with its
#             transition table and claim floors (sending nothing, as under
#             the store's own enqueue), the insert and status triggers
#             (their WHEN false for these rows)
#   rls       row-level security enabled and forced with items' policies;
#             every transaction switches role (runtime with its tenant to
#             enqueue, system to claim and complete), as drover's do
#   items     drover's own `items` (partitioned, everything real), the same
#             statements
#   items/N   the same, claiming N (drover's worker claims what its
#             capacity and prefetch ask for, not 500)
#   drover    `drover bench` in the same database: the library's enqueue
#             and drain of the same number of rows
#
# Usage: scripts/bounds-ladder.sh DROVER_BIN [OUT]
#   DROVER_BIN a drover built with the bench:
#   cargo build --release -p drover-cli --features bench
# Environment:
#   PG_BASE   server URL without a database (default postgres://postgres@127.0.0.1:5432)
#   ROWS      rows per rung (default 100000)
#   CLAIM     rows per raw claim (default 500)
#   SMALL     the smaller claim of the items/N rung (default 100)
#   RUNS      times the whole ladder runs (default 1)
# Prints one line per rung and run: rung, insert rows/s, drain rows/s;
# then the medians and each rung's rate over the raw rung's.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 DROVER_BIN [OUT]" >&2
    exit 2
fi
bin=$1
out=${2:-$(mktemp -d)}
base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
rows=${ROWS:-100000}
claim=${CLAIM:-500}
small=${SMALL:-100}
runs=${RUNS:-1}
db=drover_ladder
mkdir -p "$out"
[ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 2; }
command -v pgbench >/dev/null || { echo "pgbench is needed" >&2; exit 2; }

psql_db() { psql -X -q -v ON_ERROR_STOP=1 "$base/$db" "$@"; }

psql -X -q "$base/postgres" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
"$bin" --database-url "$base/$db" migrate >/dev/null
rt=$(psql_db -Atc "SELECT runtime_role FROM drover.drover_roles()")
sys=$(psql_db -Atc "SELECT system_role FROM drover.drover_roles()")
tenant=00000000-0000-0000-0000-0000000000a1

# The ids and payloads every rung inserts: UUIDv7-shaped (time first, as
# drover's), so each rung's primary key grows at its right edge as items'.
psql_db <<SQL
CREATE SCHEMA ladder;
GRANT USAGE ON SCHEMA ladder TO $rt, $sys;
CREATE TABLE ladder.src (n int PRIMARY KEY, id uuid NOT NULL, payload jsonb NOT NULL);
INSERT INTO ladder.src
SELECT n, encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
              placing substring(int8send(1700000000000 + n) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid,
       jsonb_build_object('n', n)
FROM generate_series(1, $rows) AS n;
GRANT SELECT ON ladder.src TO $rt, $sys;
CREATE SEQUENCE ladder.batch;
GRANT USAGE ON SEQUENCE ladder.batch TO $rt, $sys;
SQL

# One rung's table: $1 name, $2 LIKE options, then what to add.
make_table() {
    local t=ladder.$1 like=$2
    shift 2
    psql_db -c "CREATE TABLE $t (LIKE drover.items $like) WITH (fillfactor = 80)"
    for what in "$@"; do
        case $what in
        raw)
            psql_db -c "ALTER TABLE $t ADD PRIMARY KEY (id)" \
                -c "CREATE INDEX ON $t (lane, priority, available_at) WHERE status = 'pending'"
            ;;
        triggers)
            # items' own triggers, as they are in the installation just
            # migrated (their functions are drover's).
            psql_db -Atc "SELECT pg_get_triggerdef(oid) FROM pg_trigger
                           WHERE tgrelid = 'drover.items'::regclass AND NOT tgisinternal" |
                sed "s/ ON drover\.items / ON $t /" | while read -r def; do
                psql_db -c "$def"
            done
            ;;
        rls)
            psql_db -c "ALTER TABLE $t ENABLE ROW LEVEL SECURITY" \
                -c "ALTER TABLE $t FORCE ROW LEVEL SECURITY" \
                -c "CREATE POLICY runtime ON $t TO $rt
                      USING (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid)
                      WITH CHECK (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid)" \
                -c "CREATE POLICY system ON $t TO $sys USING (true) WITH CHECK (true)"
            ;;
        esac
    done
    psql_db -c "GRANT SELECT, INSERT, UPDATE ON $t TO $rt, $sys"
}

base_like="INCLUDING DEFAULTS"
make_table raw "$base_like" raw
make_table indexes "$base_like INCLUDING INDEXES"
make_table checks "$base_like INCLUDING INDEXES INCLUDING CONSTRAINTS"
make_table triggers "$base_like INCLUDING INDEXES INCLUDING CONSTRAINTS" triggers
make_table rls "$base_like INCLUDING INDEXES INCLUDING CONSTRAINTS" triggers rls

# The statements, as pgbench scripts ($T the table; role switching only
# where the rung has row-level security). Each \gset'd claim hands its
# ids to the next statement as one parameter.
write_scripts() {
    local t=$1 n=$2 roles=$3
    local begin_rt="" begin_sys="" end=""
    if [ "$roles" = yes ]; then
        begin_rt="BEGIN;
SET LOCAL ROLE $rt;
SELECT set_config('drover.tenant_id', '$tenant', true);"
        begin_sys="BEGIN;
SET LOCAL ROLE $sys;"
        end="COMMIT;"
    else
        begin_rt="BEGIN;"
        begin_sys="BEGIN;"
        end="COMMIT;"
    fi
    cat >"$out/insert.sql" <<SQL
SELECT nextval('ladder.batch') - 1 AS k \gset
$begin_rt
SELECT set_config('drover.wake_after_commit', 'on', true);
INSERT INTO $t (
    id, tenant_id, kind, lane, payload, priority, status, available_at,
    attempts, max_attempts, claim_seq, created_by, created_at, updated_at, updated_by
)
SELECT s.id, '$tenant', 'bench', 'default', s.payload, 0, 'pending', now(),
       0, 5, 0, '$tenant', now(), now(), '$tenant'
FROM ladder.src s WHERE s.n > :k * 1000 AND s.n <= (:k + 1) * 1000;
$end
SQL
    cat >"$out/drain.sql" <<SQL
$begin_sys
WITH c AS (
    UPDATE $t
    SET status = 'claimed', claimed_by = 'ladder', claim_token = gen_random_uuid(),
        lease_expires_at = now() + interval '30 seconds', attempts = attempts + 1,
        claim_seq = claim_seq + 1, updated_at = now()
    WHERE id IN (
        SELECT id FROM $t
        WHERE status = 'pending' AND lane = 'default' AND available_at <= now()
        ORDER BY priority, available_at
        LIMIT $n
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id
)
SELECT coalesce(array_agg(id), '{}')::text AS ids FROM c \gset
$end
$begin_sys
UPDATE $t
SET status = 'done', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
    updated_at = now()
WHERE id = ANY(:ids::uuid[]);
$end
SQL
}

# Runs one rung: prints "insert_rate drain_rate".
rung() {
    local t=$1 n=$2 roles=$3
    write_scripts "$t" "$n" "$roles"
    psql_db -c "ALTER SEQUENCE ladder.batch RESTART WITH 1" -c "TRUNCATE $t" -c "CHECKPOINT"
    local batches=$(( (rows + 999) / 1000 ))
    local ins drn left per
    ins=$(pgbench -n -M prepared -c 1 -t "$batches" -f "$out/insert.sql" "$base/$db" 2>&1 |
        sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
    per=$(( (rows + 2 * n - 1) / (2 * n) ))
    drn=$(pgbench -n -M prepared -c 2 -j 2 -t "$per" -f "$out/drain.sql" "$base/$db" 2>&1 |
        sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
    left=$(psql_db -Atc "SELECT count(*) FROM $t WHERE status <> 'done'")
    if [ "$left" != 0 ]; then
        echo "rung $t: $left rows not done after the drain" >&2
        exit 1
    fi
    echo "$ins $drn" | awk -v n="$n" '{ printf "%.0f %.0f\n", $1 * 1000, $2 * n }'
}

results=$out/ladder.tsv
: >"$results"
for run in $(seq 1 "$runs"); do
    for r in raw indexes checks triggers rls; do
        roles=no
        [ "$r" = rls ] && roles=yes
        read -r i d < <(rung "ladder.$r" "$claim" "$roles")
        printf '%s\t%s\t%s\t%s\n' "$run" "$r" "$i" "$d" | tee -a "$results"
    done
    read -r i d < <(rung drover.items "$claim" yes)
    printf '%s\t%s\t%s\t%s\n' "$run" items "$i" "$d" | tee -a "$results"
    read -r i d < <(rung drover.items "$small" yes)
    printf '%s\t%s\t%s\t%s\n' "$run" "items/$small" "$i" "$d" | tee -a "$results"
    psql_db -c "TRUNCATE drover.items"
    "$bin" --database-url "$base/$db" bench --jobs "$rows" --latency-jobs 0 --json \
        >"$out/drover-$run.json" 2>"$out/drover-$run.err"
    i=$(jq -r '.enqueue_rate | floor' "$out/drover-$run.json")
    d=$(jq -r '.drain_rate | floor' "$out/drover-$run.json")
    printf '%s\t%s\t%s\t%s\n' "$run" drover "$i" "$d" | tee -a "$results"
done

echo
echo "medians over $runs run(s); ratio = rung / raw"
awk -F'\t' '
{ k = $2; if (!(k in seen)) { seen[k] = 1; order[++m] = k }
  ins[k, ++ni[k]] = $3; drn[k, ++nd[k]] = $4 }
function med(a, k, n,   i, j, t, v) {
    for (i = 1; i <= n; i++) v[i] = a[k, i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
END {
    ri = med(ins, "raw", ni["raw"]); rd = med(drn, "raw", nd["raw"])
    printf "%-12s %12s %8s %12s %8s\n", "rung", "insert/s", "ratio", "drain/s", "ratio"
    for (x = 1; x <= m; x++) {
        k = order[x]; i = med(ins, k, ni[k]); d = med(drn, k, nd[k])
        printf "%-12s %12.0f %8.3f %12.0f %8.3f\n", k, i, i / ri, d, d / rd
    }
}' "$results"
