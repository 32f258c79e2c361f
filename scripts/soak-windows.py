#!/usr/bin/env python3
"""Summarise a `drover bench --soak` CSV by windows of WINDOW seconds.

For each window: handled items/s (mean and worst 5 s sample), claim p99
(median and worst of the 5 s samples: the worst is an upper bound on the
window's own p99, since no window can have more than 1 % of its claims
above the largest 1 % cut of its parts), end-to-end p99 worst, ready max,
items dead tuples peak, items size first/last (MiB).

Usage: scripts/soak-windows.py SOAK.csv [WINDOW_SECONDS=300]
"""
import csv
import statistics
import sys


def main() -> None:
    path = sys.argv[1]
    window = float(sys.argv[2]) if len(sys.argv) > 2 else 300.0
    rows = list(csv.DictReader(open(path)))
    groups: dict[int, list[dict]] = {}
    for r in rows:
        groups.setdefault(int(float(r["t_s"]) // window), []).append(r)
    print("window_s | handled/s mean / worst | claim p99 median / worst ms | e2e p99 worst ms"
          " | ready max | items dead peak | items MiB first -> last")
    for k in sorted(groups):
        g = groups[k]
        f = lambda c: [float(r[c]) for r in g if r.get(c) not in (None, "")]
        thr, p99, e2e = f("throughput_per_s"), f("claim_p99_ms"), f("e2e_p99_ms")
        ready, dead, size = f("ready"), f("items_dead"), f("items_bytes")
        print(f"{k * window:.0f}-{(k + 1) * window:.0f} | {statistics.mean(thr):.0f} / {min(thr):.0f}"
              f" | {statistics.median(p99):.2f} / {max(p99):.2f} | {max(e2e):.1f}"
              f" | {max(ready):.0f} | {max(dead):.0f} | {size[0] / 2**20:.1f} -> {size[-1] / 2**20:.1f}")
    dead_all = [float(r["items_dead"]) for r in rows]
    print(f"all: {len(rows)} samples, items dead peak {max(dead_all):.0f}, "
          f"dead_total peak {max(float(r['dead_total']) for r in rows):.0f}")


if __name__ == "__main__":
    main()
