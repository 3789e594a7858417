#!/usr/bin/env python3
"""silent_reader.py HOST:PORT KEYS-FILE N SECONDS: a reader that asks and
never acknowledges. It proves its address with one whole FETCH of a large
block (a token round trip, its pieces acknowledged), then sends N FETCHes for the keys of
KEYS-FILE (one hex key a line, cycled) as fast as it can and, for SECONDS,
reads whatever comes back without acknowledging a single piece. Prints
"sent N pieces P bytes B"."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, msg, parse_addr, rpc, u  # noqa: E402

FETCH = 12


def main():
    dst = parse_addr(sys.argv[1])
    keys = [bytes.fromhex(k.strip()) for k in open(sys.argv[2]) if len(k.strip()) == 64]
    n, secs = int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    # Prove the address: a FETCH whose answer comes in pieces, for which
    # the daemon asks a token first (a small block's whole-datagram answer
    # needs none and would leave the address unproven).
    for k in keys:
        if len(rpc(s, dst, msg(FETCH, [binb(k), u(0)]), timeout=5)) > 4096:
            break
    else:
        sys.exit("no key of %s has a block large enough to prove the address" % sys.argv[2])
    s.setblocking(False)
    pieces = nbytes = 0
    for i in range(n):
        m = msg(FETCH, [binb(keys[i % len(keys)]), u(0)])
        while True:
            try:
                s.sendto(m, dst)
                break
            except BlockingIOError:
                time.sleep(0.001)
        if i % 64 == 0:  # drain a little, acknowledging nothing
            try:
                while True:
                    d = s.recv(65536)
                    pieces += 1
                    nbytes += len(d)
            except BlockingIOError:
                pass
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            d = s.recv(65536)
            pieces += 1
            nbytes += len(d)
        except BlockingIOError:
            time.sleep(0.005)
    print("sent %d pieces %d bytes %d" % (n, pieces, nbytes))


if __name__ == "__main__":
    main()
