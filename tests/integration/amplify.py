#!/usr/bin/env python3
"""How many bytes a cfsd sends back to an address that never proved it is
the sender's, for t_amplify.sh.

Usage: amplify.py HOST PORT FILE

FILE is a published file (8 KiB blocks); its first 8,192 bytes are the
payload of one stored data block, ["cfs.data", 1, payload] (docs/FORMAT.md),
whose key is the BLAKE2b-256 of that block. Sends, each from a fresh UDP socket at once, one
request of each kind that used to answer with many times its size: FETCH of
that block, SYNC_KEYS of the whole ring, SYNC_DIGEST of it (64 parts),
GET_SUCCS, GET_PRED and FIND_NEXT asking for 64 successors. Like a spoofed
victim, the sockets never answer anything (no 'V' for a 'Y', no ack for a
piece); every byte that reaches each within 2 s is counted. Prints one line
per request:
  amp NAME SENT RECEIVED RATIO DATAGRAMS KINDS
(KINDS: how many whole messages (M), pieces (P), acks (A) and retries (Y)).
Then the honest path: FETCH of the same block from a fresh socket through
rpc() (which answers 'Y' with 'V', resends, and acks the pieces); prints
  honest_fetch ok BYTES     when the block's bytes came back intact
  honest_fetch FAIL WHY     otherwise.
"""
import hashlib
import os
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, rpc, u, unpack  # noqa: E402

GET_PRED, GET_SUCCS, FIND_NEXT, FETCH, SYNC_DIGEST, SYNC_KEYS = 3, 4, 8, 12, 15, 16
BLOCK = 8192
LISTEN_S = 2.0


def requests(key):
    lo, hi = bytes(32), b"\xff" * 32
    return [
        ("fetch", msg(FETCH, [binb(key), u(0)])),
        ("sync_keys", msg(SYNC_KEYS, [binb(lo), binb(hi), u(1024)])),
        ("sync_digest", msg(SYNC_DIGEST, [binb(lo), binb(hi), u(64)])),
        ("get_succs", msg(GET_SUCCS, [])),
        ("get_pred", msg(GET_PRED, [])),
        ("find_next", msg(FIND_NEXT, [binb(os.urandom(32)), u(64), u(0)])),
    ]


def kind(d):
    if 0x90 <= d[0] <= 0x9f:
        return "M"
    return chr(d[0]) if chr(d[0]) in "PAY" else "?"


def spoofed_victims(addr, key):
    """Send each request from its own fresh socket; count what comes back."""
    probes = []
    for name, m in requests(key):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(m, addr)
        probes.append({"name": name, "sock": s, "sent": len(m), "recv": 0, "n": 0, "kinds": {}})
    end = time.monotonic() + LISTEN_S
    by_fd = {p["sock"].fileno(): p for p in probes}
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([p["sock"] for p in probes], [], [], left)
        for s in ready:
            d = s.recv(65536)
            p = by_fd[s.fileno()]
            p["recv"] += len(d)
            p["n"] += 1
            p["kinds"][kind(d)] = p["kinds"].get(kind(d), 0) + 1
    for p in probes:
        p["sock"].close()
        kinds = "".join("%s%d" % kv for kv in sorted(p["kinds"].items())) or "-"
        print("amp %s %d %d %.2f %d %s" % (p["name"], p["sent"], p["recv"], p["recv"] / p["sent"], p["n"], kinds))


def honest_fetch(addr, key, want):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        r, _ = unpack(rpc(s, addr, msg(FETCH, [binb(key), u(0)]), timeout=5))
    except socket.timeout as e:
        print("honest_fetch FAIL %s" % str(e).replace(" ", "_"))
        return
    finally:
        s.close()
    if r[4] != 0:
        print("honest_fetch FAIL status_%d" % r[4])
    elif r[8][2] != want:  # body: kind, lease, data
        print("honest_fetch FAIL wrong_bytes(%d)" % len(r[8][2]))
    else:
        print("honest_fetch ok %d" % len(want))


def main():
    addr = (sys.argv[1], int(sys.argv[2]))
    with open(sys.argv[3], "rb") as f:
        payload = f.read(BLOCK)
    block = b"\x93\xa8cfs.data\x01\xc5" + struct.pack(">H", len(payload)) + payload
    key = hashlib.blake2b(block, digest_size=32).digest()
    spoofed_victims(addr, key)
    honest_fetch(addr, key, block)


if __name__ == "__main__":
    main()
