#!/usr/bin/env python3
"""gw_slow.py HOST PORT N SECONDS PATH READY: hold N TCP connections to an
HTTP server for SECONDS. Half send a request head that never ends (a
header line a byte at a time, every second); the other half send a whole
GET for PATH and then read the answer one byte a second through a small
receive buffer. Writes "ready N" to the file READY once every connection
is open and has sent its first bytes; at the end prints how many
connections were open then, and how many bytes the readers got."""
import socket
import sys
import time


def main():
    host, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    path, ready = sys.argv[5], sys.argv[6]
    conns = []
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        reader = i % 2 == 1
        if reader:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, port))
        if reader:
            s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        else:
            s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nX-Slow: a")
        s.setblocking(False)
        conns.append([s, reader, True])
    with open(ready, "w") as f:
        f.write(f"ready {n}\n")
    got = 0
    end = time.time() + secs
    while time.time() < end:
        for c in conns:
            s, reader, alive = c
            if not alive:
                continue
            try:
                if reader:
                    b = s.recv(1)
                    if b == b"":
                        c[2] = False
                    got += len(b)
                else:
                    s.send(b"a")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                c[2] = False
        time.sleep(1)
    print(f"open {sum(1 for c in conns if c[2])} of {n}, readers got {got} bytes")


main()
