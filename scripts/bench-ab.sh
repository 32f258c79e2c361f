#!/usr/bin/env bash
# A/B burst benchmark: the BENCH.md workload (`drover bench`) run with two
# release binaries alternately (before, after, before, after, ...), RUNS
# times each, on PostgreSQL and on SQLite, then the medians of each and the
# after/before ratio of each median.
#
# Alternating in the same minutes is what makes the comparison fair on a
# shared or loaded machine: a load spike hits both binaries alike. The
# ratios are the figures to quote; the absolute rates only on a quiet
# machine.
#
# Usage: scripts/bench-ab.sh BEFORE_BIN AFTER_BIN OUTDIR
#   each BIN a drover built with `drover bench` in it:
#   cargo build --release -p drover-cli --features bench
# Environment:
#   DATABASE_URL  PostgreSQL URL (default postgres://postgres@127.0.0.1:5432/test)
#   RUNS          runs per binary and backend (default 3)
#   BACKENDS      which backends, space separated (default "postgres sqlite")
#   BENCH_ARGS    extra arguments for `drover bench` (default none)
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 BEFORE_BIN AFTER_BIN OUTDIR" >&2
    exit 2
fi
before=$1
after=$2
out=$3
runs=${RUNS:-3}
pg_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
backends=${BACKENDS:-postgres sqlite}
for bin in "$before" "$after"; do
    [ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "jq is needed" >&2; exit 2; }
mkdir -p "$out"

url_of() {
    case $1 in
    postgres) echo "$pg_url" ;;
    sqlite) echo "sqlite:" ;;
    *) echo "unknown backend $1" >&2; exit 2 ;;
    esac
}

# One run: the JSON report in OUTDIR/<backend>-<label>-<n>.json.
run_one() {
    local backend=$1 label=$2 bin=$3 n=$4
    local file="$out/$backend-$label-$n.json"
    # shellcheck disable=SC2086
    "$bin" --database-url "$(url_of "$backend")" bench --json --quiet ${BENCH_ARGS:-} >"$file"
    printf '%-8s %-6s run %d: enqueue %8.0f/s  drain %8.0f/s  p50 %6.2f ms  p99 %6.2f ms\n' \
        "$backend" "$label" "$n" \
        "$(jq -r '.enqueue_rate // 0' "$file")" "$(jq -r '.drain_rate // 0' "$file")" \
        "$(jq -r '.lat_p50 // 0' "$file")" "$(jq -r '.lat_p99 // 0' "$file")"
}

# The median of one field over a label's runs.
median() {
    local backend=$1 label=$2 field=$3
    jq -s "[.[].$field // empty] | sort | if length == 0 then 0 else .[(length - 1) / 2 | floor] end" \
        "$out/$backend-$label"-*.json
}

for backend in $backends; do
    for n in $(seq 1 "$runs"); do
        run_one "$backend" before "$before" "$n"
        run_one "$backend" after "$after" "$n"
    done
done

echo
printf '%-8s %-7s %12s %12s %9s %9s\n' backend binary enqueue/s drain/s p50_ms p99_ms
for backend in $backends; do
    for label in before after; do
        printf '%-8s %-7s %12.0f %12.0f %9.2f %9.2f\n' "$backend" "$label" \
            "$(median "$backend" "$label" enqueue_rate)" "$(median "$backend" "$label" drain_rate)" \
            "$(median "$backend" "$label" lat_p50)" "$(median "$backend" "$label" lat_p99)"
    done
    # 0 where the before median is 0 (a phase skipped: --latency-jobs 0).
    ratio() {
        jq -n "$(median "$backend" before "$1") as \$b | if \$b == 0 then 0 else $(median "$backend" after "$1") / \$b end"
    }
    printf '%-8s %-7s %12.3f %12.3f %9.3f %9.3f\n' "$backend" after/b \
        "$(ratio enqueue_rate)" "$(ratio drain_rate)" "$(ratio lat_p50)" "$(ratio lat_p99)"
done | tee "$out/medians.txt"
