#!/usr/bin/env python3
"""Send one STORE to a cfsd as a plain client and print the reply's status.

Usage: dhash_store.py [HOST:]PORT KIND KEY-HEX FILE [FLAGS]
Prints the status (0 or a negative errno). Lets a test put bytes under a key
that is not theirs, which the DHash client library never does, or send a
copy for a server's cache (FLAGS 2) as a get's cache push would. A block
over one datagram goes as pieces (rpc).
"""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, parse_addr, reply_status, rpc, u  # noqa: E402

STORE = 11


def main():
    dst, kind, key, path = parse_addr(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4]
    flags = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    data = open(path, "rb").read()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    m = msg(STORE, [u(kind), binb(key), u(0), u(flags), binb(bytes(16)), binb(data)])
    print(reply_status(rpc(s, dst, m, timeout=5)))


if __name__ == "__main__":
    main()
