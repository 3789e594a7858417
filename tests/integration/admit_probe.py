#!/usr/bin/env python3
"""Store admission from outside the ring (issue 22, point 5).

Usage: admit_probe.py HOST PORT

Sends, from a plain UDP socket (no ring member):
  replica  a STORE without the PRIMARY flag, naming no sender, then one
           naming a made-up member ID: both must be refused;
  lease    a client's STORE (with the nonce round trip) asking for a lease
           of 2^64-1: the lease granted is printed;
  refresh  a REFRESH of that block to 2^64-1 without a nonce (a challenge
           must come back), then with the nonce: the lease granted.
Prints one "name value" line per figure.
"""
import hashlib
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, u  # noqa: E402

STORE, REFRESH = 11, 14
PRIMARY, CHASH, CHALLENGE = 1, 1, 1
U64MAX = (1 << 64) - 1


def unpack(b, i=0):
    """A small msgpack decoder: (value, next index)."""
    t = b[i]
    if t <= 0x7f:
        return t, i + 1
    if t >= 0xe0:
        return t - 256, i + 1
    if 0x90 <= t <= 0x9f:
        return unpack_items(b, i + 1, t & 0x0f)
    if 0xa0 <= t <= 0xbf:
        n = t & 0x1f
        return b[i + 1:i + 1 + n], i + 1 + n
    if t == 0xc0:
        return None, i + 1
    if t in (0xc2, 0xc3):
        return t == 0xc3, i + 1
    if t in (0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb):
        w = {0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4}[t]
        n = int.from_bytes(b[i + 1:i + 1 + w], "big")
        return b[i + 1 + w:i + 1 + w + n], i + 1 + w + n
    if t in (0xdc, 0xdd):
        w = 2 if t == 0xdc else 4
        return unpack_items(b, i + 1 + w, int.from_bytes(b[i + 1:i + 1 + w], "big"))
    if t == 0xca:
        return struct.unpack(">f", b[i + 1:i + 5])[0], i + 5
    if t == 0xcb:
        return struct.unpack(">d", b[i + 1:i + 9])[0], i + 9
    sizes = {0xcc: (1, ">B"), 0xcd: (2, ">H"), 0xce: (4, ">I"), 0xcf: (8, ">Q"),
             0xd0: (1, ">b"), 0xd1: (2, ">h"), 0xd2: (4, ">i"), 0xd3: (8, ">q")}
    n, fmt = sizes[t]
    return struct.unpack(fmt, b[i + 1:i + 1 + n])[0], i + 1 + n


def unpack_items(b, i, n):
    out = []
    for _ in range(n):
        v, i = unpack(b, i)
        out.append(v)
    return out, i


def call(s, addr, m, old=None):
    """status, body; a daemon from before the REFRESH nonce drops the new
    form as malformed: then old (the form it knows) is sent instead."""
    s.sendto(m, addr)
    try:
        r, _ = unpack(s.recv(65536))
    except socket.timeout:
        if old is None:
            raise
        return call(s, addr, old)
    return r[4], r[8]  # status, body


def store(key, data, flags, nonce, lease=0, sender=None):
    return msg(STORE, [u(CHASH), binb(key), u(lease), u(flags), binb(nonce), binb(data)], sender=sender)


def refresh(keys, lease, nonce):
    return msg(REFRESH, [binb(b"".join(keys)), u(lease), binb(nonce)])


def main():
    addr = (sys.argv[1], int(sys.argv[2]))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    data = os.urandom(4000)
    key = hashlib.blake2b(data, digest_size=32).digest()
    st, _ = call(s, addr, store(key, data, 0, bytes(16), U64MAX))
    print("replica_anonymous", st)
    st, _ = call(s, addr, store(key, data, 0, bytes(16), U64MAX, sender=(os.urandom(32), 0)))
    print("replica_forged_member", st)
    # a client's put, with the nonce round trip when the server asks
    st, body = call(s, addr, store(key, data, PRIMARY, bytes(16), U64MAX))
    nonce = bytes(16)
    if st == 0 and body[0] & CHALLENGE:
        nonce = body[1]
        st, body = call(s, addr, store(key, data, PRIMARY, nonce, U64MAX))
    now = int(time.time())
    print("put_status", st)
    print("put_lease_days", "%.1f" % ((body[2] - now) / 86400.0) if st == 0 else "-")
    old = msg(REFRESH, [binb(key), u(U64MAX)])
    s.settimeout(2)
    st, body = call(s, addr, refresh([key], U64MAX, bytes(16)), old)
    print("refresh_no_nonce", "challenge" if st == 0 and len(body) > 2 and body[2] & CHALLENGE else
          "extended(%s)" % ("%.1f_days" % ((body[1] - now) / 86400.0) if st == 0 else st))
    st, body = call(s, addr, refresh([key], U64MAX, nonce), old)
    found = st == 0 and body[0][0] & 1
    print("refresh_with_nonce", "found" if found else "not_found(%d)" % st)
    print("refresh_lease_days", "%.1f" % ((body[1] - now) / 86400.0) if st == 0 else "-")
    print("key", key.hex())


if __name__ == "__main__":
    main()
