#!/usr/bin/env python3
"""Figures of t_hostile_member.sh, from the honest daemons' reports.

Usage:
  hostile_figures.py joined FRAC DIR HOSTILE-IDS...
      Exit 0 when every hostile virtual server (hex IDs) is in the ring:
      its true predecessor (among all IDs) names it first successor, its
      true successor names it predecessor, and at least the fraction FRAC
      of the honest daemons hold it in some table. DIR holds NODE.json
      (`cfsctl status --json`) of every honest daemon. Prints one line.
  hostile_figures.py place K DIR ACKED-KEYS HOSTILE-IDS...
      DIR also holds NODE.keys (`cfsctl keys`). For the acknowledged keys
      (first word of each line of ACKED-KEYS) prints
        first F among_k A lost L two_among_k B
      F: keys whose first successor is hostile; A: keys with a hostile
      virtual server among their K successors (K distinct addresses); L:
      keys no honest daemon stores (the acknowledged puts lost); B: keys
      with two or more hostile servers among their K. The lost
      keys follow, one per line, prefixed "lost ".
  hostile_figures.py lookups DIR LOOKUPS HOSTILE-IDS...
      LOOKUPS holds `cfsctl lookup` lines (KEY SUCC-ID ADDR RPCS TIMEOUTS).
      Prints "T W H": lookups, wrong answers (not the true successor among
      honest and hostile IDs), answers naming a hostile virtual server
      that is not the true successor. A failed lookup ("KEY error ...")
      counts as wrong.
"""
import bisect
import glob
import json
import os
import sys


def load(d):
    reports = []
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        with open(f) as fh:
            reports.append((f, json.load(fh)))
    return reports


def tables(st):
    """Every node ID named in a daemon's tables."""
    ids = set()
    for v in st["ring"]["vnodes"]:
        if v["pred"]:
            ids.add(int(v["pred"]["id"], 16))
        for s in v["succs"]:
            ids.add(int(s["id"], 16))
        for f in v["fingers"]:
            ids.add(int(f["node"]["id"], 16))
    return ids


def joined(frac, d, hostile):
    reports = load(d)
    honest = sorted(int(v["id"], 16) for _, st in reports for v in st["ring"]["vnodes"])
    allids = sorted(honest + hostile)
    n = len(allids)
    by_id = {int(v["id"], 16): v for _, st in reports for v in st["ring"]["vnodes"]}
    ok = True
    notes = []
    for h in hostile:
        i = allids.index(h)
        pred, succ = allids[(i - 1) % n], allids[(i + 1) % n]
        linked = True
        if pred in by_id:
            ss = by_id[pred]["succs"]
            linked = bool(ss) and int(ss[0]["id"], 16) == h
        if succ in by_id:
            p = by_id[succ]["pred"]
            linked = linked and p is not None and int(p["id"], 16) == h
        known = sum(1 for _, st in reports if h in tables(st))
        notes.append("%016x: linked %s, in %d of %d daemons' tables" % (h >> 192, linked, known, len(reports)))
        ok = ok and linked and known >= frac * len(reports)
    print("; ".join(notes))
    return 0 if ok else 1


def place(k, d, acked_file, hostile):
    reports = load(d)
    vnodes = []  # (id, address, hostile?)
    held = set()
    for f, st in reports:
        addr = st["ring"]["address"]
        for v in st["ring"]["vnodes"]:
            vnodes.append((int(v["id"], 16), addr, False))
        kf = f[:-5] + ".keys"
        if os.path.exists(kf):
            for line in open(kf):
                line = line.strip()
                if line and not line.startswith("#"):
                    held.add(int(line.split()[0], 16))
    for i, h in enumerate(hostile):
        vnodes.append((h, "hostile%d" % i, True))
    vnodes.sort()
    ids = [v[0] for v in vnodes]
    first = among = both = 0
    lost = []
    for line in open(acked_file):
        if not line.strip():
            continue
        key = int(line.split()[0], 16)
        i = bisect.bisect_left(ids, key)
        addrs, bad = [], 0
        for j in range(len(vnodes)):
            _, a, h = vnodes[(i + j) % len(vnodes)]
            if a in addrs:
                continue
            if j == 0 and h:
                first += 1
            addrs.append(a)
            bad += bool(h)
            if len(addrs) == k:
                break
        among += bad > 0
        both += bad > 1
        if key not in held:
            lost.append(key)
    print("first %d among_k %d lost %d two_among_k %d" % (first, among, len(lost), both))
    for key in lost:
        print("lost %064x" % key)
    return 0


def lookups(d, lk_file, hostile):
    reports = load(d)
    ids = sorted([int(v["id"], 16) for _, st in reports for v in st["ring"]["vnodes"]] + hostile)
    hs = set(hostile)
    t = w = h = 0
    for line in open(lk_file):
        f = line.split()
        if len(f) < 2:
            continue
        t += 1
        try:
            key, succ = int(f[0], 16), int(f[1], 16)
        except ValueError:  # "KEY error ...": the lookup failed, count it wrong
            w += 1
            continue
        truth = ids[bisect.bisect_left(ids, key) % len(ids)]
        if succ != truth:
            w += 1
            h += succ in hs
    print("%d %d %d" % (t, w, h))
    return 0


def main():
    if sys.argv[1] == "lookups":
        return lookups(sys.argv[2], sys.argv[3], [int(h, 16) for h in sys.argv[4:]])
    if sys.argv[1] == "joined":
        return joined(float(sys.argv[2]), sys.argv[3], [int(h, 16) for h in sys.argv[4:]])
    if sys.argv[1] == "place":
        return place(int(sys.argv[2]), sys.argv[3], sys.argv[4], [int(h, 16) for h in sys.argv[5:]])
    sys.exit("usage: hostile_figures.py joined FRAC DIR IDS... | place K DIR ACKED IDS...")


if __name__ == "__main__":
    sys.exit(main())
