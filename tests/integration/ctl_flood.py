#!/usr/bin/env python3
"""The control socket under 100 half-sent 1 MiB frames.

Usage: ctl_flood.py CFSD-BIN DIR [CONNS]

Starts a lone cfsd (a ring of one) in DIR, opens CONNS (default 100)
connections to its control socket and on each sends a frame header
announcing 1 MiB and all but one byte of it; prints cfsd's RSS before,
right after, and 12 s later, and how many connections the daemon still
holds open then. Stops the daemon it started.
"""
import os
import socket
import struct
import subprocess
import sys
import time


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    cfsd, d = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    os.makedirs(d, exist_ok=True)
    log = open(os.path.join(d, "cfsd.log"), "w")
    p = subprocess.Popen([cfsd, "--port", str(free_port()), "--bind", "127.0.0.1", "--data", d], stdout=log, stderr=log)
    try:
        sock = os.path.join(d, "cfsd.sock")
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        time.sleep(0.5)
        before = rss_kib(p.pid)
        conns, body = [], b"x" * ((1 << 20) - 1)
        for _ in range(n):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(sock)
            c.setblocking(False)
            try:
                c.send(struct.pack(">I", 1 << 20))
                sent = 0
                t0 = time.time()
                while sent < len(body) and time.time() - t0 < 2:
                    try:
                        sent += c.send(body[sent:])
                    except BlockingIOError:
                        time.sleep(0.001)
                    except OSError:
                        break
            except OSError:
                pass
            conns.append(c)
        time.sleep(1)
        during = rss_kib(p.pid)
        time.sleep(12)
        after = rss_kib(p.pid)
        open_ = 0
        for c in conns:
            try:
                open_ += c.recv(1) != b""
            except BlockingIOError:
                open_ += 1
            except OSError:
                pass
        print("rss_before_kib %d" % before)
        print("rss_with_%d_half_frames_kib %d (+%d MiB)" % (n, during, (during - before) // 1024))
        print("rss_12s_later_kib %d (+%d MiB)" % (after, (after - before) // 1024))
        print("connections_still_open_after_12s %d of %d" % (open_, n))
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
