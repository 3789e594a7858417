#!/usr/bin/env python3
"""Ask one ring member a FIND_NEXT for a key, as a plain client, and print
what it answered: t_hostile_member.sh checks with it that cfs-hostile
really lies (answers "done, I hold it" naming only itself).

Usage: find_next_probe.py IP PORT KEY-HEX [NSUCC]
Prints "status S", then "flags F" and one "node ID-HEX IP:PORT" line per
node named (reply's order). The request asks whether the node holds the
block (CFS_LOOKUP_F_CHECK_BLOCK) and names no destination virtual server.
"""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, u  # noqa: E402

FIND_NEXT = 8
CHECK_BLOCK = 0x1


def unpack(b, i=0):
    """A minimal msgpack decoder (the types the CFS codec uses):
    (value, next index)."""
    t = b[i]
    if t <= 0x7f:
        return t, i + 1
    if t >= 0xe0:
        return t - 256, i + 1
    if 0x90 <= t <= 0x9f:
        return _items(b, i + 1, t & 0x0f)
    if 0xa0 <= t <= 0xbf:
        n = t & 0x1f
        return b[i + 1:i + 1 + n], i + 1 + n
    if t == 0xc0:
        return None, i + 1
    if t in (0xc2, 0xc3):
        return t == 0xc3, i + 1
    fixed = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h",
             0xd2: ">i", 0xd3: ">q", 0xca: ">f", 0xcb: ">d"}
    if t in fixed:
        n = struct.calcsize(fixed[t])
        return struct.unpack(fixed[t], b[i + 1:i + 1 + n])[0], i + 1 + n
    lens = {0xc4: ">B", 0xc5: ">H", 0xc6: ">I", 0xd9: ">B", 0xda: ">H", 0xdb: ">I"}
    if t in lens:
        w = struct.calcsize(lens[t])
        n = struct.unpack(lens[t], b[i + 1:i + 1 + w])[0]
        s = i + 1 + w
        return b[s:s + n], s + n
    if t in (0xdc, 0xdd):
        w = 2 if t == 0xdc else 4
        n = struct.unpack(">H" if w == 2 else ">I", b[i + 1:i + 1 + w])[0]
        return _items(b, i + 1 + w, n)
    raise ValueError("msgpack type 0x%02x" % t)


def _items(b, i, n):
    out = []
    for _ in range(n):
        v, i = unpack(b, i)
        out.append(v)
    return out, i


def main():
    ip, port, key = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
    nsucc = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(msg(FIND_NEXT, [binb(key), u(nsucc), u(CHECK_BLOCK)]), (ip, port))
    reply, _ = unpack(s.recv(65536))
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
