#!/usr/bin/env python3
"""Send one FETCH to a cfsd as a plain client: which copy does it hold?

Usage: dhash_fetch.py [HOST:]PORT KEY-HEX FILE...
Prints the reply's status (0 or a negative errno) and, when 0, the name of
the FILE whose bytes the reply carries ("other" for none of them). Asks
that one server, not the ring: a test sees each replica's own copy (a
stale root, a dropped block). A block's reply is larger than 3x the
request: the server first asks this fresh address for a token round trip,
which rpc() makes, and sends the reply as pieces, which rpc() acknowledges.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, parse_addr, reply_status, rpc, u  # noqa: E402

FETCH = 12


def main():
    dst, key = parse_addr(sys.argv[1]), bytes.fromhex(sys.argv[2])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    reply = rpc(s, dst, msg(FETCH, [binb(key), u(0)]), timeout=5)
    st = reply_status(reply)
    if st != 0:
        print(st)
        return
    # The block is the reply's last item (a bin): compare the tail.
    for f in sys.argv[3:]:
        data = open(f, "rb").read()
        if reply.endswith(data):
            print("0 %s" % os.path.basename(f))
            return
    print("0 other")


if __name__ == "__main__":
    main()
