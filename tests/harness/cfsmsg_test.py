#!/usr/bin/env python3
"""Self-test of cfsmsg.py's wire code for messages as pieces against itself, on loopback,
no daemon: a toy server in a thread reassembles requests sent as pieces,
answers an unvalidated address with 'Y' when its reply would be more than
3x what it received, and sends large replies as pieces through send_msg();
the client uses rpc(). Both sides lose chosen datagrams (the first, a
middle and the last piece, an ack) on their first transmission, so
selective retransmission and re-acking are exercised. Also checks the
frame codecs against hand-computed bytes and the checks parse_piece makes.

Usage: cfsmsg_test.py   (exit 0 and "cfsmsg self-test: N checks passed")
"""
import hashlib
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cfsmsg as w  # noqa: E402

ECHO = 12  # any request type: the toy server answers [size bytes, request body hash]
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise SystemExit("cfsmsg self-test FAILED: " + what)
    checks += 1


class Lossy:
    """A socket that drops the datagrams drop(d) names (a key, or None to
    keep it), the first time each key comes; records what it sends and
    the keys it dropped."""

    def __init__(self, drop=lambda d: None):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.bind(("127.0.0.1", 0))
        self.drop, self.dropped, self.sent = drop, [], []

    def sendto(self, d, a):
        self.sent.append(d)
        key = self.drop(d)
        if key is not None and key not in self.dropped:
            self.dropped.append(key)
            return len(d)
        return self.s.sendto(d, a)

    def recvfrom(self, n):
        return self.s.recvfrom(n)

    def fileno(self):
        return self.s.fileno()

    def getsockname(self):
        return self.s.getsockname()


def piece_index(d):
    p = w.parse_piece(d) if d[:1] == b"P" else None
    return None if p is None else p[4]


class Server(threading.Thread):
    """Answers ECHO requests; 'Y' before a reply over 3x the bytes received
    from an unvalidated address, as the daemons do."""

    def __init__(self, drop):
        super().__init__(daemon=True)
        self.sock = Lossy(drop)
        self.token = os.urandom(w.TOKEN_BYTES)
        self.validated, self.received, self.asms = set(), {}, {}
        self.retries = 0
        self.stop = False

    def run(self):
        while not self.stop:
            got = w.recv(self.sock, time.monotonic() + 0.05)
            if got is None:
                continue
            d, a = got
            self.received[a] = self.received.get(a, 0) + len(d)
            if w.parse_validate(d) == self.token:
                self.validated.add(a)
            elif w.is_message(d):
                self.handle(d, a)
            elif d[:1] == b"P":
                self.take_piece(w.parse_piece(d), a)

    def take_piece(self, p, a):
        if p is None or p[0] & w.F_REPLY:
            return
        key = (a, p[1])
        asm = self.asms.setdefault(key, w.Reassembly(p[0], p[1], p[2]))
        asm.add(p)
        if asm.complete():
            del self.asms[key]
            self.sock.sendto(asm.ack(), a)
            w._remember(self.sock, (a[:2], p[1], 0), asm.ack())
            self.handle(asm.message(), a)
        elif not w._readable(self.sock):
            self.sock.sendto(asm.ack(), a)

    def handle(self, m, a):
        v, mtype, flags, reqid = w.header(m)
        req, _ = w.unpack(m)
        size = req[8][0]
        body = [w.binb(bytes(size)), w.binb(hashlib.blake2b(m, digest_size=32).digest())]
        reply = w.arr([w.u(v), w.u(mtype), w.u(1), w.u(reqid), w.u(0), w.NIL, w.NIL, w.COORD, w.arr(body)])
        if a not in self.validated and len(reply) > 3 * self.received[a]:
            self.retries += 1
            self.sock.sendto(w.retry(reqid, self.token), a)
            return
        w.send_msg(self.sock, a, reply, reqid, is_reply=True, give_up=3)


def call(client, srv, size, pad, version=None):
    m = w.msg(ECHO, [w.u(size), w.binb(os.urandom(pad))], version=version)
    r = w.rpc(client, srv.sock.getsockname(), m, timeout=5)
    rep, _ = w.unpack(r)
    check(rep[3] == w.header(m)[3] and rep[2] == 1, "the reply answers request %d" % w.header(m)[3])
    check(len(rep[8][0]) == size, "reply of %d bytes, wanted %d" % (len(rep[8][0]), size))
    check(rep[8][1] == hashlib.blake2b(m, digest_size=32).digest(), "the server got the request intact")
    return m, r


def codecs():
    m = bytes(range(256)) * 10  # 2,560 bytes: 3 pieces
    p = w.piece(m, 2, 0x0102030405060708, 7, w.F_REPLY)
    check(p[:20] == bytes.fromhex("5001" "0102030405060708" "00000a00" "00000007" "0002"), "piece header")
    check(p[20:] == m[2360:], "last piece payload")
    check(w.parse_piece(p) == (1, 0x0102030405060708, 2560, 7, 2, m[2360:]), "piece parse")
    check(w.parse_piece(p[:-1]) is None, "a short last piece is refused")
    check(w.parse_piece(w.piece(m, 3, 1, 0)) is None, "an index past the last piece is refused")
    check(w.parse_piece(w.piece(m[:1200], 0, 1, 0)) is None, "a message that fits one datagram is no piece")
    check(w.parse_piece(b"P\x04" + p[2:]) is None, "unknown piece flags are refused")
    check(len(w.piece(m, 0, 1, 0)) == 1200, "a full piece is 1,200 bytes")
    a = w.ack(0, 9, 5, 1600, 1, b"\x02")
    check(a == bytes.fromhex("4100" "0000000000000009" "00000005" "0064" "0001" "01" "02"), "ack bytes")
    check(w.parse_ack(a) == (0, 9, 5, 1600, 1, b"\x02"), "ack parse")
    check(w.acked_pieces(w.parse_ack(a), 3) == {0, 2}, "ack names pieces 0 and 2")
    check(w.parse_ack(a + b"x") is None, "an ack with a wrong bitmap length is refused")
    t = bytes(range(16))
    check(w.parse_retry(w.retry(77, t)) == (77, t) and len(w.retry(77, t)) == 26, "retry frame")
    check(w.parse_validate(w.validate(t)) == t and len(w.validate(t)) == 17, "validate frame")
    big = w.msg(ECHO, [w.binb(bytes(5000))], version=4)
    check([len(d) for d in w.datagrams(big)] == [1200] * 4 + [20 + len(big) - 4 * 1180], "datagrams of 5 KB")
    old = w.msg(ECHO, [w.binb(bytes(5000))], version=3)
    check(w.datagrams(old) == [old], "a version-3 message travels whole")
    r = w.Reassembly(0, 5, 2560)
    r.add(w.parse_piece(w.piece(m, 1, 5, 0)))
    check(w.parse_ack(r.ack())[4:] == (0, b"\x02"), "partial ack: first missing 0, piece 1 held")
    r.add(w.parse_piece(w.piece(m, 0, 5, 1)))
    r.add(w.parse_piece(w.piece(m, 2, 5, 2)))
    check(r.complete() and r.message() == m, "reassembled")
    check(w.parse_ack(r.ack())[0] == w.F_COMPLETE and w.parse_ack(r.ack())[4] == 3, "complete ack")


def main():
    codecs()
    # The server loses the first transmission of reply pieces 0, 40 and the
    # last (84 of a 100 KB reply); the client its first ack and the first
    # transmission of request pieces 0, 4 and 8 (the last of 10 KB).
    srv = Server(lambda d: piece_index(d) if piece_index(d) in (0, 40, 84) else None)
    srv.start()
    client = Lossy(lambda d: piece_index(d) if piece_index(d) in (0, 4, 8) else
                   "first ack" if d[:1] == b"A" and not d[1] & w.F_COMPLETE else None)
    try:
        call(client, srv, 20, 10, version=4)
        check(srv.retries == 0 and len(client.sent) == 1, "a small call is one datagram each way: %d retries, %d sent" % (srv.retries, len(client.sent)))
        m, r = call(client, srv, 10, 10000, version=4)
        check(sorted(client.dropped, key=str) == [0, 4, 8], "request pieces 0, 4, 8 were lost: %s" % client.dropped)
        check(srv.retries == 0, "a large request earns a small reply without a token")
        t0 = time.monotonic()
        m, r = call(client, srv, 100000, 10, version=4)
        check(srv.retries == 1, "a 100 KB reply to a 60-byte request asked for a token first")
        check(sorted(srv.sock.dropped) == [0, 40, 84], "reply pieces 0, 40, 84 were lost: %s" % srv.sock.dropped)
        check("first ack" in client.dropped, "the client's first ack of the reply was lost")
        check(any(d[:1] == b"V" for d in client.sent), "the client sent 'V'")
        secs = time.monotonic() - t0
        m, r = call(client, srv, 100000, 10, version=4)
        check(srv.retries == 1, "a validated address gets its large reply at once")
        m, r = call(client, srv, 20000, 3000, version=3)
        check(client.sent[-1] == m, "a version-3 request of %d bytes went whole" % len(m))
        srv.validated.clear()
        try:
            w.rpc(client, srv.sock.getsockname(), w.msg(ECHO, [w.u(50000), w.binb(b"")], version=4),
                  timeout=2, validate_address=False)
            check(False, "a client that does not validate got its reply")
        except w.RetryAsked as e:
            check(e.token == srv.token, "RetryAsked carries the server's token")
        # A silent peer: the sender gives up.
        mute = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        mute.bind(("127.0.0.1", 0))
        t1 = time.monotonic()
        try:
            w.send_msg(client, mute.getsockname(), w.msg(ECHO, [w.binb(bytes(3000))], version=4), give_up=0.5)
            check(False, "send_msg to a silent peer returned")
        except socket.timeout:
            check(0.5 <= time.monotonic() - t1 < 2, "send_msg gives up after its limit")
        mute.close()
    finally:
        srv.stop = True
        srv.join(2)
    print("cfsmsg self-test: %d checks passed (100 KB reply with 3 losses and a token round trip in %.0f ms)"
          % (checks, secs * 1000))


if __name__ == "__main__":
    main()
