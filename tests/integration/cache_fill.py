#!/usr/bin/env python3
"""Offer a cfsd's block cache many copies, as the cache pushes of gets do.

Usage: cache_fill.py [HOST:]PORT COUNT SIZE SEED OUT
Sends COUNT STOREs with the CACHE flag (2), one at a time, each a
content-hash block of SIZE pseudo-random bytes (from SEED) under its key,
BLAKE2b-256 of the bytes (as pieces when over one datagram). Writes "KEY STATUS" per block to OUT and prints
how many were accepted (status 0).
"""
import hashlib
import os
import random
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, parse_addr, reply_status, rpc, u  # noqa: E402

STORE = 11
KIND_CHASH = 1
F_CACHE = 2


def main():
    dst, count, size = parse_addr(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(int(sys.argv[4]))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    ok = 0
    with open(sys.argv[5], "w") as out:
        for _ in range(count):
            data = rng.randbytes(size)
            key = hashlib.blake2b(data, digest_size=32).digest()
            m = msg(STORE, [u(KIND_CHASH), binb(key), u(0), u(F_CACHE), binb(bytes(16)), binb(data)])
            st = reply_status(rpc(s, dst, m, timeout=5))
            out.write("%s %d\n" % (key.hex(), st))
            ok += st == 0
    print(ok)


if __name__ == "__main__":
    main()
