#!/usr/bin/env python3
"""Send one LOOKUP_FWD twice under the same request ID, as a transport
resends a request whose acknowledgement was lost, and print how many
acknowledgements came back ("acks N"). The daemon must acknowledge both
and forward the query once (t_amplify.sh reads its counters).

Usage: fwd_copy.py IP PORT
"""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, node, node_id, rpc, u, unpack  # noqa: E402

LOOKUP_FWD = 9


def main():
    ip, port = sys.argv[1], int(sys.argv[2])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    me = s.getsockname()
    key = os.urandom(32)
    lookup_id = int.from_bytes(os.urandom(8), "big")
    reqid = int.from_bytes(os.urandom(4), "big")
    # the query names us as its originator, so its answer comes back here
    m = msg(LOOKUP_FWD, [binb(key), u(lookup_id), node(node_id(me[0]), me[1], ip=me[0]),
                         u(1), u(4), u(0)], reqid=reqid)
    acks = 0
    for _ in range(2):
        reply, _ = unpack(rpc(s, (ip, port), m, reqid=reqid, timeout=3))
        if reply[4] == 0:
            acks += 1
    print("acks %d" % acks)


if __name__ == "__main__":
    main()
