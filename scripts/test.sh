#!/usr/bin/env bash
# The README's test command and CI's (.ci/run execs it): on a fresh machine
# it installs or starts what the tests need, checks the floors and the
# deployment files, then runs the whole suite with per-test times and a
# per-file summary, so the slow test files are visible.
#
# Arguments are passed to `cargo nextest run` (e.g. `scripts/test.sh -E
# 'binary_id(drover-cli::integration) & test(/^cli::/)'` for one test file,
# crates/drover-cli/tests/integration/cli.rs); the doc tests run only
# without them.
set -euo pipefail
cd "$(dirname "$0")/.."

# apt-get as root, through sudo otherwise (a developer's machine).
apt_install() {
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@"
}

# promtool (prometheus) for the alert rules' unit tests, pgbouncer for the
# end-to-end test through a transaction pooler, docker-compose to validate
# deploy/compose.yaml (its `config` needs no engine). Debian packages.
need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
[ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1 || need+=(pgbouncer)
# Debian's chromium and npm for the dashboard's browser test
# (crates/drover-cli/tests/integration/browser.rs).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(npm)
# libfaketime (Debian's faketime) for the rate scenario's workers with
# skewed clocks (crates/drover-faults/tests/integration/rates.rs).
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || need+=(faketime)
if [ ${#need[@]} -gt 0 ]; then
    apt_install "${need[@]}"
fi

if ! pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1; then
    if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
        pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
        for _ in $(seq 1 30); do
            pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1 && break
            sleep 1
        done
    fi
fi
pg_isready -h 127.0.0.1 -p 5432

# The local server without fsync while the suite runs, put back at exit.
# Every test installation is some 200 relations created and dropped, and a
# transaction that drops relations flushes the WAL at commit whatever
# synchronous_commit says; on 2 cores those flushes were about a third of
# the PostgreSQL contract suite's time (174 cases: 89.5 s with fsync, 64.0 s
# without). No test depends on fsync: the tests that crash or restart a
# server run throwaway clusters of their own, which run without it too
# (drover::testing::cluster), and a server process that dies leaves its
# writes in the OS's page cache. Only for the default server (not when
# DATABASE_URL names one); DROVER_TEST_FSYNC=on keeps the server's setting.
restore_fsync=""
if [ -z "${DATABASE_URL:-}" ] && [ "${DROVER_TEST_FSYNC:-off}" = off ]; then
    admin=(psql -X -q -At "postgres://postgres@127.0.0.1:5432/postgres")
    if [ "$("${admin[@]}" -c 'SHOW fsync' 2>/dev/null)" = on ]; then
        # RESET when fsync came from postgresql.conf (the usual case), back
        # to on when an earlier ALTER SYSTEM had set it.
        if "${admin[@]}" -c "SELECT sourcefile FROM pg_settings WHERE name = 'fsync'" \
            | grep -q 'postgresql.auto.conf$'; then
            restore_fsync="ALTER SYSTEM SET fsync = on"
        else
            restore_fsync="ALTER SYSTEM RESET fsync"
        fi
        if "${admin[@]}" -c 'ALTER SYSTEM SET fsync = off' -c 'SELECT pg_reload_conf()' >/dev/null; then
            trap '"${admin[@]}" -c "$restore_fsync" -c "SELECT pg_reload_conf()" >/dev/null || true' EXIT
            echo "PostgreSQL: fsync off for the suite (DROVER_TEST_FSYNC=on keeps it)"
        fi
    fi
fi

# The floors (docs/architecture.md): no module of crates/drover imports one
# above it, no import circle anywhere in the workspace, no source file over
# 800 lines or function over 120. Each prints what it finds and fails if
# there is any.
bash scripts/check-layers.sh
python3 scripts/check-circles.py
python3 scripts/check-sizes.py

# The deployment files (also checked from the suite: crates/drover-cli/tests/integration/deploy.rs).
(cd deploy/prometheus && promtool check rules drover-rules.yaml && promtool test rules drover-rules.test.yaml)
docker-compose -f deploy/compose.yaml --profile observability config -q

# schemathesis (PyPI) for the HTTP API's schema test
# (crates/drover-cli/tests/integration/serve_cli.rs), in a virtualenv of the repo's own.
if [ ! -x .ci/venv/bin/schemathesis ]; then
    if ! python3 -m venv .ci/venv 2>/dev/null; then
        apt_install python3-venv
        python3 -m venv .ci/venv
    fi
    .ci/venv/bin/pip install -q schemathesis
fi

# Playwright from npm, driving the chromium above: no browser download.
(cd crates/drover-http/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund)

# The HTTP conformance suite's client generators and type checkers
# (crates/drover-cli/tests/integration/conformance.rs), pinned, in folders of the
# repo's own: openapi-python-client and mypy from PyPI in a virtualenv,
# openapi-typescript, openapi-fetch, @hey-api/openapi-ts and typescript
# from npm.
conformance=crates/drover-http/conformance
if [ ! -x "$conformance/python/.venv/bin/openapi-python-client" ]; then
    python3 -m venv "$conformance/python/.venv"
    "$conformance/python/.venv/bin/pip" install -q -r "$conformance/python/requirements.txt"
fi
(cd "$conformance/ts" && npm install --no-audit --no-fund)
# The TypeScript reference worker's own (crates/drover-cli/tests/integration/reference_workers.rs;
# its Python sibling uses the conformance venv above).
(cd examples/worker-ts && npm install --no-audit --no-fund)

# cargo-nextest runs every test in its own process, binaries side by side,
# and prints each test's time; .config/nextest.toml says which tests must
# run alone. The project's prebuilt release if it is missing (building it
# from source takes minutes), `cargo install` if the download fails.
if ! cargo nextest --version >/dev/null 2>&1; then
    bin="${CARGO_HOME:-$HOME/.cargo}/bin"
    mkdir -p "$bin"
    curl -LsSf https://get.nexte.st/latest/linux | tar zxf - -C "$bin" \
        || cargo install --locked cargo-nextest
fi

start=$(date +%s)
status=0
cargo nextest run --workspace --no-fail-fast "$@" || status=$?
# nextest runs no doc tests; the README's examples and the API docs'
# examples are compiled and run here.
if [ $# -eq 0 ]; then
    cargo test --workspace --doc || status=$?
fi

# Per-file time: the sum of its tests' times (they may overlap with other
# files'), from the JUnit report nextest wrote (under the workspace's
# target/nextest whatever CARGO_TARGET_DIR says: nextest's store directory).
# A crate's integration tests are one binary (`<crate>::integration`) with a
# module per file, so its tests are grouped by their name's first segment
# (`kill9::...` is tests/integration/kill9.rs); any other binary (unit
# tests, examples/shop's one file) is one row.
python3 - target/nextest/default/junit.xml <<'PY' || true
import collections, sys, xml.etree.ElementTree as ET
times, counts = collections.Counter(), collections.Counter()
for suite in ET.parse(sys.argv[1]).getroot().iter("testsuite"):
    binary = suite.get("name")
    for case in suite.iter("testcase"):
        row = binary
        if binary.endswith("::integration") and "::" in case.get("name", ""):
            row = f"{binary} {case.get('name').split('::', 1)[0]}"
        times[row] += float(case.get("time") or 0)
        counts[row] += 1
print("\nper test file (sum of its tests' times):")
for row, t in sorted(times.items(), key=lambda kv: kv[1], reverse=True):
    print(f"{t:9.1f} s  {counts[row]:4d} tests  {row}")
PY
echo "suite: $(( $(date +%s) - start )) s (build included)"
exit "$status"
