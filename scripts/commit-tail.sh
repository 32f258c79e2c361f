#!/usr/bin/env bash
# The machine's own commit tail with no drover running: pgbench -N at a
# fixed rate on a throwaway stock-settings cluster, every transaction
# logged, cut into 5 s windows; prints the median window p50, the soak's
# stall line (10x it) and every window whose p99 passes it. Compare with
# `drover bench --soak`'s stalls.txt (docs/performance.md, "Stalls").
#
# Usage: scripts/commit-tail.sh        (needs initdb, pg_ctl, pgbench, python3; run as root)
# Environment: RATE (400 tx/s), CLIENTS (16), SECS (180), PORT (5441)
set -euo pipefail
dir=$(mktemp -d /tmp/commit-tail.XXXXXX)
port=${PORT:-5441}
chown postgres "$dir"
su postgres -c "initdb -D $dir/data -A trust -U postgres >/dev/null"
su postgres -c "pg_ctl -D $dir/data -o '-p $port -k $dir' -l $dir/log start >/dev/null"
trap 'su postgres -c "pg_ctl -D $dir/data stop -m fast >/dev/null" || true; rm -rf "$dir"' EXIT
url="postgres://postgres@127.0.0.1:$port/postgres"
pgbench -i -s 10 -q "$url" >/dev/null 2>&1
(cd "$dir" && pgbench -N -c "${CLIENTS:-16}" -j 2 -R "${RATE:-400}" -T "${SECS:-180}" \
    -l --log-prefix="$dir/lat" "$url" | tail -4)
cat "$dir"/lat.* | python3 -c '
import collections, math, sys
w = collections.defaultdict(list)
for line in sys.stdin:
    f = line.split()
    # client transaction time_us script epoch_s epoch_us [lag]
    w[int((int(f[4]) + int(f[5]) / 1e6) // 5)].append(int(f[2]) / 1000.0)
keys = sorted(w)[1:-1]  # the first and last windows are partial
def pct(v, q):
    v = sorted(v)
    return v[min(len(v), max(1, math.ceil(q * len(v)))) - 1]
p50s = sorted(pct(w[k], 0.5) for k in keys)
line = 10 * p50s[len(p50s) // 2]
every = [x for k in keys for x in w[k]]
over = [(k - keys[0], pct(w[k], 0.99), max(w[k])) for k in keys if pct(w[k], 0.99) > line]
print(f"windows {len(keys)}, transactions {len(every)}, median window p50 {line / 10:.2f} ms, "
      f"line {line:.1f} ms, p99 {pct(every, 0.99):.1f} ms, max {max(every):.1f} ms")
print(f"windows over the line: {len(over)}")
for i, p99, mx in over:
    print(f"  window {i}: p99 {p99:.1f} ms, max {mx:.1f} ms")
'
