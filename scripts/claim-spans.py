#!/usr/bin/env python3
"""The probe's claim p99 per span, from a soak's claims.csv.

Usage: scripts/claim-spans.py CLAIMS_CSV SPAN_S [START_S]

Counts every probe claim of each span (not a statistic of the 5 s rows),
spans starting at START_S (default 0): what issue targets such as "claim
p99 <= 5 ms in every 5-minute window" or "back under 5 ms within 60 s of
the release" are stated over.
"""
import csv
import math
import sys


def p99(values):
    values = sorted(values)
    rank = max(1, math.ceil(0.99 * len(values)))
    return values[rank - 1]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    path, span = sys.argv[1], float(sys.argv[2])
    start = float(sys.argv[3]) if len(sys.argv) == 4 else 0.0
    spans = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            t = float(row["t_s"])
            if t < start:
                continue
            spans.setdefault(int((t - start) // span), []).append(float(row["claim_ms"]))
    print("span_s | claims | p99 ms | max ms")
    for k in sorted(spans):
        v = spans[k]
        lo = start + k * span
        print(f"{lo:.0f}-{lo + span:.0f} | {len(v)} | {p99(v):.2f} | {max(v):.2f}")


if __name__ == "__main__":
    main()
