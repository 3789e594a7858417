#!/usr/bin/env python3
"""A hostile ring peer for t_ring_hostile.sh: sends forged, unanswerable and
malformed messages to a cfsd and never answers a nonce.

Usage: hostile_peer.py TARGET_PORT OWN_PORT FAKE_BASE_PORT
Prints the hex IDs it claimed (one per line) so the test can check that none
of them entered any table.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import arr, msg, node, node_id  # noqa: E402


def main():
    target, own, fake_base = (int(a) for a in sys.argv[1:4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", own))
    dst = ("127.0.0.1", target)
    me = node_id(own)
    forged = os.urandom(32)
    fakes = [node_id(fake_base + i) for i in range(10)]
    for nid in [me, forged] + fakes:
        print(nid.hex())
    # 1. A NOTIFY whose ID does not hash from our address.
    s.sendto(msg(5, [node(forged, own)], sender=(forged, 0)), dst)
    # 2. A NOTIFY with the right ID; we will never echo the nonce.
    s.sendto(msg(5, [node(me, own)], sender=(me, 0)), dst)
    # 3. A LEAVE naming ten successors at addresses where nobody listens.
    s.sendto(msg(6, [arr([]), arr([node(f, fake_base + i) for i, f in enumerate(fakes)])],
                 sender=(me, 0)), dst)
    # 4. Malformed: wrong version, unknown type, an oversized node list,
    #    truncated, garbage.
    s.sendto(msg(1, [], version=3), dst)
    s.sendto(msg(99, []), dst)
    s.sendto(msg(6, [arr([]), arr([node(fakes[0], fake_base)] * 65)], sender=(me, 0)), dst)
    s.sendto(msg(1, [])[:-3], dst)
    s.sendto(os.urandom(200), dst)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
