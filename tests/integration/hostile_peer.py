#!/usr/bin/env python3
"""A hostile ring peer for t_ring_hostile.sh: sends forged, unanswerable and
malformed messages to a cfsd and never answers a nonce.

Usage: hostile_peer.py TARGET_IP TARGET_PORT OWN_IP OWN_PORT [IP:PORT...]
The NOTIFY with a right ID also goes to the other members given: it falls in
exactly one member's (predecessor, self] arc of a correct ring, and that one
checks it (the others ignore a NOTIFY that would not be their predecessor).
A LEAVE from a node in none of the target's tables is ignored (it needs a
cookie round trip from a known member first).
The ten nodes its LEAVE names are at 127.66.0.1..10, where nobody listens
(IDs hash the IP and an index, not the port: docs/PROTOCOL.md "Node IDs").
Since protocol version 4 a message over 1,200 bytes goes as pieces (each
sent once, never acknowledged back), and the garbage includes malformed
piece, ack and validate frames.
Prints the hex IDs it claimed (one per line) so the test can check that none
of them entered any table.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import ACK, PIECE, arr, binb, datagrams, msg, node, node_id, validate  # noqa: E402


def main():
    target_ip, target, own_ip, own = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((own_ip, own))
    dst = (target_ip, target)
    me = node_id(own_ip)
    forged = os.urandom(32)
    fake_ips = ["127.66.0.%d" % (i + 1) for i in range(10)]
    fakes = [node_id(ip) for ip in fake_ips]
    for nid in [me, forged] + fakes:
        print(nid.hex())
    # 1. A NOTIFY whose ID does not hash from our address.
    s.sendto(msg(5, [node(forged, own, ip=own_ip)], sender=(forged, 0)), dst)
    # 2. A NOTIFY with the right ID; we will never echo the nonce.
    s.sendto(msg(5, [node(me, own, ip=own_ip)], sender=(me, 0)), dst)
    for other in sys.argv[5:]:
        ip, port = other.rsplit(":", 1)
        s.sendto(msg(5, [node(me, own, ip=own_ip)], sender=(me, 0)), (ip, int(port)))
    # 3. A LEAVE naming ten successors at addresses where nobody listens.
    s.sendto(msg(6, [arr([]), arr([node(f, 4000, ip=ip) for f, ip in zip(fakes, fake_ips)]),
                     binb(bytes(16))],
                 sender=(me, 0)), dst)
    # 4. Malformed: wrong version, unknown type, an oversized node list,
    #    truncated, garbage.
    s.sendto(msg(1, [], version=9), dst)
    s.sendto(msg(99, []), dst)
    # The oversized list both whole (a datagram over 1,200 bytes) and, where
    # pieces exist, as pieces that reassemble into what the decoder refuses.
    over = msg(6, [arr([]), arr([node(fakes[0], 4000, ip=fake_ips[0])] * 65), binb(bytes(16))], sender=(me, 0))
    s.sendto(over, dst)
    pieces = datagrams(over)
    if len(pieces) > 1:
        for d in pieces:
            s.sendto(d, dst)
    s.sendto(msg(1, [])[:-3], dst)
    s.sendto(os.urandom(200), dst)
    # 5. Malformed frames: a piece one byte short, a piece of a 100 MB
    #    message, an ack whose bitmap length lies, a token of the wrong size.
    p = pieces[0] if len(pieces) > 1 else bytes([PIECE]) + bytes(1199)
    s.sendto(p[:-1], dst)
    s.sendto(p[:10] + (100 << 20).to_bytes(4, "big") + p[14:], dst)
    s.sendto(bytes([ACK, 0]) + os.urandom(16) + bytes([64]) + bytes(3), dst)
    s.sendto(validate(os.urandom(16))[:-1], dst)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
