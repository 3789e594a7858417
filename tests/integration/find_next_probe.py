#!/usr/bin/env python3
"""Ask one ring member a FIND_NEXT for a key, as a plain client, and print
what it answered: t_hostile_member.sh checks with it that cfs-hostile
really lies (answers "done, I hold it" naming only itself).

Usage: find_next_probe.py IP PORT KEY-HEX [NSUCC]
Prints "status S", then "flags F" and one "node ID-HEX IP:PORT" line per
node named (reply's order). The request asks whether the node holds the
block (CFS_LOOKUP_F_CHECK_BLOCK) and names no destination virtual server. A long answer to this fresh address
needs the token round trip first, which rpc() makes.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, rpc, u, unpack  # noqa: E402

FIND_NEXT = 8
CHECK_BLOCK = 0x1


def main():
    ip, port, key = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
    nsucc = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    reply, _ = unpack(rpc(s, (ip, port), msg(FIND_NEXT, [binb(key), u(nsucc), u(CHECK_BLOCK)]), timeout=3))
    # [version, type, flags, reqid, status, from, to, coord, body]
    status, body = reply[4], reply[8]
    print("status %d" % status)
    if status != 0:
        return
    flags, _count, nodes = body
    print("flags %d" % flags)
    for n in nodes:
        nid, nip, nport = n[0], n[1], n[2]
        print("node %s %s:%d" % (nid.hex(), socket.inet_ntop(
            socket.AF_INET if len(nip) == 4 else socket.AF_INET6, nip), nport))


if __name__ == "__main__":
    main()
