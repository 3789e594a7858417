#!/usr/bin/env python3
"""Check where blocks live, from every daemon's status and stored keys.

Usage: replica_check.py K DIR [KEYS-FILE]

DIR holds, for each live daemon, NODE.json (`cfsctl status --json`) and
NODE.keys (`cfsctl keys`). A block belongs on the K distinct servers that
follow its key on the ring (the first K distinct addresses among the
virtual servers at or after it). Checks the keys of KEYS-FILE (one hex key
first on each line; default: every key stored anywhere) and prints one JSON
object: keys, exact (on exactly their K servers), missing_copies,
extra_copies, lost (on no live server), short (held somewhere, but not on
all of their K servers: what repair has still to do), copies histogram. Exit 0 always;
the caller asserts.
"""
import bisect
import glob
import json
import os
import sys


def main():
    k = int(sys.argv[1])
    d = sys.argv[2]
    vnodes = []  # (id, address)
    holders = {}  # key -> set of addresses
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        with open(f) as fh:
            st = json.load(fh)
        addr = "%s:%d" % (st["address"].rsplit(":", 1)[0], st["port"])
        for v in st["ring"]["vnodes"]:
            vnodes.append((int(v["id"], 16), addr))
        kf = f[:-5] + ".keys"
        if os.path.exists(kf):
            for line in open(kf):
                line = line.strip()
                if line and not line.startswith("#"):
                    holders.setdefault(int(line, 16), set()).add(addr)
    vnodes.sort()
    ids = [v[0] for v in vnodes]
    servers = len(set(a for _, a in vnodes))
    if len(sys.argv) > 3:
        keys = [int(l.split()[0], 16) for l in open(sys.argv[3]) if l.strip()]
    else:
        keys = sorted(holders)
    out = {"keys": len(keys), "exact": 0, "missing_copies": 0, "extra_copies": 0,
           "lost": 0, "short": 0, "copies": {}}
    want_n = min(k, servers)
    for key in keys:
        i = bisect.bisect_left(ids, key)
        want = []
        j = 0
        while len(want) < want_n and j < len(ids):
            a = vnodes[(i + j) % len(ids)][1]
            if a not in want:
                want.append(a)
            j += 1
        have = holders.get(key, set())
        out["copies"][len(have)] = out["copies"].get(len(have), 0) + 1
        missing = len(set(want) - have)
        extra = len(have - set(want))
        out["missing_copies"] += missing
        out["extra_copies"] += extra
        if not have:
            out["lost"] += 1
        elif missing:
            out["short"] += 1
        if missing == 0 and extra == 0:
            out["exact"] += 1
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
