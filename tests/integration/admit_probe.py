#!/usr/bin/env python3
"""Store admission from outside the ring.

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
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, rpc, u, unpack  # noqa: E402

STORE, REFRESH = 11, 14
PRIMARY, CHASH, CHALLENGE = 1, 1, 1
U64MAX = (1 << 64) - 1


def call(s, addr, m, old=None):
    """status, body; a daemon from before the REFRESH nonce drops the new
    form as malformed: then old (the form it knows) is sent instead. The
    STORE's 4,000 bytes travel as pieces (rpc)."""
    try:
        r, _ = unpack(rpc(s, addr, m, timeout=s.gettimeout()))
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
