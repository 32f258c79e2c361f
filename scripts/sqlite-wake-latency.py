#!/usr/bin/env python3
"""Cross-process pickup on one SQLite file: `drover enqueue` commits an item,
a `drover worker` (another process, its poll at 10 minutes so only a wake-up
can reach it) claims it. Prints the p50, p90 and max of commit -> claim over
N items, one at a time, each enqueued once the one before is done (so each
is picked up from an idle worker), after a random pause of up to 20 ms:
without it each enqueue would commit at the same phase of the worker's
10 ms look (the loop is paced by the item it waits for, which started just
after a look), and every sample would show that one phase.

The claim instant is the item's `updated_at` while it is claimed (the claim
statement stamps it), the enqueue's is its `created_at` (stamped just before
the insert commits, so the figure slightly overstates the latency); both come
from the one clock of this machine. The item is `drover.sleep` for 200 ms so
the claimed row can be read before it completes.

    cargo build --release -p drover-cli
    python3 scripts/sqlite-wake-latency.py [--bin target/release/drover] [--items 50]
"""

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid


def env(url):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("DROVER_") and k not in ("DATABASE_URL", "RUST_LOG")}
    e["DROVER_DATABASE_URL"] = url
    e["DROVER_HEARTBEAT_CRON"] = "off"
    return e


def drover(bin_, url, *args):
    out = subprocess.run([bin_, *args], env=env(url), stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, check=True)
    return out.stdout


def wait(what, f, limit=60.0, every=0.002):
    start = time.monotonic()
    while True:
        v = f()
        if v:
            return v
        if time.monotonic() - start > limit:
            sys.exit(f"timed out after {limit} s waiting for {what}")
        time.sleep(every)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--items", type=int, default=50)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "wake.db")
        url = f"sqlite://{path}"
        drover(a.bin, url, "migrate")
        worker = subprocess.Popen(
            [a.bin, "worker", "--poll-interval", "10m", "--metrics-addr", "off"],
            env=env(url), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            # Read-only: a reader commits nothing, so it wakes no one.
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            wait("the worker's row",
                 lambda: db.execute("SELECT 1 FROM workers WHERE state = 'running'").fetchone())
            lat = []
            for n in range(a.items):
                time.sleep(random.uniform(0.0, 0.02))
                item = json.loads(drover(a.bin, url, "enqueue", "drover.sleep",
                                         "--payload", '{"ms": 200}', "--json"))
                key = uuid.UUID(item["id"]).bytes

                def claimed():
                    return db.execute(
                        "SELECT updated_at - created_at FROM items "
                        "WHERE id = ? AND status = 'claimed'", (key,)).fetchone()

                (us,) = wait(f"item {n} claimed (the poll is 10 min)", claimed)
                lat.append(us / 1000.0)
                wait(f"item {n} done", lambda: db.execute(
                    "SELECT 1 FROM items WHERE id = ? AND status = 'done'", (key,)).fetchone(),
                    every=0.01)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print(f"sqlite cross-process pickup (enqueue commit -> claim), {len(lat)} items: "
          f"p50 {statistics.median(lat):.1f} ms, p90 {p(0.9):.1f} ms, max {lat[-1]:.1f} ms")


if __name__ == "__main__":
    main()
