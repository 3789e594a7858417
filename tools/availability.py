#!/usr/bin/env python3
"""The availability table of docs/PUBLISHING.md ("Redundancy"), computed.

DHash++ equation 1: a block is readable while at least m of its n holders
are up, each up on its own with probability p0; copies:k is m = 1 of
n = k. Prints the Markdown table: the rate n/m (disk and upload bytes per
byte published) and the probability a block is unavailable at each p0,
summed over the failing cases (fewer than m up) so that small figures keep
their digits.

Usage: tools/availability.py [P0...]   (default: 0.5 0.7 0.9)
"""
import math
import sys

SCHEMES = [
    ("copies:3", 1, 3, ""),
    ("copies:6", 1, 6, " (default)"),
    ("rs:4/12", 4, 12, ""),
    ("rs:7/14", 7, 14, " (DHash++'s)"),
    ("rs:8/24", 8, 24, ""),
    ("rs:8/32", 8, 32, ""),
]


def unavailable(m, n, p0):
    """P(fewer than m of n holders up), each up with probability p0."""
    return sum(math.comb(n, i) * p0 ** i * (1 - p0) ** (n - i) for i in range(m))


def fmt(x):
    if x >= 0.01:
        return "%.3f" % x
    mant, exp = ("%.1e" % x).split("e")
    return "%se%d" % (mant, int(exp))


def main():
    p0s = [float(a) for a in sys.argv[1:]] or [0.5, 0.7, 0.9]
    for p in p0s:
        if not 0 < p < 1:
            sys.exit("availability.py: p0 must be between 0 and 1, not %g" % p)
    print("| redundancy | rate | " + " | ".join("unavailable, p0 = %g" % p for p in p0s) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in p0s) + " |")
    for name, m, n, note in SCHEMES:
        rate = "%g" % (n / m)
        print("| %s%s | %s | %s |" % (name, note, rate, " | ".join(fmt(unavailable(m, n, p)) for p in p0s)))


if __name__ == "__main__":
    main()
