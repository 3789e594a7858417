#!/usr/bin/env python3
"""Check a ring from the `cfsctl status --json` reports of all its daemons.

Usage: ring_check.py [--successors=R] STATUS.json...   (one file per live daemon;
R is the daemons' successor list length, 16 unless given)

The ring is correct when every virtual server's predecessor and whole
successor list (up to min(R, N-1) entries) are the true ones, computed from
the sorted list of all virtual-server IDs. Prints one summary line; exit 0
when correct, 1 otherwise. With --ids, prints the sorted IDs instead.
"""
import json
import sys


def main():
    args = sys.argv[1:]
    want_ids = "--ids" in args
    r = 16  # the successor list length the daemons run with
    for a in args:
        if a.startswith("--successors="):
            r = int(a.split("=", 1)[1])
    files = [a for a in args if not a.startswith("--")]
    vnodes = []
    for f in files:
        with open(f) as fh:
            d = json.load(fh)
        for v in d["ring"]["vnodes"]:
            vnodes.append(v)
    ids = sorted(int(v["id"], 16) for v in vnodes)
    if want_ids:
        for i in ids:
            print("%064x" % i)
        return 0
    n = len(ids)
    pos = {i: k for k, i in enumerate(ids)}
    bad = 0
    worst = ""
    for v in vnodes:
        me = int(v["id"], 16)
        k = pos[me]
        succs = [int(s["id"], 16) for s in v["succs"]]
        want_len = min(r, n - 1)
        want = [ids[(k + j) % n] for j in range(1, want_len + 1)]
        pred_ok = n == 1 or (v["pred"] is not None and int(v["pred"]["id"], 16) == ids[k - 1])
        succ_ok = succs[:want_len] == want and (n > 1 or not succs)
        if not (pred_ok and succ_ok and v["joined"]):
            bad += 1
            if not worst:
                worst = " (e.g. %s: pred %s, %d of %d successors right)" % (
                    v["id"][:8], "ok" if pred_ok else "wrong",
                    sum(1 for a, b in zip(succs, want) if a == b), want_len)
    print("%d virtual servers, %d with a wrong predecessor or successor list%s" % (n, bad, worst))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
